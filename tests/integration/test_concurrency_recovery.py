"""The recovery path after a 412 (issue 22.5): what each MergeOption does to a concurrent write.

Two contexts read the same counter, the other one saves first, then ours saves: the
interleaving is fixed by the order of the calls, not by threads, so it is the same every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tablesdk import CloudTableClient, DataServiceRequestError, MergeOption, TableEntity

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


class Counter(TableEntity):
    Value: int


def _lose_the_race(client: CloudTableClient, table: str, merge_option: MergeOption) -> int:
    """Ours reads 0, theirs reads 0 and saves 1, ours adds 1: returns what ours then saves after the 412."""
    client.insert_entity(table, Counter(PartitionKey="p", RowKey="c", Value=0))
    ours = client.get_table_service_context()
    theirs = client.get_table_service_context()
    mine = ours.get(table, "p", "c", Counter)
    other = theirs.get(table, "p", "c", Counter)
    assert mine is not None and other is not None
    other.Value += 1
    theirs.update_object(other)
    theirs.save_changes()

    mine.Value += 1
    ours.update_object(mine)
    with pytest.raises(DataServiceRequestError) as refused:
        ours.save_changes()
    assert refused.value.status_code == 412

    ours.merge_option = merge_option
    fresh = ours.get(table, "p", "c", Counter)
    assert fresh is mine  # the tracked object is refreshed in place
    if merge_option is MergeOption.OVERWRITE_CHANGES:
        mine.Value += 1  # the change is applied again, to the service's values
        ours.update_object(mine)
    ours.save_changes()
    return client.get_entity(table, "p", "c", Counter).Value


def test_overwrite_changes_then_reapply_loses_nothing(client: CloudTableClient, table: str) -> None:
    assert _lose_the_race(client, table, MergeOption.OVERWRITE_CHANGES) == 2


def test_preserve_changes_keeps_the_clients_value_and_overwrites_the_other_writer(
    client: CloudTableClient, table: str
) -> None:
    # Documented behaviour (client wins, as in .NET): the local edit is kept, the ETag refreshed,
    # so the save succeeds and the other writer's increment is overwritten.
    assert _lose_the_race(client, table, MergeOption.PRESERVE_CHANGES) == 1


def test_counter_sample_loses_no_increment_under_contention(
    target: str, connection_string: str, unique_table_name: str
) -> None:
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": connection_string, "PYTHONPATH": str(ROOT)}
    payload_format = target.rsplit("-", 1)[1]
    result = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "counter.py"), "--format", payload_format,
         "--workers", "4", "--increments", "15", "--table", unique_table_name],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "counter is 60 (expected 60)" in result.stdout
