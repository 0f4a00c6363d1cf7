"""tablesdk.legacy without a service: what it imports, its client-side encryption, its errors, and that
its calls go through tablesdk's client (retries, server timeouts, sender).

The call-by-call comparison with the old package is tests/integration/test_legacy_differential.py.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tablesdk import ExponentialRetry as SdkExponentialRetry
from tablesdk import HttpRequest, HttpResponse, MockSender, NoRetry
from tablesdk.legacy import (
    AzureBatchOperationError,
    AzureConflictHttpError,
    AzureException,
    AzureHttpError,
    AzureMissingResourceHttpError,
    AzureValidationError,
    ClientEncryptionNotAvailableError,
    EdmType,
    Entity,
    EntityProperty,
    ExponentialRetry,
    LinearRetry,
    TableBatch,
    TablePermissions,
    TableService,
    no_retry,
)

ROOT = Path(__file__).resolve().parents[2]
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def modules_after(statement: str) -> list[str]:
    script = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_import_tablesdk_does_not_load_the_legacy_surface() -> None:
    assert [name for name in modules_after("import tablesdk") if name.startswith("tablesdk.legacy")] == []


def test_the_legacy_surface_needs_nothing_of_the_old_package() -> None:
    statement = (
        "import datetime\n"
        "from tablesdk import MockSender\n"
        "from tablesdk.legacy import TableService, Entity\n"
        "sender = MockSender(lambda request: MockSender.response(204))\n"
        f"svc = TableService(account_name='acct', account_key={KEY!r}, sender=sender)\n"
        "svc.generate_table_shared_access_signature('tbl', 'r', datetime.datetime(2099, 1, 1))\n"
        "svc.insert_or_merge_entity('tbl', Entity(PartitionKey='p', RowKey='r', When=datetime.datetime(2020, 1, 1)))\n"
        "assert len(sender.requests) == 1\n"
    )
    loaded = modules_after(statement)
    # The old package needed azure-common, python-dateutil and cryptography.
    assert [name for name in loaded if name.split(".")[0] in ("azure", "dateutil", "cryptography")] == []


def test_no_legacy_module_imports_azure() -> None:
    for path in sorted((ROOT / "tablesdk" / "legacy").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            assert not [name for name in names if name.split(".")[0] == "azure"], f"{path.name} imports {names}"


# ---------------------------------------------------------------- a service on a recording sender

class Recorder:
    """Answers each request from a queue of (status, body, headers) and keeps what was sent."""

    def __init__(self, *answers: tuple[int, Any, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.sender = MockSender(self.answer)

    def answer(self, request: HttpRequest) -> HttpResponse:
        status, body, headers = self.answers.pop(0) if self.answers else (204, b"", {})
        text = json.dumps(body) if isinstance(body, dict) else body
        return MockSender.response(status, text, {"Content-Type": "application/json;odata=minimalmetadata", **headers})

    @property
    def requests(self) -> list[HttpRequest]:
        return self.sender.requests


def service(recorder: Recorder, **options: Any) -> TableService:
    return TableService(account_name="acct", account_key=KEY, sender=recorder.sender, **options)


def test_calls_are_sent_by_a_tablesdk_client_with_its_options() -> None:
    recorder = Recorder((204, b"", {"ETag": 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"'}))
    svc = service(recorder, retry_policy=NoRetry())
    assert isinstance(svc.client.retry_policy, NoRetry)
    etag = svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r", "N": 5}, timeout=7)
    assert etag == 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"'
    [request] = recorder.requests
    assert request.url.startswith("https://acct.table.core.windows.net/tbl") and "timeout=7" in request.url
    assert request.headers["Authorization"].startswith("SharedKey acct:")
    body = json.loads(request.body or b"{}")
    assert body["N"] == "5" and body["N@odata.type"] == "Edm.Int64"  # an int is written as Int64


def test_the_default_retry_policy_is_tablesdks() -> None:
    assert isinstance(service(Recorder()).client.retry_policy, SdkExponentialRetry)


def test_a_server_busy_answer_is_retried_by_the_clients_policy() -> None:
    busy = {"odata.error": {"code": "ServerBusy", "message": {"value": "busy"}}}
    recorder = Recorder((503, busy, {}), (204, b"", {}))
    svc = service(recorder, retry_policy=SdkExponentialRetry(1, 0.0, 0.0, 0.0))
    svc.delete_entity("tbl", "p", "r")
    assert len(recorder.requests) == 2


def test_a_datetime_is_written_whole_seconds_in_utc_as_the_old_package_did() -> None:
    from datetime import datetime, timedelta, timezone

    recorder = Recorder()
    moment = datetime(2024, 5, 6, 7, 8, 9, 999999, tzinfo=timezone(timedelta(hours=-5)))
    service(recorder).insert_or_replace_entity("tbl", {"PartitionKey": "p", "RowKey": "r", "When": moment})
    body = json.loads(recorder.requests[0].body or b"{}")
    assert body["When"].startswith("2024-05-06T12:08:09") and body["When"].rstrip("Z").rstrip("0").endswith(("09", "09."))


@pytest.mark.parametrize("metadata", ["minimalmetadata", "nometadata"])
def test_a_read_entity_carries_the_services_etag(metadata: str) -> None:
    # The service drops the trailing zeros of a Timestamp's fraction; the ETag quotes it as written.
    etag = "W/\"datetime'2024-01-02T03%3A04%3A05.12345Z'\""
    body: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r", "Timestamp": "2024-01-02T03:04:05.12345Z", "N": 1}
    if metadata == "minimalmetadata":
        body["odata.etag"] = etag
    svc = service(Recorder((200, body, {"Content-Type": f"application/json;odata={metadata}"})))
    entity = svc.get_entity("tbl", "p", "r", accept=f"application/json;odata={metadata}")
    assert entity.etag == etag
    assert entity.Timestamp.microsecond == 123450 and entity.Timestamp.utcoffset().total_seconds() == 0


# ---------------------------------------------------------------- the old retry policies

BUSY = (503, {"odata.error": {"code": "ServerBusy", "message": {"value": "busy"}}}, {})


def test_no_retry_sends_each_request_once() -> None:
    recorder = Recorder(BUSY, (204, b"", {}))
    svc = service(recorder)
    svc.retry = no_retry
    assert isinstance(svc.client.retry_policy, NoRetry) and svc.retry is no_retry
    with pytest.raises(AzureHttpError) as raised:
        svc.delete_entity("tbl", "p", "r")
    assert raised.value.status_code == 503 and len(recorder.requests) == 1


@pytest.mark.parametrize(("attempts", "succeeds"), [(2, True), (1, False)])
def test_an_old_policy_counts_its_retries_after_the_first_attempt(attempts: int, succeeds: bool) -> None:
    recorder = Recorder(BUSY, BUSY, (204, b"", {}))
    svc = service(recorder)
    assert svc.client is not None  # a client made before the policy is set gets it too
    svc.retry = LinearRetry(backoff=0, max_attempts=attempts, random_jitter_range=0).retry
    if succeeds:
        svc.delete_entity("tbl", "p", "r")
    else:
        with pytest.raises(AzureHttpError):
            svc.delete_entity("tbl", "p", "r")
    assert len(recorder.requests) == attempts + 1


def test_the_exponential_schedule_and_what_it_retries() -> None:
    from tablesdk import ConflictError, ConnectionFailedError, ServerBusyError, TableServiceError

    policy = ExponentialRetry(random_jitter_range=0)
    busy = ServerBusyError("busy", status_code=503)
    assert [policy.retry_after(n, busy) for n in (1, 2, 3, 4)] == [15, 18, 24, None]
    assert policy.retry_after(1, ConflictError("taken", status_code=409)) is None
    assert policy.retry_after(1, TableServiceError("slow", status_code=408)) == 15
    assert policy.retry_after(1, TableServiceError("no", status_code=501)) is None
    assert policy.retry_after(1, ConnectionFailedError("cut")) == 15
    assert policy.retry_after(1, ValueError("not a service error")) is None
    jittered = ExponentialRetry(initial_backoff=10, random_jitter_range=3).retry_after(1, busy)
    assert jittered is not None and 7 <= jittered <= 13


def test_a_function_of_the_old_retry_context_is_refused() -> None:
    svc = service(Recorder())
    with pytest.raises(TypeError, match="retry context"):
        svc.retry = lambda context: 5


# ---------------------------------------------------------------- the encryption settings

class KeyWrapper:
    """A key-encryption key of the old protocol that wraps with a XOR (enough to test the calls)."""

    def __init__(self, kid: str = "local:1") -> None:
        self.kid = kid

    def wrap_key(self, key: bytes) -> bytes:
        return bytes(byte ^ 0x5A for byte in key)

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        return bytes(byte ^ 0x5A for byte in key)

    def get_kid(self) -> str:
        return self.kid

    def get_key_wrap_algorithm(self) -> str:
        return "xor"


SECRET = "top secret text"
ENTITY = {"PartitionKey": "p", "RowKey": "r", "Secret": EntityProperty(EdmType.STRING, SECRET, encrypt=True),
          "Resolved": "chosen by the resolver", "Plain": "in clear"}


def body_payload(request: HttpRequest) -> Any:
    """The entity a request sent, as the engine reads it."""
    import base64

    from tablesdk._entities._edm import EdmType as SdkEdmType
    from tablesdk._entities._edm import EntityPayload

    body = json.loads(request.body or b"{}")
    values = {name: value for name, value in body.items() if not name.endswith("@odata.type")}
    types = {name[:-len("@odata.type")]: SdkEdmType(value) for name, value in body.items() if name.endswith("@odata.type")}
    for name, edm in types.items():
        if edm is SdkEdmType.BINARY:
            values[name] = base64.b64decode(values[name])
    return EntityPayload(values, types)


def answer_with(payload: Any) -> tuple[int, Any, dict[str, str]]:
    """A Get Entity answer in minimal metadata for ``payload``."""
    import base64

    body: dict[str, Any] = {"odata.etag": 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"',
                            "Timestamp": "2024-01-01T00:00:00Z"}
    for name, value in payload.values.items():
        if isinstance(value, bytes):
            body[name], body[f"{name}@odata.type"] = base64.b64encode(value).decode("ascii"), "Edm.Binary"
        else:
            body[name] = value
    return 200, body, {}


WRITES = {
    "insert": lambda svc: svc.insert_entity("tbl", ENTITY),
    "update": lambda svc: svc.update_entity("tbl", ENTITY),
    "insert_or_replace": lambda svc: svc.insert_or_replace_entity("tbl", ENTITY),
}


def encrypting_service(recorder: Recorder) -> TableService:
    svc = service(recorder)
    svc.key_encryption_key = KeyWrapper()
    svc.encryption_resolver_function = lambda pk, rk, name: name == "Resolved"
    return svc


@pytest.mark.parametrize("call", sorted(WRITES))
def test_a_key_encrypts_the_chosen_properties_in_protocol_1_0(call: str) -> None:
    from tablesdk._encryption import TableEncryptionPolicy, decrypt_payload

    recorder = Recorder()
    WRITES[call](encrypting_service(recorder))
    [request] = recorder.requests
    assert SECRET.encode() not in (request.body or b"") and b"chosen by the resolver" not in (request.body or b"")
    sent = body_payload(request)
    assert json.loads(sent.values["_ClientEncryptionMetadata1"])["EncryptionAgent"] == {
        "Protocol": "1.0", "EncryptionAlgorithm": "AES_CBC_256"}
    assert sent.values["Plain"] == "in clear"
    plain = decrypt_payload(sent, TableEncryptionPolicy(key=KeyWrapper()))
    assert (plain.values["Secret"], plain.values["Resolved"]) == (SECRET, "chosen by the resolver")


def test_a_batch_encrypts_as_the_service_does_and_can_use_the_authenticated_protocol() -> None:
    from tablesdk._encryption import PROTOCOL_AUTHENTICATED

    svc = encrypting_service(Recorder())
    batch = svc.batch("tbl").__enter__()  # the batch the with block gives, not committed
    assert batch.encryption_protocol == "1.0"
    batch.insert_entity(ENTITY)
    svc.encryption_protocol = PROTOCOL_AUTHENTICATED
    later = svc.batch("tbl").__enter__()
    later.insert_or_replace_entity(ENTITY)
    for operations, protocol in ((batch.to_batch_operation(), "1.0"), (later.to_batch_operation(), PROTOCOL_AUTHENTICATED)):
        [operation] = list(operations)
        sent = operation.entity
        assert sent["Secret"] != SECRET and sent.edm_type("Secret").value == "Edm.Binary"
        assert json.loads(sent["_ClientEncryptionMetadata1"])["EncryptionAgent"]["Protocol"] == protocol


def test_with_a_key_the_metadata_is_written_even_when_nothing_is_chosen() -> None:
    recorder = Recorder()
    svc = service(recorder)
    svc.key_encryption_key = KeyWrapper()
    svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r", "Plain": "x"})
    sent = body_payload(recorder.requests[0])
    assert sent.values["Plain"] == "x" and set(sent.values) >= {"_ClientEncryptionMetadata1", "_ClientEncryptionMetadata2"}


@pytest.mark.parametrize(("value", "error", "message"), [
    (5, ValueError, "Encryption is only supported for not None strings."),
    (None, ValueError, "Encryption is only supported for not None strings."),
    (EntityProperty(EdmType.INT32, 5, encrypt=True), ValueError, "Encryption is only supported for not None strings."),
    (EntityProperty(EdmType.STRING, None, encrypt=True), ValueError, "Encryption is only supported for not None strings."),
])
def test_what_protocol_1_0_cannot_encrypt_is_refused_with_the_old_error(value: Any, error: Any, message: str) -> None:
    recorder = Recorder()
    svc = encrypting_service(recorder)
    with pytest.raises(error) as raised:
        svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r", "Resolved": value})
    assert str(raised.value) == message and recorder.requests == []


def test_a_resolver_choosing_a_key_is_refused_as_the_service_would_refuse_it() -> None:
    recorder = Recorder()
    svc = service(recorder)
    svc.key_encryption_key = KeyWrapper()
    svc.encryption_resolver_function = lambda pk, rk, name: name == "RowKey"
    with pytest.raises(AzureValidationError, match="keys cannot be encrypted") as raised:
        svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r"})
    assert raised.value.status_code == 400 and recorder.requests == []


def test_a_key_without_wrap_key_is_refused_with_the_old_error() -> None:
    class ReadOnly:
        def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
            return key

        def get_kid(self) -> str:
            return "k"

    recorder = Recorder()
    svc = service(recorder)
    svc.key_encryption_key = ReadOnly()
    with pytest.raises(AttributeError, match="^key encryption key does not define a complete interface. Value of "
                       "wrap_key is either missing or invalid.$"):
        svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r"})
    assert recorder.requests == []


def test_a_select_asks_for_both_metadata_columns_when_decrypting() -> None:
    from urllib.parse import unquote

    recorder = Recorder((200, {"value": []}, {}), (200, {"value": []}, {}), (200, {"value": []}, {}))
    svc = service(recorder)
    list(svc.query_entities("tbl", select="Secret"))
    svc.key_resolver_function = lambda kid: None
    list(svc.query_entities("tbl", select="Secret"))
    list(svc.query_entities("tbl", select="*"))
    plain, decrypting, everything = (unquote(request.url) for request in recorder.requests)
    assert "_ClientEncryptionMetadata" not in plain
    assert "_ClientEncryptionMetadata1,_ClientEncryptionMetadata2" in decrypting
    assert "select" not in everything


def test_a_read_decrypts_and_a_failure_is_the_old_decryption_failed() -> None:
    from tablesdk._encryption import EncryptionKeyError, TableEncryptionPolicy, encrypt_payload

    from tablesdk._entities._edm import EntityPayload

    stored = encrypt_payload(EntityPayload({"PartitionKey": "p", "RowKey": "r", "Secret": SECRET, "N": 1}, {}),
                             TableEncryptionPolicy(key=KeyWrapper(), protocol="1.0"), lambda pk, rk, name: name == "Secret")
    recorder = Recorder(*[answer_with(stored)] * 3)
    svc = service(recorder)
    svc.key_encryption_key = KeyWrapper()
    got = svc.get_entity("tbl", "p", "r")
    assert (got.Secret, got.N) == (SECRET, EntityProperty(EdmType.INT32, 1))
    assert "_ClientEncryptionMetadata1" not in got
    svc.key_encryption_key = None
    svc.key_resolver_function = lambda kid: KeyWrapper("another")
    with pytest.raises(AzureException) as raised:
        svc.get_entity("tbl", "p", "r")
    assert type(raised.value) is AzureException and str(raised.value) == "Decryption failed"
    cause = raised.value.__cause__
    assert isinstance(cause, EncryptionKeyError) and (cause.partition_key, cause.row_key, cause.key_id) == ("p", "r", "local:1")
    assert SECRET not in repr(cause)
    svc.key_resolver_function = None
    got = svc.get_entity("tbl", "p", "r")  # no key: the ciphertext and metadata as they are stored
    assert got.Secret.type == EdmType.BINARY and "_ClientEncryptionMetadata1" in got


def test_a_key_needs_only_the_methods_of_the_call() -> None:
    from tablesdk._encryption import TableEncryptionPolicy, decrypt_payload

    class WriteOnly:
        def wrap_key(self, key: bytes) -> bytes:
            return KeyWrapper().wrap_key(key)

        def get_kid(self) -> str:
            return "local:1"

        def get_key_wrap_algorithm(self) -> str:
            return "xor"

    class ReadOnly:
        def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
            return KeyWrapper().unwrap_key(key, algorithm)

        def get_kid(self) -> str:
            return "local:1"

    recorder = Recorder()
    writer = service(recorder)
    writer.key_encryption_key = WriteOnly()
    writer.insert_entity("tbl", ENTITY)
    sent = body_payload(recorder.requests[0])
    assert decrypt_payload(sent, TableEncryptionPolicy(key=KeyWrapper())).values["Secret"] == SECRET
    reader = service(Recorder(answer_with(sent)))
    reader.key_encryption_key = ReadOnly()
    assert reader.get_entity("tbl", "p", "r").Secret == SECRET


def test_require_encryption_refuses_a_plain_entity_read_with_a_key() -> None:
    recorder = Recorder(answer_with(type("P", (), {"values": {"PartitionKey": "p", "RowKey": "r", "N": "x"}})()))
    svc = service(recorder)
    svc.key_encryption_key, svc.require_encryption = KeyWrapper(), True
    with pytest.raises(AzureException, match="^Decryption failed$"):
        svc.get_entity("tbl", "p", "r")


def test_client_encryption_not_available_error_is_still_importable_and_never_raised() -> None:
    assert issubclass(ClientEncryptionNotAvailableError, AzureException)
    source = (ROOT / "tablesdk" / "legacy").glob("*.py")
    assert not [path.name for path in source if "raise ClientEncryptionNotAvailableError" in path.read_text()]


def test_merges_with_a_key_are_refused_as_the_old_package_refused_them() -> None:
    svc = service(Recorder())
    svc.key_encryption_key = KeyWrapper()
    with pytest.raises(ValueError, match="encryption is not supported for this method"):
        svc.merge_entity("tbl", {"PartitionKey": "p", "RowKey": "r"})
    with pytest.raises(ValueError, match="encryption is not supported for this method"):
        TableBatch(key_encryption_key=KeyWrapper()).insert_or_merge_entity({"PartitionKey": "p", "RowKey": "r"})


# ---------------------------------------------------------------- models and errors

def test_http_errors_take_the_class_of_their_status() -> None:
    assert type(AzureHttpError("gone", 404)) is AzureMissingResourceHttpError
    assert type(AzureHttpError("taken", 409)) is AzureConflictHttpError
    assert type(AzureHttpError("stale", 412)) is AzureHttpError
    batch = AzureBatchOperationError("0:dup", 409, "EntityAlreadyExists")
    assert isinstance(batch, AzureHttpError) and batch.code == "EntityAlreadyExists" and batch.status_code == 409


def test_a_request_refused_before_sending_is_an_http_400_and_a_value_error() -> None:
    recorder = Recorder()
    with pytest.raises(AzureHttpError) as raised:
        service(recorder).insert_entity("tbl", {"PartitionKey": "a/b", "RowKey": "r"})
    assert isinstance(raised.value, AzureValidationError) and isinstance(raised.value, ValueError)
    assert raised.value.status_code == 400 and "PartitionKey" in str(raised.value)
    assert recorder.requests == []


def test_service_errors_are_translated_and_chained() -> None:
    body = {"odata.error": {"code": "EntityAlreadyExists", "message": {"value": "The specified entity already exists."}}}
    svc = service(Recorder((409, body, {"x-ms-error-code": "EntityAlreadyExists"})), retry_policy=NoRetry())
    with pytest.raises(AzureConflictHttpError) as raised:
        svc.insert_entity("tbl", {"PartitionKey": "p", "RowKey": "r"})
    assert raised.value.status_code == 409 and raised.value.error_code == "EntityAlreadyExists"
    assert raised.value.__cause__ is not None and KEY not in str(raised.value)


def test_an_account_key_that_is_not_base64_is_a_signing_error() -> None:
    from tablesdk.legacy import AzureSigningError

    with pytest.raises(AzureSigningError, match="account_key"):
        TableService(account_name="acct", account_key="not base64!")


def test_entity_is_a_dict_with_attributes() -> None:
    entity = Entity(PartitionKey="p")
    entity.RowKey = "r"
    assert entity == {"PartitionKey": "p", "RowKey": "r"} and entity.PartitionKey == "p"
    del entity.RowKey
    with pytest.raises(AttributeError, match="'Entity' object has no attribute 'RowKey'"):
        entity.RowKey


def test_permissions_combine_into_their_letters() -> None:
    assert str(TablePermissions.QUERY | TablePermissions.DELETE | TablePermissions.ADD) == "rad"
    assert TablePermissions(_str="ud").update and not TablePermissions(_str="ud").query


def test_every_legacy_name_is_documented() -> None:
    import inspect

    import tablesdk.legacy

    for name in tablesdk.legacy.__all__:
        value = getattr(tablesdk.legacy, name)
        assert inspect.isclass(value) or inspect.isfunction(value), name
        assert value.__doc__ and value.__doc__.strip(), name


def test_one_client_per_metadata_level_and_closed_with_the_service() -> None:
    svc = service(Recorder())
    assert svc.client is svc.client
    nometadata = svc._client_for("application/json;odata=nometadata")
    assert nometadata is not svc.client
    with pytest.raises(ValueError, match="accept must be one of"):
        svc.get_entity("tbl", "p", "r", accept="application/atom+xml")
    svc.close()
    assert svc.client is not nometadata


def test_the_service_repr_does_not_show_the_key() -> None:
    assert KEY not in repr(service(Recorder()))


def test_a_call_is_traced_around_the_clients_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tablesdk._core._tracing
    import tablesdk._pipeline._transport

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tablesdk")
    for module in (tablesdk._core._tracing, tablesdk._pipeline._transport):
        monkeypatch.setattr(module, "active_tracer", lambda: tracer)
    service(Recorder()).delete_entity("tbl", "p", "r")
    spans = {span.name: span for span in memory.get_finished_spans()}
    assert set(spans) == {"TableService.delete_entity", "CloudTableClient.delete_entity", "DELETE"}
    client_span = spans["CloudTableClient.delete_entity"]
    assert client_span.parent is not None
    assert client_span.parent.span_id == spans["TableService.delete_entity"].context.span_id
    provider.shutdown()


# ---------------------------------------------------------------- the same signatures as the old package

#: Old public methods tablesdk.legacy leaves out: a proxy setting of the old HTTP session, and a log helper.
NOT_OFFERED = {"set_proxy", "extract_date_and_request_id"}


def _parameters(function: Any) -> list[tuple[str, Any]]:
    import inspect

    return [
        (p.name, p.default) for p in inspect.signature(function).parameters.values() if p.kind is not p.VAR_KEYWORD
    ]


def test_every_old_call_has_the_same_parameters_and_defaults() -> None:
    import inspect

    old = pytest.importorskip("azure.cosmosdb.table")
    import azure.cosmosdb.table.common.models as old_models
    import azure.cosmosdb.table.common.retry as old_retry

    import tablesdk.legacy as new

    for old_class, new_class in ((old.TableService, new.TableService), (old.TableBatch, new.TableBatch)):
        for name, member in inspect.getmembers(old_class, callable):
            if (name.startswith("_") and name != "__init__") or name in NOT_OFFERED:
                continue
            assert _parameters(getattr(new_class, name)) == _parameters(member), f"{old_class.__name__}.{name}"
    for old_value, new_value in (
        (old.Entity, new.Entity), (old.EntityProperty, new.EntityProperty), (old.TablePermissions, new.TablePermissions),
        (old_models.AccessPolicy, new.AccessPolicy), (old_models.ResourceTypes, new.ResourceTypes),
        (old_models.AccountPermissions, new.AccountPermissions), (old_models.Logging, new.Logging),
        (old_models.Metrics, new.Metrics), (old_models.CorsRule, new.CorsRule),
        (old_models.RetentionPolicy, new.RetentionPolicy), (old_retry.ExponentialRetry, new.ExponentialRetry),
        (old_retry.LinearRetry, new.LinearRetry),
    ):
        assert _parameters(new_value.__init__) == _parameters(old_value.__init__), old_value.__name__
    assert [vars(old.EdmType)[name] for name in dir(old.EdmType) if name.isupper()] == [
        vars(new.EdmType)[name] for name in dir(new.EdmType) if name.isupper()]
