"""CloudTableClient on the wire (mocked): headers, versions, table operations, key rerouting."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import responses

from tablesdk import (
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    CloudTableClient,
    ConflictError,
    DynamicEntity,
    ResourceNotFoundError,
    ServerBusyError,
    TableServiceError,
)
from tablesdk._clients._client import path_can_carry_keys

from fake_service import CONNECTION_STRING, ENDPOINT, error_reply

ACCOUNT = CloudStorageAccount.parse(CONNECTION_STRING)


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as m:
        yield m


def json_client(**kw: object) -> CloudTableClient:
    return ACCOUNT.create_cloud_table_client(**kw)  # type: ignore[arg-type]


class TestHeaders:
    @pytest.mark.parametrize(
        "payload_format, version, accept, dsv",
        [
            ("json", "2019-02-02", "application/json;odata=minimalmetadata", "3.0;NetFx"),
            ("atom", "2015-04-05", "application/atom+xml,application/xml", "2.0;NetFx"),
        ],
    )
    def test_every_request_carries_format_headers(
        self, mock: responses.RequestsMock, payload_format: str, version: str, accept: str, dsv: str
    ) -> None:
        mock.add("GET", f"{ENDPOINT}/Tables('abc')", status=200, body=b"")
        client = json_client(payload_format=payload_format)
        assert client.api_version == version and client.payload_format == payload_format
        assert client.table_exists("abc")
        headers = mock.calls[0].request.headers
        assert headers["x-ms-version"] == version
        assert headers["Accept"] == accept and headers["DataServiceVersion"] == dsv
        assert headers["MaxDataServiceVersion"]
        assert re.fullmatch(r"[0-9a-f-]{36}", headers["x-ms-client-request-id"])
        assert headers["Authorization"].startswith("SharedKey devstoreaccount1:")
        assert "Expect" not in headers and headers["User-Agent"].startswith("tablesdk/")

    def test_explicit_api_version_and_server_timeout(self, mock: responses.RequestsMock) -> None:
        mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Tables.*"), status=200, json={"value": []})
        client = json_client(api_version="2020-12-06", server_timeout=30)
        list(client.list_tables())
        request = mock.calls[0].request
        assert request.headers["x-ms-version"] == "2020-12-06"
        assert parse_qs(urlsplit(request.url).query)["timeout"] == ["30"]

    def test_json_metadata_level(self, mock: responses.RequestsMock) -> None:
        mock.add("GET", f"{ENDPOINT}/Tables('abc')", status=200, body=b"")
        json_client(json_metadata="nometadata").table_exists("abc")
        assert mock.calls[0].request.headers["Accept"] == "application/json;odata=nometadata"

    def test_unknown_format_is_refused(self) -> None:
        with pytest.raises(ValueError, match="payload_format"):
            json_client(payload_format="xml")


class TestTables:
    def test_create_table_if_not_exists_handles_the_race(self, mock: responses.RequestsMock) -> None:
        mock.add("POST", f"{ENDPOINT}/Tables", status=204)
        mock.add("POST", f"{ENDPOINT}/Tables", *(), **_err(409, "TableAlreadyExists", "The table specified already exists."))
        client = json_client()
        assert client.create_table_if_not_exists("Blogs") is True
        assert client.create_table_if_not_exists("Blogs") is False
        body = json.loads(mock.calls[0].request.body)
        assert body == {"TableName": "Blogs"}
        assert mock.calls[0].request.headers["Prefer"] == "return-no-content"

    def test_table_being_deleted_is_an_error_not_false(self, mock: responses.RequestsMock) -> None:
        mock.add("POST", f"{ENDPOINT}/Tables", **_err(409, "TableBeingDeleted", "The specified table is being deleted."))
        with pytest.raises(ConflictError, match="being deleted") as info:
            json_client().create_table_if_not_exists("Blogs")
        assert info.value.error_code == "TableBeingDeleted"

    def test_list_tables_follows_next_table_name(self, mock: responses.RequestsMock) -> None:
        mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Tables\?.*NextTableName=c1.*"), json={"value": [{"TableName": "c1"}]})
        mock.add(
            "GET", re.compile(re.escape(ENDPOINT) + r"/Tables(\?.*)?$"),
            json={"value": [{"TableName": "a1"}, {"TableName": "b1"}]},
            headers={"x-ms-continuation-NextTableName": "c1"},
        )
        assert list(json_client().list_tables(prefix="a")) == ["a1", "b1", "c1"]
        first = parse_qs(urlsplit(mock.calls[0].request.url).query)
        assert first["$filter"] == ["(TableName ge 'a' and TableName lt 'b')"]

    def test_errors_map_to_subclasses_with_code_and_request_id(self, mock: responses.RequestsMock) -> None:
        status, headers, body = error_reply(404, "TableNotFound", "The table specified does not exist.\nRequestId:abc\nTime:x")
        mock.add("DELETE", f"{ENDPOINT}/Tables('Blogs')", status=status, headers={**headers, "x-ms-request-id": "rid-1"}, body=body)
        mock.add("DELETE", f"{ENDPOINT}/Tables('Blogs')", status=500, body=b"")
        client = json_client(retry_policy=__import__("tablesdk").NoRetry())
        with pytest.raises(ResourceNotFoundError) as info:
            client.delete_table("Blogs")
        assert (info.value.error_code, info.value.request_id) == ("TableNotFound", "rid-1")
        assert info.value.message == "The table specified does not exist."
        with pytest.raises(TableServiceError) as empty:
            client.delete_table("Blogs")
        assert empty.value.status_code == 500 and "no error body" in empty.value.message


class TestEntities:
    def test_insert_uses_return_no_content_and_takes_the_etag_header(self, mock: responses.RequestsMock) -> None:
        mock.add("POST", f"{ENDPOINT}/Blogs", status=204, headers={"ETag": 'W/"1"'})
        entity = DynamicEntity(PartitionKey="p", RowKey="r", N=1)
        assert json_client().insert_entity("Blogs", entity) == 'W/"1"' and entity.etag == 'W/"1"'
        assert mock.calls[0].request.headers["Prefer"] == "return-no-content"

    def test_echo_content_parses_the_returned_entity(self, mock: responses.RequestsMock) -> None:
        body = {"odata.etag": 'W/"2"', "PartitionKey": "p", "RowKey": "r", "N": 1, "Timestamp": "2026-01-01T00:00:00Z"}
        mock.add("POST", f"{ENDPOINT}/Blogs", status=201, json=body, headers={"ETag": 'W/"2"'})
        client = json_client(echo_content=True)
        result = client.execute_operation(BatchOperation(
            BatchOperationKind.INSERT, "Blogs", "p", "r",
            __import__("tablesdk._entities._entity", fromlist=["x"]).entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", N=1)), None,
        ))
        assert mock.calls[0].request.headers["Prefer"] == "return-content"
        assert result.status == 201 and result.payload is not None and result.payload.values["N"] == 1

    def test_update_without_etag_is_refused_before_sending(self, mock: responses.RequestsMock) -> None:
        with pytest.raises(ValueError, match="needs an ETag"):
            json_client().update_entity("Blogs", DynamicEntity(PartitionKey="p", RowKey="r"))
        assert len(mock.calls) == 0

    def test_point_get_quotes_and_encodes_keys(self, mock: responses.RequestsMock) -> None:
        mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(.*"), json={"PartitionKey": "o'neil", "RowKey": "a b", "odata.etag": "e"})
        json_client().get_entity("Blogs", "o'neil", "a b")
        path = urlsplit(mock.calls[0].request.url).path
        assert unquote(path).endswith("/Blogs(PartitionKey='o''neil',RowKey='a b')")

    @pytest.mark.parametrize("pk, rk", [("Metric%25", "Count"), ("p", "k" * 300)])
    def test_keys_the_path_cannot_carry_are_read_with_a_filter(self, mock: responses.RequestsMock, pk: str, rk: str) -> None:
        mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\)\?.*"), json={"value": []})
        with pytest.raises(ResourceNotFoundError):
            json_client().get_entity("Blogs", pk, rk)
        url = mock.calls[0].request.url
        assert "/Blogs()?" in url
        escaped = pk.replace("'", "''")
        assert parse_qs(urlsplit(url).query)["$filter"] == [f"PartitionKey eq '{escaped}' and RowKey eq '{rk}'"]

    def test_keys_the_path_cannot_carry_are_written_with_a_one_operation_batch(self, mock: responses.RequestsMock) -> None:
        def batch_reply(request: object) -> tuple[int, dict[str, str], str]:
            body = request.body.decode()  # type: ignore[attr-defined]
            assert "MERGE " in body and "PartitionKey='Metric%2525'" in body
            boundary = "batchresponse_1"
            text = (
                f"--{boundary}\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
                "--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                "HTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/\"9\"\r\n\r\n\r\n"
                "--changesetresponse_1--\r\n"
                f"--{boundary}--\r\n"
            )
            return 202, {"Content-Type": f"multipart/mixed; boundary={boundary}"}, text

        mock.add_callback("POST", f"{ENDPOINT}/$batch", callback=batch_reply)
        entity = DynamicEntity(PartitionKey="Metric%25", RowKey="Count", V=1)
        assert json_client().update_entity("Blogs", entity, etag="*") == 'W/"9"'
        assert [c.request.method for c in mock.calls] == ["POST"]

    def test_path_can_carry_keys(self) -> None:
        assert path_can_carry_keys("Blogs", "p", "r")
        assert not path_can_carry_keys("Blogs", "100%", "r")
        assert not path_can_carry_keys("Blogs", "p", "k" * 300)
        assert path_can_carry_keys("Blogs", "p", "k" * 200)


def test_server_busy_is_retried_by_the_default_policy(mock: responses.RequestsMock) -> None:
    from tablesdk import LinearRetry

    mock.add("GET", f"{ENDPOINT}/Tables('abc')", **_err(503, "ServerBusy", "busy"))
    mock.add("GET", f"{ENDPOINT}/Tables('abc')", status=200, body=b"")
    client = json_client(retry_policy=LinearRetry(2, 0))
    assert client.table_exists("abc")
    ids = {c.request.headers["x-ms-client-request-id"] for c in mock.calls}
    assert len(mock.calls) == 2 and len(ids) == 1  # one operation, one client request id
    from tablesdk import NoRetry

    client.retry_policy = NoRetry()
    mock.add("GET", f"{ENDPOINT}/Tables('abc')", **_err(503, "ServerBusy", "busy"))
    with pytest.raises(ServerBusyError):
        client.table_exists("abc")


def _err(status: int, code: str, message: str) -> dict[str, object]:
    s, headers, body = error_reply(status, code, message)
    return {"status": s, "headers": headers, "body": body}


@pytest.mark.parametrize("method, path, code, status", [
    ("POST", "Tables", "TableAlreadyExists", 409),
    ("DELETE", "Tables('Blogs')", "ResourceNotFound", 404),
])
def test_if_exists_helpers_do_not_guess_after_a_lost_attempt(
    mock: responses.RequestsMock, method: str, path: str, code: str, status: int
) -> None:
    from tablesdk import LinearRetry

    mock.add(method, f"{ENDPOINT}/{path}", **_err(500, "InternalError", "lost"))  # outcome unknown
    mock.add(method, f"{ENDPOINT}/{path}", **_err(status, code, "answered the retry"))
    client = json_client(retry_policy=LinearRetry(1, 0))
    helper = client.create_table_if_not_exists if method == "POST" else client.delete_table_if_exists
    with pytest.raises(TableServiceError) as info:
        helper("Blogs")
    assert info.value.ambiguous_retry is True and info.value.status_code == status


@pytest.mark.parametrize("code, client_gets", [("ResourceNotFound", "empty"), ("TableNotFound", "raises")])
def test_point_query_not_found_rules(mock: responses.RequestsMock, code: str, client_gets: str) -> None:
    from tablesdk import prop

    mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(PartitionKey.*"), **_err(404, code, "missing"))
    client = json_client()
    point = (prop("PartitionKey") == "p") & (prop("RowKey") == "r")
    query = client.create_query("Blogs").where(point)
    if client_gets == "empty":
        assert query.first_or_default() is None  # a missing entity is an empty result
    else:
        with pytest.raises(ResourceNotFoundError):  # a missing table is not
            query.first_or_default()
    ctx = client.get_table_service_context()
    with pytest.raises(ResourceNotFoundError):
        ctx.get("Blogs", "p", "r")
    if client_gets == "empty":
        assert ctx.get_or_none("Blogs", "p", "r") is None
    else:
        with pytest.raises(ResourceNotFoundError):  # a missing table is an error to get_or_none too
            ctx.get_or_none("Blogs", "p", "r")
    ctx.ignore_resource_not_found = True  # the context's option covers both, like IgnoreResourceNotFoundException
    with pytest.warns(DeprecationWarning, match="get_or_none"):
        assert ctx.get("Blogs", "p", "r") is None


class TestDeleteEntity:
    """delete_entity(table, entity) is conditional on the entity's ETag, like update_entity."""

    URL = f"{ENDPOINT}/Blogs(PartitionKey='p',RowKey='r')"

    def _deleted(self, mock: responses.RequestsMock) -> None:
        mock.add("DELETE", self.URL, status=204)

    def test_an_entity_is_deleted_if_it_still_has_its_etag(self, mock: responses.RequestsMock) -> None:
        self._deleted(mock)
        entity = DynamicEntity(PartitionKey="p", RowKey="r")
        entity.etag = 'W/"datetime\'2026-01-01T00%3A00%3A00Z\'"'
        json_client().delete_entity("Blogs", entity)
        assert mock.calls[0].request.headers["If-Match"] == entity.etag

    def test_etag_star_deletes_whatever_the_version(self, mock: responses.RequestsMock) -> None:
        self._deleted(mock)
        json_client().delete_entity("Blogs", DynamicEntity(PartitionKey="p", RowKey="r"), etag="*")
        assert mock.calls[0].request.headers["If-Match"] == "*"

    def test_keys_form_through_keywords(self, mock: responses.RequestsMock) -> None:
        self._deleted(mock)
        json_client().delete_entity("Blogs", partition_key="p", row_key="r", etag="*")
        assert mock.calls[0].request.headers["If-Match"] == "*"

    def test_an_entity_without_etag_is_refused_before_sending(self, mock: responses.RequestsMock) -> None:
        with pytest.raises(ValueError, match="no ETag.*etag='\\*'"):
            json_client().delete_entity("Blogs", DynamicEntity(PartitionKey="p", RowKey="r"))
        assert not mock.calls

    def test_keys_without_etag_are_refused(self, mock: responses.RequestsMock) -> None:
        with pytest.raises(ValueError, match="needs etag="):
            json_client().delete_entity("Blogs", partition_key="p", row_key="r")
        assert not mock.calls

    def test_positional_keys_get_a_message_naming_the_keyword_form(self, mock: responses.RequestsMock) -> None:
        with pytest.raises(TypeError, match="partition_key=..., row_key=..."):
            json_client().delete_entity("Blogs", "p")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not both"):
            json_client().delete_entity("Blogs", DynamicEntity(PartitionKey="p", RowKey="r"), row_key="r", etag="*")
        assert not mock.calls


def test_a_connection_string_without_credential_is_refused_when_the_client_is_created() -> None:
    account = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=https;AccountName=myaccount;EndpointSuffix=core.windows.net"
    )
    with pytest.raises(ValueError, match="no credential.*no anonymous access.*AccountKey=.*SharedAccessSignature="):
        account.create_cloud_table_client()
