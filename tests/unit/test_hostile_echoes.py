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
from tablesdk._http import HttpRequest, HttpResponse, MockSender, Timeout
from tablesdk._redaction import attempt_secrets, scrub

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
