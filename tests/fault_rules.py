"""What the fault proxy is told and what it records (tests/faults.py is the front): the
faults, the rules that program them, the events it records, and the decisions it hands to
the senders that ask it first."""

from __future__ import annotations

import enum
import re
import threading
from dataclasses import dataclass, field

__all__ = [
    "AMBIGUOUS_FAULTS",
    "DECISION_HEADER",
    "DELAY_FAULTS",
    "ENDLESS_FAULTS",
    "ERROR_FAULTS",
    "Decision",
    "Fault",
    "FaultRule",
    "ProxyEvent",
    "replace_table_endpoint",
]


class Fault(str, enum.Enum):
    """What the proxy does to a matching request instead of forwarding it cleanly."""

    #: Answer 503 ServerBusy (JSON or XML ``odata.error`` body, ``x-ms-error-code``); not forwarded.
    SERVER_BUSY = "server_busy"
    #: Answer 500 InternalError; not forwarded.
    INTERNAL_ERROR = "internal_error"
    #: Answer 429 TooManyRequests (Cosmos DB's Table API throttles this way); not forwarded.
    TOO_MANY_REQUESTS = "too_many_requests"
    #: Hold the request for ``delay`` seconds before forwarding; if the client gives up
    #: (closes its connection) meanwhile, the request is dropped and never forwarded.
    DELAY_BEFORE_FORWARD = "delay_before_forward"
    #: Forward at once, then hold the answer for ``delay`` seconds; if the client gives up
    #: meanwhile the answer is dropped (the server did the work: ambiguous).
    DELAY_BEFORE_ANSWER = "delay_before_answer"
    #: Read the request, then reset the connection (SO_LINGER 0 close); not forwarded.
    RESET = "reset"
    #: Forward, read the upstream answer, then reset the connection (ambiguous).
    FORWARD_THEN_RESET = "forward_then_reset"
    #: Forward, then send the headers and half of the body and close the connection
    #: (ambiguous). An empty body cannot be halved, so then the cut falls inside the
    #: status line (``HTTP/1.``), which no client can mistake for a complete answer.
    TRUNCATE = "truncate"
    #: Read the request, then send a status line and a header block one byte every ``pace``
    #: seconds, a block that never ends (header lines follow one another for as long as the
    #: client reads); not forwarded. Each byte comes well inside any read timeout: only a
    #: bound on the answer as a whole ends it.
    TRICKLE_HEADERS = "trickle_headers"
    #: As TRICKLE_HEADERS, but a whole header line every ``pace`` seconds: an endless header block.
    ENDLESS_HEADERS = "endless_headers"


#: Faults answered by the proxy itself with an error status (they take extra ``headers``).
ERROR_FAULTS = frozenset({Fault.SERVER_BUSY, Fault.INTERNAL_ERROR, Fault.TOO_MANY_REQUESTS})
#: Faults after which the request has reached the server: a write may have been applied.
AMBIGUOUS_FAULTS = frozenset({Fault.DELAY_BEFORE_ANSWER, Fault.FORWARD_THEN_RESET, Fault.TRUNCATE})
#: Faults that hold a request until the client gives up (or ``delay`` runs out).
DELAY_FAULTS = frozenset({Fault.DELAY_BEFORE_FORWARD, Fault.DELAY_BEFORE_ANSWER})
#: Faults whose answer never ends: the proxy keeps sending until the client gives up or it stops.
ENDLESS_FAULTS = frozenset({Fault.TRICKLE_HEADERS, Fault.ENDLESS_HEADERS})
#: The request header by which a :class:`FaultSender` tells the proxy which of its
#: decisions an attempt carries. The proxy removes it before recording and forwarding
#: (it is added after signing and is part of no signature).
DECISION_HEADER = "X-Fault-Proxy-Decision"


@dataclass
class FaultRule:
    """A programmed fault: applies to the next ``times`` requests it matches.

    ``method`` (case-insensitive) and ``path`` (a regex searched in the raw
    request target, path and query) narrow the match; None matches anything.
    ``remaining`` counts down as the rule fires. ``headers`` are added to the answer of an
    error fault (``Retry-After``, ``x-ms-retry-after-ms`` ...).

    The signals (set the first time the rule fires, never cleared) order a test's
    actions after the proxy's: ``received`` once the proxy has the request in hand
    and has chosen this rule for it (a delay fault is now holding it), ``forwarded``
    once the upstream has answered it (DELAY_BEFORE_ANSWER is now holding the
    answer), ``handled`` once the proxy is done with it and has recorded it.
    """

    fault: Fault
    times: int
    method: str | None = None
    path: re.Pattern[str] | None = None
    delay: float = 3.0
    pace: float = 0.05
    headers: tuple[tuple[str, str], ...] = ()
    remaining: int = field(init=False)
    received: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)
    forwarded: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)
    handled: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.remaining = self.times

    def matches(self, method: str, target: str) -> bool:
        if self.remaining <= 0:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or self.path.search(target) is not None


@dataclass
class ProxyEvent:
    """One request the proxy handled.

    ``action`` is the :class:`Fault` applied or ``"forward"``. ``target`` is the
    request target with any SAS ``sig`` value replaced by ``REDACTED``;
    ``headers`` (the request headers exactly as received, secrets included) is
    kept out of the repr. ``upstream_status`` is what the upstream answered
    (None when not forwarded), ``client_status`` the status the client was sent
    in full (None when it got no complete answer), ``request_id`` the
    ``x-ms-request-id`` sent to the client (or upstream's, when the answer was
    lost), ``client_gave_up`` whether the client closed the connection during a
    delay.
    """

    seq: int
    method: str
    target: str
    action: str
    client_request_id: str | None
    body_length: int
    headers: list[tuple[str, str]] = field(repr=False, default_factory=list)
    forwarded: bool = False
    upstream_status: int | None = None
    client_status: int | None = None
    request_id: str | None = None
    client_gave_up: bool = False
    error: str | None = None
    start: float = 0.0
    end: float = 0.0

    def header(self, name: str) -> str | None:
        """The first request header called ``name`` (case-insensitive), as received."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


@dataclass(frozen=True)
class Decision:
    """What the proxy will do to one attempt a :class:`FaultSender` is about to send.

    ``rule`` is the rule it will apply (None: forward cleanly); ``id`` is the value of
    :data:`DECISION_HEADER` that ties the attempt to it.
    """

    id: str
    rule: FaultRule | None

    @property
    def fault(self) -> Fault | None:
        return self.rule.fault if self.rule is not None else None


def replace_table_endpoint(connection_string: str, endpoint: str) -> str:
    """``connection_string`` with its ``TableEndpoint`` set to ``endpoint`` (added if absent)."""
    parts = [p for p in connection_string.split(";") if p.strip()]
    kept = [p for p in parts if p.split("=", 1)[0].strip().lower() != "tableendpoint"]
    kept.append(f"TableEndpoint={endpoint}")
    return ";".join(kept) + ";"
