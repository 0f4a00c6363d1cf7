"""The flows' machinery: a :class:`Call` a flow yields, and the runners that send them.

Each operation is a generator (a *flow*) that yields the :class:`Call` it needs
sent and receives the answer (an :class:`~tablesdk._pipeline._http.HttpResponse`) at the
``yield``, or the error that sending raised, thrown in there. A flow checks its
arguments, builds each request, parses each answer and decides what a failure
means (a point read that falls back to ``$filter``, a write that goes out as a
one-operation batch, "if not exists" conflicts); it does no I/O and never
waits. :class:`~tablesdk._clients._client.CloudTableClient` runs flows with
:func:`run_flow` over its :class:`~tablesdk._pipeline._transport.Transport`, and
:class:`~tablesdk.aio.AsyncCloudTableClient` with :func:`arun_flow` over its
asyncio transport: the same code, only sending and waiting differ.

Also here: what every flow's requests share (the query string, whether keys fit in the
path, the error of an answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TypeVar
from urllib.parse import quote

from .._formats._batch import entity_path
from .._core._errors import (
    ResourceNotFoundError,
    TableErrorCode,
    TableServiceError,
    TableValidationError,
    error_for_status,
)
from .._formats import parse_error_body
from .._pipeline._http import HttpResponse, RequestHook
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from .._pipeline._transport import OperationContext


T = TypeVar("T")

#: HTTP.sys refuses URI path segments longer than this (white paper section 2).
MAX_URI_SEGMENT_LENGTH = 260

#: The SDK's own errors: the flow runners raise them afresh from the caller's call (a bug keeps every frame).
RAISED_FROM_THE_CALL = (TableServiceError, TableValidationError)


class Call:
    """One request a flow needs sent: what the client's transport gets, before hooks and signing."""

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = (
        "method", "path", "query", "headers", "body", "retry_policy", "operation_context", "request_hook",
        "endpoint", "check", "read_only", "pinned", "options",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        retry_policy: RetryPolicy | None = None,
        operation_context: OperationContext | None = None,
        request_hook: RequestHook | None = None,
        endpoint: str | None = None,
        check: Callable[[HttpResponse], None] | None = None,
        read_only: bool = False,
        pinned: str | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers: dict[str, str] = {} if headers is None else headers
        self.body = body
        self.retry_policy = retry_policy
        self.operation_context = operation_context
        self.request_hook = request_hook
        self.endpoint = endpoint  # another endpoint than the table endpoint (the secondary, for stats)
        self.check = check  # may refuse a 2xx (a batch's change set)
        self.read_only = read_only  # a POST that changes nothing (a point query in a $batch)
        self.pinned = pinned  # "primary"/"secondary": where the continuation token being followed came from
        self.options = options  # the call's overrides of the client's defaults (set by run_flow)

    def __repr__(self) -> str:
        return f"Call({self.method} {self.path!r})"


#: An operation: yields the calls it needs, receives their answers, returns its result.
Flow = Generator[Call, HttpResponse, T]


def _with_options(call: Call, options: TableRequestOptions | None) -> Call:
    """``call`` carrying the operation's request options (a call that has its own keeps them).

    The flow keeps the call it yielded, so after the ``yield`` it can see which options
    were in force (the location mode decides whether a continuation token is pinned)."""
    if call.options is None:
        call.options = options
    return call


def run_flow(
    flow: Flow[T], send: Callable[[Call], HttpResponse], options: TableRequestOptions | None = None
) -> T:
    """Run ``flow`` to its result, sending each call with ``send`` (errors are thrown into the flow).

    ``options`` go on every call of the flow: one operation, one set of request options."""
    try:
        call = next(flow)
        while True:
            try:
                response = send(_with_options(call, options))
            except Exception as exc:  # noqa: BLE001 - the flow decides; it re-raises what it does not handle
                call = flow.throw(exc)
            else:
                call = flow.send(response)
    except StopIteration as done:
        result: T = done.value
        return result
    except RAISED_FROM_THE_CALL as error:
        raise error.with_traceback(None)  # the transport's and the generators' frames are plumbing


async def arun_flow(
    flow: Flow[T], send: Callable[[Call], Awaitable[HttpResponse]], options: TableRequestOptions | None = None
) -> T:
    """:func:`run_flow` for an awaitable ``send``. Cancellation is not thrown into the flow:
    it leaves the operation where it was."""
    try:
        call = next(flow)
        while True:
            try:
                response = await send(_with_options(call, options))
            except Exception as exc:  # noqa: BLE001 - the flow decides; it re-raises what it does not handle
                call = flow.throw(exc)
            else:
                call = flow.send(response)
    except StopIteration as done:
        result: T = done.value
        return result
    except RAISED_FROM_THE_CALL as error:
        raise error.with_traceback(None)  # the transport's and the generators' frames are plumbing
    finally:
        flow.close()


def query_string(params: Sequence[tuple[str, str]]) -> str:
    """``name=value&...`` with every value percent-encoded."""
    return "&".join(f"{name}={quote(value, safe='')}" for name, value in params)


def path_can_carry_keys(table_name: str, partition_key: str, row_key: str) -> bool:
    """Whether the entity's keys can be addressed in the URL path.

    False for keys containing '%' (the service decodes the path twice) and for
    paths whose entity segment exceeds :data:`MAX_URI_SEGMENT_LENGTH`.
    """
    if "%" in partition_key or "%" in row_key:
        return False
    return len(entity_path(table_name, partition_key, row_key)) <= MAX_URI_SEGMENT_LENGTH


def _not_found() -> ResourceNotFoundError:
    return ResourceNotFoundError("The specified resource does not exist.", status_code=404, error_code=TableErrorCode.RESOURCE_NOT_FOUND.value)


def error_from_response(response: HttpResponse) -> TableServiceError:
    """The per-status error of an answer with status >= 300 (the transport's ``error_parser``)."""
    code, message = parse_error_body(response.body, response.headers.get("Content-Type"), response.attempt_secrets)
    header_code = response.headers.get("x-ms-error-code")
    return error_for_status(
        response.status,
        header_code or code,
        message or f"HTTP {response.status} with no error body",
        request_id=response.request_id,
    )
