"""``tablesdk.dask.read_table(since=...)`` given something that is neither a Watermark nor a
ChangeWindow: refused when the read is planned, not read as the whole table."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tablesdk import CloudStorageAccount, DynamicEntity

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("since", ["2024-01-01T00:00:00Z", datetime(2024, 1, 1, tzinfo=timezone.utc), 0])
def test_a_since_that_is_not_a_watermark_is_refused(
    devstore_connection_string: str, unique_table_name: str, since: object,
) -> None:
    pytest.importorskip("dask.dataframe")
    from tablesdk.dask import read_table

    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        client.create_table(unique_table_name)
        client.insert_entity(unique_table_name, DynamicEntity("a", "1", V=1))
    with pytest.raises(TypeError, match="Watermark"):
        read_table(devstore_connection_string, unique_table_name, since=since, boundaries=[])  # type: ignore[arg-type]
