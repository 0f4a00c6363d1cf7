"""Incremental reads: :class:`Watermark` (where the last read of a table's changes stopped),
:func:`since_filter` (the ``$filter`` of the next one) and :class:`ChangeTracker` (which rows of a
read are new, and the watermark after it).

The service stamps every insert and update with a ``Timestamp`` of 100 ns precision (seven
fractional digits). A Python ``datetime`` keeps six, so a filter built from one rounds the
watermark down and returns rows at it again; here the watermark keeps the seventh digit
(:class:`~tablesdk._entities._edm_base.EdmDateTime`) and the filter literal carries all seven.

What a watermark guarantees: ``floor`` is a Timestamp at or below which every row has been
delivered; ``seen`` holds the keys and ETag of the rows delivered above it. The next read asks
for ``Timestamp gt floor`` and drops the rows whose keys and ETag are in ``seen``. After a read,
the floor moves to ``overlap`` before the newest Timestamp it read (never past the moment the
read started, by this machine's clock, minus ``overlap``): a row that commits while the read runs,
on a partition read already or a little out of Timestamp order, is then still above the next
floor and is read next time, once. Rows that become visible more than ``overlap`` after their
Timestamp (and after the read started) can be missed: choose ``overlap`` above the service's commit
delay and this machine's clock error. Deletions are not seen: an incremental read returns the rows
inserted or updated.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from .._core._errors import TableValidationError
from .._entities._edm import EdmDateTime, format_datetime, parse_datetime
from .._entities._filter import Filter, prop

__all__ = ["Watermark", "ChangeWindow", "Changes", "AsyncChanges", "ChangeTracker", "since_filter", "DEFAULT_OVERLAP", "WATERMARK_METADATA_KEY"]

#: How far below the newest Timestamp read the next read starts again, unless a watermark says otherwise.
DEFAULT_OVERLAP = timedelta(seconds=5)
#: The key of the next watermark (its :meth:`Watermark.to_string`) in an Arrow schema's metadata and a
#: pandas frame's ``attrs``.
WATERMARK_METADATA_KEY = "tablesdk.watermark"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Rows a read records before it drops those below the floor reached so far.
_PRUNE_AT = 65_536
_FORMAT_VERSION = 1


def ticks_of(value: datetime) -> int:
    """``value`` as 100 ns ticks since the Unix epoch (the seventh digit of an EdmDateTime included)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, EdmDateTime):
        return micros * 10 + value.ticks_remainder
    # A pandas Timestamp (what a frame's Timestamp column holds) keeps nanoseconds beyond the
    # microseconds: the service's seventh digit is among them.
    nanoseconds = getattr(value, "nanosecond", 0)
    return micros * 10 + (nanoseconds // 100 if isinstance(nanoseconds, int) else 0)


#: 0001-01-01T00:00:00Z, the first Edm.DateTime, as ticks since the Unix epoch.
_FIRST_TICKS = -62_135_596_800 * 10_000_000


def datetime_of_ticks(ticks: int) -> EdmDateTime:
    """100 ns ticks since the Unix epoch as an :class:`EdmDateTime` (UTC, seventh digit kept)."""
    micros, remainder = divmod(ticks, 10)
    value = _EPOCH + timedelta(microseconds=micros)
    return EdmDateTime(
        value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond,
        timezone.utc, ticks_remainder=remainder,
    )


def _shown(text: str) -> str:
    """``text`` for an error when it may be a mistyped Edm.DateTime; else only its length, so that a
    secret given in its place by mistake (a connection string, a SAS) never reaches the message."""
    if len(text) <= 40 and not any(char in text for char in "=;&?"):
        return repr(text)
    return f"a text of {len(text)} characters, not shown"


def _overlap_ticks(overlap: timedelta) -> int:
    if not isinstance(overlap, timedelta) or overlap < timedelta(0):
        raise TableValidationError("overlap", "the overlap is a timedelta of zero or more", repr(overlap))
    return (overlap.days * 86_400 + overlap.seconds) * 10_000_000 + overlap.microseconds * 10


class Watermark:
    """Where an incremental read stopped: pass it as ``since=`` to read the rows changed after it.

    ``floor``: every row whose Timestamp is at or below it has been delivered (None: nothing has,
    the first read reads the whole table); ``seen``: ``(PartitionKey, RowKey, ETag)`` of the rows
    delivered above the floor, which the next read skips; ``overlap``: how far below the newest
    Timestamp it read a read leaves the next floor (see the module's guarantee). Immutable; keep it
    between runs with :meth:`to_string` / :meth:`from_string`.
    """

    __slots__ = ("_floor", "_overlap", "_seen", "_seen_ticks")

    def __init__(
        self,
        floor: datetime | None = None,
        *,
        overlap: timedelta = DEFAULT_OVERLAP,
        seen: Iterable[tuple[str, str, str]] | Mapping[tuple[str, str, str], int] = (),
    ) -> None:
        if floor is not None and not isinstance(floor, datetime):
            raise TableValidationError("since", "a watermark's floor is a datetime (or None)", repr(floor))
        _overlap_ticks(overlap)
        self._floor: int | None = None if floor is None else ticks_of(floor)
        self._overlap = overlap
        # Each seen row with its Timestamp in ticks (None when not known): a read drops it once the
        # floor passes it.
        stamps: Mapping[tuple[str, str, str], int | None] = (
            seen if isinstance(seen, Mapping) else dict.fromkeys(seen)
        )
        self._seen_ticks: dict[tuple[str, str, str], int | None] = {
            (str(pk), str(rk), str(etag)): ticks for (pk, rk, etag), ticks in stamps.items()
        }
        self._seen = frozenset(self._seen_ticks)

    @classmethod
    def start(cls, overlap: timedelta = DEFAULT_OVERLAP) -> Watermark:
        """The watermark of a first read: every row of the table."""
        return cls(None, overlap=overlap)

    @classmethod
    def at(cls, timestamp: datetime | str, overlap: timedelta = DEFAULT_OVERLAP) -> Watermark:
        """Rows changed strictly after ``timestamp`` (a datetime, an :class:`EdmDateTime` with its 100 ns
        digit, or Edm.DateTime text with up to seven fractional digits; naive means UTC)."""
        if isinstance(timestamp, str):
            text = timestamp
            try:
                timestamp = parse_datetime(text.strip())
            except ValueError:
                raise TableValidationError(
                    "since", "a watermark is an Edm.DateTime such as 2024-01-02T03:04:05.1234567Z", _shown(text)
                ) from None
        return cls(timestamp, overlap=overlap)

    @property
    def floor(self) -> EdmDateTime | None:
        """Every row with a Timestamp at or below this has been delivered (100 ns precision), or None."""
        return None if self._floor is None else datetime_of_ticks(self._floor)

    @property
    def floor_ticks(self) -> int | None:
        """:attr:`floor` as 100 ns ticks since the Unix epoch, or None."""
        return self._floor

    @property
    def overlap(self) -> timedelta:
        """How far below the newest Timestamp a read leaves the next floor."""
        return self._overlap

    @property
    def seen(self) -> frozenset[tuple[str, str, str]]:
        """``(PartitionKey, RowKey, ETag)`` of the rows delivered above :attr:`floor`."""
        return self._seen

    def with_overlap(self, overlap: timedelta) -> Watermark:
        """This watermark with another overlap for the reads that follow it."""
        copy = Watermark(None, overlap=overlap, seen=self._seen_ticks)
        copy._floor = self._floor
        return copy

    def to_string(self) -> str:
        """A JSON text of this watermark (floor with seven digits, overlap, seen rows), for
        :meth:`from_string`."""
        floor = self.floor
        return json.dumps(
            {
                "version": _FORMAT_VERSION,
                "floor": None if floor is None else format_datetime(floor),
                "overlap_seconds": self._overlap.total_seconds(),
                "seen": sorted([*identity, ticks] for identity, ticks in self._seen_ticks.items()),
            },
            ensure_ascii=False, separators=(",", ":"),
        )

    @classmethod
    def from_string(cls, text: str) -> Watermark:
        """The watermark of :meth:`to_string`'s text, or of a bare Edm.DateTime text (as :meth:`at`)."""
        if not isinstance(text, str):
            raise TypeError(f"Watermark.from_string takes a str, not {type(text).__name__}")
        stripped = text.strip()
        if not stripped.startswith("{"):
            return cls.at(stripped)
        try:
            data: Any = json.loads(stripped)
            if data.get("version") != _FORMAT_VERSION:
                raise ValueError("unknown version")
            floor_text = data["floor"]
            overlap = timedelta(seconds=float(data["overlap_seconds"]))
            seen = {(pk, rk, etag): ticks for pk, rk, etag, ticks in data["seen"]}
            if not all(isinstance(part, str) for row in seen for part in row) or not all(
                ticks is None or (isinstance(ticks, int) and not isinstance(ticks, bool)) for ticks in seen.values()
            ):
                raise ValueError("seen rows are three strings and a Timestamp in ticks")
            floor = None if floor_text is None else parse_datetime(floor_text)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
            raise TableValidationError("since", "not the text of Watermark.to_string()", str(exc)) from None
        return cls(floor, overlap=overlap, seen=seen)

    @classmethod
    def of(cls, result: Any) -> Watermark:
        """The next watermark of an incremental read's ``pyarrow.Table`` (schema metadata) or pandas
        DataFrame (``attrs``), under :data:`WATERMARK_METADATA_KEY`."""
        attrs = getattr(result, "attrs", None)
        if isinstance(attrs, dict) and WATERMARK_METADATA_KEY in attrs:
            return cls.from_string(str(attrs[WATERMARK_METADATA_KEY]))
        schema = getattr(result, "schema", None)
        metadata = getattr(schema, "metadata", None) or {}
        text = metadata.get(WATERMARK_METADATA_KEY.encode())
        if text is None:
            raise LookupError("no watermark: the result is not from a read with since=")
        return cls.from_string(text.decode())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Watermark):
            return NotImplemented
        return (self._floor, self._overlap, self._seen) == (other._floor, other._overlap, other._seen)

    def __hash__(self) -> int:
        return hash((self._floor, self._overlap, self._seen))

    def __repr__(self) -> str:
        floor = self.floor
        shown = "None" if floor is None else format_datetime(floor)
        return f"Watermark(floor={shown}, overlap={self._overlap!r}, seen={len(self._seen)} rows)"


def since_filter(since: Watermark | None) -> Filter | None:
    """The ``$filter`` of the rows above ``since``'s floor: ``Timestamp gt datetime'<7 digits>'``
    (None for a first read). AND it with a query's own filter; then drop the rows
    :class:`ChangeTracker` says were seen. Every engine's incremental read builds its filter here."""
    if since is None:
        return None
    if not isinstance(since, Watermark):
        raise TypeError(f"since= takes a Watermark (Watermark.at, Watermark.from_string), not {type(since).__name__}")
    floor = since.floor
    return None if floor is None else prop("Timestamp") > floor


class ChangeWindow:
    """An incremental read whose upper end is fixed before it starts: the rows changed after
    ``since`` whose Timestamp is at or below ``until`` (100 ns precision). For engines whose reads
    run elsewhere and may run again (Spark, Ray, a Polars ``LazyFrame``): every run of the read
    returns the same rows (but for rows deleted or updated meanwhile, whose new versions are above
    ``until``), and :attr:`next_watermark` is known before a row is read.

    ``until`` (a datetime, an :class:`EdmDateTime` with its 100 ns digit; naive means UTC)
    defaults to now by this machine's clock minus ``since.overlap``: a row that commits
    while the read runs has a Timestamp above it and comes with the next read (the guarantee of
    :class:`Watermark`: rows visible more than ``overlap`` after their Timestamp can be missed).
    It is never below ``since``'s floor (then the window is empty), and a given one later than now
    (beyond ``since.overlap``, the allowance for clock error) is refused. Keep the window with
    :meth:`to_string` / :meth:`from_string` (a Spark option).
    """

    __slots__ = ("since", "_until")

    def __init__(self, since: Watermark, until: datetime | None = None) -> None:
        if not isinstance(since, Watermark):
            raise TypeError(f"a ChangeWindow starts at a Watermark, not {type(since).__name__}")
        if until is not None and not isinstance(until, datetime):
            raise TableValidationError("until", "the end of a change window is a datetime", repr(until))
        now = time.time_ns() // 100
        if until is None:  # never before the first day of the calendar, whatever the overlap
            ticks = max(now - _overlap_ticks(since.overlap), _FIRST_TICKS)
        else:
            ticks = ticks_of(until)
            # Beyond the overlap (the allowance for clock error), a row written after the read with
            # a Timestamp at or below until is missed by the read and skipped by the next.
            if ticks > now + _overlap_ticks(since.overlap):
                raise TableValidationError(
                    "until", "at most now, by this machine's clock (within the watermark's overlap): a row written "
                    "after the read with a Timestamp at or below until would be missed by this read and the next",
                    f"got {format_datetime(datetime_of_ticks(ticks))}; a naive datetime is read as UTC, so take "
                    "datetime.now(timezone.utc), not datetime.now()",
                )
        self._set(since, ticks)

    def _set(self, since: Watermark, ticks: int) -> None:
        floor = since.floor_ticks
        self.since = since
        self._until = ticks if floor is None or ticks > floor else floor

    @property
    def until(self) -> EdmDateTime:
        """The newest Timestamp the read returns (100 ns precision)."""
        return datetime_of_ticks(self._until)

    @property
    def until_ticks(self) -> int:
        """:attr:`until` as 100 ns ticks since the Unix epoch."""
        return self._until

    @property
    def next_watermark(self) -> Watermark:
        """The watermark after the read: floor :attr:`until`; the rows ``since`` had seen above it stay seen."""
        seen = {
            identity: ticks for identity, ticks in self.since._seen_ticks.items() if ticks is None or ticks > self._until
        }
        result = Watermark(None, overlap=self.since.overlap, seen=seen)
        result._floor = self._until
        return result

    def filter(self) -> Filter:
        """The ``$filter`` of the window: ``Timestamp gt`` the floor (as :func:`since_filter`) and
        ``Timestamp le`` :attr:`until`, all seven digits."""
        upper: Filter = prop("Timestamp") <= self.until
        lower = since_filter(self.since)
        return upper if lower is None else lower & upper

    def keep(self, partition_key: str, row_key: str, etag: str, ticks: int) -> bool:
        """Whether a row the filter returned is delivered: inside the window (checked again here,
        for a service that compares Timestamps more coarsely) and not seen by ``since``."""
        floor = self.since.floor_ticks
        if ticks > self._until or (floor is not None and ticks <= floor):
            return False
        return (partition_key, row_key, etag) not in self.since.seen

    def to_string(self) -> str:
        """A JSON text of the window (``since``'s :meth:`Watermark.to_string` and ``until``)."""
        return json.dumps({"since": json.loads(self.since.to_string()), "until": format_datetime(self.until)},
                          ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_string(cls, text: str) -> ChangeWindow:
        """The window of :meth:`to_string`'s text."""
        try:
            data: Any = json.loads(text) if isinstance(text, str) else None
            if not isinstance(data, dict) or set(data) != {"since", "until"}:
                raise ValueError("not a change window")
            since = Watermark.from_string(json.dumps(data["since"]))
            until = parse_datetime(data["until"])
        except (ValueError, TypeError, OverflowError, TableValidationError) as exc:
            raise TableValidationError(
                "since", "the text of ChangeWindow(watermark).to_string(): the read's upper end is fixed before "
                "it starts, so that its next watermark is known", str(exc)[:200],
            ) from None
        # Taken as it was made: the machine that reads it (a Spark worker) may keep another time.
        window = cls.__new__(cls)
        window._set(since, ticks_of(until))
        return window

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeWindow):
            return NotImplemented
        return (self.since, self._until) == (other.since, other._until)

    def __hash__(self) -> int:
        return hash((self.since, self._until))

    def __repr__(self) -> str:
        return f"ChangeWindow(since={self.since!r}, until={format_datetime(self.until)})"


class ChangeTracker:
    """One incremental read's bookkeeping: which rows to deliver, and the watermark after the read.

    Call :meth:`keep` for every row the read's filter (:func:`since_filter`) returned, in any order
    and from several ranges; :meth:`watermark` gives the next watermark. ``started_ticks`` (100 ns
    ticks since the Unix epoch) is when the read began by this machine's clock (now when None).
    """

    __slots__ = ("since", "_started", "_overlap", "_newest", "_recent", "_prune_at")

    def __init__(self, since: Watermark, started_ticks: int | None = None) -> None:
        if not isinstance(since, Watermark):
            raise TypeError(f"since= takes a Watermark, not {type(since).__name__}")
        self.since = since
        self._started = time.time_ns() // 100 if started_ticks is None else started_ticks
        self._overlap = _overlap_ticks(since.overlap)
        self._newest: int | None = None
        # Every row read with its Timestamp; pruned to the new floor by watermark(). The lower
        # bound of what can be pruned moves as Timestamps arrive, so prune in bulk now and then.
        self._recent: dict[tuple[str, str, str], int] = {}
        self._prune_at = _PRUNE_AT

    def keep(self, partition_key: str, row_key: str, etag: str, ticks: int) -> bool:
        """Whether to deliver the row (False: delivered by an earlier read, same keys and ETag)."""
        identity = (partition_key, row_key, etag)
        if self._newest is None or ticks > self._newest:
            self._newest = ticks
        self._recent[identity] = ticks
        if len(self._recent) > self._prune_at:  # rows above the floor stay: prune again at twice as many
            self._prune(self._next_floor())
            self._prune_at = max(_PRUNE_AT, 2 * len(self._recent))
        return identity not in self.since.seen

    def _next_floor(self) -> int | None:
        old = self.since.floor_ticks
        if self._newest is None:
            return old
        candidate = min(self._newest, self._started) - self._overlap
        return candidate if old is None or candidate > old else old

    def _prune(self, floor: int | None) -> None:
        if floor is not None:
            self._recent = {identity: ticks for identity, ticks in self._recent.items() if ticks > floor}

    def watermark(self) -> Watermark:
        """The watermark after the rows given to :meth:`keep` so far.

        The rows the earlier watermark had seen stay seen while they are above the new floor (or
        their Timestamp is unknown), read again or not: a reader that dropped them before they
        reached :meth:`keep` (another process's range) still skips them next time."""
        floor = self._next_floor()
        self._prune(floor)
        seen: dict[tuple[str, str, str], int | None] = {
            identity: ticks for identity, ticks in self.since._seen_ticks.items()
            if floor is None or ticks is None or ticks > floor
        }
        seen.update(self._recent)
        result = Watermark(None, overlap=self.since.overlap, seen=seen)
        result._floor = floor
        return result

    def watermark_so_far(self) -> Watermark:
        """The watermark of a read that stopped before its end: the floor stays ``since``'s (pages
        come in key order, so a row not reached yet can be older than every row read), and the rows
        read so far are seen, so the next read skips them and reads the rest."""
        seen = dict(self.since._seen_ticks)
        seen.update(self._recent)
        result = Watermark(None, overlap=self.since.overlap, seen=seen)
        result._floor = self.since.floor_ticks
        return result


T = TypeVar("T")


def refuse_partial_read(take: int | None) -> None:
    """Refuse ``take()`` on an incremental read: a read cut short in key order may pass over rows older
    than those it returns, which the next watermark's floor would then skip for good."""
    if take is not None:
        raise TableValidationError(
            "take", "an incremental read (since=, changes()) reads every changed row: take() would leave rows "
            "older than those returned behind the next watermark (read in batches with iter_arrow_batches instead)",
            f"take({take})",
        )


def refuse_resolved_changes(entity_type: object) -> None:
    """Refuse ``changes()`` of a ``resolve()`` query before sending: its results keep no ETag and
    Timestamp, which telling a row's versions apart needs."""
    if getattr(entity_type, "resolver", None) is not None:
        raise TypeError("changes() needs entities that keep their ETag and Timestamp, not a resolve() query's "
                        "results: read the changes, then resolve each entity")


def entity_changes(since: Watermark) -> tuple[Filter | None, ChangeTracker, Callable[[T], T | None]]:
    """What an incremental read of entities needs, for a query of either flavour: the filter to AND
    with the query (None: a first read), the tracker of the next watermark, and the function that
    hands an entity on (or None: delivered by an earlier read). The entities need their keys, ETag
    and Timestamp."""
    from .._entities._entity_access import entity_etag, entity_keys, entity_timestamp

    tracker = ChangeTracker(since)
    condition = since_filter(since)

    def deliver(entity: T) -> T | None:
        pk, rk = entity_keys(entity)
        etag, stamp = entity_etag(entity), entity_timestamp(entity)
        if etag is None or not isinstance(stamp, datetime):
            raise TypeError("changes() needs entities that keep their ETag and Timestamp")
        return entity if tracker.keep(pk, rk, etag, ticks_of(stamp)) else None

    return condition, tracker, deliver


class Changes(Iterator[T]):
    """The results of an incremental read (entities of :meth:`TableQuery.changes`, record batches of
    ``iter_arrow_batches(since=...)``), with the next watermark: :attr:`watermark` covers what was
    handed out so far, the whole read's once the iterator is exhausted. Before then its floor stays
    where the read started (rows are read in key order, not Timestamp order, so a row not reached
    yet can be older than every row handed out): the next read skips the rows handed out and reads
    the rest."""

    def __init__(self, items: Iterator[Any], tracker: ChangeTracker, deliver: Callable[[Any], T | None]) -> None:
        self._items = items
        self._tracker = tracker
        self._deliver = deliver
        self._exhausted = False

    def __iter__(self) -> Changes[T]:
        return self

    def __next__(self) -> T:
        while True:
            try:
                item = next(self._items)
            except StopIteration:
                self._exhausted = True
                raise
            delivered = self._deliver(item)
            if delivered is not None:
                return delivered

    @property
    def watermark(self) -> Watermark:
        """The watermark to pass as ``since=`` to the next read."""
        return self._tracker.watermark() if self._exhausted else self._tracker.watermark_so_far()


class AsyncChanges(AsyncIterator[T]):
    """:class:`Changes` for ``async for`` (the async query's ``iter_arrow_batches(since=...)``)."""

    def __init__(self, items: AsyncIterator[Any], tracker: ChangeTracker, deliver: Callable[[Any], T | None]) -> None:
        self._items = items
        self._tracker = tracker
        self._deliver = deliver
        self._exhausted = False

    def __aiter__(self) -> AsyncChanges[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            try:
                item = await self._items.__anext__()
            except StopAsyncIteration:
                self._exhausted = True
                raise
            delivered = self._deliver(item)
            if delivered is not None:
                return delivered

    @property
    def watermark(self) -> Watermark:
        """The watermark to pass as ``since=`` to the next read (see :class:`Changes`)."""
        return self._tracker.watermark() if self._exhausted else self._tracker.watermark_so_far()
