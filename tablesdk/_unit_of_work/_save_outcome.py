"""What a ``save_changes`` tells its caller: one outcome per change, and the error of a save
that did not fully succeed.

These are the unit of work's results, kept apart from the context that produces them so that
the error carrying them (:class:`DataServiceRequestError`) is typed exactly without the
exception hierarchy (:mod:`tablesdk._core._errors`, a leaf every layer imports) naming the unit of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload


from .._core._errors import TableServiceError

__all__ = ["OperationResponse", "DataServiceResponse", "DataServiceRequestError"]


@dataclass
class OperationResponse:
    """The outcome of one change sent (or not sent) by ``save_changes``.

    ``sent`` is False for changes that were never attempted because an earlier
    one failed (or a batch was refused); ``error`` is the per-status
    :class:`~tablesdk._core._errors.TableServiceError` of a failed change.
    """

    entity: Any  # a TableEntity, DynamicEntity, model object or mapping
    table: str
    operation: str
    status_code: int | None = None
    etag: str | None = None
    error: TableServiceError | None = None
    sent: bool = False

    @property
    def succeeded(self) -> bool:
        """True when the change was applied by the service."""
        return self.sent and self.error is None and self.status_code is not None and self.status_code < 400


class DataServiceResponse(Sequence[OperationResponse]):
    """The outcome of a ``save_changes``: one :class:`OperationResponse` per change.

    ``is_batch`` tells whether the changes went as one entity group
    transaction; then ``batch_status_code`` is the transaction's status and
    ``failed_index`` the index of the operation the service blamed, if any.
    """

    def __init__(
        self,
        responses: list[OperationResponse],
        *,
        is_batch: bool = False,
        batch_status_code: int | None = None,
        failed_index: int | None = None,
    ) -> None:
        self._responses = responses
        self.is_batch = is_batch
        self.batch_status_code = batch_status_code
        self.failed_index = failed_index

    @overload
    def __getitem__(self, index: int) -> OperationResponse: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[OperationResponse]: ...

    def __getitem__(self, index: int | slice) -> OperationResponse | Sequence[OperationResponse]:
        return self._responses[index]

    def __len__(self) -> int:
        return len(self._responses)

    @property
    def errors(self) -> list[OperationResponse]:
        """The responses of the changes that failed."""
        return [r for r in self._responses if r.error is not None]

    @property
    def has_errors(self) -> bool:
        """Whether any change failed."""
        return any(r.error is not None for r in self._responses)

    def __repr__(self) -> str:
        ok = sum(1 for r in self._responses if r.succeeded)
        return (
            f"DataServiceResponse(operations={len(self._responses)}, succeeded={ok}, "
            f"failed={len(self.errors)}, batch={self.is_batch})"
        )


class DataServiceRequestError(TableServiceError):
    """A ``save_changes`` that did not fully succeed.

    ``response`` is the :class:`DataServiceResponse` listing every
    operation's outcome (succeeded, failed, not sent); ``status_code`` and
    ``error_code`` are those of the first failure.
    """

    def __init__(
        self,
        message: str,
        *,
        response: DataServiceResponse,
        status_code: int | None = None,
        error_code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(
            message, status_code=status_code, error_code=error_code, request_id=request_id
        )
        self.response = response
