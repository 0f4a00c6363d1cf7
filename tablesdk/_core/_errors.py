"""The tablesdk exception hierarchy.

Errors returned by the service are :class:`TableServiceError` subclasses chosen
by HTTP status; invalid input found before any request is sent raises
:class:`TableValidationError` (a :class:`ValueError`) naming the field and the
limit. Messages never contain credentials: only the service's error code, its
message and the request id are kept.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

__all__ = [
    "TableErrorCode",
    "TableServiceError",
    "ResourceNotFoundError",
    "ConflictError",
    "PreconditionFailedError",
    "ServerBusyError",
    "AuthenticationError",
    "RequestTimeoutError",
    "ConnectionFailedError",
    "BatchError",
    "TableValidationError",
    "SchemaConflictError",
    "ResponseDecodeError",
    "ContinuationCycleError",
    "error_for_status",
]


class TableErrorCode(str, Enum):
    """The error codes the Table service documents, as a string enum.

    A member equals its plain string (``TableErrorCode.ENTITY_ALREADY_EXISTS ==
    "EntityAlreadyExists"``), so ``error.error_code`` (the string the service sent)
    can be compared with either. The first group are the Table service's own codes
    (REST reference, "Table service error codes"); the second the common storage
    codes a table operation can get (authentication, throttling, limits).
    """

    DUPLICATE_PROPERTIES_SPECIFIED = "DuplicatePropertiesSpecified"
    ENTITY_NOT_FOUND = "EntityNotFound"
    ENTITY_ALREADY_EXISTS = "EntityAlreadyExists"
    ENTITY_TOO_LARGE = "EntityTooLarge"
    HOST_INFORMATION_NOT_PRESENT = "HostInformationNotPresent"
    INVALID_DUPLICATE_ROW = "InvalidDuplicateRow"
    INVALID_INPUT = "InvalidInput"
    INVALID_VALUE_TYPE = "InvalidValueType"
    JSON_FORMAT_NOT_SUPPORTED = "JsonFormatNotSupported"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NOT_IMPLEMENTED = "NotImplemented"
    OUT_OF_RANGE_INPUT = "OutOfRangeInput"
    PROPERTIES_NEED_VALUE = "PropertiesNeedValue"
    PROPERTY_NAME_INVALID = "PropertyNameInvalid"
    PROPERTY_NAME_TOO_LONG = "PropertyNameTooLong"
    PROPERTY_VALUE_TOO_LARGE = "PropertyValueTooLarge"
    TABLE_ALREADY_EXISTS = "TableAlreadyExists"
    TABLE_BEING_DELETED = "TableBeingDeleted"
    TABLE_NOT_FOUND = "TableNotFound"
    TOO_MANY_PROPERTIES = "TooManyProperties"
    UPDATE_CONDITION_NOT_SATISFIED = "UpdateConditionNotSatisfied"
    X_METHOD_INCORRECT_COUNT = "XMethodIncorrectCount"
    X_METHOD_INCORRECT_VALUE = "XMethodIncorrectValue"
    X_METHOD_NOT_USING_POST = "XMethodNotUsingPost"

    AUTHENTICATION_FAILED = "AuthenticationFailed"
    AUTHORIZATION_FAILURE = "AuthorizationFailure"
    AUTHORIZATION_PERMISSION_MISMATCH = "AuthorizationPermissionMismatch"
    AUTHORIZATION_PROTOCOL_MISMATCH = "AuthorizationProtocolMismatch"
    AUTHORIZATION_RESOURCE_TYPE_MISMATCH = "AuthorizationResourceTypeMismatch"
    AUTHORIZATION_SERVICE_MISMATCH = "AuthorizationServiceMismatch"
    AUTHORIZATION_SOURCE_IP_MISMATCH = "AuthorizationSourceIPMismatch"
    INSUFFICIENT_ACCOUNT_PERMISSIONS = "InsufficientAccountPermissions"
    INTERNAL_ERROR = "InternalError"
    INVALID_HEADER_VALUE = "InvalidHeaderValue"
    INVALID_QUERY_PARAMETER_VALUE = "InvalidQueryParameterValue"
    INVALID_RESOURCE_NAME = "InvalidResourceName"
    INVALID_URI = "InvalidUri"
    MISSING_REQUIRED_HEADER = "MissingRequiredHeader"
    OPERATION_TIMED_OUT = "OperationTimedOut"
    REQUEST_BODY_TOO_LARGE = "RequestBodyTooLarge"
    RESOURCE_NOT_FOUND = "ResourceNotFound"
    SERVER_BUSY = "ServerBusy"
    UNSUPPORTED_HEADER = "UnsupportedHeader"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# The two usual causes of a refused signature: a wrong key (or SAS) and a skewed clock, since the
# service refuses a request whose x-ms-date is more than 15 minutes off its own time.
_AUTH_HINT = (
    " [check the account key or SAS token, and the machine's clock: requests more than"
    " 15 minutes off the service's time are refused]"
)


class TableServiceError(Exception):
    """An error answered by the Table service (or a transport failure).

    ``status_code`` is the HTTP status (None when no response arrived),
    ``error_code`` the service's code such as ``EntityAlreadyExists``,
    ``message`` the service's text without its RequestId/Time trailer, and
    ``request_id`` the ``x-ms-request-id`` of the failed attempt.
    ``ambiguous_retry`` is True when this error answered a retry of a write whose
    earlier attempt may have succeeded on the server (see docs/retries.md).
    ``headers`` are the failed answer's response headers, a read-only, case-insensitive
    mapping with any echoed secret redacted (empty when no answer arrived): a custom retry
    policy reads ``Retry-After`` or ``x-ms-retry-after-ms`` there.
    """

    #: The response headers of the answer (empty when no answer arrived).
    headers: Mapping[str, str] = MappingProxyType({})

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_code: str | None = None,
        request_id: str | None = None,
        client_request_id: str | None = None,
        ambiguous_retry: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.error_code = error_code
        self.request_id = request_id
        self.client_request_id = client_request_id
        self.ambiguous_retry = ambiguous_retry

    def __str__(self) -> str:
        return self.describe()

    def describe(self, *, request_id: bool = True) -> str:
        """``str(error)``; ``request_id=False`` leaves the request id out, for a message that
        quotes this error inside another error that shows the id itself."""
        parts = []
        if self.status_code is not None:
            parts.append(str(self.status_code))
        if self.error_code:
            parts.append(self.error_code)
        head = " ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        if self.status_code == 403 and self.error_code == "AuthenticationFailed" and _AUTH_HINT not in text:
            text += _AUTH_HINT
        if request_id and self.request_id:
            text += f" (request id {self.request_id})"
        if self.ambiguous_retry:
            text += " [answered a retry of a write whose first attempt may have succeeded]"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, "
            f"error_code={self.error_code!r}, message={self.message!r}, "
            f"request_id={self.request_id!r})"
        )


class ResourceNotFoundError(TableServiceError):
    """404: the table or entity does not exist."""


class ConflictError(TableServiceError):
    """409: e.g. EntityAlreadyExists, TableAlreadyExists, TableBeingDeleted."""


class PreconditionFailedError(TableServiceError):
    """412: the If-Match ETag no longer matches (UpdateConditionNotSatisfied)."""


class ServerBusyError(TableServiceError):
    """503 ServerBusy or 429 Too Many Requests: the service is throttling; retry with back-off.

    Its ``headers`` may say how long to wait (``Retry-After``, ``x-ms-retry-after-ms``), which
    the built-in retry policies honour (see :func:`tablesdk.server_delay`).
    """


class AuthenticationError(TableServiceError):
    """403: the signature, SAS or permissions were refused."""


class RequestTimeoutError(TableServiceError):
    """The request did not complete in time (client timeout, deadline, or 408/504)."""


class ConnectionFailedError(TableServiceError):
    """The connection failed or was cut before a complete response arrived.

    ``refused`` is True when nothing accepted the connection (the request was never
    sent), and ``unresolved`` too when the host name does not resolve (a mistyped
    account name or endpoint); the built-in retry policies retry both on a short
    schedule, so such a call fails within seconds.
    """

    refused: bool = False
    unresolved: bool = False


class BatchError(TableServiceError):
    """An entity group transaction that the service refused as a whole.

    ``failed_index`` is the zero-based index of the operation that failed, parsed
    from the service's ``"N:message"`` form, or None when the failure is not tied
    to one operation (for example ServerBusy or an authentication failure).
    """

    def __init__(
        self,
        message: str,
        *,
        failed_index: int | None = None,
        status_code: int | None = None,
        error_code: str | None = None,
        request_id: str | None = None,
        cause: TableServiceError | None = None,
    ) -> None:
        super().__init__(
            message, status_code=status_code, error_code=error_code, request_id=request_id
        )
        self.failed_index = failed_index
        self.cause = cause


class ResponseDecodeError(TableServiceError, ValueError):
    """A success (2xx) response whose body is not what the operation expects.

    Examples: an HTML page from a proxy, JSON that is not an entity or a feed,
    nesting deeper than any real response, an Edm.Int32 value out of range, an
    entity without its PartitionKey. ``status_code`` and ``request_id`` are
    those of the response; ``excerpt`` is a short, markup-free excerpt of the
    body (at most 120 characters) and ``reason`` says what failed to decode.
    A write answered this way was applied by the server: only its answer is
    unreadable. ``etag`` is the response's ``ETag`` header, if it had one.
    """

    etag: str | None = None

    def __init__(
        self,
        reason: str,
        *,
        excerpt: str = "",
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        self.reason = reason
        self.excerpt = excerpt
        super().__init__(self._text(reason, excerpt), status_code=status_code, request_id=request_id)

    @staticmethod
    def _text(reason: str, excerpt: str) -> str:
        text = f"the response body could not be decoded: {reason}"
        return f"{text}; body starts: {excerpt!r}" if excerpt else text


class ContinuationCycleError(TableServiceError):
    """The service sent a continuation token already seen in the same iteration.

    Following it would request the same pages forever, so iteration stops.
    ``token`` is the repeated token (a ContinuationToken for entity queries,
    the NextTableName text for table listing).
    """

    def __init__(self, message: str, *, token: object = None) -> None:
        super().__init__(message)
        self.token = token


class SchemaConflictError(TableServiceError, ValueError):
    """Values read from a table that do not fit one column (``TableQuery.to_arrow`` and the like).

    A property that arrives with two EDM types, a value that does not fit an
    explicit schema's column, or a property a schema lacks. ``property_name``
    is the property, ``types`` the EDM types involved and ``keys`` the
    ``(PartitionKey, RowKey)`` of a row holding the offending value.
    """

    def __init__(
        self, message: str, *, property_name: str, types: tuple[Any, ...], keys: tuple[str, str] | None
    ) -> None:
        super().__init__(message)
        self.property_name = property_name
        self.types = types
        self.keys = keys

    def __reduce__(self) -> tuple[Any, ...]:
        # Its fields are required keywords, which the default (the message alone) would not pass.
        return (_rebuilt_error, (type(self), self.args, self.__dict__))


def _rebuilt_error(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """An error of ``cls`` with its ``args`` and attributes, without calling its ``__init__`` (unpickling)."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class TableValidationError(ValueError):
    """Input the service would refuse, caught before any request is sent.

    ``field`` names the offending field (a property, key, table name or batch);
    ``limit`` describes the rule that was broken.
    """

    def __init__(self, field: str, limit: str, detail: str = "") -> None:
        self.field = field
        self.limit = limit
        self._detail = detail
        text = f"{field}: {limit}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields, so that it crosses a process boundary (a Dask, Ray or Spark task's error).
        return (type(self), (self.field, self.limit, self._detail), self.__dict__)


_BY_STATUS: dict[int, type[TableServiceError]] = {
    403: AuthenticationError,
    404: ResourceNotFoundError,
    408: RequestTimeoutError,
    409: ConflictError,
    412: PreconditionFailedError,
    429: ServerBusyError,
    503: ServerBusyError,
    504: RequestTimeoutError,
}


def error_for_status(
    status_code: int,
    error_code: str | None,
    message: str,
    **kwargs: Any,
) -> TableServiceError:
    """Build the :class:`TableServiceError` subclass that matches ``status_code``."""
    cls = _BY_STATUS.get(status_code, TableServiceError)
    return cls(message, status_code=status_code, error_code=error_code or None, **kwargs)


def require_positive_int(name: str, value: Any, unit: str = "") -> int:
    """``value`` when it is an int >= 1 (a bool is not an int here); otherwise a
    ValueError naming ``name`` (``unit``, e.g. ``" (seconds)"``, follows the bound)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{unit}, got {value!r}")
    return value


def require_positive_seconds(name: str, value: Any, *, finite: bool = False) -> float:
    """``float(value)`` when it is a number of seconds > 0 (a bool is not a number here; with
    ``finite``, infinity is refused too); otherwise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or (
        finite and not math.isfinite(value)
    ):
        raise ValueError(f"{name} must be > 0 seconds{' and finite' if finite else ''}, got {value!r}")
    return float(value)


def warn_the_caller(message: str, category: type[Warning]) -> None:
    """Warn, naming the first frame outside tablesdk (faces and tracing wrappers vary the depth)."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("tablesdk."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
