"""The exceptions of the ``azure-cosmosdb-table`` surface, with the same names and hierarchy.

``AzureHttpError(message, status_code)`` becomes :class:`AzureMissingResourceHttpError` for
404 and :class:`AzureConflictHttpError` for 409 when constructed directly, as the old
package's base class did, so ``except AzureMissingResourceHttpError`` catches what it caught
there. Every error raised by :mod:`tablesdk.legacy` for an answer of the service is one of
these, chained (``__cause__``) to the tablesdk error it translates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .. import BatchError, TableServiceError, TableValidationError


class AzureException(Exception):
    """The root of the legacy errors (``azure.common.AzureException``)."""


class AzureHttpError(AzureException):
    """The service answered with an error status (``status_code``; ``error_code`` is the service's code).

    Constructing it with 404 gives an :class:`AzureMissingResourceHttpError`, with 409 an
    :class:`AzureConflictHttpError`.
    """

    status_code: int
    error_code: str | None

    def __new__(cls, message: str, status_code: int, *args: Any, **kwargs: Any) -> AzureHttpError:
        if cls is AzureHttpError:
            if status_code == 404:
                cls = AzureMissingResourceHttpError
            elif status_code == 409:
                cls = AzureConflictHttpError
        return AzureException.__new__(cls, message, status_code, *args, **kwargs)

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_code = None

    def __reduce__(self) -> tuple[Any, ...]:
        # __new__ needs the status code, which the default (the message alone) would not pass.
        return (_rebuilt_http_error, (type(self), self.args, self.__dict__))


def _rebuilt_http_error(cls: type[AzureHttpError], args: tuple[Any, ...], state: dict[str, Any]) -> AzureHttpError:
    """An :class:`AzureHttpError` of ``cls`` as it was pickled, without its ``__new__`` and ``__init__``."""
    error = AzureException.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class AzureConflictHttpError(AzureHttpError):
    """409: the table or entity already exists, or the table is being deleted."""


class AzureMissingResourceHttpError(AzureHttpError):
    """404: the table or entity does not exist."""


class AzureBatchOperationError(AzureHttpError):
    """An operation of a batch failed; ``status_code`` is its status and ``code`` the service's
    error code. The message starts with the failing operation's index (``"1:The specified..."``)."""

    code: str | None

    def __init__(self, message: str, status_code: int, batch_code: str | None) -> None:
        super().__init__(message, status_code)
        self.code = batch_code
        self.error_code = batch_code


class AzureValidationError(AzureHttpError, ValueError):
    """A request tablesdk refused before sending, which the service would have answered 400.

    The old package sent such requests (an invalid table name, a ``/`` in a key, a property
    name that is not an identifier, an empty batch) and raised the service's 400 as an
    :class:`AzureHttpError`; this is one too, with ``status_code`` 400 and no ``error_code``,
    and also a ValueError whose message names the field and the rule.
    """

    def __new__(cls, message: str, *args: Any, **kwargs: Any) -> AzureValidationError:
        return AzureException.__new__(cls, message)

    def __init__(self, message: str) -> None:
        super().__init__(message, 400)


class AzureBatchValidationError(AzureException):
    """A batch refused before sending: another partition, a repeated RowKey, over 100 operations."""


class AzureSigningError(AzureException):
    """Requests cannot be signed: the account key is not base64. Raised when the
    :class:`TableService` is created (the old package raised it at the first request)."""


class ClientEncryptionNotAvailableError(AzureException, NotImplementedError):
    """No longer raised: :mod:`tablesdk.legacy` encrypts and decrypts (``key_encryption_key``,
    ``key_resolver_function``) since client-side encryption joined tablesdk. Kept so that code
    catching it still imports; an ``except`` clause naming it never runs."""


_REASONS = {
    400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
    412: "Precondition Failed", 413: "Request Entity Too Large", 500: "Internal Server Error",
    501: "Not Implemented", 503: "Service Unavailable", 504: "Gateway Timeout",
}


def translate(error: TableServiceError) -> AzureException:
    """The legacy error for a tablesdk error (the caller raises it ``from`` the original)."""
    status = error.status_code
    if isinstance(error, BatchError) and error.failed_index is not None and status is not None:
        return AzureBatchOperationError(f"{error.failed_index}:{error.message}", status, error.error_code)
    if status is None:
        return AzureException(str(error))
    text = _REASONS.get(status, f"HTTP {status}")
    if error.error_code:
        text += f" ErrorCode: {error.error_code}"
    if error.message:
        text += f"\n{error.message}"
    translated = AzureHttpError(text, status)
    translated.error_code = error.error_code
    return translated


@contextlib.contextmanager
def legacy_errors() -> Iterator[None]:
    """Raise the legacy error for any tablesdk service or validation error raised inside the block."""
    try:
        yield
    except TableServiceError as error:
        raise translate(error) from error
    except TableValidationError as error:
        raise AzureValidationError(str(error)) from error
