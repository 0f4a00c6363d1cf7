"""sqlite3 storage for the emulator: tables, entities, timestamps.

One connection is shared by all request threads behind one lock; each
request (or batch change set) runs as one transaction, so a change set is
all-or-nothing and a query sees a consistent snapshot.

PartitionKey and RowKey are stored as BLOBs holding their UTF-16 big-endian
encoding, so that sqlite's byte order (``memcmp``) is the service's key order:
by UTF-16 code units, in which a character above U+FFFF (a surrogate pair)
sorts before U+E000..U+FFFF. (Text in sqlite's BINARY collation would order
by code point.) Databases written by earlier versions, which stored the keys
as TEXT, are converted when opened (``PRAGMA user_version`` 0 -> 1).

An entity's properties are stored once, as their minimal-metadata JSON members
(``jmin``, which is lossless: every type a JSON value cannot tell is annotated),
so that a query page is assembled without decoding them. The ``props`` column
(a typed encoding) is empty in rows written now; rows written by earlier
versions keep theirs, and either is read.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from ._values import Props, json_fragment, props_from_json_members, props_from_storage, utf16_key, wire_datetime

__all__ = ["Storage", "EntityRow", "etag_for"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (
    lname TEXT PRIMARY KEY,
    name  TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entities (
    tbl   TEXT NOT NULL,
    pk    BLOB NOT NULL,
    rk    BLOB NOT NULL,
    ts    TEXT NOT NULL,
    props TEXT NOT NULL,
    jmin  TEXT NOT NULL,
    PRIMARY KEY (tbl, pk, rk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""


#: ``PRAGMA user_version`` of the current layout (1: keys stored as UTF-16BE BLOBs).
SCHEMA_VERSION = 1


def _key(text: str) -> bytes:
    return utf16_key(text)


_UTF16, _PASS = "utf-16-be", "surrogatepass"


def etag_for(timestamp: str) -> str:
    """The ETag of an entity written at ``timestamp`` (canonical Edm.DateTime text), in wire form."""
    return "W/\"datetime'" + wire_datetime(timestamp).replace(":", "%3A") + "'\""


@dataclass
class EntityRow:
    """A stored entity: keys, Timestamp text and properties (decoded lazily).

    ``json_members`` is the properties' minimal-metadata JSON, pre-rendered at
    write time so that JSON queries need not decode and re-encode them.
    """

    pk: str
    rk: str
    timestamp: str
    raw: str
    json_members: str = ""
    _props: Props | None = None

    @property
    def props(self) -> Props:
        if self._props is None:
            self._props = props_from_storage(self.raw) if self.raw else props_from_json_members(self.json_members)
        return self._props

    @property
    def etag(self) -> str:
        return etag_for(self.timestamp)


class Storage:
    """Tables and entities in one sqlite database (``":memory:"`` or a file path)."""

    def __init__(self, path: str = ":memory:", *, clock_ns: Callable[[], int] | None = None) -> None:
        self.path = path
        #: Where Timestamps come from: nanoseconds since the Unix epoch (``time.time_ns`` unless given;
        #: a test gives its own to write a row at a chosen 100 ns tick).
        self.clock_ns: Callable[[], int] = clock_ns or time.time_ns
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=" + ("MEMORY" if path == ":memory:" else "WAL"))
        self._conn.execute("PRAGMA synchronous=OFF" if path == ":memory:" else "PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._upgrade()
        self.lock = threading.RLock()
        self._last_ticks = 0
        self._stamp_second = -1
        self._stamp_head = ""
        self._in_tx = False
        latest = self._conn.execute("SELECT MAX(ts) FROM entities").fetchone()[0]
        if latest:  # a reopened file: never hand out an older Timestamp (ETag) again
            stamp = datetime.strptime(latest[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
            self._last_ticks = int(stamp.timestamp()) * 10_000_000 + int(latest[20:27])

    def _upgrade(self) -> None:
        """Convert a database of an earlier layout (TEXT keys) to this one."""
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version >= SCHEMA_VERSION:
            return
        self._conn.execute("BEGIN")
        try:
            rows = self._conn.execute(
                "SELECT tbl, pk, rk FROM entities WHERE typeof(pk) = 'text' OR typeof(rk) = 'text'"
            ).fetchall()
            for tbl, pk, rk in rows:
                new_pk = _key(pk) if isinstance(pk, str) else pk
                new_rk = _key(rk) if isinstance(rk, str) else rk
                self._conn.execute(
                    "UPDATE entities SET pk = ?, rk = ? WHERE tbl = ? AND pk = ? AND rk = ?",
                    (new_pk, new_rk, tbl, pk, rk),
                )
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        with self.lock:
            self._conn.close()

    # -------------------------------------------------------------- transactions

    @contextmanager
    def transaction(self) -> Iterator[Storage]:
        """Hold the lock and run the body as one transaction (rolled back on an exception)."""
        with self.lock:
            if self._in_tx:  # nested use (a batch operation): the outer transaction decides
                yield self
                return
            self._conn.execute("BEGIN")
            self._in_tx = True
            try:
                yield self
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._in_tx = False

    @contextmanager
    def reading(self) -> Iterator[Storage]:
        """Hold the lock for a consistent read."""
        with self.lock:
            yield self

    def rollback(self) -> None:
        """Undo the current transaction's changes and start a new one (used by batches)."""
        self._conn.execute("ROLLBACK")
        self._conn.execute("BEGIN")

    # -------------------------------------------------------------- timestamps

    def next_timestamp(self) -> str:
        """A Timestamp strictly later than any handed out before (so every ETag is unique)."""
        with self.lock:
            ticks = self.clock_ns() // 100
            if ticks <= self._last_ticks:
                ticks = self._last_ticks + 1
            self._last_ticks = ticks
            seconds, remainder = divmod(ticks, 10_000_000)
            if seconds != self._stamp_second:  # the date and time of day change once a second
                self._stamp_second = seconds
                self._stamp_head = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
            return self._stamp_head + "%07dZ" % remainder

    # -------------------------------------------------------------- tables

    def get_table(self, name: str) -> str | None:
        """The stored name of table ``name`` (names are case-insensitive), or None."""
        row = self._conn.execute("SELECT name FROM tables WHERE lname = ?", (name.lower(),)).fetchone()
        return None if row is None else str(row[0])

    def create_table(self, name: str) -> bool:
        """Create the table; False when it exists already."""
        try:
            self._conn.execute("INSERT INTO tables (lname, name) VALUES (?, ?)", (name.lower(), name))
        except sqlite3.IntegrityError:
            return False
        return True

    def delete_table(self, name: str) -> bool:
        lname = name.lower()
        cur = self._conn.execute("DELETE FROM tables WHERE lname = ?", (lname,))
        if cur.rowcount == 0:
            return False
        self._conn.execute("DELETE FROM entities WHERE tbl = ?", (lname,))
        self._conn.execute("DELETE FROM meta WHERE key = ?", ("acl:" + lname,))
        return True

    def iter_tables(self, start: str | None = None) -> Iterator[str]:
        """Table names in order of their lower-cased names, from ``start`` (a lower-cased name)."""
        if start is None:
            cur = self._conn.execute("SELECT name FROM tables ORDER BY lname")
        else:
            cur = self._conn.execute("SELECT name FROM tables WHERE lname >= ? ORDER BY lname", (start,))
        for (name,) in cur:
            yield str(name)

    # -------------------------------------------------------------- service-level state

    def get_meta(self, key: str) -> str | None:
        """Stored service-level state (a table's ACL, the service properties) as JSON text, or None."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str | None) -> None:
        """Store (or, with None, remove) service-level state."""
        if value is None:
            self._conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -------------------------------------------------------------- entities

    def get_entity(self, table: str, pk: str, rk: str) -> EntityRow | None:
        row = self._conn.execute(
            "SELECT ts, props, jmin FROM entities WHERE tbl = ? AND pk = ? AND rk = ?",
            (table.lower(), _key(pk), _key(rk)),
        ).fetchone()
        if row is None:
            return None
        return EntityRow(pk, rk, row[0], row[1], row[2])

    def put_entity(self, table: str, pk: str, rk: str, props: Props, *, exists: bool) -> str:
        """Insert (``exists`` False) or overwrite an entity; returns its new Timestamp."""
        ts = self.next_timestamp()
        raw = ""  # the properties are read back from their JSON members (see the module docstring)
        members = json_fragment(props)
        if exists:
            self._conn.execute(
                "UPDATE entities SET ts = ?, props = ?, jmin = ? WHERE tbl = ? AND pk = ? AND rk = ?",
                (ts, raw, members, table.lower(), _key(pk), _key(rk)),
            )
        else:
            self._conn.execute(
                "INSERT INTO entities (tbl, pk, rk, ts, props, jmin) VALUES (?, ?, ?, ?, ?, ?)",
                (table.lower(), _key(pk), _key(rk), ts, raw, members),
            )
        return ts

    def insert_entities(self, table: str, entities: list[tuple[str, str, Props]]) -> list[str] | None:
        """Insert new entities in one statement: their Timestamps, or None when one exists already
        (then some may be written: the caller rolls its transaction back)."""
        lname = table.lower()
        stamps = [self.next_timestamp() for _ in entities]
        rows = [(lname, _key(pk), _key(rk), ts, "", json_fragment(props))
                for (pk, rk, props), ts in zip(entities, stamps)]
        try:
            self._conn.executemany(
                "INSERT INTO entities (tbl, pk, rk, ts, props, jmin) VALUES (?, ?, ?, ?, ?, ?)", rows
            )
        except sqlite3.IntegrityError:
            return None
        return stamps

    def delete_entity(self, table: str, pk: str, rk: str) -> None:
        self._conn.execute(
            "DELETE FROM entities WHERE tbl = ? AND pk = ? AND rk = ?", (table.lower(), _key(pk), _key(rk))
        )

    def scan(
        self,
        table: str,
        *,
        start: tuple[str, str] | None = None,
        conditions: list[tuple[str, str, str]] | None = None,
        chunk: int = 512,
    ) -> Iterator[EntityRow]:
        """Entities of ``table`` in (PartitionKey, RowKey) order from key ``start`` (inclusive).

        The order is the service's: by UTF-16 code units (see the module docstring).

        ``conditions`` are ``(column, operator, value)`` predicates on ``pk``/``rk``;
        only rows meeting all of them are returned. Rows are fetched ``chunk`` at a
        time, each chunk with a fresh statement, so the caller may stop early at no
        cost. Each statement seeks to the later of the conditions' lower bound and
        the position reached (see :func:`key_bounds`): the primary key index is
        entered there and left at the upper bound, so a page deep in a range costs
        what the first one does.
        """
        lname = table.lower()
        conds = [(column, op, _key(value)) for column, op, value in conditions or ()]
        for column, op, _ in conds:
            assert column in ("pk", "rk") and op in ("=", ">", ">=", "<", "<=")
        position = None if start is None else (_key(start[0]), _key(start[1]), True)
        while True:
            where, params = key_bounds(conds, position)
            sql = "SELECT pk, rk, ts, props, jmin FROM entities WHERE tbl = ?" + where + " ORDER BY pk, rk LIMIT ?"
            rows = self._conn.execute(sql, [lname, *params, chunk]).fetchall()
            for pk, rk, ts, raw, members in rows:
                yield EntityRow(pk.decode(_UTF16, _PASS), rk.decode(_UTF16, _PASS), ts, raw, members)
            if len(rows) < chunk:
                return
            position = (rows[-1][0], rows[-1][1], False)

    def reset(self) -> None:
        """Delete every table and entity."""
        with self.lock:
            self._conn.execute("DELETE FROM entities")
            self._conn.execute("DELETE FROM tables")
            self._conn.execute("DELETE FROM meta")


# A bound on the (pk, rk) order: ("pk", key, inclusive) bounds PartitionKey alone, ("row", (pk, rk),
# inclusive) the pair. Sort keys make the tightest bound of each side the max (lower) or min (upper).
_Bound = tuple[str, Any, bool]


def _lower_order(bound: _Bound) -> tuple[bytes, int, bytes, int]:
    kind, key, inclusive = bound
    if kind == "pk":  # pk >= X starts at (X, ''); pk > X after every (X, rk)
        return (key, 0 if inclusive else 1, b"", 0)
    return (key[0], 0, key[1], 0 if inclusive else 1)


def _upper_order(bound: _Bound) -> tuple[bytes, int, bytes, int]:
    kind, key, inclusive = bound
    if kind == "pk":  # pk < X ends before (X, ''); pk <= X after every (X, rk)
        return (key, 1 if inclusive else 0, b"", 0)
    return (key[0], 0, key[1], 1 if inclusive else 0)


def key_bounds(
    conditions: list[tuple[str, str, bytes]], position: tuple[bytes, bytes, bool] | None,
) -> tuple[str, list[bytes]]:
    """The WHERE terms (after ``tbl = ?``) and parameters of a scan over encoded keys.

    sqlite enters the primary key index at one lower bound only: given ``pk >= ?`` beside
    ``(pk, rk) > (?, ?)`` it may pick the first and filter row by row from the start of the
    range. So the bounds are folded here: of the lower bounds (the conditions' and the
    ``position`` reached, ``(pk, rk, inclusive)``) only the tightest is written, likewise of
    the upper bounds, and RowKey bounds join them as (pk, rk) pairs when PartitionKey is
    pinned by an equality. Any other RowKey condition is a plain term, checked per row.
    """
    pinned = {value for column, op, value in conditions if column == "pk" and op == "="}
    pin = next(iter(pinned)) if len(pinned) == 1 else None
    lowers: list[_Bound] = []
    uppers: list[_Bound] = []
    terms: list[str] = []
    params: list[bytes] = []
    for column, op, value in conditions:
        if column == "pk" or pin is not None:
            kind, key = ("pk", value) if column == "pk" else ("row", (pin, value))
            if op in ("=", ">", ">="):
                lowers.append((kind, key, op != ">"))
            if op in ("=", "<", "<="):
                uppers.append((kind, key, op != "<"))
        else:
            terms.append(f" AND rk {op} ?")
            params.append(value)
    if position is not None:
        lowers.append(("row", position[:2], position[2]))
    where: list[str] = []
    values: list[bytes] = []
    if lowers:
        kind, key, inclusive = max(lowers, key=_lower_order)
        op = ">=" if inclusive else ">"
        if kind == "pk":
            where.append(f" AND pk {op} ?")
            values.append(key)
        else:
            where.append(f" AND (pk, rk) {op} (?, ?)")
            values.extend(key)
    if uppers:
        kind, key, inclusive = min(uppers, key=_upper_order)
        op = "<=" if inclusive else "<"
        if kind == "pk":
            where.append(f" AND pk {op} ?")
            values.append(key)
        else:
            where.append(f" AND (pk, rk) {op} (?, ?)")
            values.extend(key)
    return "".join(where) + "".join(terms), values + params
