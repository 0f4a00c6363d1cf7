"""The sender seam: request/response objects, MockSender, RequestsSender's bounded reads, the retry loop's pure decisions."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
import responses

from tablesdk import (
    AttemptState,
    CloudStorageAccount,
    CloudTableClient,
    ConflictError,
    ConnectionFailedError,
    DynamicEntity,
    HttpRequest,
    HttpResponse,
    LinearRetry,
    MockSender,
    NoRetry,
    OperationContext,
    RequestsSender,
    SendError,
    Sender,
    TableServiceError,
)
from tablesdk._core._errors import error_for_status
from tablesdk._pipeline._retry import ExponentialRetry
from tablesdk._pipeline._settings import RequestSettings
from tablesdk._pipeline._transport import RetryLoop, Transport, is_ambiguous, prepare_request, sign_attempt

from fake_service import CONNECTION_STRING, ENDPOINT, error_reply
from loopback import unused_port

ACCOUNT = CloudStorageAccount.parse(CONNECTION_STRING)
URL = "http://acct.table.example/Blogs"


def no_sleep(seconds: float) -> None:
    pass


def conflict(request: HttpRequest) -> HttpResponse:
    status, headers, body = error_reply(409, "EntityAlreadyExists", "The specified entity already exists.")
    return MockSender.response(status, body, headers)


# ---------------------------------------------------------------- the client seam


def test_client_sends_signed_requests_through_an_injected_sender() -> None:
    sender = MockSender(lambda request: MockSender.response(204, headers={"ETag": 'W/"1"'}))
    client = ACCOUNT.create_cloud_table_client(sender=sender)
    assert isinstance(sender, Sender) and client.transport.sender is sender
    etag = client.insert_entity("Blogs", DynamicEntity(PartitionKey="p", RowKey="r", Text="hi"))
    assert etag == 'W/"1"'
    (request,) = sender.requests
    assert request.method == "POST" and request.url == f"{ENDPOINT}/Blogs"
    assert request.header("authorization", ).startswith("SharedKey devstoreaccount1:")  # type: ignore[union-attr]
    assert request.header("x-ms-date") and request.header("x-ms-client-request-id")
    assert json.loads(request.body or b"")["Text"] == "hi"
    assert sender.timeouts == [(10.0, 60.0)]


def test_client_constructor_takes_a_sender_too() -> None:
    sender = MockSender(lambda request: MockSender.response(200, b"", {}))
    client = CloudTableClient(ACCOUNT, sender=sender)
    assert client.table_exists("Blogs") and len(sender.requests) == 1


def test_each_attempt_is_signed_anew_and_errors_come_from_the_loop() -> None:
    answers = iter([MockSender.response(503, b"", {"x-ms-error-code": "ServerBusy"}), MockSender.response(204)])
    sender = MockSender(lambda request: next(answers))
    client = ACCOUNT.create_cloud_table_client(sender=sender, retry_policy=LinearRetry(2, 0.0))
    client.delete_entity("Blogs", partition_key="p", row_key="r", etag="*")
    first, second = sender.requests
    assert first is not second and first.header("x-ms-client-request-id") == second.header("x-ms-client-request-id")


def test_a_send_error_becomes_a_connection_failure_with_its_state_recorded() -> None:
    def refuse(request: HttpRequest) -> HttpResponse:
        raise SendError("ConnectionRefusedError: [Errno 111] Connection refused", state=AttemptState.NOT_SENT,
                        refused=True)

    client = ACCOUNT.create_cloud_table_client(sender=MockSender(refuse), retry_policy=NoRetry())
    op = OperationContext()
    with pytest.raises(ConnectionFailedError) as info:
        client.table_exists("Blogs", operation_context=op)
    assert info.value.refused and info.value.status_code is None
    assert [a.state for a in op.attempts] == [AttemptState.NOT_SENT]


def test_an_invalid_request_from_the_sender_is_a_value_error_never_retried() -> None:
    def invalid(request: HttpRequest) -> HttpResponse:
        raise SendError("InvalidURL: bad?sig=SECRETSECRET", invalid=True)

    sender = MockSender(invalid)
    client = ACCOUNT.create_cloud_table_client(sender=sender)
    with pytest.raises(ValueError, match="cannot send GET") as info:
        client.table_exists("Blogs")
    assert "SECRETSECRET" not in str(info.value) and len(sender.requests) == 1


# ---------------------------------------------------------------- the pure loop


def test_the_retry_loop_can_be_driven_without_io() -> None:
    """What an asyncio driver does: the same loop object, only sending and waiting differ."""
    prepared = prepare_request(
        HttpRequest("post", URL, {}, b"{}"), client_request_id="cid", user_agent="ua", server_timeout=5
    )
    assert prepared.method == "POST" and prepared.url.endswith("?timeout=5")
    assert prepared.header("Content-Length") == "2" and prepared.header("x-ms-client-request-id") == "cid"
    loop = RetryLoop(
        prepared, LinearRetry(3, 1.5), (1.0, 2.0),
        lambda r: error_for_status(r.status, r.headers.get("x-ms-error-code"), "err"), 100.0, deadline=10.0,
    )
    now = 100.0
    answers: list[HttpResponse | SendError] = [
        SendError("read timed out", timed_out=True),
        MockSender.response(409, b"", {"x-ms-error-code": "EntityAlreadyExists"}),
    ]
    delays = []
    for answer in answers:
        timeout = loop.next_timeout(now)
        assert timeout == (1.0, 2.0)
        signed = sign_attempt(loop.request, None)
        assert signed.header("x-ms-date") and loop.request.header("x-ms-date") is None
        result = loop.failed(signed, answer) if isinstance(answer, SendError) else loop.answered(signed, answer)
        step = loop.settle(result, now, now + 0.5)
        now += 0.5
        delays.append(step.delay)
        if step.delay is None:
            with pytest.raises(ConflictError) as info:
                step.finish()
            assert info.value.ambiguous_retry  # a retried insert met its own lost first attempt
        else:
            now += step.delay
    assert delays == [1.5, None]
    assert loop.states == [AttemptState.UNKNOWN, AttemptState.ANSWERED]


@pytest.mark.parametrize(
    ("method", "status", "earlier", "expected"),
    [
        ("POST", 409, [AttemptState.UNKNOWN], True),
        ("DELETE", 404, [AttemptState.ANSWERED, AttemptState.UNKNOWN], True),
        ("MERGE", 412, [AttemptState.UNKNOWN], True),
        ("POST", 409, [AttemptState.NOT_SENT], False),  # never reached the server: a plain conflict
        ("POST", 409, [AttemptState.ANSWERED], False),
        ("GET", 404, [AttemptState.UNKNOWN], False),
        ("POST", 400, [AttemptState.UNKNOWN], False),
        ("POST", None, [AttemptState.UNKNOWN], False),
    ],
)
def test_is_ambiguous_is_the_one_rule(method: str, status: int | None, earlier: list[AttemptState], expected: bool) -> None:
    assert is_ambiguous(method, status, earlier) is expected


def test_a_check_can_refuse_a_2xx_answer_and_the_policy_retries_it() -> None:
    answers = iter([MockSender.response(202, b"busy"), MockSender.response(202, b"ok")])
    sender = MockSender(lambda request: next(answers))

    def check(response: HttpResponse) -> None:
        if response.body == b"busy":
            raise error_for_status(503, "ServerBusy", "inside the batch")

    transport = Transport(None, error_parser=lambda r: TableServiceError("x"), sender=sender, sleep=no_sleep)
    op = OperationContext()
    settings = RequestSettings(retry_policy=LinearRetry(2, 0.0))
    assert transport.send("POST", URL, settings=settings, body=b"", check=check, operation_context=op).body == b"ok"
    assert [(a.status, a.error_code, a.state) for a in op.attempts] == [
        (202, "ServerBusy", AttemptState.UNKNOWN), (202, None, AttemptState.ANSWERED)
    ]


# ---------------------------------------------------------------- RequestsSender


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as m:
        yield m


def test_requests_sender_asks_for_identity_and_never_inflates(mock: responses.RequestsMock) -> None:
    packed = gzip.compress(b"x" * 100_000)
    mock.add("GET", URL, body=packed, headers={"Content-Encoding": "gzip"})
    response = RequestsSender().send(HttpRequest("GET", URL), 5.0)
    assert mock.calls[0].request.headers["Accept-Encoding"] == "identity"
    assert response.body == packed  # as sent: a small body does not become a large one


@pytest.mark.parametrize("declared", [True, False])
def test_requests_sender_caps_the_body(mock: responses.RequestsMock, declared: bool) -> None:
    mock.add("GET", URL, body=b"y" * 5000, auto_calculate_content_length=declared)
    sender = RequestsSender(max_response_bytes=4096)
    with pytest.raises(SendError, match="max_response_bytes=4096") as info:
        sender.send(HttpRequest("GET", URL), 5.0)
    assert info.value.status == 200 and info.value.state is AttemptState.ANSWERED
    mock.add("GET", URL, body=b"y" * 4096)
    assert len(sender.send(HttpRequest("GET", URL), 5.0).body) == 4096


def test_a_body_over_the_cap_is_a_final_error_from_the_client(mock: responses.RequestsMock) -> None:
    mock.add("GET", f"{ENDPOINT}/Tables('Blogs')", body=b"z" * 2000)
    client = ACCOUNT.create_cloud_table_client(max_response_bytes=1000, retry_policy=ExponentialRetry())
    with pytest.raises(TableServiceError, match="exceeds max_response_bytes=1000") as info:
        client.table_exists("Blogs")
    assert info.value.status_code == 200 and len(mock.calls) == 1
    with pytest.raises(ValueError, match="max_response_bytes"):
        ACCOUNT.create_cloud_table_client(max_response_bytes=0)


# ---------------------------------------------------------------- refused connections fail fast and say why


def test_a_refused_loopback_connection_fails_fast_with_the_default_policy(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import time

    port = unused_port()
    account = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={ACCOUNT.credential.account_key};"  # type: ignore[union-attr]
        f"TableEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
    )
    client = account.create_cloud_table_client()  # ExponentialRetry(): 3 retries, 3 s to 90 s otherwise
    slept: list[float] = []
    client.transport._sleep = slept.append  # type: ignore[attr-defined]
    op = OperationContext()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tablesdk.transport"):
        with pytest.raises(ConnectionFailedError) as info:
            client.table_exists("Blogs", operation_context=op)
    assert time.monotonic() - started < 5.0
    assert slept == [0.5, 1.0, 2.0] and sum(slept) < 20.0
    assert [a.state for a in op.attempts] == [AttemptState.NOT_SENT] * 4
    text = str(info.value)
    assert "after 4 attempts over" in text and "python -m tablesdk.devstore" in text
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all("refused" in w.lower() and "retrying in" in w for w in warnings)


def test_a_refused_remote_connection_gets_no_emulator_hint() -> None:
    def refuse(request: HttpRequest) -> HttpResponse:
        raise SendError("Connection refused", state=AttemptState.NOT_SENT, refused=True)

    account = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net"
    )
    client = account.create_cloud_table_client(sender=MockSender(refuse), retry_policy=LinearRetry(1, 0.0))
    with pytest.raises(ConnectionFailedError, match="after 2 attempts over") as info:
        client.table_exists("Blogs")
    assert "devstore" not in str(info.value)


def test_connect_timeout_is_separate_and_shorter_than_the_read_timeout() -> None:
    from tablesdk._pipeline._transport import DEFAULT_TIMEOUT

    connect, read = DEFAULT_TIMEOUT
    assert connect < read


# ---------------------------------------------------------------- a write whose answer cannot be read was still applied


def test_an_applied_write_with_an_undecodable_answer_is_not_left_pending() -> None:
    from tablesdk import DataServiceRequestError, ResponseDecodeError, SaveChangesOptions

    def answer(request: HttpRequest) -> HttpResponse:
        if request.url.endswith("/Blogs") and b'"RowKey": "bad"' in (request.body or b"").replace(b'":"', b'": "'):
            return MockSender.response(201, "<html>proxy page</html>", {"ETag": 'W/"new"', "Content-Type": "text/html"})
        return MockSender.response(204, headers={"ETag": 'W/"ok"'})

    sender = MockSender(answer)
    client = ACCOUNT.create_cloud_table_client(sender=sender, retry_policy=NoRetry(), echo_content=True)
    ctx = client.get_table_service_context()
    bad, good = DynamicEntity(PartitionKey="p", RowKey="bad"), DynamicEntity(PartitionKey="p", RowKey="good")
    ctx.add_object("Blogs", bad)
    ctx.add_object("Blogs", good)
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes(SaveChangesOptions.CONTINUE_ON_ERROR)
    first, second = info.value.response
    assert isinstance(first.error, ResponseDecodeError) and first.status_code == 201
    assert second.error is None and len(sender.requests) == 2
    from tablesdk import EntityStates

    assert ctx.get_entity_descriptor(bad).state is EntityStates.UNCHANGED  # type: ignore[union-attr]
    assert bad.etag == 'W/"new"'
    ctx.save_changes()  # nothing pending: the insert is not sent again
    assert len(sender.requests) == 2


def test_a_committed_batch_with_an_unreadable_part_is_not_left_pending() -> None:
    from tablesdk import DataServiceRequestError, EntityStates, ResponseDecodeError, SaveChangesOptions

    body = (
        "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
        "--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        "HTTP/1.1 201 Created\r\nContent-ID: 1\r\nContent-Type: application/json\r\n\r\n<html>proxy</html>\r\n"
        "--changesetresponse_1--\r\n--batchresponse_1--\r\n"
    )
    sender = MockSender(lambda request: MockSender.response(
        202, body, {"Content-Type": "multipart/mixed; boundary=batchresponse_1"}
    ))
    client = ACCOUNT.create_cloud_table_client(sender=sender, retry_policy=NoRetry(), echo_content=True)
    ctx = client.get_table_service_context()
    entity = DynamicEntity(PartitionKey="p", RowKey="r")
    ctx.add_object("Blogs", entity)
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes(SaveChangesOptions.BATCH)
    assert isinstance(info.value.response[0].error, ResponseDecodeError)
    assert ctx.get_entity_descriptor(entity).state is EntityStates.UNCHANGED  # type: ignore[union-attr]
