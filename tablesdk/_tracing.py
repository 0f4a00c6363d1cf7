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
* one CLIENT span per HTTP attempt (:func:`attempt_span`), a child of the operation's,
  with the OpenTelemetry HTTP client attributes, the W3C ``traceparent`` header put on
  the request so the service's logs can be joined, and ``error.type`` set to the
  service's error code on a failure.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ._version import __version__

__all__ = ["active_tracer", "annotate", "attempt_span", "trace_public_methods", "AttemptSpan"]

C = TypeVar("C", bound=type)


def active_tracer() -> Any | None:
    """The tablesdk tracer when the application configured a tracer provider, else None (cheaply)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer("tablesdk", __version__)


def annotate(**attributes: Any) -> None:
    """Set attributes (``tablesdk.batch.operation_count=...``) on the current span, if tracing is on."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        for name, value in attributes.items():
            if value is not None:
                span.set_attribute(name, value)


def _error_type(error: BaseException) -> str:
    code = getattr(error, "error_code", None)
    return str(code) if code else type(error).__name__


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


def trace_public_methods(cls: C, *, skip: frozenset[str] = frozenset()) -> C:
    """Give every public method defined on ``cls`` (sync or async) an operation span named ``Class.method``.

    Generators and builders that send nothing (``create_query``, ``get_table_reference``) are
    left alone: their requests are traced where they are sent.
    """
    for attribute, member in list(vars(cls).items()):
        if attribute.startswith("_") or attribute in skip or not inspect.isfunction(member):
            continue
        if inspect.isgeneratorfunction(member) or inspect.isasyncgenfunction(member):
            continue
        name = f"{cls.__name__}.{attribute}"
        wrap = _wrap_async if inspect.iscoroutinefunction(member) else _wrap_sync
        setattr(cls, attribute, wrap(name, member))
    return cls


class AttemptSpan:
    """The CLIENT span of one HTTP attempt (see :func:`attempt_span`)."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def answered(self, status: int, error: BaseException | None = None) -> None:
        """The attempt got an answer with ``status``; ``error`` when the answer is an error."""
        self.span.set_attribute("http.response.status_code", status)
        if error is not None:
            _fail(self.span, error)

    def failed(self, error: BaseException) -> None:
        """No answer arrived (refused, cut, timed out)."""
        _fail(self.span, error)


@contextmanager
def attempt_span(
    method: str, redacted_url: str, attempt: int, headers: dict[str, str]
) -> Iterator[AttemptSpan | None]:
    """A CLIENT span around one attempt, or None without tracing; puts ``traceparent`` into ``headers``.

    ``redacted_url`` must already have its SAS signature replaced: it becomes ``url.full``.
    """
    tracer = active_tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parts = urlsplit(redacted_url)
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.full": redacted_url,
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
    }
    if attempt > 1:
        attributes["http.request.resend_count"] = attempt - 1
    with tracer.start_as_current_span(
        method, kind=trace.SpanKind.CLIENT, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    ) as span:
        TraceContextTextMapPropagator().inject(headers, context=trace.set_span_in_context(span))
        yield AttemptSpan(span)
