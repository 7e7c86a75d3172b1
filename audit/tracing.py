"""Traces (OpenTelemetry), beside the logs and metrics: off unless configured.

One trace follows a review's work across processes: the web request that submitted it, the
django-q2 job that claimed it, the provider call, the callback that answered, the decision and
the job that delivered its notification. The context crosses the process boundaries the way the
correlation ids do (audit/context.py): in the job's payload (`enqueue_on_commit` adds
`trace_parent`), and for a callback, through the operation it answers (the trace context is
stored on the moderation request when it is created, and a callback names that request by its
idempotency key). A provider is never asked to echo anything back.

Configuration: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_TRACING=1` with the SDK's other
`OTEL_*` variables) turns it on; `configure()` then installs the SDK with an OTLP/HTTP exporter
and the Django, psycopg and httpx instrumentations. Without it only the API's no-op tracer runs:
spans cost a function call and nothing is exported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_propagator = TraceContextTextMapPropagator()
tracer = trace.get_tracer("moderation")


_enabled = False


def enabled() -> bool:
    """Whether this process records spans (`configure` installed the SDK)."""
    return _enabled


def carrier() -> str:
    """The current span's context as a W3C `traceparent` value ("" when nothing is traced)."""
    headers: dict[str, str] = {}
    _propagator.inject(headers)
    return headers.get("traceparent", "")


@contextmanager
def continued(trace_parent: str, name: str, *, kind: trace.SpanKind = trace.SpanKind.INTERNAL,
              **attributes: Any) -> Iterator[trace.Span]:
    """A span for work that another process started: a child of `trace_parent` when there is
    one, else of whatever span is current (or a new trace). The span it interrupts, if any (the
    callback's own HTTP request), is kept as a link."""
    current = trace.get_current_span()
    links = [trace.Link(current.get_span_context())] if current.get_span_context().is_valid else []
    parent = _propagator.extract({"traceparent": trace_parent}) if trace_parent else None
    if parent is not None and not trace.get_current_span(parent).get_span_context().is_valid:
        parent = None  # a malformed value: trace on rather than fail the work
    attrs = {k: str(v) for k, v in attributes.items() if v is not None}
    with tracer.start_as_current_span(name, context=parent, kind=kind, links=links if parent else [],
                                      attributes=attrs) as span:
        yield span


def configure(settings) -> bool:
    """Install the SDK, the exporter and the instrumentations, once, if tracing is configured.

    Called from AuditConfig.ready() in every process (web workers, cluster workers, commands).
    Returns whether tracing is on.
    """
    global _enabled, tracer
    if not settings.OTEL_TRACING or _enabled:
        return _enabled
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}))
    # Batches leave on a thread of their own; the SDK re-creates it in forked workers.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    instrument(provider)
    tracer, _enabled = provider.get_tracer("moderation"), True
    return True


def instrumentors() -> list:
    """The Django (incoming requests), psycopg (statements) and httpx (provider calls, client
    notifications) instrumentations."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    return [DjangoInstrumentor(), PsycopgInstrumentor(), HTTPXClientInstrumentor()]


def instrument(provider) -> None:
    """Each instrumentation once per process, recording into `provider`."""
    for instrumentor in instrumentors():
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)


SpanKind = trace.SpanKind

__all__ = ["SpanKind", "carrier", "configure", "continued", "instrument", "tracer"]
