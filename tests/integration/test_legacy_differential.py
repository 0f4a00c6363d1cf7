"""Differential test: one script written for ``azure-cosmosdb-table`` 1.0.6, run with the old
package and with ``tablesdk.legacy``, each against a fresh bundled emulator, prints the same
outcomes step by step. (Not against Azurite: it answers the old package's batches 500.)

The script (:func:`legacy_script`) takes the module's names as an :class:`Api` and covers every
call of the old surface: the service's constructors, tables (create with and without
``fail_on_exist``, exists, list with ``num_results`` and ``marker``, delete with and without
``fail_not_exist``), every entity write with ``if_match`` (current, stale, ``*``), reads with
``select``, ``accept`` and a ``property_resolver``, every property type (a Python ``int`` is
written as Int64; ``uuid`` and ``bytes`` need an ``EntityProperty``), queries with ``filter``,
``select``, ``num_results`` and ``marker`` over pages of the emulator, batches (committed by the
``with`` block, by ``commit_batch``, one failing operation, the client-side checks), table ACLs,
table and account SAS round trips, and the failures (missing table or entity, duplicate insert,
If-Match mismatch, forbidden SAS operations) as exception class names, status codes and error codes.

ETags and Timestamps differ between runs, so a step records their shape (an ETag's form, and
whether the ETag a read gives equals the one the write returned) rather than their value.
"""

from __future__ import annotations

import itertools
import logging
import math
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

Trace = list[tuple[str, Any]]


@dataclass
class Api:
    """The names a script imports from the old package (or from tablesdk.legacy)."""

    module: types.SimpleNamespace

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


def old_api() -> Api:
    import azure.common as common
    import azure.cosmosdb.table as table
    import azure.cosmosdb.table.common.models as common_models
    from azure.cosmosdb.table.common.retry import no_retry

    return Api(types.SimpleNamespace(
        TableService=table.TableService, TableBatch=table.TableBatch, Entity=table.Entity,
        EntityProperty=table.EntityProperty, EdmType=table.EdmType, TablePermissions=table.TablePermissions,
        TablePayloadFormat=table.TablePayloadFormat, AccessPolicy=common_models.AccessPolicy,
        ResourceTypes=common_models.ResourceTypes, AccountPermissions=common_models.AccountPermissions,
        AzureException=common.AzureException, AzureHttpError=common.AzureHttpError,
        AzureMissingResourceHttpError=common.AzureMissingResourceHttpError,
        AzureConflictHttpError=common.AzureConflictHttpError,
        AzureBatchOperationError=table.AzureBatchOperationError,
        AzureBatchValidationError=table.AzureBatchValidationError, Logging=common_models.Logging,
        Metrics=common_models.Metrics, RetentionPolicy=common_models.RetentionPolicy, CorsRule=common_models.CorsRule,
        no_retry=no_retry,
    ))


def new_api() -> Api:
    import tablesdk.legacy as legacy

    return Api(types.SimpleNamespace(**{name: getattr(legacy, name) for name in legacy.__all__}))


# ---------------------------------------------------------------- describing outcomes

def _etag_shape(etag: Any) -> Any:
    if not isinstance(etag, str):
        return ("etag", type(etag).__name__)
    return ("etag", etag.startswith("W/\"datetime'"), etag.endswith("'\""))


def describe(value: Any) -> Any:
    """What a caller observes of ``value``, with the per-run parts (ETag, Timestamp) reduced to their shape."""
    if isinstance(value, dict):
        out = []
        for name in sorted(value):
            item = value[name]
            if name == "etag":
                out.append((name, _etag_shape(item)))
            elif name == "Timestamp":
                out.append((name, type(item).__name__, item.utcoffset() if isinstance(item, datetime) else None))
            else:
                out.append((name, describe(item)))
        return ("Entity" if type(value).__name__ == "Entity" else "dict", out)
    if type(value).__name__ == "EntityProperty":
        return ("EntityProperty", value.type, describe(value.value))
    if type(value).__name__ == "Table":
        return ("Table", value.name)
    if type(value).__name__ == "AccessPolicy":
        return ("AccessPolicy", value.permission, describe(value.start), describe(value.expiry))
    if isinstance(value, datetime):
        return ("datetime", value.astimezone(timezone.utc).isoformat() if value.tzinfo else value.isoformat(),
                value.utcoffset())
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, (list, tuple)):
        return [describe(item) for item in value]
    return (type(value).__name__, value)


def describe_properties(props: Any) -> Any:
    def policy(value: Any) -> Any:
        return (value.enabled, value.days)

    def metrics(value: Any) -> Any:
        return None if value is None else (value.version, value.enabled, value.include_apis, policy(value.retention_policy))

    logging = props.logging
    return (
        None if logging is None else (logging.version, logging.delete, logging.read, logging.write,
                                      policy(logging.retention_policy)),
        metrics(props.hour_metrics), metrics(props.minute_metrics),
        None if props.cors is None else [
            (rule.allowed_origins, rule.allowed_methods, rule.max_age_in_seconds, rule.exposed_headers,
             rule.allowed_headers) for rule in props.cors
        ],
    )


def error_of(error: BaseException) -> tuple[Any, ...]:
    """An error's class, status and service code; for an error raised before sending, its message too."""
    status = getattr(error, "status_code", None)
    return (
        "raised", type(error).__name__, status, getattr(error, "error_code", None) or getattr(error, "code", None),
        str(error) if status is None else None,
    )


class Recorder:
    """Runs the script's steps and records each outcome under its name."""

    def __init__(self) -> None:
        self.trace: Trace = []
        self.etags: dict[str, Any] = {}

    def __call__(self, name: str, action: Callable[[], Any], shape: Callable[[Any], Any] = describe) -> Any:
        try:
            result = action()
        except Exception as error:  # noqa: BLE001 - every outcome is recorded, the comparison judges it
            self.trace.append((name, error_of(error)))
            return None
        self.trace.append((name, shape(result)))
        return result

    def etag(self, name: str, action: Callable[[], Any]) -> Any:
        """A write that returns an ETag: record its shape and keep it under ``name``."""
        etag = self(name, action, _etag_shape)
        self.etags[name] = etag
        return etag

    def same_etag(self, name: str, entity: Any, write: str) -> None:
        """Whether an entity read carries the ETag that ``write`` returned."""
        self.trace.append((name, entity is not None and entity.get("etag") == self.etags.get(write)))


def pages(generator: Any) -> tuple[Any, ...]:
    """A query's items and its marker after iterating."""
    items = list(generator)
    return (describe(items), describe(generator.next_marker))


# ---------------------------------------------------------------- the script

def legacy_script(api: Api, connection_string: str, step: Recorder) -> None:  # noqa: PLR0915 - one script
    EP, Edm = api.EntityProperty, api.EdmType
    svc = api.TableService(connection_string=connection_string)
    svc.retry = api.no_retry  # the old package's default policy retries a refused batch for about a minute

    # tables
    step("create", lambda: svc.create_table("legacyA"))
    step("create again", lambda: svc.create_table("legacyA"))
    step("create again, fail_on_exist", lambda: svc.create_table("legacyA", fail_on_exist=True))
    step("create none", lambda: svc.create_table(None))
    for name in ("legacyB", "legacyC", "legacyD"):
        step(f"create {name}", lambda name=name: svc.create_table(name))
    step("exists", lambda: svc.exists("legacyA"))
    step("exists missing", lambda: svc.exists("legacyMissing"))
    step("list tables", lambda: pages(svc.list_tables()))
    first = step("list tables, 2", lambda: svc.list_tables(num_results=2), lambda g: pages(g))
    if first is not None:
        step("list tables from marker", lambda: pages(svc.list_tables(marker=first.next_marker)))
        step("list tables from marker, 1", lambda: pages(svc.list_tables(num_results=1, marker=first.next_marker)))

    # every property type
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    typed = {
        "PartitionKey": "pk", "RowKey": "types",
        "Small": 7, "Big": 2**40, "Negative": -3, "Ratio": 0.25, "Whole": 3.0, "Flag": True, "Off": False,
        "Text": "héllo 'quoted'", "Empty": "", "When": when, "Naive": datetime(2020, 1, 2, 3, 4, 5, 678),
        "Nothing": None,
        "I32": EP(Edm.INT32, 12), "I64": EP(Edm.INT64, 5), "I64Text": EP(Edm.INT64, "99"),
        "Dbl": EP(Edm.DOUBLE, 1.5), "NotANumber": EP(Edm.DOUBLE, float("nan")), "Inf": EP(Edm.DOUBLE, float("inf")),
        "Id": EP(Edm.GUID, uuid.UUID("12345678-1234-5678-1234-567812345678")),
        "IdText": EP(Edm.GUID, "87654321-4321-8765-4321-876543218765"),
        "Blob": EP(Edm.BINARY, b"\x00\x01binary\xff"), "BlobText": EP(Edm.BINARY, "text as bytes"),
        "Str": EP(Edm.STRING, "typed text"), "Bool": EP(Edm.BOOLEAN, True), "DT": EP(Edm.DATETIME, when),
    }
    step.etag("insert typed", lambda: svc.insert_entity("legacyA", typed))
    got = step("get typed", lambda: svc.get_entity("legacyA", "pk", "types"))
    step.same_etag("get typed etag", got, "insert typed")
    if got is not None:
        step("entity attributes", lambda: (got.PartitionKey, got.RowKey, describe(got.Small), describe(got.I32)))
        step("entity missing attribute", lambda: got.NoSuchProperty)
    step("get typed, select", lambda: svc.get_entity("legacyA", "pk", "types", select="Small,I32,Missing"))
    step("get typed, no metadata", lambda: svc.get_entity(
        "legacyA", "pk", "types", accept=api.TablePayloadFormat.JSON_NO_METADATA))
    step("get typed, full metadata", lambda: svc.get_entity(
        "legacyA", "pk", "types", accept=api.TablePayloadFormat.JSON_FULL_METADATA))

    def resolver(pk: str, rk: str, name: str, value: Any, edm: Any) -> Any:
        return {"Big": Edm.INT64, "Small": Edm.INT64, "Id": Edm.GUID, "When": Edm.DATETIME,
                "Blob": Edm.BINARY, "Ratio": Edm.DOUBLE, "Text": Edm.STRING}.get(name, edm)

    step("get typed, resolver, no metadata", lambda: svc.get_entity(
        "legacyA", "pk", "types", accept=api.TablePayloadFormat.JSON_NO_METADATA, property_resolver=resolver))
    step("get typed, resolver", lambda: svc.get_entity("legacyA", "pk", "types", property_resolver=resolver))
    step("get typed, bad resolver", lambda: svc.get_entity(
        "legacyA", "pk", "types", property_resolver=lambda *args: "Edm.Nothing"))
    step("get typed, resolver refusing a value", lambda: svc.get_entity(
        "legacyA", "pk", "types", property_resolver=lambda pk, rk, name, value, edm: Edm.INT64))

    # values the old package refuses before sending
    base = {"PartitionKey": "pk", "RowKey": "bad"}
    step("plain uuid", lambda: svc.insert_entity("legacyA", {**base, "Id": uuid.uuid4()}))
    step("plain bytes", lambda: svc.insert_entity("legacyA", {**base, "Blob": b"x"}))
    step("int32 too large", lambda: svc.insert_entity("legacyA", {**base, "N": EP(Edm.INT32, 2**31)}))
    step("int64 too large", lambda: svc.insert_entity("legacyA", {**base, "N": EP(Edm.INT64, 2**63)}))
    step("unknown EDM type", lambda: svc.insert_entity("legacyA", {**base, "N": EP("Edm.Decimal", 1)}))
    step("no RowKey", lambda: svc.insert_entity("legacyA", {"PartitionKey": "pk"}))
    step("not a dict", lambda: svc.insert_entity("legacyA", ["pk", "rk"]))
    step("None entity", lambda: svc.insert_entity("legacyA", None))
    step("too many properties", lambda: svc.insert_entity(
        "legacyA", {**base, **{f"P{i}": i for i in range(254)}}))

    # keys and values at the edges
    step.etag("empty keys", lambda: svc.insert_entity("legacyA", {"PartitionKey": "", "RowKey": ""}))
    step("get empty keys", lambda: svc.get_entity("legacyA", "", ""))
    step.etag("quote and space in keys", lambda: svc.insert_entity("legacyA", {"PartitionKey": "it's", "RowKey": "a b"}))
    step("get quote and space", lambda: svc.get_entity("legacyA", "it's", "a b", timeout=5))
    step.etag("double given an int", lambda: svc.insert_entity(
        "legacyA", {"PartitionKey": "edge", "RowKey": "d", "D": EP(Edm.DOUBLE, 5), "B": EP(Edm.BOOLEAN, "true")}))
    step("get double given an int", lambda: svc.get_entity("legacyA", "edge", "d"))
    step("no EDM type", lambda: svc.insert_entity("legacyA", {"PartitionKey": "edge", "RowKey": "n", "X": EP(None, 1)}))

    # writes and their conditions
    entity = api.Entity()
    entity.PartitionKey, entity.RowKey, entity.Rating, entity.Title = "pk", "e1", 3, "first"
    step.etag("insert", lambda: svc.insert_entity("legacyA", entity))
    step("insert duplicate", lambda: svc.insert_entity("legacyA", entity))
    step("insert into missing table", lambda: svc.insert_entity("legacyMissing", entity))
    entity.Rating = 4
    step.etag("update if-match current", lambda: svc.update_entity("legacyA", entity, if_match=step.etags["insert"]))
    step("update if-match stale", lambda: svc.update_entity("legacyA", entity, if_match=step.etags["insert"]))
    step("update if-match None", lambda: svc.update_entity("legacyA", entity, if_match=None))
    step("update missing entity", lambda: svc.update_entity("legacyA", {"PartitionKey": "pk", "RowKey": "nope"}))
    step.etag("merge", lambda: svc.merge_entity("legacyA", {"PartitionKey": "pk", "RowKey": "e1", "Extra": 1.5},
                                                if_match=step.etags["update if-match current"]))
    step("merge stale", lambda: svc.merge_entity("legacyA", {"PartitionKey": "pk", "RowKey": "e1", "X": 1},
                                                 if_match=step.etags["insert"]))
    step("merge missing entity", lambda: svc.merge_entity("legacyA", {"PartitionKey": "pk", "RowKey": "nope"}))
    got = step("get after merge", lambda: svc.get_entity("legacyA", "pk", "e1"))
    step.same_etag("get after merge etag", got, "merge")
    if got is not None:
        got.Title = "read, changed and written back"
        step.etag("update what was read", lambda: svc.update_entity("legacyA", got))
        step("get after update", lambda: svc.get_entity("legacyA", "pk", "e1"))
    step.etag("insert or replace", lambda: svc.insert_or_replace_entity(
        "legacyA", {"PartitionKey": "pk", "RowKey": "e2", "A": "a", "B": 2}))
    step.etag("insert or replace again", lambda: svc.insert_or_replace_entity(
        "legacyA", {"PartitionKey": "pk", "RowKey": "e2", "C": True}))
    step("get after replace", lambda: svc.get_entity("legacyA", "pk", "e2"))
    step.etag("insert or merge", lambda: svc.insert_or_merge_entity(
        "legacyA", {"PartitionKey": "pk", "RowKey": "e2", "D": "d"}))
    step.etag("insert or merge new", lambda: svc.insert_or_merge_entity(
        "legacyA", {"PartitionKey": "pk", "RowKey": "e3", "D": "d"}))
    step("get after merge upserts", lambda: [svc.get_entity("legacyA", "pk", rk) for rk in ("e2", "e3")])
    step("delete stale", lambda: svc.delete_entity("legacyA", "pk", "e2", if_match=step.etags["insert or replace"]))
    step("delete current", lambda: svc.delete_entity(
        "legacyA", "pk", "e2", if_match=step.etags["insert or merge"]))
    step("delete again", lambda: svc.delete_entity("legacyA", "pk", "e2"))
    step("delete, any", lambda: svc.delete_entity("legacyA", "pk", "e3"))
    step("delete in missing table", lambda: svc.delete_entity("legacyMissing", "pk", "e3"))
    step("get missing entity", lambda: svc.get_entity("legacyA", "pk", "e2"))
    step("get in missing table", lambda: svc.get_entity("legacyMissing", "pk", "e2"))
    step("get with None key", lambda: svc.get_entity("legacyA", None, "e2"))

    # queries and their pages (the emulator pages at 5)
    for partition, row in itertools.product(("q1", "q2"), range(7)):
        step(f"fill {partition}/{row}", lambda p=partition, r=row: svc.insert_entity(
            "legacyB", {"PartitionKey": p, "RowKey": f"r{r:02d}", "N": r, "Even": r % 2 == 0}), lambda _: "ok")
    step("query all", lambda: pages(svc.query_entities("legacyB")))
    step("query filter", lambda: pages(svc.query_entities("legacyB", filter="PartitionKey eq 'q2' and N ge 3")))
    step("query select", lambda: pages(svc.query_entities("legacyB", filter="Even eq true", select="RowKey,N")))
    step("query select *", lambda: pages(svc.query_entities("legacyB", filter="N eq 1", select="*")))
    first_page = step("query 4", lambda: svc.query_entities("legacyB", num_results=4), pages)
    if first_page is not None:
        marker = first_page.next_marker
        step("marker", lambda: describe(marker))
        second = step("query 4 from marker", lambda: svc.query_entities("legacyB", num_results=4, marker=marker), pages)
        if second is not None:
            step("query rest from marker", lambda: pages(svc.query_entities("legacyB", marker=second.next_marker)))
    step("query 6 across pages", lambda: pages(svc.query_entities("legacyB", num_results=6)))
    step("query no metadata", lambda: pages(svc.query_entities(
        "legacyB", filter="RowKey eq 'r01'", accept=api.TablePayloadFormat.JSON_NO_METADATA)))
    step("query resolver", lambda: pages(svc.query_entities(
        "legacyB", filter="RowKey eq 'r01'", accept=api.TablePayloadFormat.JSON_NO_METADATA,
        property_resolver=lambda pk, rk, name, value, edm: Edm.INT64 if name == "N" else edm)))
    step("query empty", lambda: pages(svc.query_entities("legacyB", filter="N gt 100")))
    step("query missing table", lambda: svc.query_entities("legacyMissing"))
    step("query bad filter", lambda: svc.query_entities("legacyB", filter="N eq eq"))
    step("query items before iterating", lambda: describe(svc.query_entities("legacyB", num_results=2).items))

    # batches
    with svc.batch("legacyC") as batch:
        batch.insert_entity({"PartitionKey": "b", "RowKey": "1", "V": 1})
        batch.insert_entity({"PartitionKey": "b", "RowKey": "2", "V": 2})
        batch.insert_or_replace_entity({"PartitionKey": "b", "RowKey": "3", "V": 3})
        batch.insert_or_merge_entity({"PartitionKey": "b", "RowKey": "4", "V": 4})
    step("batch with block", lambda: pages(svc.query_entities("legacyC")))
    explicit = api.TableBatch()
    explicit.update_entity({"PartitionKey": "b", "RowKey": "1", "V": 10})
    explicit.merge_entity({"PartitionKey": "b", "RowKey": "2", "W": 20})
    explicit.delete_entity("b", "3")
    explicit.insert_entity({"PartitionKey": "b", "RowKey": "5", "V": EP(Edm.INT32, 5)})
    step("commit batch", lambda: svc.commit_batch("legacyC", explicit), lambda etags: [_etag_shape(e) for e in etags])
    step("after commit", lambda: pages(svc.query_entities("legacyC")))
    failing = api.TableBatch()
    failing.insert_entity({"PartitionKey": "b", "RowKey": "6", "V": 6})
    failing.insert_entity({"PartitionKey": "b", "RowKey": "1", "V": 1})
    step("batch with a duplicate insert", lambda: svc.commit_batch("legacyC", failing))
    step("nothing of the failed batch", lambda: svc.get_entity("legacyC", "b", "6"))
    stale = api.TableBatch()
    stale.update_entity({"PartitionKey": "b", "RowKey": "1", "V": 0}, if_match='W/"datetime\'2001-01-01T00%3A00%3A00Z\'"')
    step("batch with a stale if-match", lambda: svc.commit_batch("legacyC", stale))
    gone = api.TableBatch()
    gone.delete_entity("b", "nope")
    step("batch deleting a missing entity", lambda: svc.commit_batch("legacyC", gone))
    step("batch on a missing table", lambda: svc.commit_batch("legacyMissing", explicit))

    def other_partition() -> None:
        batch = api.TableBatch()
        batch.insert_entity({"PartitionKey": "b", "RowKey": "7"})
        batch.insert_entity({"PartitionKey": "c", "RowKey": "8"})

    def same_row() -> None:
        batch = api.TableBatch()
        batch.insert_entity({"PartitionKey": "b", "RowKey": "7"})
        batch.delete_entity("b", "7")

    def too_many() -> None:
        batch = api.TableBatch()
        for i in range(101):
            batch.insert_entity({"PartitionKey": "b", "RowKey": f"m{i}"})

    def block_raises() -> None:
        with svc.batch("legacyC") as batch:
            batch.insert_entity({"PartitionKey": "b", "RowKey": "never"})
            raise KeyError("in the block")

    step("batch, two partitions", other_partition)
    step("batch, same row twice", same_row)
    step("batch, 101 operations", too_many)
    step("batch, bad value", lambda: api.TableBatch().insert_entity({"PartitionKey": "b", "RowKey": "x", "U": b""}))
    step("batch block raising", block_raises)
    step("nothing of the raising block", lambda: svc.get_entity("legacyC", "b", "never"))

    # access policies and shared access signatures
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    expiry = datetime(2099, 1, 1, 12, 30, 15, 999, tzinfo=timezone.utc)
    step("acl empty", lambda: svc.get_table_acl("legacyB"))
    step("set acl", lambda: svc.set_table_acl("legacyB", {
        "reader": api.AccessPolicy(api.TablePermissions.QUERY, expiry, start),
        "writer": api.AccessPolicy(permission="ad", expiry="2099-01-01T00:00:00Z"),
    }))
    step("get acl", lambda: svc.get_table_acl("legacyB"))
    step("set too many", lambda: svc.set_table_acl("legacyB", {str(i): api.AccessPolicy("r") for i in range(6)}))
    step("acl of missing table", lambda: svc.get_table_acl("legacyMissing"))
    endpoint = [part for part in connection_string.split(";") if part.startswith("TableEndpoint=")][0]

    def with_sas(token: str) -> Any:
        service = api.TableService(connection_string=f"{endpoint};SharedAccessSignature={token}")
        service.retry = api.no_retry
        return service

    table_sas = step("table sas", lambda: svc.generate_table_shared_access_signature(
        "legacyB", api.TablePermissions.QUERY | api.TablePermissions.ADD, expiry), lambda token: "token")
    if table_sas:
        reader = with_sas(table_sas)
        step("sas query", lambda: pages(reader.query_entities("legacyB", filter="RowKey eq 'r03'")))
        step("sas add", lambda: reader.insert_entity("legacyB", {"PartitionKey": "s", "RowKey": "1"}), _etag_shape)
        step("sas delete refused", lambda: reader.delete_entity("legacyB", "s", "1"))
        step("sas other table refused", lambda: pages(reader.query_entities("legacyC")))
    ranged = step("ranged sas", lambda: svc.generate_table_shared_access_signature(
        "legacyB", "r", expiry, start_pk="q2", start_rk="r00", end_pk="q2", end_rk="r99"), lambda token: "token")
    if ranged:
        step("ranged sas inside", lambda: describe(with_sas(ranged).get_entity("legacyB", "q2", "r01")))
        step("ranged sas outside", lambda: with_sas(ranged).get_entity("legacyB", "q1", "r01"))
    by_policy = step("policy sas", lambda: svc.generate_table_shared_access_signature("legacyB", id="reader"),
                     lambda token: "token")
    if by_policy:
        step("policy sas query", lambda: describe(with_sas(by_policy).get_entity("legacyB", "q1", "r02")))
        step("policy sas add refused", lambda: with_sas(by_policy).insert_entity(
            "legacyB", {"PartitionKey": "s", "RowKey": "2"}))
    account_sas = step("account sas", lambda: svc.generate_account_shared_access_signature(
        api.ResourceTypes.CONTAINER | api.ResourceTypes.OBJECT, api.AccountPermissions.READ | api.AccountPermissions.LIST,
        expiry), lambda token: "token")
    if account_sas:
        step("account sas list", lambda: pages(with_sas(account_sas).list_tables()))
        step("account sas read", lambda: describe(with_sas(account_sas).get_entity("legacyB", "q1", "r04")))
        step("account sas write refused", lambda: with_sas(account_sas).insert_entity(
            "legacyB", {"PartitionKey": "s", "RowKey": "3"}))
    step("sas without key", lambda: with_sas("sv=2017-04-17&sig=x").generate_table_shared_access_signature(
        "legacyB", "r", expiry))

    # service properties (the old package reads its stats from a -secondary host name: not run here)
    props = svc.get_table_service_properties()
    step("service properties", lambda: describe_properties(props))
    step("set service properties", lambda: svc.set_table_service_properties(
        logging=api.Logging(delete=True, write=True, retention_policy=api.RetentionPolicy(True, 5)),
        hour_metrics=api.Metrics(True, True, api.RetentionPolicy(True, 7)),
        minute_metrics=api.Metrics(False),
        cors=[api.CorsRule(["https://a.example"], ["GET", "PUT"], 60, ["x-ms-*"], ["x-custom"])]))
    step("service properties after", lambda: describe_properties(svc.get_table_service_properties()))
    step("set cors only", lambda: svc.set_table_service_properties(cors=[]))
    step("service properties at the end", lambda: describe_properties(svc.get_table_service_properties()))
    step("metrics without include_apis", lambda: api.Metrics(True))

    # construction
    step("no credentials", lambda: api.TableService(account_name="acct"))
    step("nothing", lambda: api.TableService())
    remote = api.TableService("acct", "a2V5", endpoint_suffix="core.chinacloudapi.cn", protocol="http")
    step("endpoint", lambda: (remote.primary_endpoint, remote.secondary_endpoint, remote.protocol))
    emulated = api.TableService(is_emulated=True)
    step("emulated", lambda: (emulated.account_name, emulated.primary_endpoint, emulated.protocol,
                              emulated.is_emulated))
    step("encryption attributes", lambda: (svc.require_encryption, svc.key_encryption_key, svc.key_resolver_function,
                                           svc.encryption_resolver_function))

    # require_encryption without a key
    svc.require_encryption = True
    step("require encryption, insert", lambda: svc.insert_entity("legacyA", {"PartitionKey": "x", "RowKey": "y"}))
    step("require encryption, merge", lambda: svc.merge_entity("legacyA", {"PartitionKey": "x", "RowKey": "y"}))
    step("require encryption, read", lambda: svc.get_entity("legacyA", "pk", "e1"))
    step("require encryption, empty query", lambda: pages(svc.query_entities("legacyB", filter="N gt 100")))
    step("require encryption, batch", lambda: api.TableBatch(require_encryption=True).insert_entity(
        {"PartitionKey": "x", "RowKey": "y"}))
    svc.require_encryption = False

    # deleting tables
    step("delete table", lambda: svc.delete_table("legacyD"))
    step("delete table again", lambda: svc.delete_table("legacyD"))
    step("delete table again, fail_not_exist", lambda: svc.delete_table("legacyD", fail_not_exist=True))
    step("tables at the end", lambda: pages(svc.list_tables()))


def run(api: Api) -> Trace:
    logging.getLogger("azure").setLevel(logging.CRITICAL + 1)  # the old package logs every failure as an error
    with DevStore(port=0, page_size=5) as store:
        step = Recorder()
        legacy_script(api, store.connection_string, step)
        return step.trace


@pytest.fixture(scope="module")
def old_trace() -> Trace:
    return run(old_api())


@pytest.fixture(scope="module")
def new_trace() -> Trace:
    return run(new_api())


def test_the_script_gives_the_same_outcomes_step_by_step(old_trace: Trace, new_trace: Trace) -> None:
    assert [name for name, _ in new_trace] == [name for name, _ in old_trace]
    for (name, old), (_, new) in zip(old_trace, new_trace):
        assert new == old, f"step {name!r}: azure-cosmosdb-table gave {old!r}, tablesdk.legacy gave {new!r}"


def test_the_script_exercises_successes_and_failures(old_trace: Trace) -> None:
    outcomes = dict(old_trace)
    slips = [name for name, outcome in old_trace if isinstance(outcome, tuple) and outcome[:2] in (
        ("raised", "NameError"), ("raised", "UnboundLocalError"))]
    assert slips == [], "steps broken by the script itself"
    assert outcomes["create"] == ("bool", True)
    assert outcomes["insert duplicate"][:3] == ("raised", "AzureConflictHttpError", 409)
    assert outcomes["update if-match stale"][:3] == ("raised", "AzureHttpError", 412)
    assert outcomes["get missing entity"][:3] == ("raised", "AzureMissingResourceHttpError", 404)
    assert outcomes["batch with a duplicate insert"][:3] == ("raised", "AzureBatchOperationError", 409)
    assert outcomes["sas delete refused"][:3] == ("raised", "AzureHttpError", 403)
    assert outcomes["plain uuid"][1] == "TypeError"
    items, marker = outcomes["query 4"]
    assert len(items) == 4 and marker[0] == "dict"


#: Requests the service answers 400 and tablesdk refuses before sending: both raise an AzureHttpError with status 400.
REFUSED: dict[str, Callable[[Any, Any], Any]] = {
    "invalid table name": lambda api, svc: svc.create_table("1bad"),
    "slash in a key": lambda api, svc: svc.insert_entity("legacyA", {"PartitionKey": "a/b", "RowKey": "r"}),
    "key that is not a string": lambda api, svc: svc.insert_entity("legacyA", {"PartitionKey": 5, "RowKey": "r"}),
    "property name that is not an identifier": lambda api, svc: svc.insert_entity(
        "legacyA", {"PartitionKey": "p", "RowKey": "r", "a b": 1}),
    "empty batch": lambda api, svc: svc.commit_batch("legacyA", api.TableBatch()),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_service_refuses_is_an_http_400_both_ways(case: str) -> None:
    outcomes = []
    for api in (old_api(), new_api()):
        with DevStore(port=0) as store:
            svc = api.TableService(connection_string=store.connection_string)
            svc.retry = api.no_retry
            svc.create_table("legacyA")
            with pytest.raises(api.AzureHttpError) as raised:
                REFUSED[case](api, svc)
            outcomes.append(raised.value.status_code)
            assert store.table_names() == ["legacyA"]
    assert outcomes == [400, 400]


def test_service_stats_come_from_the_secondary_of_the_account_address() -> None:
    # Not in the script: the old package asks devstoreaccount1-secondary.table.core.windows.net.
    legacy = new_api()
    with DevStore(port=0) as store:
        stats = legacy.TableService(connection_string=store.connection_string).get_table_service_stats()
    assert stats.geo_replication.status == "live" and stats.geo_replication.last_sync_time is not None
