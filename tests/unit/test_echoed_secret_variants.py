"""Property: a secret a server echoes, in any case and any escaping, reaches no person.

A hostile (or merely careless) server may copy what it received into its answer: into the
error code (the body's code element or ``x-ms-error-code``), the message, the request id, a
batch's inner answer. It may upper- or lower-case it, percent-escape some or every character
(once or twice), write it in the URL-safe base64 alphabet, escape its reserved characters as
JSON (``\\/``, ``\\u002B``) or XML (``&#43;``) do, or quote a SAS URL that is itself percent-encoded. Generated here: the
attempt's own secrets (the SAS ``sig``, the bearer token, the Shared Key signature) and
secrets the client never sent (a ``sig=`` parameter, a bearer token, an ``Authorization:``
line, an ``AccountKey=``), each in such a variant, in each place an error is built from.
None may survive in ``str(error)``, ``repr(error)``, the traceback, the error's attributes,
a log record or a span attribute, sync or async.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import logging
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape as xml_escape

import pytest

pytest.importorskip("hypothesis")
pytest.importorskip("opentelemetry.sdk")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import tablesdk._core._tracing  # noqa: E402
import tablesdk._pipeline._transport  # noqa: E402
import tablesdk.aio._transport  # noqa: E402
from tablesdk import (  # noqa: E402
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    DynamicEntity,
    LinearRetry,
    OperationContext,
    SasCredential,
    SharedKeyCredential,
    TableServiceError,
)
from tablesdk._entities._entity import entity_to_payload  # noqa: E402
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout  # noqa: E402

ENDPOINT = "https://127.0.0.1:1/echoacct"
ACCOUNT = "echoacct"

# ------------------------------------------------------------------------------ the variants


@st.composite
def case_folded(draw: st.DrawFn, text: str) -> str:
    """``text`` as is, upper-cased, lower-cased, or each letter in a drawn case."""
    mode = draw(st.sampled_from(["as-is", "upper", "lower", "mixed"]))
    if mode == "upper":
        return text.upper()
    if mode == "lower":
        return text.lower()
    if mode == "mixed":
        flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
        return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips))
    return text


def _escape(ch: str, lower_hex: bool, twice: bool) -> str:
    code = f"{ord(ch):02x}" if lower_hex else f"{ord(ch):02X}"
    return f"%25{code}" if twice else f"%{code}"


#: How a server may write a character that is neither a letter nor a digit, besides percent-escaping it:
#: JSON's ``\/`` (and ``\u002B``, as .NET's encoder writes '+'), or an XML/HTML character reference.
MARKUP_ESCAPES = ["json-slash", "json-unicode", "xml-decimal", "xml-hex"]


def _markup_escape(ch: str, how: str, lower_hex: bool) -> str:
    code = f"{ord(ch):04x}" if lower_hex else f"{ord(ch):04X}"
    if how == "json-slash":
        return "\\/" if ch == "/" else ch
    if how == "json-unicode":
        return f"\\u{code}"
    if how == "xml-decimal":
        return f"&#{ord(ch)};"
    return f"&#x{code.lstrip('0')};"


def _url_safe(text: str, padded: bool) -> str:
    """``text`` in the URL-safe base64 alphabet ('-' and '_' for '+' and '/'), padded or not."""
    text = text.replace("+", "-").replace("/", "_")
    return text if padded else text.rstrip("=")


def _escaped(text: str, mode: str, lower_hex: bool, twice: bool, picks: list[bool] | None = None) -> str:
    if mode == "none":
        return text
    if mode in MARKUP_ESCAPES:
        return "".join(c if c.isalnum() else _markup_escape(c, mode, lower_hex) for c in text)
    if picks is None:
        picks = [mode == "all" or not c.isalnum() for c in text]
    return "".join(_escape(c, lower_hex, twice) if pick else c for c, pick in zip(text, picks))


@st.composite
def escaped(draw: st.DrawFn, text: str, *, alnum_too: bool = True) -> str:
    """``text`` with none, its reserved characters, or every character percent-escaped
    (hex digits in either case, possibly escaped twice: ``%252B``), or its reserved
    characters escaped as JSON or XML may write them."""
    modes = ["none", "reserved", "all", "some", *MARKUP_ESCAPES] if alnum_too else ["none", "reserved"]
    mode = draw(st.sampled_from(modes))
    lower_hex = draw(st.booleans())
    twice = draw(st.booleans())
    picks = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text))) if mode == "some" else None
    return _escaped(text, mode, lower_hex, twice, picks)


@st.composite
def secret_form(draw: st.DrawFn, secret: str) -> str:
    """How a server may write ``secret`` back: in either base64 alphabet, escaped, then
    case-folded (a server that upper-cases its whole message), or case-folded only."""
    if draw(st.booleans()):
        secret = _url_safe(secret, padded=draw(st.booleans()))
    text = draw(escaped(secret))
    return draw(case_folded(text)) if draw(st.booleans()) else text


@st.composite
def sig_parameter(draw: st.DrawFn) -> tuple[str, str]:
    """What comes before and after the value of ``sig=<value>`` echoed in some URL or text,
    in a drawn spelling."""
    before = draw(st.sampled_from(["?", "&", "%26", "%3F", "%3f", "%2526", "&amp;", "\\u0026", " ", "(", ""]))
    name = draw(escaped(draw(case_folded("sig"))))
    separator = draw(st.sampled_from(["=", "%3D", "%3d", "%253D", "\\u003d", "\\u003D"]))
    after = draw(st.sampled_from(["", "&se=2099-01-01", "%26se%3D2099", " was refused", "\"", "'", "</Url>", ")"]))
    return f"https://{ACCOUNT}.table.core.windows.net/t(){before}{name}{separator}", after


@st.composite
def authorization_line(draw: st.DrawFn, scheme: str) -> str:
    """What comes before a credential in an ``Authorization`` header (or its value alone)
    echoed in a message, in a drawn spelling."""
    scheme = draw(case_folded(scheme))
    space = draw(st.sampled_from([" ", "  ", "%20", "+", "\t"]))
    if draw(st.booleans()):
        return f"{scheme}{space}"
    name = draw(case_folded("Authorization"))
    colon = draw(st.sampled_from([": ", ":", "=", " = ", "%3A%20", '": "']))
    return f"{name}{colon}{scheme}{space}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class Case:
    """A client's credential (``kind``), the text the server echoes, and what must not leak."""

    kind: str
    sig: str
    token: str
    key: str
    echo: Callable[[HttpRequest], str]
    secrets: Callable[[HttpRequest], list[str]]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    sig = _b64(draw(st.binary(min_size=32, max_size=32)))
    token = "eyJ0eXAiOiJKV1Qi." + _b64(draw(st.binary(min_size=24, max_size=48))).rstrip("=") + ".c2lnbmF0dXJl"
    key = _b64(draw(st.binary(min_size=64, max_size=64)))
    kind = draw(st.sampled_from(["sas", "bearer", "key"]))
    foreign_sig = _b64(draw(st.binary(min_size=32, max_size=32)))
    foreign_token = _b64(draw(st.binary(min_size=24, max_size=48)))
    choice = draw(st.sampled_from(["own-bare", "own-marked", "foreign-sig", "foreign-bearer", "foreign-key"]))

    def own_secret(request: HttpRequest) -> str:
        if kind == "sas":
            return sig
        if kind == "bearer":
            return token
        return request.headers["Authorization"].rsplit(":", 1)[1]  # the Shared Key signature

    # Drawn now, applied to the request's own secret when the server answers.
    bare_shape = draw(st.sampled_from(["alone", "quoted", "in-words"]))
    escape_mode = draw(st.sampled_from(["none", "reserved", "all", *MARKUP_ESCAPES]))
    alphabet = draw(st.sampled_from(["standard", "url-safe", "url-safe-unpadded"]))
    lower_hex, twice = draw(st.booleans()), draw(st.booleans())
    key_form = _url_safe(key, padded=True) if alphabet != "standard" else key
    key_form = _escaped(key_form, escape_mode if escape_mode in MARKUP_ESCAPES else "none", lower_hex, False)
    fold = draw(st.sampled_from(["as-is", "upper", "lower"]))
    sig_before, sig_after = draw(sig_parameter())
    auth_before = draw(authorization_line("Bearer" if kind == "bearer" else "SharedKey"))
    foreign_sig_before, foreign_sig_after = draw(sig_parameter())
    foreign = {
        "foreign-sig": foreign_sig_before + draw(secret_form(foreign_sig)) + foreign_sig_after,
        "foreign-bearer": draw(authorization_line("Bearer")) + draw(secret_form(foreign_token)),
        "foreign-key": draw(st.sampled_from([
            f"AccountKey={key}", f"accountkey={quote(key, safe='')}", f"ACCOUNTKEY%3D{quote(key, safe='')}",
            f"the key {key} is wrong", f"DefaultEndpointsProtocol=https;AccountName={ACCOUNT};AccountKey={key};",
            f"AccountKey={key_form}", f"the key {key_form} is wrong",
        ])),
    }

    def form(secret: str) -> str:
        if alphabet != "standard":
            secret = _url_safe(secret, padded=alphabet == "url-safe")
        text = _escaped(secret, escape_mode, lower_hex, twice)
        return text.upper() if fold == "upper" else text.lower() if fold == "lower" else text

    def echo(request: HttpRequest) -> str:
        if choice in foreign:
            return foreign[choice]
        secret = own_secret(request)
        if choice == "own-bare":
            text = form(secret)
            return {"alone": text, "quoted": f"'{text}'", "in-words": f"you sent {text} which"}[bare_shape]
        if kind == "sas":
            return sig_before + form(sig) + sig_after
        if kind == "bearer":
            return auth_before + form(token)
        return f"{auth_before}{ACCOUNT}:{form(secret)}"

    def secrets(request: HttpRequest) -> list[str]:
        found = [own_secret(request)]
        if choice == "foreign-sig":
            found.append(foreign_sig)
        elif choice == "foreign-bearer":
            found.append(foreign_token)
        elif choice == "foreign-key":
            found.append(key)
        return found

    return Case(kind, sig, token, key, echo, secrets)


SIG = "Xk3+pQ/rT9vW2yZa4bCdEfGhIjKlMnOpQrStUvWx12E="
SIG_SENT = quote(SIG, safe="")
TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJzdG9yYWdlIn0.c2VjcmV0LXNpZ25hdHVyZQ"
KEY = _b64(bytes(range(7, 71)))


def _fixed_case(kind: str, echo: Callable[[HttpRequest], str]) -> Case:
    return Case(kind, SIG, TOKEN, KEY, echo, lambda request: [SIG if kind == "sas" else TOKEN])


def _percent_escaped(text: str, *, lower_hex: bool = False, twice: bool = False) -> str:
    return "".join(_escape(c, lower_hex, twice) for c in text)


PLACES = [
    "json-code", "json-message", "xml-code", "xml-message", "header-code", "header-request-id",
    "text-body", "batch-json-code", "batch-json-message", "batch-header-code",
]


def _error_body(place: str, echo: str) -> tuple[str, str, dict[str, str]]:
    """(content type, body, headers) of an error answer carrying ``echo`` at ``place``."""
    code, message = "AuthenticationFailed", "Server failed to authenticate the request."
    headers: dict[str, str] = {}
    if place.endswith("json-code") or place.endswith("xml-code"):
        code = f"Refused {echo}"
    elif place.endswith("message"):
        message = f"Refused {echo}\nRequestId:00000000-0000-0000-0000-000000000000"
    elif place.endswith("header-code"):
        headers["x-ms-error-code"] = f"Refused: {echo}"
    elif place == "header-request-id":
        headers["x-ms-request-id"] = f"id-{echo}"
    if place == "text-body":
        return "text/plain", f"Refused {echo}", headers
    if "xml" in place:
        body = f"<?xml version=\"1.0\"?><Error><Code>{xml_escape(code)}</Code><Message>{xml_escape(message)}</Message></Error>"
        return "application/xml", body, headers
    body = json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}})
    return "application/json;odata=minimalmetadata", body, headers


def _batch_answer(place: str, echo: str) -> tuple[str, str]:
    content_type, body, headers = _error_body(place, echo)
    if "message" in place:
        body = body.replace("Refused", "0:Refused", 1)
    inner_headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    answer = (
        "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
        "--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        f"HTTP/1.1 403 Forbidden\r\nContent-ID: 1\r\nContent-Type: {content_type}\r\n{inner_headers}\r\n"
        f"{body}\r\n--changesetresponse_1--\r\n--batchresponse_1--\r\n"
    )
    return "multipart/mixed; boundary=batchresponse_1", answer


# ------------------------------------------------------------------------------ the run


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@pytest.fixture(scope="module")
def tracer_and_spans() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider.get_tracer("tablesdk"), memory
    provider.shutdown()


class _FakeToken:
    def __init__(self, token: str) -> None:
        self.token = token
        self.expires_on = 4_102_444_800  # 2100

    def get_token(self, *scopes: str, **kwargs: Any) -> _FakeToken:
        return self


def _account(case: Case) -> CloudStorageAccount:
    credential: Any
    if case.kind == "sas":
        credential = SasCredential(f"sv=2019-02-02&tn=echo&sp=raud&se=2099-01-01T00%3A00%3A00Z&sig={quote(case.sig, safe='')}")
    elif case.kind == "bearer":
        credential = _FakeToken(case.token)
    else:
        credential = SharedKeyCredential(ACCOUNT, case.key)
    return CloudStorageAccount(ACCOUNT, ENDPOINT, credential)


def _run(case: Case, place: str, status: int, mode: str) -> tuple[BaseException, list[HttpRequest]]:
    requests: list[HttpRequest] = []
    batch = place.startswith("batch")

    def handler(request: HttpRequest) -> HttpResponse:
        requests.append(request)
        echo = case.echo(request)
        if batch:
            content_type, answer = _batch_answer(place.removeprefix("batch-"), echo)
            return MockSender.response(202, answer, {"Content-Type": content_type})
        content_type, body, headers = _error_body(place, echo)
        return MockSender.response(status, body, {"Content-Type": content_type, **headers})

    operation = BatchOperation(
        BatchOperationKind.INSERT, "echo", "p", "r", entity_to_payload(DynamicEntity("p", "r")), None
    )
    context = OperationContext()
    account = _account(case)
    retry = LinearRetry(count=1, interval_seconds=0)  # a 503 is retried: its warning is logged
    if mode == "sync":
        client = account.create_cloud_table_client(sender=MockSender(handler), retry_policy=retry)
        with pytest.raises(TableServiceError) as info:
            if batch:
                client.execute_batch([operation], operation_context=context)
            else:
                client.query_entity_payloads("echo", operation_context=context)
        return _with_attempts(info.value, context), requests

    class Sender:
        async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
            return handler(request)

        async def close(self) -> None:
            pass

    async def run() -> BaseException:
        aclient = account.create_async_cloud_table_client(sender=Sender(), retry_policy=retry)
        try:
            if batch:
                await aclient.execute_batch([operation], operation_context=context)
            else:
                await aclient.query_entity_payloads("echo", operation_context=context)
        except TableServiceError as error:
            return error
        finally:
            await aclient.close()
        raise AssertionError("the echoing server's answer was taken for a success")

    return _with_attempts(asyncio.run(run()), context), requests


def _with_attempts(error: BaseException, context: OperationContext) -> BaseException:
    error.recorded_attempts = [repr(a) for a in context.attempts]  # type: ignore[attr-defined]
    return error


def _error_texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), "".join(traceback.format_exception(error))]
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts += [str(current), repr(current)]
        texts += [repr(value) for value in vars(current).values()]
        texts += [repr(value) for value in current.args]
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__ or current.__context__
    return texts


_unicode_escape = re.compile(r"\\u([0-9a-fA-F]{4})")


def _normalised(text: str) -> str:
    """``text`` with every escaping undone, lower-cased, in the standard base64 alphabet:
    what a reader could recover."""
    for _ in range(4):
        decoded = html.unescape(_unicode_escape.sub(lambda m: chr(int(m.group(1), 16)), unquote(text)))
        decoded = decoded.replace("\\/", "/")
        if decoded == text:
            break
        text = decoded
    return text.lower().replace("-", "+").replace("_", "/")


def _windows(secret: str) -> set[str]:
    needle = secret.lower()
    return {needle[i:i + 12] for i in range(0, max(1, len(needle) - 11))}


def _leaks(secret: str, others: list[str], texts: list[str]) -> list[str]:
    """The texts that hold ``secret``, or 12 characters of it in a row, in any case or escaping
    (but 12 characters that ``others`` share with it: generated secrets may look alike)."""
    windows = _windows(secret).difference(*(_windows(other) for other in others if other != secret))
    out = []
    for text in texts:
        plain = _normalised(text)
        if any(window in plain for window in windows):
            out.append(text)
    return out


# Derandomized: the suite must not pass or fail by the draw; exploring further draws is
# `--hypothesis-seed=N` with derandomize off, by hand. The examples are draws that once survived:
# a bare token escaped so long (every character percent-escaped twice) that the message of a plain-text
# error body was cut inside it, leaving a piece of it that no pattern of the whole token could find.
@example(case=_fixed_case("bearer", lambda request: _percent_escaped(TOKEN, twice=True)),
         place="text-body", status=403, mode="sync")
@example(case=_fixed_case("bearer", lambda request: f"you sent {_percent_escaped(TOKEN, lower_hex=True, twice=True)} which"),
         place="text-body", status=503, mode="async")
@example(case=_fixed_case("bearer", lambda request: f"'{_percent_escaped(TOKEN, twice=True).lower()}'"),
         place="text-body", status=409, mode="sync")
@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases(), place=st.sampled_from(PLACES), status=st.sampled_from([403, 409, 503]),
       mode=st.sampled_from(["sync", "async"]))
def test_no_echoed_secret_survives_in_errors_logs_or_spans(
    case: Case, place: str, status: int, mode: str,
    tracer_and_spans: tuple[Any, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracer, spans = tracer_and_spans
    spans.clear()
    for module in (tablesdk._core._tracing, tablesdk._pipeline._transport, tablesdk.aio._transport):
        monkeypatch.setattr(module, "active_tracer", lambda: tracer)
    records = _Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        error, requests = _run(case, place, status, mode)
    finally:
        root.removeHandler(records)
        root.setLevel(level)
    assert requests, "nothing was sent"
    texts = _error_texts(error) + getattr(error, "recorded_attempts") + records.texts
    for span in spans.get_finished_spans():
        texts += [f"{name}={value!s}" for name, value in (span.attributes or {}).items()]
        texts.append(str(span.status.description))
    assert any(
        "error.type" in (span.attributes or {}) for span in spans.get_finished_spans()
    ), "no span recorded the failure"
    for request in requests:
        secrets = case.secrets(request)
        for secret in secrets:
            leaked = _leaks(secret, [case.sig, case.token, case.key, *secrets], texts)
            assert not leaked, f"{secret!r} survives in {leaked[:3]}"


# ------------------------------------------------------------------------------ the spellings one by one


SPELLINGS = [
    f"?SIG={SIG_SENT}", f"&Sig={SIG_SENT}", f"&sIg={SIG}", f"?sig%3D{SIG_SENT}", f"?%73ig={SIG_SENT}",
    f"%3Fsv%3D2019-02-02%26sig%3D{quote(SIG_SENT, safe='')}%26se%3D2099",  # a URL inside a URL
    f"%26%73%69%67%3D{''.join(f'%{b:02x}' for b in SIG.encode())}",  # every character escaped
    f"https%3A%2F%2Fa.table.core.windows.net%2Ft%3Fsig%253D{SIG_SENT.upper()}",
    json.dumps({"url": f"https://a/t?sv=1\u0026sig={SIG}"}, ensure_ascii=True).replace("&", "\\u0026"),
    json.dumps({"sig": SIG}), f"<Url>https://a/t?sv=1&amp;SIG={SIG_SENT}</Url>", f"<sig>{SIG}</sig>",
    f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer%20{TOKEN}", f"authorization: Bearer {TOKEN}",
    f"Authorization: SharedKey account:{SIG}", f"AUTHORIZATION={TOKEN}", f'"Authorization": "Bearer {TOKEN}"',
    f"AccountKey={KEY};EndpointSuffix=core.windows.net", f"the key {quote(KEY, safe='')} is wrong",
    # The URL-safe base64 alphabet, JSON's escapes, character references.
    f"?sig={_url_safe(SIG, padded=False)}", f"&sig={_escaped(SIG, 'xml-decimal', False, False)}&se=2099",
    f"bearer {_escaped(SIG, 'xml-hex', True, False)}", f"Authorization: Bearer {_escaped(SIG, 'json-unicode', False, False)}",
    f"AccountKey={_escaped(KEY, 'xml-hex', False, False)};", f"the key {_url_safe(KEY, padded=True)} is wrong",
    f"the key {_escaped(KEY, 'json-slash', False, False)} is wrong",
    f"the key {_escaped(_url_safe(KEY, padded=True), 'json-unicode', True, False)} is wrong",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_each_spelling_of_an_announced_secret_is_redacted(text: str) -> None:
    from tablesdk._core._redaction import redact_marked, redact_text, scrub

    for redact in (redact_marked, redact_text, lambda t: scrub(t, None)):
        redacted = redact(f"Refused {text} (sent)")
        assert "REDACTED" in redacted or redact is redact_text, redacted  # redact_text may drop the whole query
        for secret in (SIG, TOKEN, KEY):
            assert not _leaks(secret, [], [redacted]), redacted


@pytest.mark.parametrize("text", [
    "Server failed to authenticate the request. Make sure the value of Authorization header is formed"
    " correctly including the signature.",
    "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this"
    " permission.", "W/\"datetime'2024-01-01T00%3A00%3A00.1234567Z'\"", "The specified resource does not exist.",
    "Signature did not match. String to sign used was raud", "x-ms-version 2019-02-02 design",
])
def test_ordinary_error_text_is_left_alone(text: str) -> None:
    from tablesdk._core._redaction import redact_marked

    assert redact_marked(text) == text


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("place", ["json-code", "xml-code", "header-code", "batch-json-code", "batch-header-code"])
def test_a_secret_echoed_in_the_error_code_reaches_no_string_and_no_span(
    mode: str, place: str, tracer_and_spans: tuple[Any, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracer, spans = tracer_and_spans
    spans.clear()
    for module in (tablesdk._core._tracing, tablesdk._pipeline._transport, tablesdk.aio._transport):
        monkeypatch.setattr(module, "active_tracer", lambda: tracer)
    for kind, echo in (("sas", SIG.upper()), ("bearer", TOKEN.lower())):  # the attempt's own secret, case-folded
        error, _ = _run(_fixed_case(kind, lambda request: echo), place, 403, mode)
        assert isinstance(error, TableServiceError)
        assert error.error_code and "REDACTED" in error.error_code, error.error_code
        types = [str((span.attributes or {}).get("error.type")) for span in spans.get_finished_spans()]
        assert types and all("REDACTED" in t for t in types), types
        assert not _leaks(echo, [], _error_texts(error) + types)
        cause = getattr(error, "cause", None)
        if place.startswith("batch"):
            assert isinstance(cause, TableServiceError) and "REDACTED" in str(cause.error_code)
        spans.clear()


# ------------------------------------------------------------------------------ a message cut short


def test_an_excerpt_cut_inside_a_bare_secret_keeps_no_piece_of_it() -> None:
    from tablesdk._formats.errors import MAX_TEXT_EXCERPT, parse_error_body

    for escaped_token in (_percent_escaped(TOKEN, twice=True), _percent_escaped(TOKEN, lower_hex=True)):
        for padding in range(60, 280, 20):  # the cut falls at a different place in the token each time
            body = f"Refused {'x' * padding} {escaped_token} and more".encode()
            _, message = parse_error_body(body, "text/plain")  # no secrets known (a batch's inner answer)
            assert len(message) <= MAX_TEXT_EXCERPT and message.endswith("..."), message
            assert not _leaks(TOKEN, [], [message]), message


def test_the_attempts_secrets_leave_an_excerpt_before_it_is_cut() -> None:
    from tablesdk._core._redaction import attempt_secrets
    from tablesdk._formats.errors import parse_error_body

    secrets = attempt_secrets({}, f"https://a/t?sv=1&sig={SIG_SENT}")
    form_decoded = SIG.replace("+", " ")  # a form decoder's '+': the signature is two words
    for padding in range(270, 300, 3):
        body = f"{'x' * padding} {form_decoded} and more".encode()
        _, message = parse_error_body(body, "text/plain", secrets)
        assert not _leaks(SIG, [], [message.replace(" ", "+")]), message


def test_shorten_cuts_at_a_space_and_says_so() -> None:
    from tablesdk._core._redaction import shorten

    assert shorten("short", 10) == "short"
    assert shorten("alpha beta gamma", 13) == "alpha beta..."
    assert shorten("alpha betagamma", 13) == "alpha..."
    assert shorten("x" * 20, 10) == "..."
