"""Differential test: one scripted, seeded operation sequence against Azurite and the devstore.

A fixed-seed generator (``random.Random(seed)``) writes a script of ~200 operations:
inserts (new and duplicate), replaces and merges (with the current ETag, a stale ETag and
``*``, on present and missing entities), deletes (present, missing, stale), both kinds of
upsert, entity group transactions (valid ones, and ones where exactly one operation fails:
duplicate insert, stale ETag, missing entity), filtered queries over all eight EDM types
(``eq ne gt ge lt le``, ``and or not``, bare Boolean properties, typed literals and a few
mistyped ones), paged queries with a small ``$top`` whose continuation tokens are followed
to the end, ``$select`` projections, full scans, and point reads of present and missing
entities. Keys contain quotes, spaces, ``%``, ``+&=()*``, the empty string, BMP characters
(including U+E000..U+FFFF) and astral characters, so ordering by UTF-16 code units is
exercised both in result order and in key range filters.

The same script runs through tablesdk's JSON client against Azurite and against the
devstore, each on its own fresh table. Every step records what a caller can observe: the
status code (or the exception class, status, error code and ``failed_index``), the returned
entities (keys, properties with their EDM types and values; Timestamp and ETag values are
dropped but whether an ETag came back is kept), their order, and the page sizes of paged
queries. The two traces must be equal step by step; a failure names the first differing
step, its operation and both results.

ETags differ between the two servers, so the script refers to them symbolically
(``current``: the last ETag this runner saw for the entity; ``stale``: an earlier one, or
a well-formed ETag from 2001 when there is none; ``*``), and each runner resolves them
against its own history.

``TABLESDK_DIFF_SEEDS`` ("1-60" or "3,5,8") and ``TABLESDK_DIFF_STEPS`` run other or longer
scripts, to explore; the default is three fixed seeds of 200 steps (about 1 s each).

Deliberately NOT generated here (Azurite is known to be wrong or lax, see docs/devstore.md and
docs/devstore.md; the devstore's own tests cover the service's behaviour):

* cross-partition and cross-table batches (Azurite accepts them), batches over 100
  operations (malformed response) or 4 MiB, empty batches (500);
* every size and count limit: 64 KiB properties, 1 MiB entities on insert, 255
  properties, keys over 512 characters (Azurite's limit differs from the service's 1 KiB);
* invalid typed values, property-name rules, keys with ``/ \\ # ?`` or control characters
  (the client refuses them; Azurite's error codes differ), unknown EDM types, nulls;
* comparisons whose literal type differs from the property's type, except ``eq`` (and
  only outside ``not``): Azurite compares the raw JavaScript values, so ``ne``, ``lt``,
  ``gt``... coerce strings and numbers, ``d eq 3`` matches a Double, an Int32 property
  compared with a Double literal matches numerically; the service ignores such entities
  (white paper section 8.4), and whether ``not`` makes them match is undocumented; an Int32
  literal compared with an Int64 or Double property (the service compares them by value;
  test_devstore_fidelity.py checks the devstore does);
* range comparisons (``lt gt le ge``) on Edm.Guid and Edm.Binary (Azurite compares the
  base64 text), DateTime values finer than a millisecond (Azurite compares JavaScript
  ``Date`` values), filters on Timestamp, ``-0.0`` (Azurite returns ``0``);
* ``$top`` above 1000 and page sizes that depend on the server's own page limit, bogus
  continuation tokens, ``$orderby``, upper-case ``AND``, functions;
* Atom (Azurite refuses it: test_atom_conformance.py covers the devstore), authentication
  failures (error codes differ), table-name errors (Azurite sends an empty code), and
  inserts with ``Prefer: return-content`` inside a batch (Azurite sends no body).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pytest

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty, NoRetry
from tablesdk._formats._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from tablesdk._entities._edm import EdmDateTime, EntityPayload, to_filter_literal
from tablesdk._entities._entity import entity_to_payload
from tablesdk._core._errors import BatchError, TableServiceError
from tablesdk._queries._query import ContinuationToken

pytestmark = pytest.mark.integration

def _seeds() -> list[int]:
    """The fixed seeds, or ``$TABLESDK_DIFF_SEEDS`` ("1-40" or "3,5,8") to explore more scripts."""
    text = os.environ.get("TABLESDK_DIFF_SEEDS", "").strip()
    if not text:
        return [20240601, 7, 31337]
    if "-" in text:
        low, high = text.split("-", 1)
        return list(range(int(low), int(high) + 1))
    return [int(part) for part in text.split(",")]


SEEDS = _seeds()
STEPS = int(os.environ.get("TABLESDK_DIFF_STEPS", "200"))

# ------------------------------------------------------------------ the universe of keys and values

PARTITIONS = ["alpha", "o'neil 100%", "z\ue000", "z\U0001F600", "sp ace"]
ROW_KEYS = [
    "", "a", "B", "b b", "o'neil", "a''b", "100%", "a%20b", "é", "中文", "\ue000", "\uff21",
    "\U0001F600", "\U00010000x", "x\U0001F601y", " lead", "*", "a+b&c=d", "(p)", "~",
]
ALL_KEYS = [(pk, rk) for pk in PARTITIONS for rk in ROW_KEYS]
#: Extra string literals for key range filters (between and around the keys above).
KEY_PROBES = ["", "a", "b", "o", "z", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001F600", "~", "100"]

UTC = timezone.utc
TYPED_POOLS: dict[str, tuple[EdmType, list[Any]]] = {
    "s": (EdmType.STRING, ["", "alpha", "Beta", "o'neil", "é", "\U0001F600", "\ue000", "zz", "5"]),
    "i": (EdmType.INT32, [-2147483648, -7, 0, 3, 5, 2147483647]),
    "l": (EdmType.INT64, [-(2**63), -3, 5, 2**40, 2**62 + 1]),
    "d": (EdmType.DOUBLE, [-2.25, 0.0, 0.5, 1.0, 3.0, 12345.678, math.inf, -math.inf, math.nan]),
    "b": (EdmType.BOOLEAN, [True, False]),
    "t": (EdmType.DATETIME, [
        datetime(1601, 1, 1, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        datetime(2020, 1, 1, tzinfo=UTC),
        datetime(2020, 1, 1, 0, 0, 0, 123000, tzinfo=UTC),
        datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    ]),
    "g": (EdmType.GUID, [uuid.UUID(int=0), uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
                         uuid.UUID("ffffffff-0000-4000-8000-123456789abc")]),
    "x": (EdmType.BINARY, [b"", b"\x00\x01", b"\xff\xff\xff", b"hello"]),
    "opt": (EdmType.STRING, ["x", "y"]),
}
#: Probability that a generated entity carries each property ("opt" is usually missing).
PRESENCE = {"s": 0.75, "i": 0.75, "l": 0.7, "d": 0.7, "b": 0.7, "t": 0.7, "g": 0.7, "x": 0.7, "opt": 0.35}
#: "mixed" is an Edm.String on some entities and an Edm.Int32 on others.
MIXED_VALUES: list[tuple[EdmType, Any]] = [(EdmType.STRING, "5"), (EdmType.STRING, "7"), (EdmType.INT32, 5), (EdmType.INT32, 7)]

FULL_OPS = ["eq", "ne", "gt", "ge", "lt", "le"]
OPS_BY_TYPE = {
    EdmType.STRING: FULL_OPS, EdmType.INT32: FULL_OPS, EdmType.INT64: FULL_OPS, EdmType.DOUBLE: FULL_OPS,
    EdmType.DATETIME: FULL_OPS, EdmType.BOOLEAN: ["eq", "ne"], EdmType.GUID: ["eq", "ne"],
    EdmType.BINARY: ["eq", "ne"],
}
#: ``eq`` comparisons whose literal type differs from the property's (on "mixed", from some
#: entities' type). Both servers match none of them; other mistyped shapes are excluded
#: (Azurite compares raw JavaScript values: ``l eq '5'`` matches an Int64 5 stored as text,
#: ``s eq 5L`` compares digits, ``i eq 5L`` fails).
MISTYPED = ["s eq 5", "s eq 3", "s eq true", "i eq '5'", "i eq '3'", "d eq '0.5'",
            "b eq 'true'", "mixed eq 5", "mixed eq 7", "mixed eq '5'", "mixed eq '7'"]
#: A well-formed ETag no write ever gets (what "stale" means when there is no older ETag).
ANCIENT_ETAG = "W/\"datetime'2001-01-01T00%3A00%3A00.0000000Z'\""

Props = tuple[tuple[str, EdmType, Any], ...]


# ------------------------------------------------------------------ the script


@dataclass(frozen=True)
class BatchStep:
    kind: str  # insert, replace, merge, delete, upsert_merge, upsert_replace
    rk: str
    props: Props = ()
    etag: str = ""  # current, stale, * (conditional kinds only)

    def describe(self) -> str:
        etag = f" If-Match={self.etag}" if self.etag else ""
        return f"{self.kind}(RowKey={self.rk!r}{etag}{_describe_props(self.props)})"


@dataclass(frozen=True)
class Step:
    kind: str  # a BatchStep kind, or batch, query, get, scan
    pk: str = ""
    rk: str = ""
    props: Props = ()
    etag: str = ""
    batch: tuple[BatchStep, ...] = ()
    filter: str | None = None
    top: int | None = None
    select: tuple[str, ...] | None = None
    echo: bool = False  # an insert that asks for the entity back (Prefer: return-content)
    intent: str = ""  # what the generator meant to exercise: checked against Azurite's answer

    def describe(self) -> str:
        if self.kind == "batch":
            ops = ", ".join(op.describe() for op in self.batch)
            return f"batch[{self.intent}] PartitionKey={self.pk!r}: {ops}"
        if self.kind in ("query", "scan"):
            return f"{self.kind} $filter={self.filter!r} $top={self.top} $select={self.select}"
        etag = f" If-Match={self.etag}" if self.etag else ""
        intent = f"[{self.intent}{', echo' if self.echo else ''}]" if self.intent else ""
        return f"{self.kind}{intent}(PartitionKey={self.pk!r}, RowKey={self.rk!r}{etag}{_describe_props(self.props)})"


def _describe_props(props: Props) -> str:
    if not props:
        return ""
    return ", " + ", ".join(f"{name}:{edm.value[4:]}={value!r}" for name, edm, value in props)


class ScriptGenerator:
    """Writes a script from a seed, tracking which entities should exist."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.existing: set[tuple[str, str]] = set()

    # ---------------------------------------------------------- values

    def entity_props(self) -> Props:
        rng = self.rng
        props: list[tuple[str, EdmType, Any]] = []
        for name, (edm, pool) in TYPED_POOLS.items():
            if rng.random() < PRESENCE[name]:
                props.append((name, edm, rng.choice(pool)))
        if rng.random() < 0.5:
            edm, value = rng.choice(MIXED_VALUES)
            props.append(("mixed", edm, value))
        return tuple(props)

    def merge_props(self) -> Props:
        props = list(self.entity_props())
        self.rng.shuffle(props)
        return tuple(props[: self.rng.randint(1, 3)])

    def key(self, *, present: bool | None) -> tuple[str, str]:
        """A key that exists (True), does not (False), or either (None), when there is one."""
        rng = self.rng
        if present is None:
            return (rng.choice(PARTITIONS), rng.choice(ROW_KEYS))
        pool = sorted(self.existing) if present else [k for k in ALL_KEYS if k not in self.existing]
        return rng.choice(pool or ALL_KEYS)

    # ---------------------------------------------------------- filters

    def comparison(self, *, allow_mistyped: bool) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.2:
            name = rng.choice(["PartitionKey", "RowKey"])
            pool = (PARTITIONS if name == "PartitionKey" else ROW_KEYS) + KEY_PROBES
            return f"{name} {rng.choice(FULL_OPS)} {to_filter_literal(rng.choice(pool), EdmType.STRING)}"
        if allow_mistyped and roll < 0.3:
            # eq with a literal of another type than the property's: matches nothing anywhere
            return rng.choice(MISTYPED)
        if roll < 0.35:
            return rng.choice(["b", "b eq true", "b eq false", "b ne true"])
        name = rng.choice(sorted(TYPED_POOLS))
        edm, pool = TYPED_POOLS[name]
        value = rng.choice([v for v in pool if not (isinstance(v, float) and not math.isfinite(v))])
        op = rng.choice(OPS_BY_TYPE[edm])
        return f"{name} {op} {to_filter_literal(value, edm)}"

    def filter(self, depth: int = 0, *, allow_mistyped: bool = True) -> str:
        rng = self.rng
        if depth < 2 and rng.random() < 0.5:
            shape = rng.choice(["and", "or", "not", "not"])
            if shape == "not":
                return f"not ({self.filter(depth + 1, allow_mistyped=False)})"
            left = self.filter(depth + 1, allow_mistyped=allow_mistyped)
            right = self.filter(depth + 1, allow_mistyped=allow_mistyped)
            return f"({left}) {shape} ({right})"
        return self.comparison(allow_mistyped=allow_mistyped)

    # ---------------------------------------------------------- steps

    def single(self) -> Step:
        rng = self.rng
        kind = rng.choice(["insert", "insert", "replace", "merge", "delete", "upsert_merge", "upsert_replace"])
        if kind == "insert":
            intent = rng.choice(["new", "new", "duplicate"])
            pk, rk = self.key(present=intent == "duplicate")
            intent = "duplicate" if (pk, rk) in self.existing else "new"
            if intent == "new":
                self.existing.add((pk, rk))
            return Step(kind, pk, rk, props=self.entity_props(), echo=rng.random() < 0.3, intent=intent)
        if kind.startswith("upsert"):
            pk, rk = self.key(present=None)
            self.existing.add((pk, rk))
            props = self.merge_props() if kind == "upsert_merge" else self.entity_props()
            return Step(kind, pk, rk, props=props)
        # replace / merge / delete: conditional
        intent = rng.choice(["current", "current", "star", "stale", "missing"])
        pk, rk = self.key(present=intent != "missing")
        present = (pk, rk) in self.existing
        etag = {"current": "current", "star": "*", "stale": "stale", "missing": rng.choice(["*", "current"])}[intent]
        if present and etag != "stale" and kind == "delete":
            self.existing.discard((pk, rk))
        props = () if kind == "delete" else (self.merge_props() if kind == "merge" else self.entity_props())
        if not present:
            intent = "missing"
        elif intent == "missing":  # every key exists: this one succeeds
            intent = "star" if etag == "*" else "current"
        return Step(kind, pk, rk, props=props, etag=etag, intent=intent)

    def batch(self) -> Step:
        rng = self.rng
        pk = rng.choice(PARTITIONS)
        rks = rng.sample(ROW_KEYS, rng.randint(1, 6))
        failing = rng.random() < 0.45
        ops: list[BatchStep] = []
        for rk in rks:
            if (pk, rk) in self.existing:
                kind = rng.choice(["replace", "merge", "delete", "upsert_merge", "upsert_replace"])
                etag = rng.choice(["current", "*"]) if kind in ("replace", "merge", "delete") else ""
            else:
                kind = rng.choice(["insert", "insert", "upsert_merge", "upsert_replace"])
                etag = ""
            props = () if kind == "delete" else (self.merge_props() if kind in ("merge", "upsert_merge") else self.entity_props())
            ops.append(BatchStep(kind, rk, props, etag))
        intent = "valid"
        if failing:
            index = rng.randrange(len(ops))
            rk = ops[index].rk
            present = (pk, rk) in self.existing
            wanted = rng.choice(["duplicate", "stale", "missing"])
            if wanted in ("duplicate", "stale") and not present:
                wanted = "missing"
            if wanted == "missing" and present:
                wanted = rng.choice(["duplicate", "stale"])
            if wanted == "duplicate":
                ops[index] = BatchStep("insert", rk, self.entity_props())
            elif wanted == "stale":
                kind = rng.choice(["replace", "merge", "delete"])
                ops[index] = BatchStep(kind, rk, () if kind == "delete" else self.merge_props(), "stale")
            else:
                kind = rng.choice(["replace", "merge", "delete"])
                ops[index] = BatchStep(kind, rk, () if kind == "delete" else self.merge_props(), rng.choice(["*", "current"]))
            intent = f"fails at {index}: {wanted}"
        else:
            for op in ops:
                if op.kind == "delete":
                    self.existing.discard((pk, op.rk))
                else:
                    self.existing.add((pk, op.rk))
        return Step("batch", pk, batch=tuple(ops), intent=intent)

    def query(self) -> Step:
        rng = self.rng
        flt = self.filter() if rng.random() < 0.9 else None
        top = rng.choice([None, None, 3, 5, 8, 13])
        select = None
        if rng.random() < 0.2:
            select = tuple(rng.sample(["s", "i", "l", "d", "b", "t", "g", "x", "opt", "mixed", "nosuch"], 3))
        return Step("query", filter=flt, top=top, select=select)

    def get(self) -> Step:
        pk, rk = self.key(present=self.rng.random() < 0.7)
        select = ("s", "i", "nosuch") if self.rng.random() < 0.15 else None
        return Step("get", pk, rk, select=select)

    def script(self, steps: int) -> list[Step]:
        out: list[Step] = []
        makers: list[tuple[float, Callable[[], Step]]] = [
            (0.42, self.single), (0.16, self.batch), (0.27, self.query), (0.15, self.get),
        ]
        for number in range(steps):
            if number % 25 == 24:
                out.append(Step("scan", top=rng_top(self.rng)))
                continue
            roll, acc = self.rng.random(), 0.0
            for weight, make in makers:
                acc += weight
                if roll < acc:
                    out.append(make())
                    break
            else:
                out.append(self.single())
        out.append(Step("scan"))
        out.append(Step("scan", top=4))
        return out


def rng_top(rng: random.Random) -> int | None:
    return rng.choice([None, 7, 11])


def generate_script(seed: int, steps: int = STEPS) -> list[Step]:
    return ScriptGenerator(seed).script(steps)


# ------------------------------------------------------------------ running a script


def _norm_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, EdmDateTime):
        return f"{value.isoformat()}+{value.ticks_remainder}"
    if isinstance(value, datetime):
        return f"{value.isoformat()}+0"
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return f"guid:{value}"
    return repr(value)


def normalise_payload(payload: EntityPayload) -> dict[str, Any]:
    props = {}
    for name in sorted(payload.values):
        if name in ("PartitionKey", "RowKey", "Timestamp"):
            continue
        edm = payload.types.get(name)
        props[name] = [edm.value if edm is not None else None, _norm_value(payload.values[name])]
    return {
        "PartitionKey": payload.values.get("PartitionKey"),
        "RowKey": payload.values.get("RowKey"),
        "props": props,
        "etag": payload.etag is not None,
    }


def normalise_error(exc: Exception) -> dict[str, Any]:
    out: dict[str, Any] = {"error": type(exc).__name__}
    if isinstance(exc, TableServiceError):
        out.update(status=exc.status_code, code=exc.error_code)
    if isinstance(exc, BatchError):
        out["failed_index"] = exc.failed_index
    return out


_KINDS = {
    "insert": BatchOperationKind.INSERT,
    "replace": BatchOperationKind.UPDATE,
    "merge": BatchOperationKind.MERGE,
    "delete": BatchOperationKind.DELETE,
    "upsert_merge": BatchOperationKind.INSERT_OR_MERGE,
    "upsert_replace": BatchOperationKind.INSERT_OR_REPLACE,
}


@dataclass
class Runner:
    """Runs a script through one client on one table, resolving symbolic ETags."""

    client: CloudTableClient
    table: str
    etags: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    requests: int = 0

    def _seen(self, pk: str, rk: str, etag: str | None) -> None:
        if not etag:
            return
        history = self.etags.setdefault((pk, rk), [])
        if not history or history[-1] != etag:
            history.append(etag)

    def _etag(self, pk: str, rk: str, ref: str) -> str:
        history = self.etags.get((pk, rk), [])
        if ref == "*":
            return "*"
        if ref == "current":
            return history[-1] if history else ANCIENT_ETAG
        return history[-2] if len(history) >= 2 else ANCIENT_ETAG

    def _operation(self, kind: str, pk: str, rk: str, props: Props, etag_ref: str) -> BatchOperation:
        op_kind = _KINDS[kind]
        payload = None
        if kind != "delete":
            entity = DynamicEntity(PartitionKey=pk, RowKey=rk)
            for name, edm, value in props:
                entity[name] = EntityProperty(value, edm)
            payload = entity_to_payload(entity)
        etag = self._etag(pk, rk, etag_ref) if kind in ("replace", "merge", "delete") else None
        return BatchOperation(op_kind, self.table, pk, rk, payload, etag)

    def _result(self, pk: str, result: BatchOperationResult, rk: str) -> dict[str, Any]:
        self._seen(pk, rk, result.etag)
        out: dict[str, Any] = {"status": result.status, "etag": result.etag is not None}
        if result.payload is not None:
            out["entity"] = normalise_payload(result.payload)
        return out

    def _pages(self, flt: str | None, top: int | None, select: tuple[str, ...] | None) -> dict[str, Any]:
        token: ContinuationToken | None = None
        pages: list[int] = []
        entities: list[dict[str, Any]] = []
        while True:
            self.requests += 1
            payloads, token = self.client.query_entity_payloads(
                self.table, filter=flt, top=top, select=select, continuation_token=token
            )
            pages.append(len(payloads))
            for payload in payloads:
                values = payload.values
                if select is None:
                    self._seen(values["PartitionKey"], values["RowKey"], payload.etag)
                entities.append(normalise_payload(payload))
            if token is None or len(pages) > 200:
                break
        return {"pages": pages, "entities": entities}

    def run_step(self, step: Step) -> Any:
        try:
            return self._run(step)
        except (TableServiceError, ValueError) as exc:
            return normalise_error(exc)

    def _run(self, step: Step) -> Any:
        kind = step.kind
        if kind in _KINDS:
            self.requests += 1
            op = self._operation(kind, step.pk, step.rk, step.props, step.etag)
            op.echo_content = step.echo
            return self._result(step.pk, self.client.execute_operation(op), step.rk)
        if kind == "batch":
            ops = [self._operation(b.kind, step.pk, b.rk, b.props, b.etag) for b in step.batch]
            self.requests += 1
            results = self.client.execute_batch(ops)
            return [self._result(step.pk, result, op.row_key) for result, op in zip(results, ops)]
        if kind in ("query", "scan"):
            return self._pages(step.filter, step.top, step.select)
        if kind == "get":
            self.requests += 1
            payload = self.client.get_entity_payload(self.table, step.pk, step.rk, select=step.select)
            if step.select is None:
                self._seen(step.pk, step.rk, payload.etag)
            return normalise_payload(payload)
        raise AssertionError(f"unknown step kind {kind!r}")

    def run(self, script: list[Step]) -> list[Any]:
        return [self.run_step(step) for step in script]


# ------------------------------------------------------------------ fixtures and the test


@pytest.fixture
def table_on() -> Iterator[Callable[[str, str], tuple[CloudTableClient, str]]]:
    made: list[tuple[CloudTableClient, str]] = []

    def make(connection_string: str, name: str) -> tuple[CloudTableClient, str]:
        account = CloudStorageAccount.parse(connection_string)
        # no retries: a server error is an observable result, not something to wait out
        client = account.create_cloud_table_client(payload_format="json", retry_policy=NoRetry())
        client.create_table(name)
        made.append((client, name))
        return client, name

    yield make
    for client, name in made:
        try:
            client.delete_table_if_exists(name)
        finally:
            client.close()


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, indent=1, sort_keys=True)


def first_difference(script: list[Step], left: list[Any], right: list[Any]) -> str | None:
    """None when the traces are equal, else a message naming the first differing step."""
    for number, (step, a, b) in enumerate(zip(script, left, right)):
        if a == b:
            continue
        detail = ""
        if isinstance(a, dict) and isinstance(b, dict) and "entities" in a and "entities" in b:
            ka = [(e["PartitionKey"], e["RowKey"]) for e in a["entities"]]
            kb = [(e["PartitionKey"], e["RowKey"]) for e in b["entities"]]
            detail = (
                f"\n  keys only on Azurite:  {sorted(set(ka) - set(kb))!r}"
                f"\n  keys only on devstore: {sorted(set(kb) - set(ka))!r}"
                f"\n  same key set, same order: {set(ka) == set(kb)}, {ka == kb}"
                f"\n  pages: Azurite {a['pages']}, devstore {b['pages']}"
            )
        diff = list(difflib.unified_diff(
            _show(a).splitlines(), _show(b).splitlines(), "Azurite", "devstore", n=3, lineterm=""
        ))
        if len(diff) > 80:
            diff = diff[:80] + [f"... ({len(diff) - 80} more diff lines)"]
        return f"step {number} differs: {step.describe()}{detail}\n" + "\n".join(diff)
    if len(left) != len(right):
        return f"traces have different lengths: {len(left)} and {len(right)}"
    return None


#: The error code each single-operation intent should produce (None: success).
_EXPECTED_CODES = {
    "new": None, "current": None, "star": None, "duplicate": "EntityAlreadyExists",
    "stale": "UpdateConditionNotSatisfied", "missing": "ResourceNotFound",
}


def unexpected_outcomes(script: list[Step], trace: list[Any]) -> list[str]:
    """Steps whose outcome is not what the generator intended (a generator or server bug)."""
    out = []
    for number, (step, result) in enumerate(zip(script, trace)):
        failed = isinstance(result, dict) and "error" in result
        if step.kind == "batch":
            if step.intent == "valid":
                ok = isinstance(result, list) and len(result) == len(step.batch)
            else:
                index = int(step.intent.split()[2].rstrip(":"))
                ok = failed and result.get("failed_index") == index
        elif step.intent in _EXPECTED_CODES:
            code = _EXPECTED_CODES[step.intent]
            ok = (not failed) if code is None else (failed and result.get("code") == code)
        else:  # upserts, queries, scans: never fail; gets may miss
            ok = not failed or (step.kind == "get" and result.get("code") == "ResourceNotFound")
        if not ok:
            out.append(f"  step {number}: {step.describe()} -> {result!r}"[:400])
    return out


def test_script_is_deterministic_and_covers_the_operations() -> None:
    a, b = generate_script(SEEDS[0]), generate_script(SEEDS[0])
    assert a == b
    kinds = {step.kind for seed in SEEDS for step in generate_script(seed)}
    assert kinds >= {"insert", "replace", "merge", "delete", "upsert_merge", "upsert_replace", "batch", "query",
                     "get", "scan"}
    steps = [step for seed in SEEDS for step in generate_script(seed)]
    filters = " ".join(step.filter or "" for step in steps)
    for needle in (" and ", " or ", "not (", " eq ", " ne ", " lt ", " ge ", " gt ", " le ", "datetime'", "guid'",
                   "X'", "L", "RowKey", "PartitionKey", "mixed eq"):
        assert needle in filters, needle
    intents = {step.intent.split(": ")[-1] for step in steps if step.kind == "batch"}
    assert intents >= {"valid", "duplicate", "stale", "missing"}
    assert any(step.etag == "stale" for step in steps) and any(step.etag == "*" for step in steps)
    assert any(step.top for step in steps if step.kind == "query")


@pytest.mark.parametrize("seed", SEEDS)
def test_azurite_and_devstore_traces_are_identical(
    seed: int,
    azurite_connection_string: str,
    devstore_connection_string: str,
    table_on: Callable[[str, str], tuple[CloudTableClient, str]],
) -> None:
    script = generate_script(seed)
    name = f"diff{seed}{uuid.uuid4().hex[:10]}"
    azurite = Runner(*table_on(azurite_connection_string, name))
    devstore = Runner(*table_on(devstore_connection_string, name))
    left = azurite.run(script)
    right = devstore.run(script)
    problem = first_difference(script, left, right)
    if problem is not None:
        pytest.fail(f"seed {seed}: {problem}", pytrace=False)
    surprises = unexpected_outcomes(script, left)
    assert not surprises, f"seed {seed}: the script did not do what it meant to:\n" + "\n".join(surprises)
    # the script did what it was written for: failures and successes of every kind happened
    statuses = json.dumps(left)
    for needle in ('"EntityAlreadyExists"', '"UpdateConditionNotSatisfied"', '"ResourceNotFound"', '"failed_index"'):
        assert needle in statuses, f"seed {seed}: no step produced {needle}"
    # the cost of a seed is counted in requests, not seconds (a loaded machine must not fail it): a
    # script that paged without end, or a step that multiplied its requests, shows here
    assert azurite.requests == devstore.requests, f"seed {seed}: {azurite.requests} vs {devstore.requests} requests"
    assert azurite.requests <= 2 * len(script), f"seed {seed}: {azurite.requests} requests for {len(script)} steps"
