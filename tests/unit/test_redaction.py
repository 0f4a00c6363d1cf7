"""Secrets never reach a log record, an exception, or a repr: through successes, retries and failures.

The client runs against the bundled emulator (real sockets, so urllib3 logs its
request lines with their query strings) behind the fault-injecting proxy of
tests/faults.py, at DEBUG level, with a Shared Key credential and with a SAS
credential; then against ``responses`` mocks of a service whose error messages
echo the request's signature, as the real service's 403 does. Everything the
SDK or urllib3 emitted is then searched for every secret the run involved:
the account key, its decoded bytes in hex, the SAS ``sig`` value (as sent and
decoded), a wrong key used to provoke 403s, and every ``Authorization`` header
value actually sent (and its signature part).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import traceback
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl, quote

import pytest
import responses
from faults import Fault, FaultProxy

from tablesdk import (
    AuthenticationError,
    BatchError,
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    ConflictError,
    ConnectionFailedError,
    DataServiceRequestError,
    DynamicEntity,
    LinearRetry,
    NoRetry,
    OperationContext,
    RequestTimeoutError,
    ResourceNotFoundError,
    SaveChangesOptions,
    TableServiceError,
    generate_table_sas,
)
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore
from tablesdk._entities._entity import entity_to_payload

ACCOUNT = DEVSTORE_ACCOUNT
WRONG_KEY = base64.b64encode(b"not the key, but secret all the same!!").decode("ascii")
TIMEOUT = (2.0, 0.3)


def _key_forms(key: str) -> list[str]:
    raw = base64.b64decode(key)
    return [key, quote(key, safe=""), raw.hex(), raw.hex().upper()]


def _error_texts(error: BaseException) -> Iterable[str]:
    """str and repr of an error, of what it wraps, and of a save's per-operation errors."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        exc = stack.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield str(exc)
        yield repr(exc)
        yield "".join(traceback.format_exception_only(type(exc), exc))
        stack.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
        if isinstance(exc, BatchError) and exc.cause is not None:
            stack.append(exc.cause)
        if isinstance(exc, DataServiceRequestError):
            yield repr(exc.response)
            stack.extend(r.error for r in exc.response if r.error is not None)


class Recorder:
    """Collects every text a user could see, and every secret the run used."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.secrets: set[str] = set(_key_forms(DEVSTORE_KEY)) | set(_key_forms(WRONG_KEY))
        self.errors: list[TableServiceError] = []
        self.contexts: list[OperationContext] = []

    def expect(self, kind: type[TableServiceError], call: object, *args: object, **kwargs: object) -> TableServiceError:
        with pytest.raises(kind) as info:
            call(*args, **kwargs)  # type: ignore[operator]
        self.errors.append(info.value)
        return info.value

    def sas(self, token: str) -> None:
        for name, value in re.findall(r"(?:^|&)([^=&]+)=([^&]*)", token):
            if name == "sig":
                self.secrets.update({value, dict(parse_qsl(f"sig={value}"))["sig"]})

    def authorization(self, value: str | None) -> None:
        if value:
            self.secrets.update({value, value.split(" ", 1)[-1], value.rsplit(":", 1)[-1]})

    def objects(self, *objects: object) -> None:
        for obj in objects:
            self.texts.extend((repr(obj), str(obj)) if not isinstance(obj, CloudStorageAccount) else (repr(obj),))

    def finish(self, caplog: pytest.LogCaptureFixture) -> None:
        for record in caplog.records:
            self.texts.append(record.getMessage())
            self.texts.append(repr(record.args))
            if record.exc_info:
                self.texts.append("".join(traceback.format_exception(*record.exc_info)))
        self.texts.append(caplog.text)
        for error in self.errors:
            self.texts.extend(_error_texts(error))
        for op in self.contexts:
            self.texts.append(repr(op))
            self.texts.extend(repr(a) for a in op.attempts)
            self.texts.extend(a.url for a in op.attempts)
            self.texts.extend(a.error or "" for a in op.attempts)

    def assert_clean(self) -> None:
        secrets = sorted({s for s in self.secrets if len(s) >= 8}, key=len)
        leaks = [(secret, text[:300]) for text in self.texts for secret in secrets if secret in text]
        # Say where, without repeating the secret in the failure message.
        shown = [text.replace(secret, f"<SECRET {secret[:4]}...>") for secret, text in leaks[:3]]
        if leaks:  # pytest.fail, not assert: assertion rewriting would print the secrets
            pytest.fail(f"{len(leaks)} leak(s), e.g. {shown}", pytrace=False)


def _entity(rk: str) -> DynamicEntity:
    return DynamicEntity(PartitionKey="p", RowKey=rk, Value=rk)


def _insert(table: str, rk: str) -> BatchOperation:
    e = _entity(rk)
    return BatchOperation(BatchOperationKind.INSERT, table, "p", rk, entity_to_payload(e), None)


def _upsert(table: str, rk: str) -> BatchOperation:
    e = _entity(rk)
    return BatchOperation(BatchOperationKind.INSERT_OR_REPLACE, table, "p", rk, entity_to_payload(e), None)


def _drive_loopback(rec: Recorder, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    with DevStore(port=0) as store, FaultProxy(store.url, lifetime=60) as proxy:
        table = "redact" + uuid.uuid4().hex[:10]
        admin = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        admin.create_table(table)
        expiry = datetime.now(timezone.utc) + timedelta(hours=1)
        if kind == "sas":
            token = generate_table_sas(ACCOUNT, DEVSTORE_KEY, table, "raud", expiry=expiry)
            bad_token = re.sub(r"sig=[^&]*", "sig=" + quote(base64.b64encode(b"x" * 32).decode(), safe=""), token)
            rec.sas(token)
            rec.sas(bad_token)
            good = f"TableEndpoint={proxy.endpoint};SharedAccessSignature={token}"
            bad = f"TableEndpoint={proxy.endpoint};SharedAccessSignature={bad_token}"
        else:
            good = proxy.connection_string(store.connection_string)
            bad = good.replace(DEVSTORE_KEY, WRONG_KEY)
            assert bad != good

        account = CloudStorageAccount.parse(good)
        caplog.clear()
        with account.create_cloud_table_client(retry_policy=LinearRetry(3, 0.01), timeout=TIMEOUT) as client:
            rec.objects(client, account, account.credential, client.transport)
            # Successes.
            client.insert_entity(table, _entity("a"))
            assert client.get_entity(table, "p", "a")["Value"] == "a"
            client.update_entity(table, _entity("a"), etag="*")
            client.execute_batch([_insert(table, "b"), _insert(table, "c")])
            assert len(list(client.create_query(table))) == 3
            # Retries that end in success (WARNING lines carry the URL and the error text).
            proxy.inject(Fault.SERVER_BUSY, 1, method="PUT")
            proxy.inject(Fault.RESET, 1, method="PUT")
            proxy.inject(Fault.TRUNCATE, 1, method="PUT")
            op = OperationContext()
            rec.contexts.append(op)
            client.execute_operation(_upsert(table, "d"), operation_context=op)
            assert [a.status for a in op.attempts] == [503, None, None, 204]
            proxy.inject(Fault.DELAY_BEFORE_FORWARD, 1, method="GET", delay=3.0)
            op = OperationContext()
            rec.contexts.append(op)
            client.query_entity_payloads(table, operation_context=op)
            # Failures the service answers.
            rec.expect(ResourceNotFoundError, client.get_entity, table, "p", "missing")
            rec.expect(ConflictError, client.insert_entity, table, _entity("a"))
            rec.expect(BatchError, client.execute_batch, [_insert(table, "a"), _insert(table, "e")])
            ctx = client.get_table_service_context()
            ctx.add_object(table, _entity("b"))
            rec.expect(DataServiceRequestError, ctx.save_changes_with_retries)
            ctx2 = client.get_table_service_context()
            ctx2.add_object(table, _entity("c"))
            rec.expect(DataServiceRequestError, ctx2.save_changes, SaveChangesOptions.BATCH)
            # Failures of the network, retried until the policy gives up, and a deadline.
            proxy.inject(Fault.FORWARD_THEN_RESET, 4, method="POST")
            op = OperationContext()
            rec.contexts.append(op)
            rec.expect(ConnectionFailedError, client.execute_operation, _insert(table, "f"), operation_context=op)
            proxy.inject(Fault.DELAY_BEFORE_ANSWER, 1, method="GET", delay=3.0)
            rec.expect(RequestTimeoutError, client.query_entity_payloads, table, retry_policy=NoRetry())
            client.operation_deadline = 0.3
            proxy.inject(Fault.SERVER_BUSY, 100, method="GET")
            op = OperationContext()
            rec.contexts.append(op)
            rec.expect(
                RequestTimeoutError, client.query_entity_payloads, table,
                retry_policy=LinearRetry(100, 0.05), operation_context=op,
            )
            proxy.clear()
        # A refused signature.
        with CloudStorageAccount.parse(bad).create_cloud_table_client(retry_policy=NoRetry()) as wrong:
            rec.objects(wrong, wrong.account, wrong.account.credential)
            op = OperationContext()
            rec.contexts.append(op)
            error = rec.expect(AuthenticationError, wrong.query_entity_payloads, table, operation_context=op)
            assert error.status_code == 403
        admin.delete_table(table)
        admin.close()
        for event in proxy.events:
            rec.authorization(event.header("Authorization"))
        sent_auth = [e.header("Authorization") for e in proxy.events if e.header("Authorization")]
        assert (len(sent_auth) > 10) if kind == "shared_key" else (sent_auth == [])


def _drive_echoing_service(rec: Recorder, kind: str) -> None:
    """A service whose errors quote the signature back, as the real 403 does."""
    endpoint = "https://acct.table.core.windows.net"
    if kind == "sas":
        token = generate_table_sas(
            "acct", DEVSTORE_KEY, "Echo", "raud", expiry=datetime.now(timezone.utc) + timedelta(hours=1)
        )
        rec.sas(token)
        account = CloudStorageAccount.parse(f"TableEndpoint={endpoint};SharedAccessSignature={token}")
    else:
        account = CloudStorageAccount.parse(
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={DEVSTORE_KEY};EndpointSuffix=core.windows.net"
        )

    def echo(request: object) -> tuple[int, dict[str, str], str]:
        auth = request.headers.get("Authorization", "")  # type: ignore[attr-defined]
        rec.authorization(auth)
        signature = auth.rsplit(":", 1)[-1] if auth else ""
        message = (
            "Server failed to authenticate the request. The MAC signature found in the HTTP request "
            f"'{signature}' is not the same as any computed signature. Authorization: {auth} "
            f"URL: {request.url}\nRequestId:11111111-2222-3333-4444-555555555555"  # type: ignore[attr-defined]
        )
        body = '{"odata.error":{"code":"AuthenticationFailed","message":{"lang":"en-US","value":' + json.dumps(message) + "}}}"
        return 403, {"Content-Type": "application/json", "x-ms-error-code": "AuthenticationFailed"}, body

    def busy_then_echo(request: object) -> tuple[int, dict[str, str], str]:
        _, headers, body = echo(request)
        return 503, {**headers, "x-ms-error-code": "ServerBusy"}, body.replace("AuthenticationFailed", "ServerBusy")

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, re.compile(r".*/Echo\(\).*"), callback=echo)
        mock.add_callback(responses.POST, re.compile(r".*/Echo(\?.*)?$"), callback=busy_then_echo)
        with account.create_cloud_table_client(retry_policy=LinearRetry(2, 0.0)) as client:
            rec.objects(client, account, account.credential)
            op = OperationContext()
            rec.contexts.append(op)
            rec.expect(AuthenticationError, client.query_entity_payloads, "Echo", operation_context=op)
            op = OperationContext()
            rec.contexts.append(op)
            rec.expect(TableServiceError, client.execute_operation, _insert("Echo", "x"), operation_context=op)
            assert len(op.attempts) == 3


@pytest.mark.parametrize("kind", ["shared_key", "sas"])
def test_no_secret_in_logs_errors_or_reprs(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tablesdk")
    caplog.set_level(logging.DEBUG, logger="urllib3")
    rec = Recorder()
    _drive_loopback(rec, kind, caplog)
    _drive_echoing_service(rec, kind)
    rec.finish(caplog)
    rec.assert_clean()

    # The run did exercise what it claims: DEBUG lines from both loggers, retry warnings,
    # URLs with a SAS in them, errors of every kind.
    names = {r.name for r in caplog.records}
    assert "tablesdk.transport" in names and any(n.startswith("urllib3") for n in names)
    assert any(r.levelno == logging.WARNING and "retrying" in r.getMessage() for r in caplog.records)
    if kind == "sas":
        assert any("sig=REDACTED" in r.getMessage() for r in caplog.records if r.name.startswith("urllib3"))
        assert any("sig=REDACTED" in a.url for op in rec.contexts for a in op.attempts)
    assert {type(e).__name__ for e in rec.errors} >= {
        "ResourceNotFoundError", "ConflictError", "BatchError", "DataServiceRequestError",
        "ConnectionFailedError", "RequestTimeoutError", "AuthenticationError",
    }
    assert len(rec.secrets) > 6
