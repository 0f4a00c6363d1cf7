"""A hostile server's echoes of secrets are scrubbed (issue 22.6).

A signature or token echoed into an undecodable 2xx body must not survive in the
ResponseDecodeError's chain (a JSONDecodeError's ``.doc`` is the whole body), and an
echoed URL percent-encoded character by character, in lower case, is still redacted.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import pytest

from tablesdk import CloudStorageAccount, NoRetry, ResponseDecodeError
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout
from tablesdk._core._redaction import attempt_secrets, scrub

SIG = "c2VjcmV0U2lnbmF0dXJlVmFsdWU9PQ"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.SECRETTOKENPAYLOAD.c2lnbmF0dXJl"
ENDPOINT = "http://127.0.0.1:1/devstoreaccount1"
SAS_CONN = (
    f"DefaultEndpointsProtocol=http;TableEndpoint={ENDPOINT};"
    f"SharedAccessSignature=sv=2019-02-02&tn=t&sp=raud&sig={SIG}"
)


def chain_text(error: BaseException) -> str:
    """Everything the exception chain holds that a person or a log may read."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(repr(current))
        texts.extend(str(value) for value in vars(current).values())
        texts.extend(str(value) for value in getattr(current, "args", ()))
        doc = getattr(current, "doc", None)
        if doc is not None:
            texts.append(str(doc))
        current = current.__context__ or current.__cause__
    return "\n".join(texts)


def hostile(fmt: str) -> bytes:
    # The excerpt (120 characters) drops what follows a marker (sig=, Bearer); the bare echoes
    # after it are beyond the excerpt, and were only in the chained decoder error's document.
    echo = f"you sent sig={SIG} and Authorization: Bearer {TOKEN} " + "." * 200 + f" {SIG} {TOKEN}"
    if fmt == "json":
        return ('{"value":[{"PartitionKey":"p","RowKey":"r","Echo":"' + echo + '"').encode()  # cut short
    return f"<feed><entry><content><m:properties>{echo}</content>".encode()


def read(kind: str, fmt: str, body: bytes) -> BaseException:
    def handler(request: HttpRequest) -> HttpResponse:
        return MockSender.response(200, body, {"Content-Type": "application/json"})

    account = CloudStorageAccount.parse(SAS_CONN)
    if kind == "sync":
        client = account.create_cloud_table_client(
            sender=MockSender(handler), payload_format=fmt, retry_policy=NoRetry())  # type: ignore[arg-type]
        with pytest.raises(ResponseDecodeError) as info:
            client.query_entity_payloads("Tasks")
        return info.value

    pytest.importorskip("aiohttp")

    class Sender:
        async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
            return handler(request)

        async def close(self) -> None:
            pass

    async def run() -> Any:
        aclient = account.create_async_cloud_table_client(sender=Sender(), payload_format=fmt, retry_policy=NoRetry())
        try:
            await aclient.query_entity_payloads("Tasks")
        except ResponseDecodeError as exc:
            return exc
        finally:
            await aclient.close()
        raise AssertionError("expected ResponseDecodeError")

    return asyncio.run(run())  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("fmt", ["json", "atom"])
def test_an_undecodable_echo_leaves_no_secret_in_the_chain(kind: str, fmt: str) -> None:
    error = read(kind, fmt, hostile(fmt))
    text = chain_text(error)
    assert SIG not in text and TOKEN not in text
    assert error.__context__ is None  # the codec's own failure is described, not carried


@pytest.mark.parametrize("upper", [False, True])
def test_a_url_echoed_fully_percent_encoded_is_redacted(upper: bool) -> None:
    url = f"{ENDPOINT}/Tasks()?sv=2019-02-02&sig={SIG}%2B%2F"
    secrets = attempt_secrets({"Authorization": f"Bearer {TOKEN}"}, url)
    hexed = "".join(f"%{b:02X}" if upper else f"%{b:02x}" for b in url.encode())
    for text in (hexed, "".join(f"%{b:02x}" for b in TOKEN.encode())):
        scrubbed = scrub(f"the server says: {text} (sent)", secrets)
        assert scrubbed.count("REDACTED") == 1, scrubbed
        assert "%63%32%56%6a%63%6d" not in scrubbed.lower()  # the start of the signature, escaped


def test_plain_text_without_secrets_is_untouched() -> None:
    secrets = attempt_secrets({"Authorization": f"Bearer {TOKEN}"}, f"{ENDPOINT}/Tasks()?sig={SIG}")
    text = "W/\"datetime'2024-01-01T00%3A00%3A00Z'\" and %61%62"
    assert scrub(text, secrets) == text


# ---------------------------------------------------------------- secrets echoed bare, early in the body

def bare(fmt: str, secret: str, pad: int = 0) -> bytes:
    """An undecodable body echoing ``secret`` with no ``sig=`` or ``Bearer`` before it,
    ``pad`` characters into the excerpt's text (which is at most 120 characters)."""
    echo = "." * pad + f"you sent {secret} and more"
    if fmt == "json":
        return ('{"value":[{"PartitionKey":"p","RowKey":"r","Echo":"' + echo + '"').encode()
    return f"<feed><entry><content><m:properties>{echo}</content>".encode()


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("fmt", ["json", "atom"])
def test_a_bare_sas_signature_early_in_an_undecodable_body_is_not_quoted(kind: str, fmt: str) -> None:
    error = read(kind, fmt, bare(fmt, SIG))
    assert isinstance(error, ResponseDecodeError)
    assert "you sent REDACTED and more" in error.excerpt, error.excerpt
    assert SIG not in chain_text(error)


@pytest.mark.parametrize("fmt", ["json", "atom"])
def test_a_signature_the_excerpts_cut_would_split_leaves_no_start_behind(fmt: str) -> None:
    # The signature starts at about 110 of the excerpt's 120 characters (JSON: 51 before the echo).
    error = read("sync", fmt, bare(fmt, SIG, pad=50 if fmt == "json" else 100))
    assert isinstance(error, ResponseDecodeError)
    # Cut at 120 characters or at the space before a piece it would split, so no piece of the signature is left.
    assert 100 < len(error.excerpt) <= 120 and error.excerpt.endswith("..."), error.excerpt
    assert SIG[:6] not in error.excerpt and SIG[:6] not in str(error), error.excerpt


KEY_CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    f"TableEndpoint={ENDPOINT}"
)


def echoing_signature(status: int, content_type: str, body: str = "{echo}") -> tuple[MockSender, list[str]]:
    """A server answering ``status`` with ``body`` in which ``{echo}`` is a text that starts by
    echoing the request's Shared Key signature."""
    signatures: list[str] = []

    def handler(request: HttpRequest) -> HttpResponse:
        signature = request.headers["Authorization"].rsplit(":", 1)[1]
        signatures.append(signature)
        text = body.replace("{echo}", f"signature {signature} accepted, but")
        return MockSender.response(status, text, {"Content-Type": content_type})

    return MockSender(handler), signatures


def test_a_write_answered_with_the_bare_shared_key_signature_does_not_quote_it() -> None:
    from tablesdk import DataServiceRequestError, DynamicEntity

    sender, signatures = echoing_signature(201, "application/json")
    client = CloudStorageAccount.parse(KEY_CONN).create_cloud_table_client(sender=sender, retry_policy=NoRetry())
    ctx = client.get_table_service_context(echo_content=True)  # the insert's answer holds the entity
    ctx.add_object("Tasks", DynamicEntity(PartitionKey="p", RowKey="r", A=1))
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes()
    error = info.value.response[0].error
    assert isinstance(error, ResponseDecodeError)
    assert signatures and "signature REDACTED accepted" in error.excerpt, error.excerpt
    assert signatures[0] not in chain_text(info.value)


#: A committed change set whose insert echoes an unreadable entity; the echo is in the preamble,
#: which a multipart reader skips, so it starts the excerpt of the whole body.
BATCH_ANSWER = (
    "{echo}\r\n--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
    "--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
    "HTTP/1.1 201 Created\r\nContent-ID: 1\r\nContent-Type: application/json\r\n\r\n"
    "{not json\r\n--changesetresponse_1--\r\n--batchresponse_1--\r\n"
)


def test_a_batch_answered_with_the_bare_shared_key_signature_does_not_quote_it() -> None:
    from tablesdk import BatchOperation, BatchOperationKind, DynamicEntity
    from tablesdk._entities._entity import entity_to_payload

    sender, signatures = echoing_signature(202, "multipart/mixed; boundary=batchresponse_1", BATCH_ANSWER)
    client = CloudStorageAccount.parse(KEY_CONN).create_cloud_table_client(sender=sender, retry_policy=NoRetry())
    payload = entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r"))
    insert = BatchOperation(BatchOperationKind.INSERT, "Tasks", "p", "r", payload, None, echo_content=True)
    with pytest.raises(ResponseDecodeError) as info:
        client.execute_batch([insert])
    assert signatures and signatures[0] not in chain_text(info.value)
    assert info.value.excerpt.startswith("signature REDACTED accepted"), info.value.excerpt
