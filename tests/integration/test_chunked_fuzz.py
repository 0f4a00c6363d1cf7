"""Property-based: any text (astral characters at part boundaries included) or bytes up to the
entity limit round-trips exactly through a Chunked property, by the client, a context, a batch
and bulk_insert, on the bundled emulator in JSON and Atom."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Annotated

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tablesdk import Chunked, CloudStorageAccount, CloudTableClient, TableBatchOperation

pytestmark = pytest.mark.integration

PART = 32_768  # UTF-16 code units of one part
#: UTF-16 code units the text may have beside 128 KiB of bytes and short keys (the 1 MiB formula).
TEXT_LIMIT = (1024 * 1024 - 2 * 65_536 - 800) // 2


@dataclasses.dataclass
class Doc:
    PartitionKey: str
    RowKey: str
    Text: Annotated[str, Chunked] = ""
    Data: Annotated[bytes, Chunked(parts=2)] = b""


@pytest.fixture(params=["json", "atom"], scope="module")
def emulator_client(request: pytest.FixtureRequest, devstore_connection_string: str) -> Iterator[CloudTableClient]:
    account = CloudStorageAccount.parse(devstore_connection_string)
    with account.create_cloud_table_client(payload_format=request.param) as client:
        yield client


@pytest.fixture(scope="module")
def fuzz_table(emulator_client: CloudTableClient) -> Iterator[str]:
    name = "chunked" + uuid.uuid4().hex[:12]
    emulator_client.create_table(name)
    yield name
    emulator_client.delete_table_if_exists(name)


# Characters a property can hold in both formats: no lone surrogates, no XML-forbidden controls.
_chars = st.characters(blacklist_categories=("Cs", "Cc"))


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    """A text of up to the limit: filler to just before a part boundary, a character that may be
    astral there, then random text, repeated."""
    boundary = draw(st.integers(1, TEXT_LIMIT // PART)) * PART
    before = draw(st.integers(0, 3))
    piece = draw(st.text(_chars, min_size=1, max_size=40))
    repeats = draw(st.integers(0, 40))
    text = "a" * (boundary - before) + draw(_chars) + piece * repeats
    return text if _units(text) <= TEXT_LIMIT else text[: TEXT_LIMIT // 2]


@st.composite
def long_bytes(draw: st.DrawFn) -> bytes:
    piece = draw(st.binary(min_size=1, max_size=64))
    return (piece * draw(st.integers(0, 2 * 65_536 // len(piece))))[: 2 * 65_536]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(long_texts(), st.text(_chars, max_size=200)), data=long_bytes())
def test_chunked_values_round_trip_every_way(
    emulator_client: CloudTableClient, fuzz_table: str, text: str, data: bytes
) -> None:
    client, table = emulator_client, fuzz_table
    key = uuid.uuid4().hex
    client.insert_entity(table, Doc(key, "client", text, data))
    ctx = client.get_table_service_context()
    ctx.add_object(table, Doc(key, "context", text, data))
    ctx.save_changes()
    batch: TableBatchOperation[Doc] = TableBatchOperation()
    batch.insert(Doc(key, "batch", text, data))
    client.get_table_reference(table).execute_batch(batch)
    assert not client.bulk_insert(table, [Doc(key, "bulk", text, data)]).failed
    read = {d.RowKey: d for d in client.create_query(table, Doc).where(f"PartitionKey eq '{key}'")}
    assert sorted(read) == ["batch", "bulk", "client", "context"]
    for row_key, doc in read.items():
        assert (doc.Text, doc.Data) == (text, data), row_key
    fresh = client.get_table_service_context().get(table, key, "context", Doc)
    assert fresh.Text == text and fresh.Data == data


def test_the_largest_values_fit(emulator_client: CloudTableClient, fuzz_table: str) -> None:
    text = ("\U0001F600" + "b") * (TEXT_LIMIT // 3)
    data = bytes(range(256)) * 512
    emulator_client.insert_entity(fuzz_table, Doc("largest", "1", text, data))
    back = emulator_client.get_entity(fuzz_table, "largest", "1", Doc)
    assert back.Text == text and back.Data == data
