"""A fault-injecting HTTP proxy for tests (standard library only; not part of the package).

:class:`FaultProxy` listens on loopback and forwards every request, unchanged,
to an upstream Table endpoint (Azurite, the bundled emulator, a stub). A test
programs it with :meth:`FaultProxy.inject`: for the next ``times`` requests
that match a method and/or a path regex, the proxy misbehaves in one of the
ways of :class:`Fault` instead of forwarding transparently::

    with FaultProxy(azurite_endpoint) as proxy:
        proxy.inject(Fault.SERVER_BUSY, times=2, method="POST", path=r"/mytable$")
        account = CloudStorageAccount.parse(proxy.connection_string(conn_str))
        ...
        assert proxy.count(Fault.SERVER_BUSY) == 2

Request fidelity: the request line (method and the raw request target, so the
account segment and the query string), every header in its original order and
spelling (``Authorization``, ``x-ms-date``, ``Host`` ...) and the body bytes are
sent upstream exactly as received, so Shared Key and SAS signatures still
verify: the canonicalized resource is built from the URL path, which does not
change when the client's ``TableEndpoint`` is ``http://127.0.0.1:<proxy
port>/devstoreaccount1`` (:attr:`FaultProxy.endpoint`).

Connections: the client side keeps HTTP/1.1 keep-alive connections open as
the client asks; each forwarded request uses a fresh upstream connection. The
upstream response is relayed with its status, reason and headers, minus the
hop-by-hop ones (``Connection``, ``Keep-Alive``, ``Transfer-Encoding``), with
the whole body and a ``Content-Length``.

Bounds: a rule fires at most ``times`` times; delays are capped by
``max_delay``; the proxy shuts itself down after ``lifetime`` seconds even if
the test forgets to; idle client connections are dropped after
``idle_timeout`` seconds; upstream calls time out after ``upstream_timeout``.
``latency`` (seconds) delays every forwarded request, like a network round
trip (the benchmarks use 20 ms).

Every request handled is recorded as a :class:`ProxyEvent` (what the proxy
did, the status upstream and client saw, request ids): :attr:`FaultProxy.events`
(which first waits for requests still in hand, so a test can read it right
after its client call returned). Nothing is logged and nothing is printed.

Ordering without clocks: each :class:`FaultRule` sets threading events as the
proxy applies it (``received``: the request is in hand, ``forwarded``: the
upstream answered it, ``handled``: it is recorded), so a test that must act
while a request is held waits on them instead of sleeping. A client's read
timeout, though, is a clock: with one timeout for every attempt, the attempts a
delay fault holds must outlast it while the clean ones must not, which no
single value guarantees on a busy machine. :class:`FaultSender` (and
:class:`AsyncFaultSender`) resolve that: wrapped around a client's sender, they
ask the proxy, before each attempt goes out, which fault it will meet
(:meth:`FaultProxy.decide`) and tag the request with that decision
(:data:`DECISION_HEADER`, removed before forwarding), so the attempts a delay
fault holds get a short read timeout and every other attempt keeps the
client's own (in the tests a generous one: a failure detector only). Delays are
then given as an upper bound: the proxy holds the request until the client
gives up. A read timeout on a clean attempt is then never a race but a fault a
test asks for (a DELAY_BEFORE_ANSWER rule for that attempt).

The pieces: :mod:`fault_rules` (faults, rules, events, decisions), :mod:`fault_handler`
(one client connection), :mod:`fault_proxy` (the proxy), :mod:`fault_senders` (the
senders that ask it first). Tests import them all from here.
"""

from __future__ import annotations

from fault_proxy import FaultProxy
from fault_rules import (
    AMBIGUOUS_FAULTS,
    DECISION_HEADER,
    DELAY_FAULTS,
    ENDLESS_FAULTS,
    ERROR_FAULTS,
    Decision,
    Fault,
    FaultRule,
    ProxyEvent,
    replace_table_endpoint,
)
from fault_senders import AsyncFaultSender, FaultSender

__all__ = [
    "Fault",
    "AMBIGUOUS_FAULTS",
    "FaultRule",
    "ProxyEvent",
    "FaultProxy",
    "Decision",
    "DECISION_HEADER",
    "DELAY_FAULTS",
    "ENDLESS_FAULTS",
    "ERROR_FAULTS",
    "FaultSender",
    "AsyncFaultSender",
    "replace_table_endpoint",
]

