"""Test helpers shared by several test folders (codec payloads, a fake codec)."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from tablesdk._entities._edm import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, EdmDateTime, EdmType, EntityPayload
from tablesdk._formats import PayloadFormat

UTC = timezone.utc
T = EdmType


def payload(**props: Any) -> EntityPayload:
    """PartitionKey/RowKey plus ``Name=(value, EdmType)`` pairs."""
    values: dict[str, Any] = {"PartitionKey": "pk", "RowKey": "rk"}
    types: dict[str, EdmType] = {"PartitionKey": T.STRING, "RowKey": T.STRING}
    for name, (value, edm_type) in props.items():
        values[name] = value
        types[name] = edm_type
    return EntityPayload(values, types)


#: Every non-string EDM type at its limits; each codec's tests add the strings its format can carry.
EDM_LIMITS: dict[str, tuple[Any, EdmType]] = dict(
    I32Min=(INT32_MIN, T.INT32), I32Max=(INT32_MAX, T.INT32), I32Zero=(0, T.INT32),
    I64Min=(INT64_MIN, T.INT64), I64Max=(INT64_MAX, T.INT64), I64Small=(5, T.INT64),
    I64Beyond53=(2**53 + 1, T.INT64),
    DtMin=(datetime(1601, 1, 1, tzinfo=UTC), T.DATETIME),
    DtMax=(EdmDateTime(9999, 12, 31, 23, 59, 59, 999999, UTC, ticks_remainder=9), T.DATETIME),
    DtTicks=(EdmDateTime(2024, 1, 2, 3, 4, 5, 123456, UTC, ticks_remainder=7), T.DATETIME),
    DtNaive=(datetime(2024, 1, 2, 3, 4, 5), T.DATETIME),
    DtOffset=(datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))), T.DATETIME),
    Nan=(math.nan, T.DOUBLE), PInf=(math.inf, T.DOUBLE), NInf=(-math.inf, T.DOUBLE),
    NegZero=(-0.0, T.DOUBLE), Whole=(1.0, T.DOUBLE), Huge=(1.7976931348623157e308, T.DOUBLE),
    Tiny=(5e-324, T.DOUBLE), Third=(1 / 3, T.DOUBLE),
    True_=(True, T.BOOLEAN), False_=(False, T.BOOLEAN),
    Guid=(uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"), T.GUID),
    Bin=(bytes(range(256)), T.BINARY), EmptyBin=(b"", T.BINARY),
)


def assert_same_value(name: str, got: Any, want: Any, edm_type: EdmType | None = None) -> None:
    """``got`` (read back) equals ``want`` (sent) in value, Python type, sign, zone and 7th digit."""
    if isinstance(want, float) or (edm_type is T.DOUBLE and isinstance(want, int)):
        want = float(want)
        assert type(got) is float, name
        if math.isnan(want):
            assert math.isnan(got), name
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (name, got, want)
    elif isinstance(want, datetime):
        assert isinstance(got, EdmDateTime), name
        expected = want if want.tzinfo else want.replace(tzinfo=UTC)
        assert got == expected and got.tzinfo is UTC, name
        assert got.ticks_remainder == getattr(want, "ticks_remainder", 0), name
    else:
        assert type(got) is type(want) and got == want, (name, got, want)


class FakeFormat(PayloadFormat):
    """A deterministic codec for batch tests: entities as sorted compact JSON of their values."""

    name = "fake"
    default_api_version = "2019-02-02"
    content_type = "application/json"

    def __init__(self, *, ensure_ascii: bool = True) -> None:
        self.ensure_ascii = ensure_ascii

    def request_headers(self) -> dict[str, str]:
        return {
            "Accept": "application/json;odata=minimalmetadata",
            "DataServiceVersion": "3.0;",
            "MaxDataServiceVersion": "3.0;NetFx",
        }

    def serialize_entity(self, payload: EntityPayload) -> bytes:
        return json.dumps(payload.values, sort_keys=True, separators=(",", ":"), ensure_ascii=self.ensure_ascii).encode()

    def parse_entity(self, body: bytes, etag: str | None = None) -> EntityPayload:
        data = json.loads(body)
        etag = data.pop("odata.etag", etag)
        data.pop("odata.metadata", None)
        return EntityPayload(data, {}, etag)

    def parse_entities(self, body: bytes) -> list[EntityPayload]:  # pragma: no cover - unused
        raise NotImplementedError

    def serialize_table(self, table_name: str) -> bytes:  # pragma: no cover - unused
        raise NotImplementedError

    def parse_tables(self, body: bytes) -> list[str]:  # pragma: no cover - unused
        raise NotImplementedError


def refuse_creation_in(directory: Any, monkeypatch: Any) -> None:
    """Make ``os.open`` refuse to create a file in ``directory`` (EACCES), as a read-only directory does for
    anyone but root: a test running as root plays with it what every other user gets."""
    import errno
    import os

    create = os.open
    where = os.fspath(directory)

    def refused(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.path.dirname(os.fspath(path)) == where:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return create(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)
