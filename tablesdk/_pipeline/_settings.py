"""``RequestSettings``: a client's defaults for every request it sends, as one frozen value.

A client holds one :class:`RequestSettings` (built by :func:`client_settings` from its
constructor's ``timeout``, ``server_timeout``, ``operation_deadline``, ``retry_policy``,
``location_mode`` and ``user_agent``, whose header :func:`user_agent_header` writes) and
hands it, merged with the call's :class:`~tablesdk._pipeline._options.TableRequestOptions`, to its
transport with every request: the thread-based :class:`~tablesdk._pipeline._transport.Transport` and
the asyncio :class:`~tablesdk.aio._transport.AsyncTransport` read the same value and keep no
settings of their own. :meth:`RequestSettings.merged` is the one place where a call's options and an
explicit ``retry_policy=`` argument override the client's defaults.

The client's default client-side encryption (its ``encryption_policy=``) is one of these settings
too, with a call's ``encryption_resolver`` and ``require_encryption``: the transport never reads
them, the operations do (through :meth:`RequestSettings.merged`, as every other setting).

The value is checked when built and never changes: a client's settable ``retry_policy``,
``operation_deadline`` and ``location_mode`` replace the client's value with a new one
(:meth:`RequestSettings.replace`), so a request already under way keeps the settings it
started with.

How the connections are made (``pool_size``, ``trust_env``, ``max_response_bytes``, a
custom ``sender``) is not a request setting: it is fixed when the sender is built.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .._core._errors import TableValidationError, require_positive_int, require_positive_seconds
from ._http import Timeout
from ._retry import ExponentialRetry, RetryPolicy
from .._version import __version__

if TYPE_CHECKING:
    class TableRequestOptions(Protocol):
        """The fields of :class:`tablesdk._pipeline._options.TableRequestOptions` merged here (it imports this module)."""

        @property
        def timeout(self) -> Timeout | None: ...
        @property
        def server_timeout(self) -> int | None: ...
        @property
        def deadline(self) -> float | None: ...
        @property
        def retry_policy(self) -> RetryPolicy | None: ...
        @property
        def location_mode(self) -> str | None: ...
        @property
        def encryption_policy(self) -> EncryptionPolicyLike | None: ...
        @property
        def encryption_resolver(self) -> Callable[[str, str, str], bool] | None: ...
        @property
        def require_encryption(self) -> bool | None: ...

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_USER_AGENT",
    "EncryptionPolicyLike",
    "LOCATION_MODES",
    "RequestSettings",
    "check_encryption_policy",
    "check_encryption_resolver",
    "check_location_mode",
    "check_retry_policy",
    "check_timeout",
    "client_settings",
    "resolve_retry_policy",
    "user_agent_header",
]

#: Default client timeout: 10 s to connect, 60 s between bytes read.
DEFAULT_TIMEOUT: tuple[float, float] = (10.0, 60.0)

#: ``User-Agent`` sent when the caller does not give one.
DEFAULT_USER_AGENT = f"tablesdk/{__version__}"

#: Where reads go: the primary only (default), the primary with retries alternating to the
#: read-only secondary of an RA-GRS account, or the secondary only. Writes always go to the primary.
LOCATION_MODES = ("primary_only", "primary_then_secondary", "secondary_only")


class EncryptionPolicyLike(Protocol):
    """What the request settings read of a :class:`~tablesdk.TableEncryptionPolicy` (the engine, which
    sits above this layer, defines the class; a policy is held here and handed up unread)."""

    @property
    def protocol(self) -> str: ...
    @property
    def require_encryption(self) -> bool: ...
    @property
    def encryption_resolver(self) -> Callable[[str, str, str], bool] | None: ...


def check_encryption_policy(policy: object, name: str = "encryption_policy") -> EncryptionPolicyLike:
    """``policy`` when it is an encryption policy (a :class:`~tablesdk.TableEncryptionPolicy`); TypeError otherwise."""
    if not all(hasattr(policy, attribute) for attribute in ("protocol", "require_encryption", "encryption_resolver")):
        raise TypeError(f"{name} must be a TableEncryptionPolicy, not {type(policy).__name__}")
    result: EncryptionPolicyLike = policy  # type: ignore[assignment]
    return result


def check_encryption_resolver(resolver: object) -> Callable[[str, str, str], bool]:
    """``resolver`` when it is callable, ``(partition_key, row_key, name) -> bool``; TypeError otherwise."""
    if not callable(resolver):
        raise TypeError(
            f"encryption_resolver must be a callable (partition_key, row_key, name) -> bool, not {type(resolver).__name__}"
        )
    result: Callable[[str, str, str], bool] = resolver
    return result


def user_agent_header(application: str | None) -> str:
    """The ``User-Agent`` the clients send: ``[application ]tablesdk/<v> Python/<v> (<platform>)``.

    As in the Azure SDKs, the application's token comes first, so it survives in
    server logs that cut a long header. It must be printable ASCII without
    control characters (it is a header value) and at most 256 characters.
    """
    base = f"tablesdk/{__version__} Python/{_python_version()} ({_platform()})"
    if application is None:
        return base
    if not isinstance(application, str) or not application.strip():
        raise TableValidationError("user_agent", "a non-empty str", f"got {application!r}")
    if len(application) > 256 or not all(" " <= c <= "~" for c in application):
        raise TableValidationError(
            "user_agent", "at most 256 printable ASCII characters (it is sent as a header)", repr(application[:40])
        )
    return f"{application.strip()} {base}"


@functools.cache
def _platform() -> str:
    """The platform words of the User-Agent, as ``platform.platform(terse=True)`` puts them.

    On Linux with glibc they come from ``os.uname()`` and the C library itself:
    ``platform.platform`` would run ``uname -p`` in a child process and scan the
    interpreter's binary for the glibc version, on the first request of every process.
    """
    uname = os.uname() if hasattr(os, "uname") else None
    libc = _glibc_version() if uname is not None and uname.sysname == "Linux" else None
    if uname is None or libc is None:
        import platform

        return platform.platform(terse=True)
    words = "-".join(part.strip() for part in (uname.sysname, uname.release, uname.machine, "with", libc) if part)
    for character in ' /\\:;"()':  # what platform.platform replaces, so the words stay the same
        words = words.replace(character, "_" if character == " " else "-")
    words = words.replace("unknown", "")
    while "--" in words:
        words = words.replace("--", "-")
    return words.rstrip("-")


def _glibc_version() -> str | None:
    """``glibc2.36`` for glibc 2.36 (the C library's own answer), or None for another C library."""
    try:
        answer = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None
    if not answer or not answer.startswith("glibc "):
        return None
    return answer.replace(" ", "", 1)


def _python_version() -> str:
    return "%d.%d.%d" % sys.version_info[:3]


def check_timeout(value: Timeout, name: str = "timeout") -> Timeout:
    """``value`` when it is seconds > 0 or a ``(connect, read)`` pair of them; a ValueError naming ``name`` otherwise."""
    items = value if isinstance(value, tuple) else (value,)
    if isinstance(value, tuple) and len(value) != 2:
        raise ValueError(f"{name} must be seconds or a (connect, read) pair, got {value!r}")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not item > 0:
            raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
    return value


def check_location_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`LOCATION_MODES`; a ValueError otherwise."""
    if mode not in LOCATION_MODES:
        raise ValueError(f"location_mode must be one of {', '.join(LOCATION_MODES)}; got {mode!r}")
    return mode


def check_retry_policy(policy: Any) -> RetryPolicy:
    """``policy`` when it has ``retry_after(attempt, error)``; ValueError for None, TypeError for anything else."""
    if policy is None:
        raise ValueError("retry_policy is required (use NoRetry() to disable retries)")
    if not callable(getattr(policy, "retry_after", None)):
        raise TypeError(f"retry_policy must have retry_after(attempt, error), not {type(policy).__name__}")
    result: RetryPolicy = policy
    return result


def resolve_retry_policy(
    explicit: RetryPolicy | None, options: TableRequestOptions | None, default: RetryPolicy
) -> RetryPolicy:
    """The policy of a call: an explicit ``retry_policy=`` argument, else the request options',
    else ``default`` (the client's; ``NoRetry()`` for ``save_changes``)."""
    if explicit is not None:
        return explicit
    if options is not None and options.retry_policy is not None:
        return options.retry_policy
    return default


class RequestSettings:
    """The settings of a client's requests, checked when built and never changed.

    ``timeout`` bounds each attempt (seconds, or a ``(connect, read)`` pair; the read timeout
    bounds each wait for bytes and the whole answer); ``server_timeout`` (int seconds, or None)
    is sent as the service's ``timeout=N``; ``deadline`` (seconds, or None) caps each request
    across all its retries (the client's ``operation_deadline``); ``retry_policy`` decides
    the retries (``ExponentialRetry()`` when None); ``location_mode`` is where reads go (one of
    :data:`LOCATION_MODES`); ``user_agent`` is the whole ``User-Agent`` header value.
    ``encryption_policy`` (or None) encrypts writes and decrypts reads, ``encryption_resolver``
    (or None: the policy's) chooses the properties encrypted, ``require_encryption`` (or None: the
    policy's) refuses what is not encrypted; none of them is read by the transport.
    """

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = (
        "timeout", "server_timeout", "deadline", "retry_policy", "location_mode", "user_agent",
        "encryption_policy", "encryption_resolver", "require_encryption",
    )

    timeout: Timeout
    server_timeout: int | None
    deadline: float | None
    retry_policy: RetryPolicy
    location_mode: str
    user_agent: str
    encryption_policy: EncryptionPolicyLike | None
    encryption_resolver: Callable[[str, str, str], bool] | None
    require_encryption: bool | None

    def __init__(
        self,
        *,
        timeout: Timeout = DEFAULT_TIMEOUT,
        server_timeout: int | None = None,
        deadline: float | None = None,
        retry_policy: RetryPolicy | None = None,
        location_mode: str = "primary_only",
        user_agent: str = DEFAULT_USER_AGENT,
        encryption_policy: EncryptionPolicyLike | None = None,
        encryption_resolver: Callable[[str, str, str], bool] | None = None,
        require_encryption: bool | None = None,
    ) -> None:
        if server_timeout is not None:
            require_positive_int("server_timeout", server_timeout, " (seconds)")
        if deadline is not None:
            require_positive_seconds("deadline", deadline)
        self._set(
            check_timeout(timeout),
            server_timeout,
            deadline,
            check_retry_policy(retry_policy) if retry_policy is not None else ExponentialRetry(),
            check_location_mode(location_mode),
            user_agent,
            check_encryption_policy(encryption_policy) if encryption_policy is not None else None,
            check_encryption_resolver(encryption_resolver) if encryption_resolver is not None else None,
            require_encryption,
        )

    def _set(
        self, timeout: Timeout, server_timeout: int | None, deadline: float | None, retry_policy: RetryPolicy,
        location_mode: str, user_agent: str, encryption_policy: EncryptionPolicyLike | None = None,
        encryption_resolver: Callable[[str, str, str], bool] | None = None, require_encryption: bool | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "timeout", timeout)
        setter(self, "server_timeout", server_timeout)
        setter(self, "deadline", deadline)
        setter(self, "retry_policy", retry_policy)
        setter(self, "location_mode", location_mode)
        setter(self, "user_agent", user_agent)
        setter(self, "encryption_policy", encryption_policy)
        setter(self, "encryption_resolver", encryption_resolver)
        setter(self, "require_encryption", require_encryption)

    def _with(
        self, timeout: Timeout, server_timeout: int | None, deadline: float | None, retry_policy: RetryPolicy,
        location_mode: str, encryption_policy: EncryptionPolicyLike | None = None,
        encryption_resolver: Callable[[str, str, str], bool] | None = None, require_encryption: bool | None = None,
    ) -> RequestSettings:
        """A copy with these values, which are checked already (a request's options are checked when built)."""
        settings: RequestSettings = object.__new__(RequestSettings)
        settings._set(
            timeout, server_timeout, deadline, retry_policy, location_mode, self.user_agent,
            encryption_policy, encryption_resolver, require_encryption,
        )
        return settings

    def replace(self, **changes: Any) -> RequestSettings:
        """A copy with ``changes`` (any of the constructor's keywords), checked as the constructor checks."""
        fields: dict[str, Any] = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return RequestSettings(**fields)

    def merged(self, options: TableRequestOptions | None, retry_policy: RetryPolicy | None = None) -> RequestSettings:
        """The settings of one call: these, overridden by the fields of ``options`` that are set and by
        an explicit ``retry_policy=`` argument (which wins over the options'). Returns ``self`` when
        nothing overrides it."""
        policy = resolve_retry_policy(retry_policy, options, self.retry_policy)
        if options is None:
            if policy is self.retry_policy:
                return self
            return self._with(
                self.timeout, self.server_timeout, self.deadline, policy, self.location_mode,
                self.encryption_policy, self.encryption_resolver, self.require_encryption,
            )
        return self._with(
            options.timeout if options.timeout is not None else self.timeout,
            options.server_timeout if options.server_timeout is not None else self.server_timeout,
            options.deadline if options.deadline is not None else self.deadline,
            policy,
            options.location_mode if options.location_mode is not None else self.location_mode,
            options.encryption_policy if options.encryption_policy is not None else self.encryption_policy,
            options.encryption_resolver if options.encryption_resolver is not None else self.encryption_resolver,
            options.require_encryption if options.require_encryption is not None else self.require_encryption,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RequestSettings is frozen: use replace({name}=...) for a changed copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("RequestSettings is frozen")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestSettings):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"RequestSettings({fields})"


def client_settings(
    *,
    retry_policy: RetryPolicy | None,
    timeout: Timeout,
    server_timeout: int | None,
    operation_deadline: float | None,
    location_mode: str,
    user_agent: str | None,
    encryption_policy: EncryptionPolicyLike | None = None,
) -> RequestSettings:
    """The settings of a client of either flavour made with these constructor arguments:
    ``ExponentialRetry()`` when ``retry_policy`` is None, ``user_agent`` the application's token
    ahead of the SDK's own (:func:`user_agent_header`), ``operation_deadline`` checked by that name."""
    if operation_deadline is not None:
        require_positive_seconds("operation_deadline", operation_deadline)
    return RequestSettings(
        timeout=timeout, server_timeout=server_timeout, deadline=operation_deadline, retry_policy=retry_policy,
        location_mode=location_mode, user_agent=user_agent_header(user_agent), encryption_policy=encryption_policy,
    )
