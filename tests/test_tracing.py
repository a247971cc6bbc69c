"""A run as the application's OpenTelemetry sees it: the run a span, each sample a child
span, each model call and tool call a span in the GenAI conventions (retries as events,
cost, cache hits, rate-limit and batch waits), message contents only when asked, never a
key; metrics; the library's log records carrying the run, task, sample and span ids;
one real OTLP/HTTP export; a Ray worker continuing the driver's trace; and a run that
is not traced importing nothing of OpenTelemetry.

The providers are the SDK's, handed to the runs with `use_providers()`: OpenTelemetry's
global providers are never set in this process (they can be set once per process, and
the rest of the suite must run untraced). The global path is tested in subprocesses.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")  # the dev group's

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import vitals_engine as ve
from tests.helpers import openai, sums, wait_until
from vitals_engine.tracing import use_providers

pytestmark = pytest.mark.anyio

MODEL = "gpt-4.1-mini"
KEY = "sk-secret-do-not-leak-4242"
QUICK_BATCH = ve.Batch(size=10, wait=0.05, poll=0.02)


@pytest.fixture(scope="module")
def spans_provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def spans(spans_provider) -> Iterator[InMemorySpanExporter]:
    """The spans of the runs a test makes (this module's provider, the exporter emptied)."""
    provider, exporter = spans_provider
    exporter.clear()
    with use_providers(tracer_provider=provider):
        yield exporter
    exporter.clear()


def task(server: Any, tmp_path: Any, n: int = 2, **chat_options: Any) -> ve.Task:
    chat = openai(server, MODEL, api_key=KEY, **chat_options)
    return ve.Task(
        sums(n), solver=ve.generate(chat), scorer=ve.detect_includes(), name="sums", dir=tmp_path
    )


def named(found: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in found if span.name.startswith(prefix)]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- the span tree -------------------------------------------------------------------------


async def test_a_run_is_a_span_over_its_samples_over_their_model_calls(server, tmp_path, spans):
    """A run of two samples: one run span (task, id, totals), a span per sample under it,
    and under each its model call's span with the GenAI conventions' attributes and cost."""
    done = await task(server, tmp_path).eval_async()
    assert done.log_path is not None
    run_id = ve.read_log(done.log_path).run_id
    found = list(spans.get_finished_spans())
    (run,) = named(found, "eval ")
    assert run.name == "eval sums"
    assert parent_of(run) is None
    run_attributes = attributes(run)
    assert run_attributes["vitals.task"] == "sums"
    assert run_attributes["vitals.run_id"] == run_id
    assert run_attributes["vitals.samples.done"] == 2
    assert run_attributes["vitals.cost_usd"] > 0
    samples = named(found, "sample ")
    assert sorted(attributes(s)["vitals.sample.id"] for s in samples) == ["1", "2"]
    assert {parent_of(s) for s in samples} == {span_id(run)}
    calls = named(found, "chat ")
    assert len(calls) == 2
    assert {parent_of(c) for c in calls} == {span_id(s) for s in samples}
    assert {trace_id(c) for c in found} == {trace_id(run)}
    call = attributes(calls[0])
    assert calls[0].name == f"chat {MODEL}"
    assert calls[0].kind.name == "CLIENT"
    assert call["gen_ai.operation.name"] == "chat"
    assert call["gen_ai.provider.name"] == "openai"
    assert call["gen_ai.request.model"] == MODEL
    assert call["gen_ai.response.model"] == MODEL
    assert call["gen_ai.response.finish_reasons"] == ("stop",)
    assert call["gen_ai.usage.input_tokens"] > 0
    assert call["gen_ai.usage.output_tokens"] > 0
    assert call["vitals.cost_usd"] > 0
    assert call["vitals.role"] == "solver"
    assert "vitals.rate_limit.wait_s" in call  # it passed the endpoint's limits


async def test_cached_and_reasoning_tokens_are_counted_as_the_conventions_say(
    server, tmp_path, spans
):
    """Tokens read from the provider's prompt cache are part of the input tokens and
    counted apart as well; reasoning tokens are counted apart from the output."""
    server.cached_tokens = 1
    server.reasoning_tokens = 4
    done = await task(server, tmp_path, 1).eval_async()
    (call,) = named(list(spans.get_finished_spans()), "chat ")
    found = attributes(call)
    ((input, cached, written, output, reasoning),) = (
        done.get_cost()
        .select(
            "input_tokens",
            "cached_input_tokens",
            "cache_write_tokens",
            "output_tokens",
            "reasoning_tokens",
        )
        .rows()
    )
    assert cached > 0
    assert reasoning > 0
    assert found["gen_ai.usage.cache_read.input_tokens"] == cached
    assert found["gen_ai.usage.input_tokens"] == input + cached + written
    assert found["gen_ai.usage.reasoning.output_tokens"] == reasoning
    assert found["gen_ai.usage.output_tokens"] == output


async def test_a_tool_call_is_a_span_under_its_sample(server, tmp_path, spans):
    """A model that calls a tool: the tool's execution is an `execute_tool` span under the
    sample, between the two model calls."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    chat = openai(server, MODEL, api_key=KEY)
    chat.register_tool(add)
    rows = [{"input": "Use add to compute 3 and 4", "target": "7"}]
    await ve.Task(
        rows, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path
    ).eval_async()
    found = list(spans.get_finished_spans())
    (sample,) = named(found, "sample ")
    (tool,) = named(found, "execute_tool ")
    assert tool.name == "execute_tool add"
    assert parent_of(tool) == span_id(sample)
    tool_attributes = attributes(tool)
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "add"
    assert tool_attributes["gen_ai.tool.call.id"]
    assert "gen_ai.tool.call.arguments" not in tool_attributes  # contents not asked for
    first, second = sorted(named(found, "chat "), key=lambda span: span.start_time or 0)
    assert attributes(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (first.end_time or 0) <= (tool.start_time or 0)
    assert (tool.end_time or 0) <= (second.start_time or 0)


async def test_a_retry_is_an_event_of_its_call_with_its_reason_and_wait(server, tmp_path, spans):
    """A call answered after a 429: one span, one `vitals.retry` event saying why and how
    long the call waited, and the retry counted on the span."""
    server.fail("429", times=1, retry_after=0.01)
    await task(server, tmp_path, 1).eval_async()
    (call,) = named(list(spans.get_finished_spans()), "chat ")
    assert attributes(call)["vitals.retries"] == 1
    (event,) = call.events
    assert event.name == "vitals.retry"
    event_attributes: dict[str, Any] = dict(event.attributes or {})
    assert event_attributes["vitals.retry.attempt"] == 1
    assert "429" in event_attributes["vitals.retry.reason"]
    assert event_attributes["vitals.retry.wait_s"] >= 0.01


async def test_a_call_that_fails_is_a_failed_span(server, tmp_path, spans):
    """A call the provider refuses (401): its span and its sample's are marked failed with
    the error's type, and the run goes on."""
    server.fail("401", times=1)
    await task(server, tmp_path, 1).eval_async(fail_on_error=False)
    found = list(spans.get_finished_spans())
    (call,) = named(found, "chat ")
    (sample,) = named(found, "sample ")
    assert call.status.status_code.name == "ERROR"
    assert attributes(call)["error.type"] == "AuthenticationError"
    assert sample.status.status_code.name == "ERROR"


async def test_a_run_with_too_many_failed_samples_ends_its_span_failed(server, tmp_path, spans):
    """A run that fails (EvalFailedError: more samples failed than fail_on_error allows)
    ends its span with an error status and `error.type`, as its samples' spans do."""
    server.fail("401", times=2)
    with pytest.raises(ve.EvalFailedError):
        await task(server, tmp_path, 2).eval_async()
    (run,) = named(list(spans.get_finished_spans()), "eval ")
    assert run.status.status_code.name == "ERROR"
    assert attributes(run)["error.type"] == "EvalFailedError"


async def test_a_run_stopped_by_its_budget_ends_its_span_failed(server, tmp_path, spans):
    """A run its budget stops (BudgetExceeded) ends its span with an error status and
    `error.type`, the samples it did not start never spanned."""
    with pytest.raises(ve.BudgetExceeded):
        await task(server, tmp_path, 40).eval_async(cost_budget=0.00001, max_concurrency=2)
    (run,) = named(list(spans.get_finished_spans()), "eval ")
    assert run.status.status_code.name == "ERROR"
    assert attributes(run)["error.type"] == "BudgetExceeded"


async def test_a_run_that_allows_its_failures_ends_its_span_well(server, tmp_path, spans):
    """A run whose failed samples fail_on_error allows ends its span without error."""
    server.fail("401", times=1)
    await task(server, tmp_path, 2).eval_async(fail_on_error=1)
    (run,) = named(list(spans.get_finished_spans()), "eval ")
    assert run.status.status_code.name != "ERROR"
    assert "error.type" not in attributes(run)


class Faulty:
    """A span processor with a bug: raises on every span's start or end."""

    def __init__(self, when: str) -> None:
        self.when = when
        self.calls = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.when == "start":
            self.calls += 1
            raise RuntimeError("the host's span processor broke on start")

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        if self.when == "end":
            self.calls += 1
            raise RuntimeError("the host's span processor broke on end")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("when", ["start", "end"])
async def test_a_broken_span_processor_never_stops_a_run(server, tmp_path, caplog, when):
    """A span processor of the host's that raises on every span's start (or end): the run
    of 20 samples finishes with all of them logged, the error reported once, and a
    healthy processor before it gets every span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    faulty = Faulty(when)
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # the SDK's order: it first
    provider.add_span_processor(faulty)
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    with use_providers(tracer_provider=provider):
        done = await task(server, tmp_path, 20).eval_async()
    assert faulty.calls > 20
    assert done.log_path is not None
    assert len(ve.read_log(done.log_path).samples) == 20
    assert done.metrics == {"accuracy": 1.0}
    reported = [r for r in caplog.records if "tracing" in r.getMessage().lower()]
    assert len(reported) == 1
    assert "the host's span processor broke" in reported[0].getMessage()
    found = list(exporter.get_finished_spans())
    assert len(named(found, "sample ")) == (20 if when == "end" else 0)
    assert len(named(found, "eval ")) == (1 if when == "end" else 0)
    provider.shutdown()


class BrokenMeterProvider:
    """A meter provider of the host's whose every measurement raises."""

    def get_meter(self, *args: Any, **kwargs: Any) -> BrokenMeterProvider:
        return self

    def create_histogram(self, *args: Any, **kwargs: Any) -> BrokenMeterProvider:
        return self

    create_counter = create_histogram

    def record(self, *args: Any, **kwargs: Any) -> None:
        raise ValueError("the host's metric view broke")

    add = record


async def test_a_broken_meter_never_stops_a_run(server, tmp_path, caplog):
    """A meter whose every measurement raises: the run finishes, the error said once."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    with use_providers(meter_provider=BrokenMeterProvider()):
        done = await task(server, tmp_path, 5).eval_async()
    assert done.metrics == {"accuracy": 1.0}
    reported = [r for r in caplog.records if "the host's metric view broke" in r.getMessage()]
    assert len(reported) == 1


async def test_a_cache_hit_is_a_span_that_says_so(server, tmp_path, spans):
    """The second run of the same samples with the reply cache: each call a span marked as
    a hit, at cost 0, and nothing sent; the first run's calls are marked as kept."""
    cache = ve.Cache(dir=tmp_path / "cache")
    await task(server, tmp_path, 2).eval_async(cache=cache)
    first = named(list(spans.get_finished_spans()), "chat ")
    assert [attributes(s)["vitals.cache.hit"] for s in first] == [False, False]
    spans.clear()
    server.reset()
    await task(server, tmp_path, 2).eval_async(cache=cache)
    assert server.requests == 0
    hits = named(list(spans.get_finished_spans()), "chat ")
    assert [attributes(s)["vitals.cache.hit"] for s in hits] == [True, True]
    assert [attributes(s)["vitals.cost_usd"] for s in hits] == [0.0, 0.0]


async def test_a_call_in_batch_mode_says_which_batch_answered_it_and_its_wait(
    server, tmp_path, spans
):
    """In batch mode a call's span names the provider batch that answered it and how long
    it waited for it; it passed no live rate limit."""
    server.batch_delay = 0.02
    await task(server, tmp_path, 3).eval_async(batch=QUICK_BATCH)
    calls = named(list(spans.get_finished_spans()), "chat ")
    assert len(calls) == 3
    for call in calls:
        found = attributes(call)
        assert found["vitals.batch.id"]
        assert found["vitals.batch.wait_s"] >= 0
        assert "vitals.rate_limit.wait_s" not in found


# -- contents and secrets -----------------------------------------------------------------


def everything_said(found: list[ReadableSpan]) -> str:
    """Every attribute and event attribute of `found`, as one text."""
    parts = []
    for span in found:
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
    parts.append(str([span.resource.attributes for span in found]))
    return "\n".join(parts)


async def test_message_contents_are_left_out_unless_asked_for(server, tmp_path, spans):
    """Without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, no prompt and no reply
    is on any span."""
    await task(server, tmp_path, 1).eval_async()
    said = everything_said(list(spans.get_finished_spans()))
    assert "What's 0+0?" not in said
    assert "gen_ai.input.messages" not in said
    assert "gen_ai.output.messages" not in said


async def test_message_contents_are_recorded_when_asked_for(server, tmp_path, spans, monkeypatch):
    """With the variable `true`, a call's span holds its input and output messages (JSON),
    and a tool's span its arguments and result."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    chat = openai(server, MODEL, api_key=KEY, system_prompt="Be brief.")
    chat.register_tool(add)
    rows = [{"input": "Use add to compute 3 and 4", "target": "7"}]
    await ve.Task(
        rows, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path
    ).eval_async()
    found = list(spans.get_finished_spans())
    first = min(named(found, "chat "), key=lambda span: span.start_time or 0)
    call = attributes(first)
    assert "Use add to compute 3 and 4" in call["gen_ai.input.messages"]
    assert '"role":"user"' in call["gen_ai.input.messages"]
    assert "Be brief." in call["gen_ai.system_instructions"]
    assert '"type":"tool_call"' in call["gen_ai.output.messages"]
    (tool,) = named(found, "execute_tool ")
    assert attributes(tool)["gen_ai.tool.call.arguments"] == '{"a":3,"b":4}'
    assert attributes(tool)["gen_ai.tool.call.result"] == "7"


async def test_no_key_is_on_any_span_even_with_contents(server, tmp_path, spans, monkeypatch):
    """The API key is on no span, attribute or event, whatever is captured (a failed call
    and a retry included)."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    server.fail("500", times=1)
    await task(server, tmp_path, 2).eval_async(retry=ve.Retry(backoff=0.01))
    said = everything_said(list(spans.get_finished_spans()))
    assert "vitals.retry" in said
    assert KEY not in said
    assert "authorization" not in said.lower()


# -- metrics ----------------------------------------------------------------------------


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """The data points of each metric the reader has, by name."""
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_metrics_count_tokens_durations_cost_and_retries(server, tmp_path):
    """Through the application's meter provider: token usage by type and call durations
    as the GenAI conventions' histograms, cost and retries as counters."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    server.fail("429", times=1, retry_after=0.01)
    with use_providers(meter_provider=meters):
        done = await task(server, tmp_path, 3).eval_async()
    found = points(reader)
    usage = {p.attributes["gen_ai.token.type"]: p for p in found["gen_ai.client.token.usage"]}
    cost = done.get_cost()
    assert usage["input"].count == usage["output"].count == 3
    assert usage["input"].sum == cost["input_tokens"].sum()
    assert usage["output"].sum == cost["output_tokens"].sum()
    assert usage["input"].attributes["gen_ai.provider.name"] == "openai"
    assert usage["input"].attributes["gen_ai.request.model"] == MODEL
    (duration,) = found["gen_ai.client.operation.duration"]
    assert duration.count == 3
    (spent,) = found["vitals.cost"]
    assert spent.value == pytest.approx(cost["cost"].sum())
    (retries,) = found["vitals.retries"]
    assert retries.value == 1
    meters.shutdown()


# -- logs -------------------------------------------------------------------------------


async def _logged_retry(server, tmp_path, caplog) -> tuple[logging.LogRecord, str | None]:
    """The library's log record of a retried call (one 429) in a run, and the run's id."""
    caplog.set_level(logging.INFO, logger="vitals_engine")
    server.fail("429", times=1, retry_after=0.01)
    done = await task(server, tmp_path, 1).eval_async()
    assert done.log_path is not None
    (record,) = [r for r in caplog.records if "retrying model call" in r.getMessage()]
    return record, ve.read_log(done.log_path).run_id


async def test_log_records_carry_the_run_task_sample_and_span(server, tmp_path, spans, caplog):
    """What the library logs during a traced run (a retry here) carries the run's id, the
    task, the sample's id and epoch, and the ids of the span it was logged in."""
    record, run_id = await _logged_retry(server, tmp_path, caplog)
    assert record.__dict__["run_id"] == run_id
    assert record.__dict__["task"] == "sums"
    assert (record.__dict__["sample_id"], record.__dict__["epoch"]) == (1, 1)
    (call,) = named(list(spans.get_finished_spans()), "chat ")
    assert record.__dict__["trace_id"] == format(trace_id(call), "032x")
    assert record.__dict__["span_id"] == format(span_id(call), "016x")
    assert "run_id" not in record.getMessage()  # the message is as it was


async def test_log_records_carry_the_run_and_sample_without_tracing(server, tmp_path, caplog):
    """Untraced, the records still carry the run, task and sample, and no span ids."""
    record, run_id = await _logged_retry(server, tmp_path, caplog)
    assert (record.__dict__["run_id"], record.__dict__["task"]) == (run_id, "sums")
    assert record.__dict__["sample_id"] == 1
    assert "trace_id" not in record.__dict__


# -- one real export -----------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each request's protobuf body."""

    received: list[Any]

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.received.append((self.path, request))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[HTTPServer]:
    http = HTTPServer(("127.0.0.1", 0), _Receiver)
    http.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield http
    http.shutdown()
    http.server_close()
    thread.join()


async def test_spans_go_out_over_otlp_http(server, tmp_path, receiver):
    """With the OTLP/HTTP exporter, the run's spans reach a collector as protobuf: the
    run, its sample and its call with their GenAI attributes."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    port = receiver.server_address[1]
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with use_providers(tracer_provider=provider):
        await task(server, tmp_path, 1).eval_async()
    assert provider.force_flush()
    provider.shutdown()
    sent = [
        span
        for path, request in receiver.received  # type: ignore[attr-defined]
        if path == "/v1/traces"
        for resource in request.resource_spans
        for scope in resource.scope_spans
        if scope.scope.name == "vitals_engine"
        for span in scope.spans
    ]
    assert sorted(span.name for span in sent) == ["chat gpt-4.1-mini", "eval sums", "sample 1"]
    (call,) = [span for span in sent if span.name.startswith("chat ")]
    values = {kv.key: kv.value for kv in call.attributes}
    assert values["gen_ai.provider.name"].string_value == "openai"
    assert values["gen_ai.usage.output_tokens"].int_value > 0


# -- Ray: the driver's trace continued --------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a Ray actor's event loop
async def test_a_ray_worker_continues_the_drivers_trace(server, spans):
    """The plan a driver sends its workers carries the run's W3C trace context; a worker
    (the actor's class, in this process) runs its samples as spans of that trace, under
    the driver's run span."""
    pytest.importorskip("ray")
    from ray import cloudpickle

    from vitals_engine.distributed.driver import _plan
    from vitals_engine.distributed.wire import parcel_out
    from vitals_engine.distributed.worker import SampleWorker
    from vitals_engine.engine.observing import RunObserver
    from vitals_engine.engine.options import RunOptions
    from vitals_engine.engine.run import Run
    from vitals_engine.engine.user_functions import spec_of
    from vitals_engine.engine.work import RunWork
    from vitals_engine.samples import Sample, SampleRecord

    run = Run(
        work=RunWork(
            solver=spec_of(ve.generate(openai(server, MODEL, api_key=KEY)), "solver"), scorer=None
        ),
        options=RunOptions(max_concurrency=2),
        observer=RunObserver(task="sums", run_id="driver-run"),
    )
    with run.observer.running():
        payload = _plan(run, run.work, 2, 2, None, False)
        plan = cloudpickle.loads(payload)
        assert plan.trace_context["traceparent"].startswith("00-")
        worker = SampleWorker()
        await worker.begin(payload)
        records = [SampleRecord(Sample(i, 1, f"What's {i}+{i}?", str(2 * i))) for i in (1, 2)]
        await worker.feed(parcel_out(records, fresh=True))
        await worker.stop()
        back = [cloudpickle.loads(blob) async for blob in worker.serve()]
        await worker.end()
    assert sorted(done[0] for finished, *_ in back for done in finished) == [1, 2]
    found = list(spans.get_finished_spans())
    (driver,) = named(found, "eval ")
    samples = named(found, "sample ")
    assert len(samples) == 2
    assert {parent_of(s) for s in samples} == {span_id(driver)}
    assert {trace_id(s) for s in found} == {trace_id(driver)}
    assert len(named(found, "chat ")) == 2


def tracing_to(endpoint: str) -> Any:
    """A solver that makes the runs its Ray worker's process starts from now on report
    their spans over OTLP/HTTP to `endpoint` (as an application's setup would). Made here:
    the workers cannot import this module."""

    def solve(input: str) -> str:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        from vitals_engine.tracing import setup

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        setup._chosen = setup.Providers(tracer_provider=provider)
        return "traced from now on"

    return solve


def received_spans(receiver: HTTPServer) -> list[Any]:
    return [
        span
        for _, request in receiver.received  # type: ignore[attr-defined]
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def gone(ray: Any, worker: Any) -> bool:
    """Whether a killed worker has stopped answering (a kill takes effect soon)."""
    try:
        ray.get(worker.ready.remote(), timeout=60)
    except ray.exceptions.RayActorError:
        return True
    return False


def test_spans_on_ray_workers_continue_the_drivers_trace(local_ray, spans, receiver, tmp_path):
    """On a real (local) Ray: once a worker's process has a tracer provider, the samples
    it runs are spans of the driver's trace, under the driver's run span, with their
    model calls under them. (The worker that was given a provider is killed after.)"""
    import ray

    from vitals_engine.distributed.pool import POOL

    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    rows = [{"input": "set up", "target": "traced"}]
    try:
        setup = ve.Task(
            rows, solver=tracing_to(endpoint), scorer=ve.detect_includes(), dir=tmp_path
        )
        setup.eval(backend=ve.Ray(workers=1))
        assert received_spans(receiver) == []  # decided at the run's start: untraced
        spans.clear()
        task = ve.Task(
            sums(2), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
        )
        task.eval(backend=ve.Ray(workers=1))
    finally:
        for worker in POOL.idle():  # no other test gets a worker that traces
            ray.kill(worker)
            wait_until(functools.partial(gone, ray, worker), "the killed worker to be gone")
    (driver,) = named(list(spans.get_finished_spans()), "eval ")
    assert named(list(spans.get_finished_spans()), "sample ") == []  # they ran on the worker
    remote = received_spans(receiver)
    samples = [span for span in remote if span.name.startswith("sample ")]
    calls = [span for span in remote if span.name.startswith("chat ")]
    assert len(samples) == len(calls) == 2
    trace = trace_id(driver).to_bytes(16, "big")
    assert {span.trace_id for span in remote} == {trace}
    assert {span.parent_span_id for span in samples} == {span_id(driver).to_bytes(8, "big")}
    assert {span.parent_span_id for span in calls} == {span.span_id for span in samples}


# -- untraced runs --------------------------------------------------------------------------


def run_in_a_subprocess(setup: str) -> str:
    """Run `setup`, then a task of two samples on `chat_mock`, in a fresh interpreter;
    what it prints."""
    code = textwrap.dedent(setup) + textwrap.dedent(
        """
        import sys
        import vitals_engine as ve
        task = ve.Task([{"input": "What's 1+1?", "target": "2"},
                        {"input": "What's 2+2?", "target": "4"}],
                       solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(),
                       name="plain")
        task.eval()
        print("loaded:", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        print("tracing:", "vitals_engine.tracing.spans" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_plain_run_imports_nothing_of_opentelemetry(tmp_path, monkeypatch):
    """Without a provider, a run imports no module of OpenTelemetry and none of ours that
    makes spans."""
    monkeypatch.chdir(tmp_path)
    out = run_in_a_subprocess("")
    assert "loaded: []" in out
    assert "tracing: False" in out


def test_a_run_is_untraced_while_the_application_set_no_provider(tmp_path, monkeypatch):
    """An application that imported OpenTelemetry's API but set no provider: the run is
    not traced (the global provider is still the proxy)."""
    monkeypatch.chdir(tmp_path)
    out = run_in_a_subprocess("import opentelemetry.trace, opentelemetry.metrics\n")
    assert "tracing: False" in out


def test_a_run_uses_the_global_provider_the_application_set(tmp_path, monkeypatch):
    """An application that set OpenTelemetry's global tracer provider: its runs are traced
    there, without any call of ours."""
    monkeypatch.chdir(tmp_path)
    out = run_in_a_subprocess(
        """
        import atexit
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        names = lambda: sorted(s.name for s in exporter.get_finished_spans())
        atexit.register(lambda: print("spans:", names()))
        """
    )
    assert "tracing: True" in out
    names = ["chat mock-model", "chat mock-model", "eval plain", "sample 1", "sample 2"]
    assert f"spans: {names}" in out


def test_the_cloud_platforms_are_named_as_the_conventions_name_them():
    from vitals_engine.tracing.genai import provider_name

    named = {name: provider_name(name) for name in ("Bedrock", "Azure OpenAI", "Vertex AI")}
    assert named == {
        "Bedrock": "aws.bedrock",
        "Azure OpenAI": "azure.ai.openai",
        "Vertex AI": "gcp.vertex_ai",
    }
