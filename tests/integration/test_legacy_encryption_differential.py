"""Differential test of client-side encryption: one script written for ``azure-cosmosdb-table`` 1.0.6
with a ``key_encryption_key``, run with the old package and with ``tablesdk.legacy``, each against a
fresh bundled emulator, prints the same outcomes step by step.

The script (:func:`encrypted_script`) writes with every encrypting call (``encryption_resolver_function``
and ``EntityProperty(..., encrypt=True)``, batches), makes every refusal (merges, what protocol 1.0
cannot encrypt, too many properties, an incomplete key, ``require_encryption`` without a key), reads
with the key, a resolver, a wrong key and no key (the ciphertext and metadata as stored), with
``select``, ``accept``, a ``property_resolver`` and pages with markers, and reads with
``require_encryption`` entities that are and are not encrypted.

Ciphertexts, wrapped keys and IVs are random, so a step records their length (the same plaintext
gives the same length in protocol 1.0) and the metadata's fields rather than their bytes; the name
of the writing library in the metadata differs (readers look in it for "Java" only) and is recorded
as that. Where tablesdk deliberately differs (a ``select`` without PartitionKey and RowKey, which the
old package could not decrypt), the script does not go; docs/migrating.md lists those differences.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import pytest
from legacy_crypto import KeyWrapper, resolver_of
from test_legacy_differential import Api, Recorder, Trace, describe, new_api, old_api

from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

METADATA_KEY = "_ClientEncryptionMetadata1"


def _metadata_shape(text: str) -> Any:
    document = json.loads(text)
    wrapped = document["WrappedContentKey"]
    library = document.get("KeyWrappingMetadata", {}).get("EncryptionLibrary", "")
    return ("metadata", wrapped["KeyId"], wrapped["Algorithm"], len(wrapped["EncryptedKey"]),
            document["EncryptionAgent"], len(document["ContentEncryptionIV"]), ("Java" in library))


def unrandom(described: Any) -> Any:
    """A described outcome with its random parts (ciphertexts, wrapped keys, IVs) reduced to their shape."""
    if isinstance(described, list):
        return [unrandom(item) for item in described]
    if isinstance(described, tuple):
        if described[:2] == ("EntityProperty", "Edm.Binary") and isinstance(described[2], tuple):
            return ("EntityProperty", "Edm.Binary", ("bytes", len(described[2][1])))
        if len(described) == 2 and described[0] == METADATA_KEY and described[1][0] == "str":
            return (METADATA_KEY, _metadata_shape(described[1][1]))
        return tuple(unrandom(item) for item in described)
    return described


def shown(value: Any) -> Any:
    return unrandom(describe(value))


def as_is(value: Any) -> Any:
    return value


def shown_pages(generator: Any) -> Any:
    items = list(generator)
    return (shown(items), shown(generator.next_marker))


class NoWrap:
    """A key that can only unwrap: the old package refused it for writes."""

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        return key

    def get_kid(self) -> str:
        return "no-wrap"


def encrypted_script(api: Api, connection_string: str, step: Recorder) -> None:  # noqa: PLR0915 - one script
    EP, Edm = api.EntityProperty, api.EdmType
    kek, other = KeyWrapper(), KeyWrapper("local:other")

    def service(**settings: Any) -> Any:
        svc = api.TableService(connection_string=connection_string)
        svc.retry = api.no_retry
        for name, value in settings.items():
            setattr(svc, name, value)
        return svc

    svc = service(key_encryption_key=kek,
                  encryption_resolver_function=lambda pk, rk, name: name in ("Secret", "Also"))
    step("create", lambda: svc.create_table("encA"))
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)

    # writes that encrypt
    first = {"PartitionKey": "p", "RowKey": "r1", "Secret": "first secret", "Also": "é" * 40, "Plain": "in clear",
             "N": 5, "When": when, "Flag": EP(Edm.STRING, "flagged", encrypt=True), "Nothing": None}
    step.etag("insert", lambda: svc.insert_entity("encA", first))
    step("get", lambda: svc.get_entity("encA", "p", "r1"), shown)
    step("get, no metadata", lambda: svc.get_entity(
        "encA", "p", "r1", accept=api.TablePayloadFormat.JSON_NO_METADATA), shown)
    step("get, full metadata", lambda: svc.get_entity(
        "encA", "p", "r1", accept=api.TablePayloadFormat.JSON_FULL_METADATA), shown)
    step("get, resolver typing the secret", lambda: svc.get_entity(
        "encA", "p", "r1", property_resolver=lambda pk, rk, name, value, edm: Edm.INT64 if name == "Secret" else edm),
        shown)
    step("get, resolver giving no EDM type", lambda: svc.get_entity(
        "encA", "p", "r1", property_resolver=lambda pk, rk, name, value, edm: "Edm.Nothing"), shown)
    step.etag("update", lambda: svc.update_entity(
        "encA", {"PartitionKey": "p", "RowKey": "r1", "Secret": "second secret", "Plain": "changed"},
        if_match=step.etags["insert"]))
    step("update, stale", lambda: svc.update_entity(
        "encA", {"PartitionKey": "p", "RowKey": "r1", "Secret": "x"}, if_match=step.etags["insert"]))
    step("get after update", lambda: svc.get_entity("encA", "p", "r1"), shown)
    step.etag("insert or replace", lambda: svc.insert_or_replace_entity(
        "encA", {"PartitionKey": "p", "RowKey": "r2", "Secret": "", "Also": "also"}))
    step.etag("nothing chosen", lambda: svc.insert_entity("encA", {"PartitionKey": "p", "RowKey": "r3", "Plain": "x"}))
    step("insert duplicate", lambda: svc.insert_entity("encA", first))

    # what a key refuses
    base = {"PartitionKey": "p", "RowKey": "bad"}
    step("merge", lambda: svc.merge_entity("encA", {**base, "Plain": "y"}))
    step("insert or merge", lambda: svc.insert_or_merge_entity("encA", {**base, "Plain": "y"}))
    step("an int chosen", lambda: svc.insert_entity("encA", {**base, "Secret": 5}))
    step("a None chosen", lambda: svc.insert_entity("encA", {**base, "Secret": None}))
    step("an Int32 flagged", lambda: svc.insert_entity("encA", {**base, "X": EP(Edm.INT32, 1, encrypt=True)}))
    step("a typeless property flagged", lambda: svc.insert_entity("encA", {**base, "X": EP(value="v", encrypt=True)}))
    step("a bad value besides a bad choice", lambda: svc.insert_entity("encA", {**base, "Secret": 1, "B": b"x"}))
    step("251 properties", lambda: svc.insert_entity("encA", {**base, **{f"P{i}": i for i in range(251)}}))
    step.etag("250 properties", lambda: svc.insert_entity("encA", {**base, **{f"P{i}": i for i in range(250)}}))
    step("a key that cannot wrap", lambda: service(key_encryption_key=NoWrap()).insert_entity("encA", base))
    step.etag("insert without a key", lambda: service().insert_entity(
        "encA", {"PartitionKey": "p", "RowKey": "clear", "Secret": "not encrypted"}))

    # batches
    def batch_block() -> None:
        with svc.batch("encA") as batch:
            batch.insert_entity({"PartitionKey": "p", "RowKey": "b1", "Secret": "in a batch"})
            batch.insert_or_replace_entity({"PartitionKey": "p", "RowKey": "b2", "Also": "also in a batch", "M": 1.5})
            batch.update_entity({"PartitionKey": "p", "RowKey": "r3", "Secret": "replaced in a batch"})

    step("batch", batch_block)
    step("batch merge", lambda: svc.batch("encA").__enter__().merge_entity({"PartitionKey": "p", "RowKey": "b1"}))
    step("batch, an int chosen", lambda: api.TableBatch(key_encryption_key=kek, encryption_resolver=lambda *a: True)
         .insert_entity({"PartitionKey": "p", "RowKey": "b3", "N": 1}))

    # reading: pages, markers, select, filter
    step("query all", lambda: shown_pages(svc.query_entities("encA")), as_is)
    page = step("query 2", lambda: svc.query_entities("encA", num_results=2), shown_pages)
    if page is not None:
        step("query from marker", lambda: shown_pages(svc.query_entities("encA", num_results=3, marker=page.next_marker)), as_is)
    step("query, select", lambda: shown_pages(svc.query_entities("encA", select="PartitionKey,RowKey,Secret")), as_is)
    step("query, select *", lambda: shown_pages(svc.query_entities("encA", select="*", filter="RowKey eq 'r2'")), as_is)
    step("query, filter on a plain property", lambda: shown_pages(svc.query_entities("encA", filter="Plain eq 'changed'")), as_is)
    step("query, no metadata", lambda: shown_pages(svc.query_entities(
        "encA", filter="RowKey le 'r2'", accept=api.TablePayloadFormat.JSON_NO_METADATA)))

    # other keys
    step("resolver", lambda: shown_pages(service(key_resolver_function=resolver_of(other, kek)).query_entities("encA")), as_is)
    step("resolver and a wrong key", lambda: service(
        key_resolver_function=resolver_of(kek), key_encryption_key=other).get_entity("encA", "p", "r1"), shown)
    step("wrong key", lambda: service(key_encryption_key=other).get_entity("encA", "p", "r1"))
    step("wrong key bytes", lambda: service(key_encryption_key=KeyWrapper(kek.kid, bytes(32))).get_entity(
        "encA", "p", "r1"))
    step("wrong key, query", lambda: shown_pages(service(key_encryption_key=other).query_entities("encA")), as_is)
    step("resolver without the key", lambda: service(key_resolver_function=resolver_of(other)).get_entity(
        "encA", "p", "r1"))
    step("resolver raising", lambda: service(key_resolver_function=lambda kid: 1 / 0).get_entity("encA", "p", "r1"))
    step("a key that cannot unwrap", lambda: service(key_encryption_key=type("K", (), {"get_kid": lambda self: kek.kid})())
         .get_entity("encA", "p", "r1"))
    step("wrong key, a plain table read", lambda: service(key_encryption_key=other).get_entity("encA", "p", "clear"),
         shown)

    # no key: what is stored
    plain = service()
    stored = step("no key", lambda: plain.get_entity("encA", "p", "r1"), shown)
    step("no key, query", lambda: shown_pages(plain.query_entities("encA", filter="RowKey ge 'r'")), as_is)
    if stored is not None:
        step("write back what was read without a key", lambda: svc.insert_or_replace_entity("encA", stored))
        step("write it back without a key", lambda: plain.insert_or_replace_entity("encA", stored), lambda _: "ok")
        step("read it back", lambda: svc.get_entity("encA", "p", "r1"), shown)

    # require_encryption
    required = service(key_encryption_key=kek, require_encryption=True)
    step("required, encrypted entity", lambda: required.get_entity("encA", "p", "r2"), shown)
    step("required, plain entity", lambda: required.get_entity("encA", "p", "clear"))
    step("required, query over both", lambda: shown_pages(required.query_entities("encA")), as_is)
    step("required, query of encrypted ones", lambda: shown_pages(required.query_entities("encA", filter="RowKey eq 'r2'")), as_is)
    step.etag("required, nothing chosen", lambda: required.insert_entity("encA", {"PartitionKey": "p", "RowKey": "r4"}))
    step("required, read it", lambda: required.get_entity("encA", "p", "r4"), shown)
    step("required, merge", lambda: required.merge_entity("encA", {"PartitionKey": "p", "RowKey": "r4"}))
    keyless = service(require_encryption=True)
    step("required without a key, insert", lambda: keyless.insert_entity("encA", {"PartitionKey": "p", "RowKey": "r5"}))
    step("required without a key, read", lambda: keyless.get_entity("encA", "p", "r2"))
    step("required with a resolver, read", lambda: service(
        require_encryption=True, key_resolver_function=resolver_of(kek)).get_entity("encA", "p", "r2"), shown)
    step("required with a resolver, write", lambda: service(
        require_encryption=True, key_resolver_function=resolver_of(kek)).insert_entity("encA", {"PartitionKey": "p",
                                                                                                 "RowKey": "r6"}))


def run(api: Api) -> Trace:
    logging.getLogger("azure").setLevel(logging.CRITICAL + 1)
    with DevStore(port=0, page_size=3) as store:
        step = Recorder()
        encrypted_script(api, store.connection_string, step)
        return step.trace


@pytest.fixture(scope="module")
def old_trace() -> Trace:
    return run(old_api())


@pytest.fixture(scope="module")
def new_trace() -> Trace:
    return run(new_api())


def test_the_encrypted_script_gives_the_same_outcomes_step_by_step(old_trace: Trace, new_trace: Trace) -> None:
    assert [name for name, _ in new_trace] == [name for name, _ in old_trace]
    for (name, old), (_, new) in zip(old_trace, new_trace):
        assert new == old, f"step {name!r}: azure-cosmosdb-table gave {old!r}, tablesdk.legacy gave {new!r}"


def test_the_encrypted_script_exercises_successes_and_failures(old_trace: Trace) -> None:
    outcomes = dict(old_trace)
    slips = [name for name, outcome in old_trace if isinstance(outcome, tuple) and outcome[:2] in (
        ("raised", "NameError"), ("raised", "UnboundLocalError"), ("raised", "KeyError"))]
    assert slips == [], "steps broken by the script itself"
    decryption_failed = ("raised", "AzureException", None, None, "Decryption failed")
    assert outcomes["wrong key"] == decryption_failed and outcomes["required, plain entity"] == decryption_failed
    assert outcomes["merge"][:2] == ("raised", "ValueError")
    assert ("Secret", ("str", "first secret")) in outcomes["get"][1]
    no_key = {item[0]: item[1] for item in outcomes["no key"][1]}
    assert no_key["Secret"][:2] == ("EntityProperty", "Edm.Binary") and METADATA_KEY in no_key
    items, marker = outcomes["query 2"]
    assert len(items) == 2 and marker[0] == "dict"


def test_where_tablesdk_deliberately_differs() -> None:
    """A read with a key decrypts whatever the ``select``: the old package left the metadata out of
    ``get_entity``'s select (returning the ciphertext as a Binary property) and could not decrypt a
    query whose select left out PartitionKey or RowKey."""
    outcomes = []
    for api in (old_api(), new_api()):
        logging.getLogger("azure").setLevel(logging.CRITICAL + 1)
        with DevStore(port=0) as store:
            svc = api.TableService(connection_string=store.connection_string)
            svc.retry = api.no_retry
            svc.create_table("encA")
            svc.key_encryption_key = KeyWrapper()
            svc.insert_entity("encA", {"PartitionKey": "p", "RowKey": "r", "Secret": api.EntityProperty(
                api.EdmType.STRING, "text", encrypt=True)})
            step = Recorder()
            step("get, select", lambda: svc.get_entity("encA", "p", "r", select="Secret"), shown)
            step("query, select", lambda: shown_pages(svc.query_entities("encA", select="RowKey,Secret")), as_is)
            outcomes.append(dict(step.trace))
    old, new = outcomes
    assert old["get, select"] == ("Entity", [("Secret", ("EntityProperty", "Edm.Binary", ("bytes", 16))),
                                             ("etag", ("etag", True, True))])
    assert new["get, select"][1][0] == ("Secret", ("str", "text"))
    assert old["query, select"] == ("raised", "AzureException", None, None, "Decryption failed")
    assert new["query, select"][0][0][1][:2] == [("RowKey", ("str", "r")), ("Secret", ("str", "text"))]
