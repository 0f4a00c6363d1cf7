"""AtomPub conformance of the devstore against the white paper and the Azure Storage team's blog, read back with tablesdk's codecs.

Azurite refuses AtomPub (it answers 415 to Atom requests), so these run against the bundled
emulator only. They feed it the exact request bodies those documents show and check that
the answers parse with the SDK's own codecs to the right typed values:

* the "Movie" Atom insert entry (seed 001, the wire example after the Movie class),
  byte for byte, under x-ms-version 2011-08-18 and 2015-04-05, Shared Key signed with
  :class:`tablesdk._core._auth.SharedKeyCredential`, sent with raw ``requests``; read back as
  an Atom entry, an Atom feed (the seed's ``PartitionKey == "Action" && Rating > 4.0``
  query) and as JSON;
* the white paper's entity group transaction (seed 000, "Entity Group Transactions":
  inserts, updates and deletes of blogs in partition ``Channel_19`` of ``Blogs``, each
  update carrying its ETag in its own part), the single-query batch (``PartitionKey ==
  "Channel_19" && RowKey == "2"``), and the error response shape (a 400 ``InvalidInput``
  whose message starts with the failing operation's index ``1:``); built with
  :func:`tablesdk._formats._batch.build_batch_request` and the Atom codec, and once hand-written
  following the white paper, and parsed with :func:`tablesdk._formats._batch_answer.parse_batch_response`;
* round trips of all eight EDM types: inserted as Atom, read as JSON, and the reverse.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import requests

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty
from tablesdk._core._auth import SharedKeyCredential
from tablesdk._formats._batch import BatchOperation, BatchOperationKind, build_batch_request
from tablesdk._formats._batch_answer import parse_batch_response
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore
from tablesdk._entities._edm import EdmDateTime, EntityPayload, parse_datetime
from tablesdk._entities._entity import entity_to_payload
from tablesdk._core._errors import BatchError
from tablesdk._formats import get_format

pytestmark = pytest.mark.integration

#: Verbatim from seed 001 (the wire protocol example for inserting a "Movie").
MOVIE_ENTRY = (
    '<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/'
    'dataservices" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns="http://www.w3.org/'
    '2005/Atom"><title /><author><name /></author><updated>2010-10-16T15:48:53.0011614Z</updated><id /><content type='
    '"application/xml"><m:properties><d:Favorite m:type="Edm.Boolean">false</d:Favorite><d:Language>English</d:Language>'
    '<d:PartitionKey>Action</d:PartitionKey><d:Rating m:type="Edm.Double">4.5</d:Rating><d:ReleaseYear m:type="Edm.'
    'Int32">2010</d:ReleaseYear><d:Revenue m:type="Edm.Double">0</d:Revenue><d:RowKey>Cop Out</d:RowKey><d:Timestamp m:'
    'type="Edm.DateTime">0001-01-01T00:00:00</d:Timestamp></m:properties></content></entry>'
)
#: What the Movie entity holds once stored: (EDM type, value) of every property but Timestamp.
MOVIE = {
    "PartitionKey": (EdmType.STRING, "Action"),
    "RowKey": (EdmType.STRING, "Cop Out"),
    "Favorite": (EdmType.BOOLEAN, False),
    "Language": (EdmType.STRING, "English"),
    "Rating": (EdmType.DOUBLE, 4.5),
    "ReleaseYear": (EdmType.INT32, 2010),
    "Revenue": (EdmType.DOUBLE, 0.0),
}
ATOM_VERSIONS = ["2011-08-18", "2015-04-05"]
ATOM_ACCEPT = "application/atom+xml,application/xml"
M_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"

ATOM = get_format("atom")
JSON = get_format("json")


# ------------------------------------------------------------------ helpers


class RawAtom:
    """Raw ``requests`` against the devstore, Shared Key signed by tablesdk._core._auth."""

    def __init__(self, store: DevStore, version: str) -> None:
        self.base = store.url
        self.version = version
        self.credential = SharedKeyCredential(DEVSTORE_ACCOUNT, DEVSTORE_KEY)
        self.session = requests.Session()
        self.session.trust_env = False

    def send(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
             **extra: str) -> requests.Response:
        url = f"{self.base}/{path}"
        headers = {
            "x-ms-version": self.version,
            "Accept": ATOM_ACCEPT,
            "DataServiceVersion": "1.0;NetFx",
            "MaxDataServiceVersion": "2.0;NetFx",
            **extra,
        }
        if content_type is not None:
            headers["Content-Type"] = content_type
        url = self.credential.apply(method, url, headers)
        return self.session.request(method, url, data=body, headers=headers, timeout=30)

    def close(self) -> None:
        self.session.close()


@pytest.fixture
def store(devstore: DevStore) -> DevStore:
    return devstore


@pytest.fixture
def clients(store: DevStore) -> Iterator[dict[str, CloudTableClient]]:
    account = CloudStorageAccount.parse(store.connection_string)
    made = {fmt: account.create_cloud_table_client(payload_format=fmt) for fmt in ("json", "atom")}
    yield made
    for client in made.values():
        client.close()


@pytest.fixture
def table(clients: dict[str, CloudTableClient], unique_table_name: str) -> Iterator[str]:
    clients["json"].create_table(unique_table_name)
    yield unique_table_name
    clients["json"].delete_table_if_exists(unique_table_name)


def typed(payload: EntityPayload, *, keep_timestamp: bool = False) -> dict[str, tuple[EdmType | None, Any]]:
    """name -> (EDM type, comparable value) of every property (Timestamp only if asked)."""
    out: dict[str, tuple[EdmType | None, Any]] = {}
    for name, value in payload.values.items():
        if name == "Timestamp" and not keep_timestamp:
            continue
        out[name] = (payload.types.get(name), _comparable(value))
    return out


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, EdmDateTime):
        return (value.isoformat(), value.ticks_remainder)
    if isinstance(value, datetime):
        return (value.isoformat(), 0)
    return value


def assert_python_types(payload: EntityPayload) -> None:
    """Each value is of the Python type its EDM type promises (bool is not an int here)."""
    expected = {
        EdmType.STRING: str, EdmType.INT32: int, EdmType.INT64: int, EdmType.DOUBLE: float,
        EdmType.BOOLEAN: bool, EdmType.DATETIME: datetime, EdmType.GUID: uuid.UUID, EdmType.BINARY: bytes,
    }
    for name, value in payload.values.items():
        edm = payload.types[name]
        assert isinstance(value, expected[edm]), (name, edm, value)
        if edm in (EdmType.INT32, EdmType.INT64, EdmType.DOUBLE):
            assert not isinstance(value, bool), name
        if isinstance(value, datetime):
            offset = value.utcoffset()
            assert offset is not None and offset.total_seconds() == 0, name


# ------------------------------------------------------------------ the Movie entry (seed 001)


@pytest.mark.parametrize("version", ATOM_VERSIONS)
def test_movie_insert_entry_from_the_seed(
    store: DevStore, clients: dict[str, CloudTableClient], table: str, version: str
) -> None:
    raw = RawAtom(store, version)
    try:
        resp = raw.send("POST", table, MOVIE_ENTRY.encode("utf-8"), "application/atom+xml")
        assert resp.status_code == 201, resp.text
        assert resp.headers["Content-Type"].startswith("application/atom+xml")
        assert resp.headers["x-ms-version"] == version
        etag = resp.headers["ETag"]
        inserted = ATOM.parse_entity(resp.content, etag)
        assert inserted.etag == etag
        assert typed(inserted) == MOVIE
        assert_python_types(inserted)
        stamp = inserted.values["Timestamp"]
        assert inserted.types["Timestamp"] is EdmType.DATETIME
        assert stamp.year >= 2024  # the service sets Timestamp; the entry's 0001-01-01 is ignored
        assert f"datetime'{stamp.strftime('%Y-%m-%dT%H')}" in etag  # the ETag is the Timestamp

        # a point query, as an Atom entry
        point = raw.send("GET", "%s(PartitionKey='Action',RowKey='Cop%%20Out')" % table)
        assert point.status_code == 200, point.text
        got = ATOM.parse_entity(point.content, point.headers.get("ETag"))
        assert typed(got, keep_timestamp=True) == typed(inserted, keep_timestamp=True)
        assert got.etag == etag

        # the seed's query: movie.PartitionKey == "Action" && movie.Rating > 4.0, as an Atom feed
        query = raw.send("GET", f"{table}()?$filter=PartitionKey%20eq%20'Action'%20and%20Rating%20gt%204.0")
        assert query.status_code == 200, query.text
        assert query.headers["Content-Type"].startswith("application/atom+xml")
        feed = ATOM.parse_entities(query.content)
        assert [typed(p, keep_timestamp=True) for p in feed] == [typed(inserted, keep_timestamp=True)]
        assert feed[0].etag == etag  # the feed's entries carry m:etag
        none = raw.send("GET", f"{table}()?$filter=Rating%20gt%204.5")
        assert ATOM.parse_entities(none.content) == []
    finally:
        raw.close()

    # the same entity read through the JSON protocol: identical typed values and Timestamp
    as_json = clients["json"].get_entity_payload(table, "Action", "Cop Out")
    assert typed(as_json, keep_timestamp=True) == typed(inserted, keep_timestamp=True)
    assert as_json.etag == etag
    assert_python_types(as_json)


@pytest.mark.parametrize("version", ATOM_VERSIONS)
def test_movie_entry_with_return_no_content_and_errors_in_atom(store: DevStore, table: str, version: str) -> None:
    raw = RawAtom(store, version)
    try:
        resp = raw.send("POST", table, MOVIE_ENTRY.encode("utf-8"), "application/atom+xml",
                        Prefer="return-no-content")
        # Prefer is understood from 2013-08-15 on; before, the entity always comes back
        assert resp.status_code == (201 if version < "2013-08-15" else 204), resp.text
        assert resp.headers["ETag"].startswith("W/\"datetime'")
        again = raw.send("POST", table, MOVIE_ENTRY.encode("utf-8"), "application/atom+xml")
        assert again.status_code == 409
        assert again.headers["x-ms-error-code"] == "EntityAlreadyExists"
        assert again.headers["Content-Type"].startswith("application/xml")
        assert f'<error xmlns="{M_NS}">' in again.text and "<code>EntityAlreadyExists</code>" in again.text
        missing = raw.send("GET", "%s(PartitionKey='Action',RowKey='Terminator')" % table)
        assert missing.status_code == 404 and "<code>ResourceNotFound</code>" in missing.text
    finally:
        raw.close()


# ------------------------------------------------------------------ the white paper's batch (seed 000)


def blog(row: str, text: str, rating: int) -> EntityPayload:
    return entity_to_payload(DynamicEntity(PartitionKey="Channel_19", RowKey=row, Text=text, Rating=rating))


def _send_batch(raw: RawAtom, body: bytes, content_type: str) -> requests.Response:
    resp = raw.send("POST", "$batch", body, content_type)
    assert resp.status_code == 202, resp.text
    return resp


@pytest.mark.parametrize("version", ATOM_VERSIONS)
def test_white_paper_entity_group_transaction(
    store: DevStore, clients: dict[str, CloudTableClient], table: str, version: str
) -> None:
    atom_client = clients["atom"]
    for row, rating in (("1", 3), ("2", 4), ("3", 1), ("4", 2)):
        atom_client.execute_operation(BatchOperation(
            BatchOperationKind.INSERT, table, "Channel_19", row, blog(row, f"blog {row}", rating), None))
    # "We assume that the deletedBlogs and updatedBlogs have been fetched into the context"
    fetched = {p.values["RowKey"]: p for p in atom_client.query_entity_payloads(table)[0]}
    updated = []
    for row in ("1", "2"):
        payload = fetched[row]
        payload.values["Rating"] += 1  # updatedBlogs[index].Rating++
        del payload.values["Timestamp"]
        updated.append(BatchOperation(BatchOperationKind.MERGE, table, "Channel_19", row, payload, payload.etag))
    operations = [
        BatchOperation(BatchOperationKind.INSERT, table, "Channel_19", "10", blog("10", "new ten", 5), None,
                       echo_content=True),
        BatchOperation(BatchOperationKind.INSERT, table, "Channel_19", "11", blog("11", "new eleven", 0), None),
        BatchOperation(BatchOperationKind.DELETE, table, "Channel_19", "3", None, fetched["3"].etag),
        BatchOperation(BatchOperationKind.DELETE, table, "Channel_19", "4", None, "*"),
        *updated,
    ]
    body, content_type = build_batch_request(store.url, operations, ATOM, api_version=version)
    assert body.count(b"If-Match: W/") == 3  # each ETag travels in its own part, not as a batch header
    raw = RawAtom(store, version)
    try:
        resp = _send_batch(raw, body, content_type)
    finally:
        raw.close()
    assert resp.headers["Content-Type"].startswith("multipart/mixed; boundary=batchresponse_")
    results = parse_batch_response(resp.content, resp.headers["Content-Type"], operations, ATOM)
    assert [r.status for r in results] == [201, 201 if version < "2013-08-15" else 204, 204, 204, 204, 204]
    assert [r.index for r in results] == list(range(6))
    echoed = results[0].payload
    assert echoed is not None and typed(echoed) == {
        "PartitionKey": (EdmType.STRING, "Channel_19"), "RowKey": (EdmType.STRING, "10"),
        "Text": (EdmType.STRING, "new ten"), "Rating": (EdmType.INT32, 5),
    }
    assert all(r.etag for i, r in enumerate(results) if i not in (2, 3))  # deletes return no ETag
    assert results[2].etag is None and results[3].etag is None

    state = {p.values["RowKey"]: p for p in clients["json"].query_entity_payloads(table)[0]}
    assert sorted(state) == ["1", "10", "11", "2"]
    assert [state[r].values["Rating"] for r in ("1", "2", "10", "11")] == [4, 5, 5, 0]
    assert state["1"].etag == results[4].etag and state["2"].etag == results[5].etag


@pytest.mark.parametrize("version", ATOM_VERSIONS)
def test_white_paper_single_query_batch(
    store: DevStore, clients: dict[str, CloudTableClient], table: str, version: str
) -> None:
    clients["json"].execute_operation(BatchOperation(
        BatchOperationKind.INSERT, table, "Channel_19", "2", blog("2", "two", 7), None))
    # PartitionKey == "Channel_19" && RowKey == "2", as a query batch
    operations = [BatchOperation(BatchOperationKind.RETRIEVE, table, "Channel_19", "2", None, None)]
    body, content_type = build_batch_request(store.url, operations, ATOM, api_version=version)
    assert b"changeset" not in body and b"GET " in body
    raw = RawAtom(store, version)
    try:
        resp = _send_batch(raw, body, content_type)
    finally:
        raw.close()
    [result] = parse_batch_response(resp.content, resp.headers["Content-Type"], operations, ATOM)
    assert result.status == 200 and result.payload is not None
    assert typed(result.payload) == {
        "PartitionKey": (EdmType.STRING, "Channel_19"), "RowKey": (EdmType.STRING, "2"),
        "Text": (EdmType.STRING, "two"), "Rating": (EdmType.INT32, 7),
    }
    assert result.etag == clients["json"].get_entity_payload(table, "Channel_19", "2").etag


def _hand_written_batch(base: str, table: str, version: str, second_entry: str) -> tuple[bytes, str]:
    """A change set written out the way the white paper and the REST reference show it."""
    def entry(properties: str) -> str:
        return (
            '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
            '<entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
            f'xmlns:m="{M_NS}" xmlns="http://www.w3.org/2005/Atom">'
            "<title /><author><name /></author><updated>2009-04-30T20:44:09.5789464Z</updated><id />"
            f'<content type="application/xml"><m:properties>{properties}</m:properties></content></entry>'
        )

    first = entry(
        "<d:PartitionKey>Channel_19</d:PartitionKey><d:RowKey>1</d:RowKey>"
        '<d:Rating m:type="Edm.Int32">3</d:Rating><d:Text>.NET...</d:Text>'
    )
    batch, changeset = "batch_a1e9d677-b28b-435e-a89e-87e6a768a431", "changeset_8a28b620-b4bb-458c-a177-0959fb14c977"
    parts = []
    for number, (method, path, body) in enumerate(
        [("POST", table, first), ("POST", table, second_entry)], 1
    ):
        parts.append(
            f"--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            f"{method} {base}/{path} HTTP/1.1\r\nContent-ID: {number}\r\n"
            f"Content-Type: application/atom+xml;type=entry\r\nContent-Length: {len(body.encode())}\r\n"
            f"x-ms-version: {version}\r\n\r\n{body}\r\n"
        )
    text = (
        f"--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
        + "".join(parts)
        + f"--{changeset}--\r\n--{batch}--\r\n"
    )
    return text.encode("utf-8"), f"multipart/mixed; boundary={batch}"


@pytest.mark.parametrize("version", ATOM_VERSIONS)
def test_hand_written_batch_and_the_white_paper_error_response(
    store: DevStore, clients: dict[str, CloudTableClient], table: str, version: str
) -> None:
    good_second = (
        '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
        '<entry xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
        f'xmlns:m="{M_NS}" xmlns="http://www.w3.org/2005/Atom"><title /><author><name /></author>'
        "<updated>2009-04-30T20:44:09.5789464Z</updated><id /><content type=\"application/xml\"><m:properties>"
        "<d:PartitionKey>Channel_19</d:PartitionKey><d:RowKey>2</d:RowKey>"
        '<d:Rating m:type="Edm.Int32">{rating}</d:Rating><d:Text>Azure...</d:Text>'
        "</m:properties></content></entry>"
    )
    operations = [
        BatchOperation(BatchOperationKind.INSERT, table, "Channel_19", row, blog(row, "", 0), None) for row in "12"
    ]
    raw = RawAtom(store, version)
    try:
        # the white paper's error: operation 1 is invalid (an Int32 that is not a number)
        body, content_type = _hand_written_batch(store.url, table, version, good_second.format(rating="four"))
        resp = _send_batch(raw, body, content_type)
        assert resp.content.count(b"HTTP/1.1 ") == 1  # one response for the whole failed change set
        assert b"HTTP/1.1 400 Bad Request" in resp.content
        assert f'<error xmlns="{M_NS}">'.encode() in resp.content
        assert b"<code>InvalidInput</code>" in resp.content and b'<message xml:lang="en-US">1:' in resp.content
        with pytest.raises(BatchError) as info:
            parse_batch_response(resp.content, resp.headers["Content-Type"], operations, ATOM)
        assert (info.value.failed_index, info.value.status_code, info.value.error_code) == (1, 400, "InvalidInput")
        assert clients["json"].query_entity_payloads(table)[0] == []  # nothing was written

        body, content_type = _hand_written_batch(store.url, table, version, good_second.format(rating="4"))
        resp = _send_batch(raw, body, content_type)
        results = parse_batch_response(resp.content, resp.headers["Content-Type"], operations, ATOM)
    finally:
        raw.close()
    assert [r.status for r in results] == [201, 201]  # no Prefer header: the entries come back
    assert [r.payload.values["Rating"] for r in results if r.payload is not None] == [3, 4]
    assert [r.payload.types["Rating"] for r in results if r.payload is not None] == [EdmType.INT32] * 2
    assert [r.headers.get("Content-ID") for r in results] == ["1", "2"]
    state = clients["json"].query_entity_payloads(table)[0]
    assert [(p.values["RowKey"], p.values["Text"], p.etag) for p in state] == [
        ("1", ".NET...", results[0].etag), ("2", "Azure...", results[1].etag),
    ]


# ------------------------------------------------------------------ round trips of every EDM type


def every_type(row: str) -> DynamicEntity:
    return DynamicEntity(
        PartitionKey="round trip \U0001F600", RowKey=row,
        Str="o'neil & <co> é中\U0001F600 ", Empty="",
        I32=EntityProperty(-(2**31), EdmType.INT32), I32b=2010,
        I64=EntityProperty(2**62 + 1, EdmType.INT64), I64small=EntityProperty(5, EdmType.INT64),
        Dbl=4.5, Whole=EntityProperty(2.0, EdmType.DOUBLE), Zero=0.0, Tiny=1.5e-300, Nan=math.nan, Inf=-math.inf,
        Yes=True, No=False,
        When=parse_datetime("2024-02-29T23:59:59.1234567Z"), Early=datetime(1601, 1, 1, tzinfo=timezone.utc),
        Id=uuid.UUID("1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
        Raw=bytes(range(256)), NoBytes=b"",
    )


EXPECTED_TYPES = {
    "PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Str": EdmType.STRING, "Empty": EdmType.STRING,
    "I32": EdmType.INT32, "I32b": EdmType.INT32, "I64": EdmType.INT64, "I64small": EdmType.INT64,
    "Dbl": EdmType.DOUBLE, "Whole": EdmType.DOUBLE, "Zero": EdmType.DOUBLE, "Tiny": EdmType.DOUBLE,
    "Nan": EdmType.DOUBLE, "Inf": EdmType.DOUBLE, "Yes": EdmType.BOOLEAN, "No": EdmType.BOOLEAN,
    "When": EdmType.DATETIME, "Early": EdmType.DATETIME, "Id": EdmType.GUID, "Raw": EdmType.BINARY,
    "NoBytes": EdmType.BINARY,
}


@pytest.mark.parametrize("writer, reader", [("atom", "json"), ("json", "atom")])
def test_round_trip_of_every_edm_type(
    clients: dict[str, CloudTableClient], table: str, writer: str, reader: str
) -> None:
    entity = every_type(f"{writer}-to-{reader}")
    sent = entity_to_payload(entity)
    etag = clients[writer].insert_entity(table, entity)
    back = clients[reader].get_entity_payload(table, entity.PartitionKey, entity.RowKey)
    assert back.etag == etag
    assert {name: back.types.get(name) for name in EXPECTED_TYPES} == EXPECTED_TYPES
    assert typed(back) == typed(sent)
    assert back.values["When"].ticks_remainder == 7  # the 100 ns digit survives both formats
    assert_python_types(back)
    # and the writer's own format agrees, Timestamp included
    mine = clients[writer].get_entity_payload(table, entity.PartitionKey, entity.RowKey)
    assert typed(mine, keep_timestamp=True) == typed(back, keep_timestamp=True)
    # a query page in the reader's format carries the same entity
    [listed] = clients[reader].query_entity_payloads(table, filter=f"RowKey eq '{entity.RowKey}'")[0]
    assert typed(listed, keep_timestamp=True) == typed(back, keep_timestamp=True)
