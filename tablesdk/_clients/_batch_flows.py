"""The ``$batch`` flow, and the encryption of the operations a caller built."""

from __future__ import annotations

from collections.abc import Sequence

from .._core._cosmos import check_cosmos_batch_size
from .._formats._batch import BatchOperation, BatchOperationResult, build_batch_request
from .._core._errors import BatchError
from .._pipeline._http import RequestHook
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._core._tracing import annotate
from .._pipeline._transport import OperationContext

from ._client_base import ClientBase, _scope_of
from ._flows import Call, Flow


class BatchFlows(ClientBase):
    """The flows of ``$batch`` (see :mod:`tablesdk._clients._flows`)."""

    def _f_execute_batch(
        self,
        operations: Sequence[BatchOperation],
        retry_policy: RetryPolicy | None,
        operation_context: OperationContext | None,
        request_hook: RequestHook | None,
    ) -> Flow[list[BatchOperationResult]]:
        self._check_writes(operations)
        body, content_type = build_batch_request(  # validates the batch first
            self.table_endpoint, operations, self._format, api_version=self.api_version
        )
        if self.is_cosmos:
            check_cosmos_batch_size(len(body))
        # The answer is parsed by the transport's check, so that a change set refused inside
        # the 202 is retried and flagged ambiguous by the retry loop like any error answer.
        from .._formats._batch_answer import BatchAnswer  # with the first batch, not by ``import tablesdk`` (start-up)

        answer = BatchAnswer(operations, self._format)
        annotate({"tablesdk.batch.operation_count": len(operations)})
        call = Call(
            "POST", "$batch", headers={"Content-Type": content_type}, body=body,
            retry_policy=retry_policy, operation_context=operation_context, request_hook=request_hook,
            check=answer, read_only=answer.read_only,
        )
        try:
            yield call
        except BatchError as error:
            annotate({"tablesdk.batch.failed_index": error.failed_index})
            raise
        results = answer.results
        encryption = _scope_of(self._settings_for(call))
        if encryption is not None:  # a point query's entity, an insert's echo
            for result in results:
                if result.payload is not None:
                    result.payload = encryption.decrypt(result.payload)
        return results

    def _encrypted_operations(
        self, operations: Sequence[BatchOperation], options: TableRequestOptions | None
    ) -> Sequence[BatchOperation]:
        """``operations`` (built by the caller) encrypted by the client-side encryption of a call
        with ``options``; an operation whose payload is encrypted already is sent as it is."""
        encryption = self._encryption(options)
        if encryption is None:
            return operations
        return [encryption.encrypt_operation(operation) for operation in operations]
