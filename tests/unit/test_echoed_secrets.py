"""A SAS signature echoed back by a server, in any header and any escaping, is scrubbed.

The server below copies the request's ``sig`` into ``x-ms-request-id``,
``x-ms-error-code`` and a custom header, as sent (``%2B``), with lower-case
escapes (``%2b``) and decoded; none of it may reach an exception, a repr, a
recorded attempt or a log line.
"""

from __future__ import annotations

import logging
import re
import traceback
from urllib.parse import quote

import pytest
import responses

from tablesdk import (
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    DynamicEntity,
    NoRetry,
    OperationContext,
    TableServiceError,
)
from tablesdk._entities._entity import entity_to_payload

SIG = "AbC+dEf/GhI=jkLmNoPq+RsTuVwXyZ/0123456789ab="
SENT = quote(SIG, safe="")
FORMS = [SENT, re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), SENT), SIG]
ENDPOINT = "http://127.0.0.1:9/devstoreaccount1"
TOKEN = f"sv=2019-02-02&tn=echo&sp=raud&se=2099-01-01T00%3A00%3A00Z&sig={SENT}"


def _echo_headers(form: str) -> dict[str, str]:
    return {
        "x-ms-request-id": f"id-{form}",
        "x-ms-error-code": f"Code{form}",
        "x-custom": f"url was ?sig={form}&x=1",
    }


def _texts(error: BaseException) -> list[str]:
    assert isinstance(error, TableServiceError)
    return [
        str(error), repr(error), "".join(traceback.format_exception(error)),
        str(error.request_id), str(error.error_code), error.message,
    ]


def _assert_clean(texts: list[str]) -> None:
    blob = "\n".join(texts)
    for secret in (SIG, SENT, FORMS[1], "jkLmNoPq"):
        assert secret not in blob, secret


@pytest.mark.parametrize("form", FORMS)
def test_sig_echoed_in_headers_of_an_error_is_scrubbed(form: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tablesdk")
    client = CloudStorageAccount.parse(
        f"TableEndpoint={ENDPOINT};SharedAccessSignature={TOKEN}"
    ).create_cloud_table_client(retry_policy=NoRetry())
    op = OperationContext()
    with responses.RequestsMock() as mock:
        mock.add("GET", re.compile(r".*/echo\(\).*"), status=403, headers=_echo_headers(form),
                 body=f"<Error><Code>AuthenticationFailed</Code><Message>sig {form}</Message></Error>")
        with pytest.raises(TableServiceError) as info:
            client.query_entity_payloads("echo", operation_context=op)
        assert SENT in mock.calls[0].request.url  # the secret really was sent
    texts = _texts(info.value) + [r.getMessage() for r in caplog.records]
    texts += [repr(a) for a in op.attempts] + [str(a.request_id) for a in op.attempts]
    _assert_clean(texts)
    assert "REDACTED" in str(info.value.request_id)


@pytest.mark.parametrize("form", FORMS)
def test_sig_echoed_in_headers_of_a_success_is_scrubbed(form: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tablesdk")
    client = CloudStorageAccount.parse(
        f"TableEndpoint={ENDPOINT};SharedAccessSignature={TOKEN}"
    ).create_cloud_table_client(retry_policy=NoRetry())
    op = OperationContext()
    with responses.RequestsMock() as mock:
        mock.add("POST", re.compile(r".*/echo(\?.*)?$"), status=204,
                 headers={**_echo_headers(form), "ETag": 'W/"datetime\'2020-01-01T00%3A00%3A00Z\'"'})
        operation = BatchOperation(
            BatchOperationKind.INSERT, "echo", "p", "r", entity_to_payload(DynamicEntity("p", "r")), None
        )
        result = client.execute_operation(operation, operation_context=op)
    texts = [repr(result), str(result.headers)] + [r.getMessage() for r in caplog.records]
    texts += [repr(a) for a in op.attempts]
    _assert_clean(texts)


def test_devstore_verbose_log_redacts_sig(caplog: pytest.LogCaptureFixture) -> None:
    from tablesdk.devstore import DevStore

    caplog.set_level(logging.INFO, logger="tablesdk.devstore")
    with DevStore(verbose=True) as store:
        client = CloudStorageAccount.parse(
            f"TableEndpoint={store.url};SharedAccessSignature={TOKEN}"
        ).create_cloud_table_client(retry_policy=NoRetry())
        with pytest.raises(TableServiceError):
            client.query_entity_payloads("echo")
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tablesdk.devstore")]
    assert any("sig=REDACTED" in line for line in lines), lines
    _assert_clean(lines)
