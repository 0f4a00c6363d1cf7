"""Transport: signing per attempt, retries, deadlines, ambiguity, redaction, recording.

HTTP is mocked with ``responses``; the cut-connection tests use a tiny loopback
socket server because only a real socket can drop a connection mid-request.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
import urllib3.exceptions

from loopback import LoopbackServer, answer, hold, unused_port
import tablesdk._pipeline._transport as transport_module
from tablesdk._pipeline._requests_sender import RequestsSender
from tablesdk._core._errors import (
    AuthenticationError,
    ConflictError,
    ConnectionFailedError,
    PreconditionFailedError,
    RequestTimeoutError,
    ResourceNotFoundError,
    ServerBusyError,
    TableServiceError,
    error_for_status,
)
from tablesdk._pipeline._retry import ExponentialRetry, LinearRetry, NoRetry
from tablesdk._pipeline._settings import RequestSettings
from tablesdk._pipeline._transport import (
    DEFAULT_USER_AGENT,
    HttpResponse,
    OperationContext,
    RequestAttempt,
    Transport,
)
from tablesdk._core._redaction import redact_text, redact_url

BASE = "http://acct.table.example/"
URL = BASE + "Blogs"
SECRET = "SECRETsig0123456789"


# ------------------------------------------------------------------- helpers


class FakeCredential:
    """Signs like a SharedKey credential, recording what it saw on each call."""

    def __init__(self, secret: str = "SIGVALUE") -> None:
        self.secret = secret
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        self.calls.append((method, url, dict(headers)))
        n = len(self.calls)
        headers["Authorization"] = f"SharedKey acct:{self.secret}{n}"
        return url


class FakeSas:
    """Appends a SAS token, like SasCredential."""

    def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
        return url + ("&" if "?" in url else "?") + f"sv=2019-02-02&sig={SECRET}"


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def parse_error(response: HttpResponse) -> TableServiceError:
    code = response.headers.get("x-ms-error-code")
    return error_for_status(response.status, code, response.body.decode() or "error")


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


class SettledTransport(Transport):
    """A Transport that sends with the settings it was made with unless given others, as a client does."""

    def __init__(self, credential: Any, settings: RequestSettings, **kwargs: Any) -> None:
        super().__init__(credential, **kwargs)
        self.settings = settings

    def send(self, method: str, url: str, *, settings: RequestSettings | None = None, **kwargs: Any) -> HttpResponse:
        return super().send(method, url, settings=settings or self.settings, **kwargs)


#: The keywords of :func:`make` that are request settings (the others are the transport's).
SETTINGS_KEYWORDS = ("timeout", "server_timeout", "deadline", "user_agent", "location_mode")


def make(
    fake_time: FakeTime,
    credential: Any = None,
    policy: Any = None,
    **kwargs: Any,
) -> SettledTransport:
    settings = RequestSettings(
        retry_policy=policy if policy is not None else LinearRetry(3, 1.0),
        **{name: kwargs.pop(name) for name in SETTINGS_KEYWORDS if name in kwargs},
    )
    return SettledTransport(
        credential,
        settings,
        error_parser=parse_error,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        **kwargs,
    )


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def add_status(mock: responses.RequestsMock, method: str, status: int, code: str | None = None,
               body: str = "", url: str = URL, request_id: str | None = None) -> None:
    headers = {}
    if code:
        headers["x-ms-error-code"] = code
    if request_id:
        headers["x-ms-request-id"] = request_id
    mock.add(method, url, status=status, body=body, headers=headers)


# --------------------------------------------------------------- redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a/t?sig=abc%2Bdef&sv=1", "http://a/t?sig=REDACTED&sv=1"),
        ("http://a/t?sv=1&sig=abc", "http://a/t?sv=1&sig=REDACTED"),
        ("http://a/t?sv=1&SIG=abc#frag", "http://a/t?sv=1&SIG=REDACTED#frag"),
        ("http://a/t?design=1&xsig=keep", "http://a/t?design=1&xsig=keep"),
        ("http://a/t", "http://a/t"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_text_drops_queries_and_signatures() -> None:
    text = "Max retries exceeded with url: /t?sv=1&sig=abc (x) and sig=zzz"
    out = redact_text(text)
    assert "abc" not in out and "zzz" not in out and "sv=1" not in out


# ------------------------------------------------------------ basic success


def test_success_returns_whole_response(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, body=b'{"value":[]}', status=200,
             headers={"x-ms-request-id": "rid-1", "ETag": 'W/"1"'})
    with make(fake_time) as t:
        response = t.send("GET", URL, headers={"Accept": "application/json"})
    assert response.status == 200
    assert response.body == b'{"value":[]}'
    assert response.request_id == "rid-1"
    assert response.etag == 'W/"1"'
    assert response.headers["X-MS-REQUEST-ID"] == "rid-1"  # case-insensitive
    assert "12 bytes" in repr(response)
    assert fake_time.sleeps == []


def test_headers_added_and_caller_headers_untouched(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    mock.add("POST", URL, status=201)
    mock.add("DELETE", URL, status=204)
    mock.add("GET", URL, status=200)
    caller = {"Content-Type": "application/json", "X-MS-Date": "stale", "content-length": "999"}
    original = dict(caller)
    t = make(fake_time)
    t.send("POST", URL, headers=caller, body=b"{}")
    t.send("DELETE", URL)
    t.send("GET", URL)
    assert caller == original
    post, delete, get = (c.request.headers for c in mock.calls)
    assert post["Content-Length"] == "2"
    assert post["User-Agent"] == DEFAULT_USER_AGENT
    assert post["x-ms-date"] != "stale"
    assert "Expect" not in post
    assert "python-requests" not in post.get("User-Agent", "")
    assert delete["Content-Length"] == "0"
    assert "Content-Length" not in get
    for headers in (post, delete, get):
        assert len(headers["x-ms-client-request-id"]) == 36
        assert headers["x-ms-date"].endswith("GMT")


def test_custom_user_agent(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, status=200)
    make(fake_time, user_agent="myapp/1").send("GET", URL)
    assert mock.calls[0].request.headers["User-Agent"] == "myapp/1"


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_redirects_are_errors_not_followed_nor_retried(
    mock: responses.RequestsMock, fake_time: FakeTime, method: str
) -> None:
    # A write "answered" by a redirect did not happen: reporting it as done would lose it.
    mock.add(method, URL, status=301, headers={"Location": BASE + "elsewhere"})
    with pytest.raises(TableServiceError) as info:
        make(fake_time).send(method, URL, body=b"x")
    assert info.value.status_code == 301
    assert len(mock.calls) == 1 and fake_time.sleeps == []


# ----------------------------------------------------------------- retries


def test_retries_503_then_succeeds(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    add_status(mock, "GET", 503, "ServerBusy")
    mock.add("GET", URL, status=200, body=b"ok")
    response = make(fake_time, policy=LinearRetry(3, 2.5)).send("GET", URL)
    assert response.body == b"ok"
    assert len(mock.calls) == 3
    assert fake_time.sleeps == [2.5, 2.5]


def test_exponential_policy_delays_are_used(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    for _ in range(3):
        add_status(mock, "GET", 500, "InternalError")
    mock.add("GET", URL, status=200)
    policy = ExponentialRetry(3, 2.0, 0.5, 10.0, random=random.Random(9))
    make(fake_time, policy=policy).send("GET", URL)
    rng = random.Random(9)
    expected = [min(0.5 + (2 ** (n - 1) - 1) * rng.uniform(1.6, 2.4), 10.0) for n in (1, 2, 3)]
    assert fake_time.sleeps == pytest.approx(expected)


def test_retries_exhausted_raise_last_error(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    for i in range(3):
        add_status(mock, "GET", 503, "ServerBusy", request_id=f"rid-{i}")
    with pytest.raises(ServerBusyError) as info:
        make(fake_time, policy=LinearRetry(2, 1.0)).send("GET", URL)
    assert info.value.request_id == "rid-2"
    assert len(mock.calls) == 3


def test_per_call_policy_overrides_default(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    with pytest.raises(ServerBusyError):
        make(fake_time).send("GET", URL, settings=RequestSettings(retry_policy=NoRetry()))
    assert len(mock.calls) == 1


def test_fresh_date_and_signature_per_attempt(
    mock: responses.RequestsMock, fake_time: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    dates = iter(["Mon, 01 Jan 2024 00:00:00 GMT", "Mon, 01 Jan 2024 00:00:02 GMT",
                  "Mon, 01 Jan 2024 00:00:05 GMT"])
    monkeypatch.setattr(transport_module, "http_date", lambda: next(dates))
    add_status(mock, "PUT", 503, "ServerBusy")
    add_status(mock, "PUT", 500, "InternalError")
    mock.add("PUT", URL, status=204)
    credential = FakeCredential()
    make(fake_time, credential=credential).send(
        "PUT", URL, headers={"x-ms-date": "caller value", "If-Match": "*"}, body=b"{}"
    )
    # The credential signed each attempt once, each time with one fresh x-ms-date and no
    # Authorization left over from the previous attempt.
    seen_dates = []
    for method, url, headers in credential.calls:
        assert (method, url) == ("PUT", URL)
        assert [k for k in headers if k.lower() == "x-ms-date"] == ["x-ms-date"]
        assert "Authorization" not in headers
        assert headers["If-Match"] == "*"
        seen_dates.append(headers["x-ms-date"])
    assert seen_dates == ["Mon, 01 Jan 2024 00:00:00 GMT", "Mon, 01 Jan 2024 00:00:02 GMT",
                          "Mon, 01 Jan 2024 00:00:05 GMT"]
    sent = [c.request.headers for c in mock.calls]
    assert [h["x-ms-date"] for h in sent] == seen_dates
    assert [h["Authorization"] for h in sent] == [
        "SharedKey acct:SIGVALUE1", "SharedKey acct:SIGVALUE2", "SharedKey acct:SIGVALUE3"
    ]


def test_same_client_request_id_across_retries(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    t = make(fake_time)
    t.send("GET", URL)
    t.send("GET", URL)
    ids = [c.request.headers["x-ms-client-request-id"] for c in mock.calls]
    assert ids[0] == ids[1]
    assert ids[2] != ids[0]


def test_client_request_id_from_context_or_caller(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    t = make(fake_time)
    ctx = OperationContext(client_request_id="my-op-1")
    t.send("GET", URL, operation_context=ctx)
    t.send("GET", URL, headers={"X-MS-Client-Request-Id": "caller-id"})
    ids = [c.request.headers["x-ms-client-request-id"] for c in mock.calls]
    assert ids == ["my-op-1", "my-op-1", "caller-id"]
    assert [a.client_request_id for a in ctx.attempts] == ["my-op-1", "my-op-1"]


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "InvalidInput", TableServiceError),
        (403, "AuthenticationFailed", AuthenticationError),
        (404, "ResourceNotFound", ResourceNotFoundError),
        (409, "EntityAlreadyExists", ConflictError),
        (412, "UpdateConditionNotSatisfied", PreconditionFailedError),
        (503, "ServerBusy", ServerBusyError),
        (504, None, RequestTimeoutError),
    ],
)
def test_no_retry_raises_right_subclass(
    mock: responses.RequestsMock, fake_time: FakeTime, status: int, code: str | None, cls: type
) -> None:
    add_status(mock, "POST", status, code, body="the message", request_id="rid-9")
    ctx = OperationContext()
    with pytest.raises(cls) as info:
        make(fake_time, policy=NoRetry()).send("POST", URL, body=b"{}", operation_context=ctx)
    error = info.value
    assert type(error) is cls
    assert error.status_code == status
    assert error.error_code == code
    assert error.request_id == "rid-9"
    assert error.client_request_id == mock.calls[0].request.headers["x-ms-client-request-id"]
    assert error.ambiguous_retry is False
    assert len(mock.calls) == 1
    assert ctx.attempts[0].retry_delay is None


@pytest.mark.parametrize("status", [400, 403, 404, 409, 412, 501, 505])
def test_final_statuses_are_not_retried_by_default_policies(
    mock: responses.RequestsMock, fake_time: FakeTime, status: int
) -> None:
    add_status(mock, "GET", status)
    with pytest.raises(TableServiceError):
        make(fake_time, policy=ExponentialRetry(5)).send("GET", URL)
    assert len(mock.calls) == 1
    assert fake_time.sleeps == []


def test_custom_policy_may_retry_what_builtins_do_not(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    class RetryConflictsOnce:
        def retry_after(self, attempt: int, error: BaseException) -> float | None:
            return 0.25 if attempt == 1 and isinstance(error, ConflictError) else None

    add_status(mock, "GET", 409, "TableBeingDeleted")
    mock.add("GET", URL, status=200)
    assert make(fake_time, policy=RetryConflictsOnce()).send("GET", URL).status == 200
    assert fake_time.sleeps == [0.25]


def test_timeout_and_connection_errors_are_retried(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    mock.add("GET", URL, body=requests.ReadTimeout("read timed out"))
    mock.add("GET", URL, body=requests.ConnectionError("connection reset"))
    mock.add("GET", URL, body=requests.exceptions.ChunkedEncodingError("cut"))
    mock.add("GET", URL, status=200)
    ctx = OperationContext()
    make(fake_time, policy=LinearRetry(3, 1.0)).send("GET", URL, operation_context=ctx)
    assert [a.status for a in ctx.attempts] == [None, None, None, 200]
    assert ctx.attempts[0].error is not None and "client timeout" in ctx.attempts[0].error
    assert ctx.attempts[1].error is not None and "connection failed" in ctx.attempts[1].error


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (requests.ReadTimeout("slow"), RequestTimeoutError),
        (requests.ConnectTimeout("slow connect"), RequestTimeoutError),
        # requests wraps a read timeout hit while reading the body in a ConnectionError.
        (requests.ConnectionError(urllib3.exceptions.ReadTimeoutError(None, "/t", "Read timed out.")),
         RequestTimeoutError),
        (requests.ConnectionError("refused"), ConnectionFailedError),
        (requests.exceptions.ChunkedEncodingError("incomplete"), ConnectionFailedError),
        (urllib3.exceptions.ProtocolError("Connection aborted."), ConnectionFailedError),
    ],
)
def test_transport_exceptions_map_to_sdk_errors(
    mock: responses.RequestsMock, fake_time: FakeTime, exc: Exception, cls: type
) -> None:
    mock.add("GET", URL, body=exc)
    with pytest.raises(cls) as info:
        make(fake_time, policy=NoRetry()).send("GET", URL)
    assert info.value.status_code is None
    assert info.value.client_request_id
    # The requests exception (whose text can hold the URL) is not chained.
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_invalid_url_is_a_value_error_without_retry(fake_time: FakeTime) -> None:
    t = make(fake_time)
    with pytest.raises(ValueError, match="cannot send") as info:
        t.send("GET", f"notascheme://host/t?sig={SECRET}")
    assert SECRET not in str(info.value)
    assert fake_time.sleeps == []


def test_credential_errors_propagate_without_retry(fake_time: FakeTime) -> None:
    class Broken:
        def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
            raise ValueError("no key")

    with pytest.raises(ValueError, match="no key"):
        make(fake_time, credential=Broken()).send("GET", URL)
    assert fake_time.sleeps == []


# ---------------------------------------------------------------- deadline


def test_deadline_caps_total_sleep(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    for _ in range(10):
        add_status(mock, "GET", 503, "ServerBusy")
    started = fake_time.now
    ctx = OperationContext()
    with pytest.raises(RequestTimeoutError) as info:
        make(fake_time, policy=LinearRetry(9, 4.0), deadline=10.0).send("GET", URL, operation_context=ctx)
    assert sum(fake_time.sleeps) <= 10.0
    assert fake_time.now - started < 10.0
    assert fake_time.sleeps == [4.0, 4.0]  # a third sleep would reach the deadline
    assert "deadline of 10.0 s exceeded after 3 attempts" in str(info.value)
    assert isinstance(info.value.__cause__, ServerBusyError)
    assert info.value.status_code is None
    assert len(ctx.attempts) == 3 and ctx.attempts[-1].retry_delay is None


def test_deadline_counts_time_spent_in_attempts(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    def slow_busy(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        fake_time.now += 3.0  # each attempt takes 3 s
        return 503, {}, "busy"

    mock.add_callback("GET", URL, callback=slow_busy)
    with pytest.raises(RequestTimeoutError, match="deadline"):
        make(fake_time, policy=LinearRetry(9, 1.0), deadline=9.0).send("GET", URL)
    # t=3 sleep 1, t=7 sleep 1, t=11 over: two sleeps only, never past the deadline.
    assert fake_time.sleeps == [1.0, 1.0]
    assert len(mock.calls) == 3


def test_deadline_caps_each_attempt_timeout(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    mock.add("GET", URL, status=200)
    make(fake_time, policy=LinearRetry(3, 2.0), timeout=(10.0, 60.0), deadline=5.0).send("GET", URL)
    timeouts = [c.request.req_kwargs["timeout"] for c in mock.calls]
    assert timeouts == [(5.0, 5.0), (3.0, 3.0)]


def test_timeout_without_deadline_is_passed_through(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    t = make(fake_time, timeout=7.0)
    t.send("GET", URL)
    t.send("GET", URL, settings=t.settings.replace(timeout=(1.0, 2.0)))
    assert [c.request.req_kwargs["timeout"] for c in mock.calls] == [7.0, (1.0, 2.0)]


def test_final_error_is_raised_even_past_deadline(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    def slow_conflict(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        fake_time.now += 20.0
        return 409, {"x-ms-error-code": "EntityAlreadyExists"}, "exists"

    mock.add_callback("POST", URL, callback=slow_conflict)
    with pytest.raises(ConflictError):
        make(fake_time, deadline=5.0).send("POST", URL, body=b"{}")


# ------------------------------------------------------------- ambiguity


@pytest.mark.parametrize(
    ("method", "first", "status", "code", "cls"),
    [
        ("POST", requests.ReadTimeout("timed out"), 409, "EntityAlreadyExists", ConflictError),
        ("DELETE", requests.ConnectionError("reset"), 404, "ResourceNotFound",
         ResourceNotFoundError),
        ("PUT", 500, 412, "UpdateConditionNotSatisfied", PreconditionFailedError),
        ("MERGE", 503, 412, "UpdateConditionNotSatisfied", PreconditionFailedError),
    ],
)
def test_ambiguous_retry_flag(
    mock: responses.RequestsMock, fake_time: FakeTime, method: str, first: Any, status: int,
    code: str, cls: type,
) -> None:
    if isinstance(first, int):
        add_status(mock, method, first)
    else:
        mock.add(method, URL, body=first)
    add_status(mock, method, status, code)
    with pytest.raises(cls) as info:
        make(fake_time).send(method, URL, body=b"{}" if method != "DELETE" else None)
    assert info.value.ambiguous_retry is True
    assert "may have succeeded" in str(info.value)


def test_ambiguity_survives_an_intermediate_clear_failure(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    mock.add("POST", URL, body=requests.ReadTimeout("timed out"))
    add_status(mock, "POST", 408)  # also retried
    add_status(mock, "POST", 409, "EntityAlreadyExists")
    with pytest.raises(ConflictError) as info:
        make(fake_time).send("POST", URL, body=b"{}")
    assert info.value.ambiguous_retry is True


def test_conflict_without_earlier_unknown_outcome_is_not_ambiguous(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    add_status(mock, "POST", 409, "EntityAlreadyExists")
    with pytest.raises(ConflictError) as info:
        make(fake_time).send("POST", URL, body=b"{}")
    assert info.value.ambiguous_retry is False


def test_request_never_sent_is_not_ambiguous(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    mock.add("POST", URL, body=requests.ConnectTimeout("could not connect"))
    mock.add("POST", URL, body=requests.ConnectionError(
        urllib3.exceptions.NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
    ))
    add_status(mock, "POST", 409, "EntityAlreadyExists")
    with pytest.raises(ConflictError) as info:
        make(fake_time).send("POST", URL, body=b"{}")
    assert info.value.ambiguous_retry is False
    assert len(mock.calls) == 3


def test_reads_are_never_flagged(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, body=requests.ReadTimeout("timed out"))
    add_status(mock, "GET", 404, "ResourceNotFound")
    with pytest.raises(ResourceNotFoundError) as info:
        make(fake_time).send("GET", URL)
    assert info.value.ambiguous_retry is False


# ------------------------------------------------------------ server timeout


def test_server_timeout_parameter(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    mock.add("GET", URL, status=200)
    t = make(fake_time, server_timeout=30)
    t.send("GET", URL)
    t.send("GET", URL + "?$filter=x&$top=5")
    t.send("GET", URL, settings=t.settings.replace(server_timeout=5))
    t.send("GET", URL + "?timeout=7")  # an explicit one is kept, not duplicated
    urls = [c.request.url for c in mock.calls]
    assert urls[0] == URL + "?timeout=30"
    assert urls[1].endswith("&timeout=30") and "$top=5" in urls[1]
    assert urls[2] == URL + "?timeout=5"
    assert urls[3] == URL + "?timeout=7"


def test_no_server_timeout_by_default(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, status=200)
    make(fake_time).send("GET", URL)
    assert mock.calls[0].request.url == URL


def test_server_timeout_is_signed(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    mock.add("GET", URL, status=200)
    credential = FakeCredential()
    make(fake_time, credential=credential, server_timeout=12).send("GET", URL)
    assert credential.calls[0][1] == URL + "?timeout=12"


# -------------------------------------------------------------- redaction


def test_secrets_never_leak(
    mock: responses.RequestsMock, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sas_url = URL + f"?sv=2019-02-02&sig={SECRET}"
    # The service echoes the request's MAC in AuthenticationFailed details.
    echo = f"The MAC signature found in the HTTP request '{SECRET}1' is not the same as any computed."
    mock.add("GET", sas_url, status=503, headers={"x-ms-error-code": "ServerBusy"})
    mock.add("GET", sas_url, body=requests.ConnectionError(
        f"HTTPConnectionPool: Max retries exceeded with url: /Blogs?sv=1&sig={SECRET}"
    ))
    mock.add("GET", sas_url, status=403, body=echo,
             headers={"x-ms-error-code": "AuthenticationFailed"})
    ctx = OperationContext()
    with pytest.raises(AuthenticationError) as info:
        make(fake_time, credential=FakeCredential(secret=SECRET)).send(
            "GET", sas_url, operation_context=ctx, headers={"Authorization": f"Bearer {SECRET}"}
        )
    assert len(mock.calls) == 3
    # The requests really carried the secrets...
    assert SECRET in mock.calls[0].request.url
    assert SECRET in mock.calls[0].request.headers["Authorization"]
    # ... and none of our outputs do.
    texts = [str(info.value), repr(info.value), info.value.message, *map(str, info.value.args)]
    texts += [repr(a) for a in ctx.attempts] + [repr(ctx)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [str(r.args) for r in caplog.records]
    for text in texts:
        assert SECRET not in text, text
    assert "REDACTED" in info.value.message
    assert all("sig=REDACTED" in a.url for a in ctx.attempts)
    assert ctx.attempts[1].error is not None and "?" not in ctx.attempts[1].error.split("(")[0]


def test_sas_credential_url_is_redacted(
    mock: responses.RequestsMock, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tablesdk.transport")
    mock.add("GET", URL, body=requests.ReadTimeout(f"read timed out /Blogs?sig={SECRET}"))
    mock.add("GET", URL, status=200)
    ctx = OperationContext()
    make(fake_time, credential=FakeSas()).send("GET", URL, operation_context=ctx)
    assert SECRET in mock.calls[0].request.url
    assert all(SECRET not in repr(a) for a in ctx.attempts)
    assert all(a.url.endswith("sig=REDACTED") for a in ctx.attempts)
    assert caplog.records and all(SECRET not in r.getMessage() for r in caplog.records)


def test_urllib3_log_lines_are_redacted(fake_time: FakeTime, caplog: pytest.LogCaptureFixture) -> None:
    make(fake_time)  # installs the filter
    caplog.set_level(logging.DEBUG)
    logging.getLogger("urllib3.connectionpool").debug(
        '%s://%s:%s "%s %s %s" %s %s', "http", "h", 80, "GET", f"/t?sig={SECRET}&sv=1",
        "HTTP/1.1", 200, 0,
    )
    assert caplog.records
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert "sig=REDACTED" in caplog.records[-1].getMessage()


# ------------------------------------------------------------------ logging


def test_logging_debug_per_attempt_and_warning_on_retry(
    mock: responses.RequestsMock, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tablesdk.transport")
    add_status(mock, "GET", 503, "ServerBusy", request_id="rid-a")
    mock.add("GET", URL, status=200, headers={"x-ms-request-id": "rid-b"})
    make(fake_time).send("GET", URL)
    records = [r for r in caplog.records if r.name == "tablesdk.transport"]
    debug = [r for r in records if r.levelno == logging.DEBUG]
    warning = [r for r in records if r.levelno == logging.WARNING]
    assert len(debug) == 2 and len(warning) == 1
    assert "GET" in debug[0].getMessage() and "503" in debug[0].getMessage()
    assert "rid-a" in debug[0].getMessage() and "ms" in debug[0].getMessage()
    assert "200" in debug[1].getMessage() and "rid-b" in debug[1].getMessage()
    assert "retrying in 1.000 s" in warning[0].getMessage()


# --------------------------------------------------------- operation context


def test_operation_context_records_attempts(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    def busy(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        fake_time.now += 0.5
        return 503, {"x-ms-error-code": "ServerBusy", "x-ms-request-id": "rid-1"}, "busy"

    mock.add_callback("POST", URL, callback=busy)
    mock.add("POST", URL, status=201, headers={"x-ms-request-id": "rid-2"})
    ctx = OperationContext()
    assert ctx.last_attempt is None
    make(fake_time, policy=LinearRetry(3, 2.0)).send(
        "POST", URL, body=b"{}", operation_context=ctx
    )
    first, second = ctx.attempts
    assert isinstance(first, RequestAttempt)
    assert (first.attempt, first.method, first.url) == (1, "POST", URL)
    assert (first.status, first.error_code, first.request_id) == (503, "ServerBusy", "rid-1")
    assert first.retry_delay == 2.0
    assert first.start == 1000.0 and first.end == 1000.5 and first.elapsed == 0.5
    assert first.error is not None and "ServerBusy" in first.error
    assert (second.attempt, second.status, second.request_id) == (2, 201, "rid-2")
    assert second.retry_delay is None and second.error is None and second.error_code is None
    assert second.start == 1002.5
    assert first.client_request_id == second.client_request_id
    assert ctx.request_ids == ["rid-1", "rid-2"]
    assert ctx.last_attempt is second
    assert "attempts=2" in repr(ctx)


# ------------------------------------------------------ construction, session


def test_session_configuration(fake_time: FakeTime) -> None:
    t = make(fake_time, pool_size=48)
    assert isinstance(t.sender, RequestsSender)
    adapter = t.sender.session.get_adapter("https://acct.table.core.windows.net/")
    assert adapter._pool_connections == 48  # type: ignore[attr-defined]
    assert adapter._pool_maxsize == 48  # type: ignore[attr-defined]
    assert adapter.max_retries.total == 0  # type: ignore[attr-defined]
    assert t.sender.session.trust_env is False
    other = make(fake_time, trust_env=True).sender
    assert isinstance(other, RequestsSender) and other.session.trust_env is True
    assert t.pool_size == 48
    assert "pool_size=48" in repr(t)
    t.close()


def test_context_manager_closes_session(fake_time: FakeTime, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = []
    with make(fake_time) as t:
        assert isinstance(t.sender, RequestsSender)
        monkeypatch.setattr(t.sender.session, "close", lambda: closed.append(True))
    assert closed == [True]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"pool_size": 0}, "pool_size"),
        ({"pool_size": True}, "pool_size"),
        ({"max_response_bytes": 0}, "max_response_bytes"),
    ],
)
def test_invalid_construction(fake_time: FakeTime, kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        make(fake_time, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": -2}, "timeout"),
        ({"timeout": (1.0, -1.0)}, "timeout"),
        ({"timeout": (1.0, 2.0, 3.0)}, "timeout"),
        ({"server_timeout": 0}, "server_timeout"),
        ({"server_timeout": -1}, "server_timeout"),
        ({"server_timeout": 1.5}, "server_timeout"),
        ({"deadline": 0}, "deadline"),
        ({"deadline": -1.0}, "deadline"),
        ({"location_mode": "nearest"}, "location_mode"),
    ],
)
def test_invalid_settings_are_refused_when_built(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        RequestSettings(**kwargs)
    with pytest.raises(ValueError, match=name):
        RequestSettings().replace(**kwargs)


# ------------------------------------------------ real loopback: cut connections


def _http(status: int, reason: str, body: bytes = b"", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode() + body


def test_cut_connection_then_conflict_over_real_socket(
    fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with LoopbackServer([
        answer(None),  # the insert "reaches" the server, which drops the connection
        answer(_http(409, "Conflict", b"The specified entity already exists.",
                     "x-ms-error-code: EntityAlreadyExists\r\nx-ms-request-id: rid-409\r\n")),
    ]) as server:
        url = f"{server.url}/devstoreaccount1/Blogs?sv=1&sig={SECRET}"
        ctx = OperationContext()
        with make(fake_time, policy=LinearRetry(3, 0.0), timeout=5.0) as t:
            with pytest.raises(ConflictError) as info:
                t.send("POST", url, body=b'{"PartitionKey":"p","RowKey":"r"}',
                       operation_context=ctx)
    assert info.value.ambiguous_retry is True
    assert info.value.request_id == "rid-409"
    assert [a.status for a in ctx.attempts] == [None, 409]
    assert ctx.attempts[0].error is not None and "connection failed" in ctx.attempts[0].error
    assert len(server.requests) == 2
    texts = [r.getMessage() for r in caplog.records] + [str(info.value), repr(info.value)]
    texts += [repr(a) for a in ctx.attempts]
    assert all(SECRET not in text for text in texts)
    # urllib3 itself logged the request line with the query; the filter redacted it.
    assert any(r.name.startswith("urllib3") and "sig=REDACTED" in r.getMessage()
               for r in caplog.records)


def test_cut_connection_with_no_retry_over_real_socket(fake_time: FakeTime) -> None:
    with LoopbackServer([answer(None)]) as server:
        url = f"{server.url}/devstoreaccount1/Tables?sig={SECRET}"
        with make(fake_time, policy=NoRetry(), timeout=5.0) as t:
            with pytest.raises(ConnectionFailedError) as info:
                t.send("GET", url)
    text = str(info.value) + repr(info.value)
    assert SECRET not in text and "?" not in str(info.value).split(":", 2)[0]
    assert "connection failed" in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_read_timeout_over_real_socket(fake_time: FakeTime) -> None:
    # A server that reads the request and never answers: the client read timeout fires.
    with LoopbackServer(hold) as server:
        url = f"{server.url}/t?sig={SECRET}"
        with make(fake_time, policy=NoRetry(), timeout=(2.0, 0.2)) as t:
            with pytest.raises(RequestTimeoutError) as info:
                t.send("GET", url)
    assert "client timeout" in str(info.value)
    assert SECRET not in str(info.value)


def test_connection_refused_is_a_connection_failure_not_a_timeout(fake_time: FakeTime) -> None:
    port = unused_port()
    ctx = OperationContext()
    with make(fake_time, policy=LinearRetry(1, 0.0), timeout=2.0) as t:
        with pytest.raises(ConnectionFailedError, match="connection failed") as info:
            t.send("DELETE", f"http://127.0.0.1:{port}/t?sig={SECRET}", operation_context=ctx)
    assert len(ctx.attempts) == 2  # retried once
    assert SECRET not in str(info.value)
    assert info.value.ambiguous_retry is False


def test_deadline_checked_again_after_an_overrunning_sleep(
    mock: responses.RequestsMock, fake_time: FakeTime
) -> None:
    add_status(mock, "GET", 503, "ServerBusy")
    mock.add("GET", URL, status=200)

    def oversleep(seconds: float) -> None:
        fake_time.sleeps.append(seconds)
        fake_time.now += seconds + 5.0  # the OS woke us far too late

    t = Transport(None, error_parser=parse_error, sleep=oversleep, clock=fake_time.clock)
    with pytest.raises(RequestTimeoutError, match="deadline of 3.0 s exceeded after 1 attempt;") as info:
        t.send("GET", URL, settings=RequestSettings(retry_policy=LinearRetry(3, 1.0), deadline=3.0))
    assert isinstance(info.value.__cause__, ServerBusyError)
    assert len(mock.calls) == 1


# --------------------------------------------------------------- after_unknown_attempt


@pytest.mark.parametrize(
    ("method", "first", "flagged"),
    [
        ("POST", 500, True),  # the server may have applied the write before failing
        ("POST", 503, True),
        ("DELETE", 500, True),
        ("GET", 500, False),  # a read has no side effect to be unsure about
        ("POST", None, False),  # no earlier failure at all
    ],
)
def test_success_after_an_unknown_outcome_is_marked(
    mock: responses.RequestsMock, fake_time: FakeTime, method: str, first: int | None, flagged: bool
) -> None:
    if first is not None:
        add_status(mock, method, first, "InternalError")
    mock.add(method, URL, status=202, body=b"batch body")
    response = make(fake_time).send(method, URL, body=b"x")
    assert response.status == 202 and response.after_unknown_attempt is flagged


def test_success_after_a_4xx_answer_is_not_marked(mock: responses.RequestsMock, fake_time: FakeTime) -> None:
    # 400 is final for the built-in policies; a policy that retries it shows a 4xx is a known outcome
    class RetryAll:
        def retry_after(self, attempt: int, error: BaseException) -> float | None:
            return 0.0 if attempt < 2 else None

    add_status(mock, "POST", 400, "InvalidInput")
    mock.add("POST", URL, status=201)
    response = make(fake_time, policy=RetryAll()).send("POST", URL, body=b"x")
    assert response.after_unknown_attempt is False  # a 4xx answer means the write was refused, not lost
