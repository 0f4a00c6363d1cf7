"""OpenTelemetry spans, when the application has configured tracing.

Nothing here imports OpenTelemetry. Tracing is on when the application has imported
``opentelemetry.trace`` *and* set a tracer provider (``trace.set_tracer_provider``);
until then every hook is one dictionary look-up (``sys.modules``) and a return, so an
application without tracing pays nothing measurable and ``import tablesdk`` stays
light.

Two kinds of span, as the Azure SDKs emit them:

* one INTERNAL span per public operation, named ``Class.method``
  (``CloudTableClient.insert_entity``, ``TableServiceContext.save_changes``), made by
  :func:`trace_public_methods` on the classes;
* one CLIENT span per HTTP attempt (:func:`traced_attempt`), a child of the operation's,
  with the OpenTelemetry HTTP client attributes, the W3C ``traceparent`` header put on
  the request so the service's logs can be joined, and ``error.type`` set to the
  service's error code on a failure.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ._redaction import redact_marked, redact_url
from .._version import __version__

__all__ = ["active_tracer", "annotate", "atraced_attempt", "trace_public_methods", "traced_attempt"]

C = TypeVar("C", bound=type)
R = TypeVar("R")


_UNKNOWN = object()
#: (provider, its tablesdk tracer or None): the last provider seen and what it gave.
_last: tuple[object, Any | None] = (_UNKNOWN, None)


def active_tracer() -> Any | None:
    """The tablesdk tracer when the application configured a tracer provider, else None (cheaply)."""
    global _last
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    # The API keeps the provider set in code in this module global; reading it skips
    # get_tracer_provider's environment look-up on every call (microseconds). A provider
    # named only in the environment is set there as soon as the application asks for a tracer.
    provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:
        return None
    if provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
    seen, tracer = _last
    if provider is seen:
        return tracer
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        tracer = None
    else:
        tracer = provider.get_tracer("tablesdk", __version__)
    _last = (provider, tracer)
    return tracer


def annotate(attributes: dict[str, Any]) -> None:
    """Set ``attributes`` (``{"tablesdk.batch.operation_count": 3}``) on the current span, if tracing is on."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        for name, value in attributes.items():
            if value is not None:
                span.set_attribute(name, value)


def _error_type(error: BaseException) -> str:
    """The span's ``error.type``: the service's error code (scrubbed: a server may echo a
    secret in it), else the exception's class name."""
    code = getattr(error, "error_code", None)
    return redact_marked(str(code)) if code else type(error).__name__


def _wrap_sync(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def traced(*args: Any, **kwargs: Any) -> Any:
        tracer = active_tracer()
        if tracer is None:
            return method(*args, **kwargs)
        with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as span:
            try:
                return method(*args, **kwargs)
            except BaseException as error:
                _fail(span, error)
                raise

    return traced


def _wrap_async(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        tracer = active_tracer()
        if tracer is None:
            return await method(*args, **kwargs)
        with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as span:
            try:
                return await method(*args, **kwargs)
            except BaseException as error:
                _fail(span, error)
                raise

    return traced


def _fail(span: Any, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))


def trace_public_methods(
    cls: C, *, skip: frozenset[str] = frozenset(), only: frozenset[str] | None = None
) -> C:
    """Give the public methods defined on ``cls`` (sync or async) an operation span named ``Class.method``.

    ``only`` names the methods to trace (default: every public one but ``skip``). Generators
    are left alone, and so should builders that send nothing (``create_query``): their
    requests are traced where they are sent.
    """
    for attribute, member in list(vars(cls).items()):
        if attribute.startswith("_") or attribute in skip or not inspect.isfunction(member):
            continue
        if only is not None and attribute not in only:
            continue
        if inspect.isgeneratorfunction(member) or inspect.isasyncgenfunction(member):
            continue
        name = f"{cls.__name__}.{attribute}"
        wrap = _wrap_async if inspect.iscoroutinefunction(member) else _wrap_sync
        setattr(cls, attribute, wrap(name, member))
    return cls


def _attempt_attributes(method: str, url: str, attempt: int) -> dict[str, Any]:
    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.full": redact_url(url),
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
    }
    if attempt > 1:
        attributes["http.request.resend_count"] = attempt - 1
    return attributes


@contextmanager
def _attempt_span(tracer: Any, method: str, url: str, attempt: int, headers: dict[str, str]) -> Iterator[Any]:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    with tracer.start_as_current_span(
        method, kind=trace.SpanKind.CLIENT, attributes=_attempt_attributes(method, url, attempt),
        record_exception=False, set_status_on_exception=False,
    ) as span:
        # The W3C trace context goes out with the request, so the service's logs can be joined to
        # this trace. It is not signed: Shared Key covers only the x-ms-* headers.
        TraceContextTextMapPropagator().inject(headers, context=trace.set_span_in_context(span))
        yield span


def _record(span: Any, status: int | None, error: BaseException | None) -> None:
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if error is not None:
        _fail(span, error)


def traced_attempt(tracer: Any, request: Any, attempt: int, run: Callable[[], R]) -> R:
    """Run one attempt (``run`` returns its :class:`~tablesdk._pipeline._transport.AttemptResult`) inside a CLIENT span."""
    with _attempt_span(tracer, request.method, request.url, attempt, request.headers) as span:
        result = run()
        _record(span, getattr(result, "status", None), getattr(result, "error", None))
        return result


async def atraced_attempt(tracer: Any, request: Any, attempt: int, run: Callable[[], Awaitable[R]]) -> R:
    """:func:`traced_attempt` for an awaited attempt."""
    with _attempt_span(tracer, request.method, request.url, attempt, request.headers) as span:
        result = await run()
        _record(span, getattr(result, "status", None), getattr(result, "error", None))
        return result
