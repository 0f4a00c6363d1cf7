"""The fault-injecting proxy (tests/faults.py is the front and says how it works): its
lifecycle, its rules, the decisions it hands to senders and the events it records."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from types import TracebackType
from urllib.parse import urlsplit

from fault_handler import ProxyHandler, ProxyServer
from fault_rules import Decision, Fault, FaultRule, ProxyEvent, replace_table_endpoint

__all__ = ["FaultProxy"]

_SIG = re.compile(r"([?&]sig=)[^&#]*", re.IGNORECASE)


class FaultProxy:
    """A loopback proxy in front of ``upstream`` that injects programmed faults.

    ``upstream`` is the upstream table endpoint (``http://host:port[/account]``);
    only http is supported. :attr:`endpoint` is the same endpoint through the
    proxy. Use as a context manager (or :meth:`start` / :meth:`close`).
    """

    def __init__(
        self,
        upstream: str,
        *,
        lifetime: float = 300.0,
        max_delay: float = 30.0,
        idle_timeout: float = 30.0,
        upstream_timeout: float = 30.0,
        latency: float = 0.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.upstream_path = parts.path.rstrip("/")
        self.lifetime = lifetime
        self.max_delay = max_delay
        self.idle_timeout = idle_timeout
        self.upstream_timeout = upstream_timeout
        if not 0 <= latency <= max_delay:
            raise ValueError(f"latency must be between 0 and max_delay ({max_delay}), got {latency!r}")
        #: Seconds every forwarded request waits first: the round trip of a real network, for
        #: benchmarks of concurrency (each connection has its own handler thread, so requests in
        #: flight at once wait at the same time, as they would on the wire).
        self.latency = float(latency)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._rules: list[FaultRule] = []
        self._events: list[ProxyEvent] = []
        self._seq = 0
        self._in_flight = 0
        self._accepted = 0
        self._connections: set[socket.socket] = set()
        # Decisions handed to FaultSenders: id -> rule, until the tagged request arrives;
        # and the ids not yet recorded (an attempt on its way, or in hand).
        self._decisions: dict[str, FaultRule | None] = {}
        self._unrecorded: set[str] = set()
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._server: ProxyServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._closed_once = False

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        if self._server is not None:
            raise RuntimeError("FaultProxy already started")
        server = ProxyServer(("127.0.0.1", 0), ProxyHandler)
        server.proxy = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-proxy", daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        """Stop accepting, drop every client connection and wait briefly for handlers. Idempotent."""
        with self._lock:
            if self._closed_once or self._server is None:
                return
            self._closed_once = True
            connections = list(self._connections)
        self._stopping.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        server = self._server
        server.shutdown()
        server.server_close()
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.wait_idle(timeout=5)
        self._finished.set()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` (by the test or at the end of ``lifetime``) has finished."""
        return self._finished.is_set()

    def wait_closed(self, timeout: float = 30.0) -> bool:
        """Wait until :meth:`close` has finished; False if that took longer than ``timeout``."""
        return self._finished.wait(timeout)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FaultProxy not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        """The upstream endpoint as seen through the proxy: same path, the proxy's host and port."""
        return self.url + self.upstream_path

    def connection_string(self, connection_string: str) -> str:
        """``connection_string`` with its TableEndpoint pointed at :attr:`endpoint`."""
        return replace_table_endpoint(connection_string, self.endpoint)

    # ------------------------------------------------------------ programming

    def inject(
        self,
        fault: Fault,
        times: int = 1,
        *,
        method: str | None = None,
        path: str | None = None,
        delay: float = 3.0,
        pace: float = 0.05,
        headers: dict[str, str] | None = None,
    ) -> FaultRule:
        """Apply ``fault`` to the next ``times`` requests matching ``method`` and ``path`` (a regex).

        Rules are tried in the order they were added; the first one that matches
        and has not run out fires. ``delay`` (seconds, capped by ``max_delay``)
        is used by the two delay faults: make it longer than the client's timeout.
        ``pace`` (seconds between two sends, capped by ``max_delay``) is that of the
        endless faults (TRICKLE_HEADERS, ENDLESS_HEADERS): keep it far inside the
        client's read timeout, so that no single wait for bytes ends the answer.
        ``headers`` are added to the answer of an error fault (SERVER_BUSY, INTERNAL_ERROR,
        TOO_MANY_REQUESTS), e.g. ``{"Retry-After": "2"}``.
        """
        if not isinstance(fault, Fault):
            raise ValueError(f"fault must be a Fault, got {fault!r}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be an int >= 1, got {times!r}")
        if not 0 <= delay <= self.max_delay:
            raise ValueError(f"delay must be between 0 and max_delay ({self.max_delay}), got {delay!r}")
        if not 0 < pace <= self.max_delay:
            raise ValueError(f"pace must be > 0 and at most max_delay ({self.max_delay}), got {pace!r}")
        rule = FaultRule(
            fault, times, method, re.compile(path) if path is not None else None, float(delay), float(pace),
            tuple((headers or {}).items()),
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def decide(self, method: str, target: str) -> Decision:
        """Take, now, the rule the next request for ``method`` and ``target`` would meet.

        For an attempt about to be sent with :data:`DECISION_HEADER` set to the
        returned decision's ``id`` (what :class:`FaultSender` does): the proxy applies
        exactly this rule (or none) to that request whenever it arrives, whatever else
        arrives first, and :attr:`events` waits for it to be recorded.
        """
        with self._lock:
            rule = self._take_locked(method, target)
            decision = Decision(uuid.uuid4().hex, rule)
            self._decisions[decision.id] = rule
            self._unrecorded.add(decision.id)
        return decision

    def withdraw(self, decision: Decision) -> None:
        """Forget ``decision``: its attempt never reached the proxy (its rule is not given back)."""
        with self._idle:
            self._decisions.pop(decision.id, None)
            self._unrecorded.discard(decision.id)
            self._idle.notify_all()

    def clear(self) -> None:
        """Forget every rule (already recorded events stay)."""
        with self._lock:
            self._rules.clear()

    @property
    def pending(self) -> int:
        """How many more faults the current rules will inject."""
        with self._lock:
            return sum(rule.remaining for rule in self._rules)

    # ------------------------------------------------------------ records

    @property
    def events(self) -> list[ProxyEvent]:
        """Every request handled so far, in arrival order (a copy).

        Waits first (up to 30 s, a bound for a stuck proxy only) until no request is
        being handled and every attempt a :class:`FaultSender` announced has been
        recorded: a client may hold its answer, or have given up on an attempt, before
        the proxy has finished with it, or even read it.
        """
        self.wait_idle(timeout=30.0)
        with self._lock:
            return sorted(self._events, key=lambda e: e.seq)

    @property
    def connections_accepted(self) -> int:
        """How many client connections the proxy has accepted (keep-alive reuses one)."""
        with self._lock:
            return self._accepted

    def count(self, action: Fault | str | None = None) -> int:
        """How many requests were handled (with ``action``, when given: a Fault or ``"forward"``).

        Waits as :attr:`events` does."""
        self.wait_idle(timeout=30.0)
        with self._lock:
            if action is None:
                return len(self._events)
            name = action.value if isinstance(action, Fault) else action
            return sum(1 for e in self._events if e.action == name)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being handled and every decided attempt is recorded;
        False if that took longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight or (self._unrecorded and not self._stopping.is_set()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    # ------------------------------------------------------------ handler callbacks

    def _take(self, method: str, target: str) -> FaultRule | None:
        with self._lock:
            return self._take_locked(method, target)

    def _take_locked(self, method: str, target: str) -> FaultRule | None:
        for rule in self._rules:
            if rule.matches(method, target):
                rule.remaining -= 1
                return rule
        return None

    def _decided(self, decision_id: str, method: str, target: str) -> FaultRule | None:
        with self._lock:
            if decision_id in self._decisions:
                return self._decisions.pop(decision_id)
            return self._take_locked(method, target)  # a tag this proxy never issued: match as usual

    def _new_event(self, handler: ProxyHandler, body_length: int, rule: FaultRule | None) -> ProxyEvent:
        with self._lock:
            self._seq += 1
            seq = self._seq
        return ProxyEvent(
            seq=seq,
            method=handler.command,
            target=_SIG.sub(r"\1REDACTED", handler.path),
            action=rule.fault.value if rule is not None else "forward",
            client_request_id=handler.headers.get("x-ms-client-request-id"),
            body_length=body_length,
            headers=list(handler.headers.items()),
            start=time.monotonic(),
        )

    def _record(self, event: ProxyEvent, decision_id: str | None = None) -> None:
        with self._idle:
            self._events.append(event)
            if decision_id is not None:
                self._unrecorded.discard(decision_id)
                self._idle.notify_all()

    def _begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def _end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.add(sock)
            self._accepted += 1
        if self._stopping.is_set():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.discard(sock)

    def __repr__(self) -> str:
        state = "closed" if self._stopping.is_set() else ("running" if self._server is not None else "new")
        return f"FaultProxy(upstream={self.upstream!r}, {state}, events={len(self._events)}, pending={self.pending})"
