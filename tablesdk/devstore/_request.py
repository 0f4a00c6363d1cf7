"""What the emulated service serves: one :class:`Request` in, one :class:`Response` out.

A request becomes a :class:`Call` once it is authenticated and its version is
known; every operation module takes the call. The versions the service accepts
and the limits every operation checks against live here too, below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._auth import AuthResult, SasGrant
from ._errors import error

__all__ = [
    "Request", "Response", "Call", "effective_method", "KNOWN_VERSIONS", "HTTP_METHODS", "V_UPSERT", "V_JSON",
    "V_NO_ATOM", "LEGACY_VERSION", "MAX_BODY", "MAX_BATCH_OPERATIONS", "MAX_PAGE",
]

#: Service versions the emulator accepts in ``x-ms-version`` (others: 400 InvalidHeaderValue).
KNOWN_VERSIONS = frozenset("""
2009-04-14 2009-07-17 2009-09-19 2011-08-18 2012-02-12 2013-08-15 2014-02-14 2015-02-21 2015-04-05
2015-07-08 2015-12-11 2016-05-31 2017-04-17 2017-07-29 2017-11-09 2018-03-28 2018-11-09 2019-02-02
2019-07-07 2019-10-10 2019-12-12 2020-02-10 2020-04-08 2020-06-12 2020-08-04 2020-10-02 2020-12-06
2021-02-12 2021-04-10 2021-06-08 2021-08-06 2021-10-04 2021-12-02 2022-11-02 2023-01-03 2023-05-03
2023-08-03 2023-11-03 2024-02-04 2024-05-04 2024-08-04 2024-11-04 2025-01-05 2025-05-05 2025-07-05
2025-11-05 2026-02-06 2026-04-06 2026-06-06
""".split())
#: The HTTP methods the service serves; any other (BREW, TRACE, CONNECT, lower-case get) is 405.
HTTP_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "MERGE", "PATCH", "OPTIONS"})
V_UPSERT = "2011-08-18"  # Insert Or Replace / Insert Or Merge (PUT/MERGE without If-Match)
V_JSON = "2013-08-15"  # JSON payloads and the Prefer header
V_NO_ATOM = "2015-12-11"  # Atom refused from here on
LEGACY_VERSION = "2009-09-19"  # what a request without x-ms-version is processed as

MAX_BODY = 4 * 1024 * 1024
MAX_BATCH_OPERATIONS = 100
MAX_PAGE = 1000


@dataclass
class Request:
    """One HTTP request as the service sees it. ``headers`` keys are lower case."""

    method: str
    raw_path: str
    raw_query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    host: str = "127.0.0.1"
    secure: bool = False
    client_ip: str = "127.0.0.1"
    x_http_methods: list[str] = field(default_factory=list)
    body_too_large: bool = False


@dataclass
class Response:
    """What the service answers: the status, the headers in the order they are sent, the body."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None


@dataclass
class Call:
    """A request being served: its parsed query, version, credentials and base URL."""

    req: Request
    query: dict[str, str]
    version: str
    explicit_version: bool
    auth: AuthResult
    base: str
    index: int | None = None  # operation index inside a batch change set
    in_batch: bool = False  # an operation inside a $batch body (its URL is not an HTTP request line)
    secondary: bool = False  # addressed to the read-only secondary view (<account>-secondary)

    @property
    def sas(self) -> SasGrant | None:
        return self.auth.sas

    def header(self, name: str, default: str = "") -> str:
        return self.req.headers.get(name, default)


def effective_method(call: Call) -> str:
    """The method a call asks for: an ``X-HTTP-Method`` tunneled through POST, PATCH read as MERGE."""
    req = call.req
    method = req.method.upper()
    if req.x_http_methods:
        if len(req.x_http_methods) > 1:
            raise error("XMethodIncorrectCount")
        if method != "POST":
            raise error("XMethodNotUsingPost")
        tunneled = req.x_http_methods[0].strip().upper()
        if tunneled not in ("MERGE", "PUT", "DELETE", "PATCH"):
            raise error("XMethodIncorrectValue")
        method = tunneled
    return "MERGE" if method == "PATCH" else method
