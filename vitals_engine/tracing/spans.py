"""A run's spans: the run, each sample (id, epoch), each model call, each tool call.

```
eval <task>                          the run (on a Ray worker: the driver's, continued)
└── sample <id>                      one per (id, epoch), from its first stage to its end
    ├── chat <model>                 one per model call (GenAI conventions), retries as
    │                                events, its cost, cache, rate-limit and batch waits
    └── execute_tool <name>          one per tool call
```

Whether a run is traced is decided once, at its start (`setup.py`); when it is not,
nothing here is made and OpenTelemetry is not imported.
A sample's stages run on whichever workers take them, so its span is started with an
explicit parent (the run's context) and made current around each stage (`enter` /
`leave`), never left current in a worker between samples. A model call's span is
current while the call is under way, so what is logged meanwhile carries its ids.

The application's OpenTelemetry setup is the application's code: a span processor
that raises on a span's start or end, or a metric view that raises on a measurement,
is reported once per run (a warning) and never stops it; a span that could not start
is replaced by a non-recording one, so its children still run.

A run that fails (more failed samples than allowed), stops on its budget or is
cancelled ends its span with an error status and `error.type`: its outcome, known
only once its samples are done, is handed to `close_run`.

Across processes, the run's context travels as W3C trace context (`carrier()`, a dict of
`traceparent` / `tracestate`); a Ray worker's `RunTrace` continues it
(`RunTrace(providers, carrier)`), its samples children of the driver's run span.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._logging import log
from .._version import version
from ..vocab.model_calls import ChatRequest, RetryNote
from ..vocab.turns import ContentToolResult, Turn
from .contents import captures_contents, input_messages, output_messages, tool_contents
from .genai import ERROR_TYPE, OPERATION, call_attributes, reply_attributes
from .instruments import Instruments
from .setup import Providers

__all__ = ["CallSpan", "RunTrace", "ToolSpan"]

#: The instrumentation scope's name, for tracer and meter.
SCOPE = "vitals_engine"


class RunTrace:
    """The spans and metrics of one run.

    Example:
        >>> providers = providers_of_run()   # None: the application configured none
        >>> if providers is not None:
        ...     trace = RunTrace(providers)
        ...     trace.open_run("sums", {"vitals.run_id": run_id})
        ...     run = trace.enter_run()
        ...     span = trace.sample_span((1, 1))
        ...     token = trace.enter(span)
        ...     ...                        # the sample's stage
        ...     trace.leave(token)
        ...     trace.sample_done((1, 1), None)
        ...     trace.leave(run)
        ...     trace.close_run({}, None)
    """

    __slots__ = (
        "_context",
        "_reported",
        "_samples",
        "api",
        "contents",
        "instruments",
        "parent",
        "run_context",
        "run_span",
        "tracer",
    )

    def __init__(self, providers: Providers, carrier: Mapping[str, str] | None = None) -> None:
        from opentelemetry import context, trace

        self.api = trace
        self._context = context
        provider = providers.tracer_provider or trace.NoOpTracerProvider()
        self.tracer = provider.get_tracer(SCOPE, version())
        meter = providers.meter_provider
        self.instruments = Instruments(meter.get_meter(SCOPE, version())) if meter else None
        #: Whether message contents go on spans (the application's choice, read once).
        self.contents = captures_contents()
        #: The context the run continues (a driver's, from its carrier; None: the current).
        self.parent = _extracted(carrier) if carrier is not None else None
        self.run_span: Any = None
        self.run_context: Any = self.parent
        #: The spans of the samples started and not done, by (id, epoch).
        self._samples: dict[tuple[Any, int], Any] = {}
        self._reported = False

    # -- the application's code, shielded -------------------------------------------------

    def report(self, error: Exception, doing: str) -> None:
        """Say, once per run, that the application's OpenTelemetry setup raised."""
        if self._reported:
            return
        self._reported = True
        log.warning(
            "tracing: the application's OpenTelemetry setup raised; the run goes on, and "
            "its spans or metrics may be incomplete (see the error: a span processor, "
            "exporter or metric view of the application's)",
            doing=doing,
            error=f"{type(error).__name__}: {error}",
        )

    def start_span(self, name: str, **options: Any) -> Any:
        """A span started by the application's tracer; a non-recording one when its setup
        raised (reported)."""
        try:
            return self.tracer.start_span(name, **options)
        except Exception as error:
            self.report(error, f"starting span {name!r}")
            return self.api.INVALID_SPAN

    def end(self, span: Any) -> None:
        """End `span`, whatever the application's span processors do on its end."""
        try:
            span.end()
        except Exception as error:
            self.report(error, "ending a span")

    def measure(self, record: Callable[..., None], *args: Any) -> None:
        """Record a measurement, whatever the application's metric setup does with it."""
        try:
            record(*args)
        except Exception as error:
            self.report(error, "recording a metric")

    # -- the run -------------------------------------------------------------------------

    def open_run(self, task: str | None, attributes: Mapping[str, Any]) -> None:
        """Start the run's span, under the current span (on a worker continuing a
        driver's run: none; the driver's is the run's)."""
        if self.parent is None:
            name = f"eval {task}" if task else "eval"
            self.run_span = self.start_span(name, attributes=attributes)
            self.run_context = self.api.set_span_in_context(self.run_span)

    def enter_run(self) -> Any:
        """Make the run's context current; returns the token `leave` takes."""
        if self.run_context is None:
            return None
        return self._context.attach(self.run_context)

    def close_run(
        self,
        attributes: Mapping[str, Any],
        error: BaseException | None,
        outcome: str | None = None,
    ) -> None:
        """End what is still open of the run: samples that did not finish, its span.
        `error`: what stopped it; `outcome`: the type of the error its end will raise
        (a run with too many failed samples, one stopped by its budget), else None."""
        for span in self._samples.values():
            span.set_attribute("vitals.sample.finished", False)
            self.end(span)
        self._samples.clear()
        span = self.run_span
        if span is None:
            return
        span.set_attributes(attributes)
        if error is not None:
            _failed(self.api, span, error)
        elif outcome is not None:
            span.set_attribute(ERROR_TYPE, outcome)
            span.set_status(self.api.Status(self.api.StatusCode.ERROR))
        self.end(span)

    def carrier(self) -> dict[str, str]:
        """The run's context as W3C trace context headers, for another process."""
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(headers, context=self.run_context)
        return headers

    # -- samples -------------------------------------------------------------------------

    def sample_span(self, key: tuple[Any, int]) -> Any:
        """The span of sample `key` (id, epoch), started at its first stage."""
        span = self._samples.get(key)
        if span is None:
            sample_id, epoch = key
            span = self._samples[key] = self.start_span(
                f"sample {sample_id}",
                context=self.run_context,
                attributes={"vitals.sample.id": str(sample_id), "vitals.sample.epoch": epoch},
            )
        return span

    def enter(self, span: Any) -> Any:
        """Make `span` current (for a stage); returns the token `leave` takes."""
        return self._context.attach(self.api.set_span_in_context(span))

    def leave(self, token: Any) -> None:
        """Undo the `enter` (or `enter_run`) that returned `token`."""
        if token is not None:
            self._context.detach(token)

    def sample_done(self, key: tuple[Any, int], error: str | None) -> None:
        """End sample `key`'s span; `error`: the type of the error it failed with."""
        span = self._samples.pop(key, None)
        if span is None:
            return
        if error is not None:
            span.set_attribute(ERROR_TYPE, error)
            span.set_status(self.api.Status(self.api.StatusCode.ERROR))
        self.end(span)

    # -- calls ---------------------------------------------------------------------------

    def model_call(
        self,
        provider: str,
        model: str,
        role: str | None,
        request: ChatRequest,
        notes: Sequence[RetryNote],
    ) -> CallSpan:
        """The span of a model call, started (current once entered: `with`); `notes`: the
        call's retry notes, read when it ends."""
        attributes = call_attributes(provider, model, role)
        if self.contents:
            attributes.update(input_messages(request))
        span = self.start_span(
            f"chat {model}", kind=self.api.SpanKind.CLIENT, attributes=attributes
        )
        return CallSpan(self, span, attributes, notes)

    def tool(self, name: str, call_id: str) -> ToolSpan:
        """The span of a tool call, started (current once entered: `with`)."""
        span = self.start_span(
            f"execute_tool {name}",
            attributes={
                OPERATION: "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
            },
        )
        return ToolSpan(self, span)

    # -- logs ----------------------------------------------------------------------------

    def span_ids(self) -> dict[str, str] | None:
        """The current span's trace and span ids (hex), for a log record; None outside
        any span."""
        context = self.api.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
        }


class CallSpan:
    """One model call's span, current while it is entered.

    Example:
        >>> with trace.model_call("OpenAI", "gpt-4.1-mini", "solver", request, call.notes) as span:
        ...     turn = await send(call)
        ...     span.replied(turn, cache=None, batch_id=None, waited=0.0, sent=call.started)
    """

    __slots__ = ("attributes", "notes", "span", "started", "token", "trace")

    def __init__(
        self, trace: RunTrace, span: Any, attributes: dict[str, Any], notes: Sequence[RetryNote]
    ) -> None:
        self.trace, self.span, self.attributes, self.notes = trace, span, attributes, notes
        self.started = time.perf_counter()
        self.token: Any = None

    def __enter__(self) -> CallSpan:
        self.token = self.trace.enter(self.span)
        return self

    def replied(
        self, turn: Turn, *, cache: str | None, batch_id: str | None, waited: float, sent: float
    ) -> None:
        """What the reply says; `cache`: "read" (a hit) or "write" (kept); `batch_id`: the
        provider batch that answered it; `waited`: seconds its attempts waited for the
        endpoint's rate limits; `sent`: time.time() of its first attempt."""
        span, trace = self.span, self.trace
        attributes = reply_attributes(turn)
        if cache is not None:
            attributes["vitals.cache.hit"] = cache == "read"
        if waited > 0:
            attributes["vitals.rate_limit.wait_s"] = waited
        if batch_id is not None:
            attributes["vitals.batch.id"] = batch_id
            attributes["vitals.batch.wait_s"] = max(0.0, time.time() - sent) if sent else 0.0
        if trace.contents:
            attributes.update(output_messages(turn))
        span.set_attributes(attributes)
        instruments = trace.instruments
        if instruments is not None:
            self.attributes.update(attributes)
            seconds = time.perf_counter() - self.started
            trace.measure(
                instruments.replied,
                self.attributes,
                turn.tokens,
                seconds,
                turn.cost,
                len(self.notes),
            )

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        trace, span, notes = self.trace, self.span, self.notes
        trace.leave(self.token)
        if notes:
            span.set_attribute("vitals.retries", len(notes))
            for note in notes:
                span.add_event(
                    "vitals.retry",
                    {
                        "vitals.retry.attempt": note.attempt,
                        "vitals.retry.reason": note.reason,
                        "vitals.retry.wait_s": note.wait,
                    },
                    timestamp=int(note.at * 1e9),
                )
        if isinstance(error, Exception):
            _failed(trace.api, span, error)
            if trace.instruments is not None:
                seconds = time.perf_counter() - self.started
                trace.measure(
                    trace.instruments.failed,
                    self.attributes,
                    type(error).__name__,
                    seconds,
                    len(notes),
                )
        trace.end(span)


class ToolSpan:
    """One tool call's span, current while it is entered.

    Example:
        >>> with trace.tool("add", request.id) as span:
        ...     result = await tool_function(request)
        ...     span.result(request.arguments, result)
    """

    __slots__ = ("span", "token", "trace")

    def __init__(self, trace: RunTrace, span: Any) -> None:
        self.trace, self.span = trace, span
        self.token: Any = None

    def __enter__(self) -> ToolSpan:
        self.token = self.trace.enter(self.span)
        return self

    def result(self, arguments: Any, result: ContentToolResult) -> None:
        """What the tool gave back (an error the model is shown marks the span failed)."""
        span = self.span
        if result.error is not None:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(self.trace.api.Status(self.trace.api.StatusCode.ERROR))
        if self.trace.contents:
            span.set_attributes(tool_contents(arguments, result))

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        self.trace.leave(self.token)
        if isinstance(error, Exception):
            _failed(self.trace.api, self.span, error)
        self.trace.end(self.span)


def _failed(trace: Any, span: Any, error: BaseException) -> None:
    """Mark `span` failed with `error`'s type (its message may hold what must not leave)."""
    span.set_attribute(ERROR_TYPE, type(error).__name__)
    span.set_status(trace.Status(trace.StatusCode.ERROR))


def _extracted(carrier: Mapping[str, str]) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(dict(carrier))
