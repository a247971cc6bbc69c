"""What tracing costs: the same run untraced, traced into nothing, and traced into memory,
against the mock server at 100 ms latency.

    .venv/bin/python bench/otel.py            # N=5,000 at C=500, 3 rounds (about a minute)
    .venv/bin/python bench/otel.py --quick    # N=1,000 at C=100, 2 rounds

Each row runs in a fresh child process, against `python -m vitals_engine.testing` in
another, after a warm-up sample: `Task(generate(chat_openai(...)), detect_includes())`
with its log on. The child sets OpenTelemetry's global providers as an application
would, before the run:

- off: none set (the run imports nothing of OpenTelemetry);
- no exporter: the SDK's tracer and meter providers with no span processor and no
  metric reader: every span and measurement is made, then dropped;
- in memory: the SDK's providers with `SimpleSpanProcessor(InMemorySpanExporter())` and
  an `InMemoryMetricReader`: every span is kept (two a sample, its own and its model
  call's, and the run's), the metrics read once at the end.

Measured: CPU per sample (the child's, all threads), wall time and the spans kept, as the
median of the rounds, rows alternating. Target: tracing into memory adds at most
0.3 ms CPU per sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
import throughput as _throughput  # bench/ is this script's folder

mock_server, verdict, LATENCY = _throughput.mock_server, _throughput.verdict, _throughput.LATENCY

KINDS = {"off": "off", "noop": "no exporter", "memory": "in memory"}


def _providers(kind: str) -> Any:
    """Set the global providers for `kind`; returns what reads the spans back (or None)."""
    if kind == "off":
        return None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    if kind == "noop":
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider())
        return None
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return exporter, reader


def child_run(kind: str, port: int, n: int, c: int) -> dict[str, Any]:
    kept = _providers(kind)
    import vitals_engine as ve

    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    chat = ve.chat_openai("gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench")
    with tempfile.TemporaryDirectory() as logs:
        warm = ve.Task(
            [{"input": "What's 0+0?", "target": "0"}],
            ve.generate(chat),
            ve.detect_includes(),
            dir=logs,
        )
        warm.eval(progress=False)
        task = ve.Task(data, ve.generate(chat), ve.detect_includes(), dir=logs)
        if kept is not None:
            kept[0].clear()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        task.eval(progress=False, max_concurrency=c)
        if kept is not None:
            kept[1].get_metrics_data()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {
        "wall": wall,
        "cpu": cpu,
        "spans": len(kept[0].get_finished_spans()) if kept is not None else 0,
        "otel_loaded": any(name.startswith("opentelemetry") for name in sys.modules),
    }


def report(n: int, c: int, rounds: int) -> list[str]:
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    with mock_server() as port:
        for _ in range(rounds):
            for kind in KINDS:
                found[kind].append(_throughput.in_child(kind, port, n, c, script=__file__))
    cpu = {
        kind: statistics.median(r["cpu"] for r in runs) / n * 1000 for kind, runs in found.items()
    }
    lines = [f"otel: N={n:,} at C={c}, mock latency {LATENCY * 1000:.0f} ms, median of {rounds}"]
    for kind, label in KINDS.items():
        runs = found[kind]
        wall = statistics.median(r["wall"] for r in runs)
        lines.append(
            f"  {label:<12} CPU {cpu[kind]:5.3f} ms/sample  (+{cpu[kind] - cpu['off']:5.3f})  "
            f"wall {wall:6.2f} s  spans {runs[-1]['spans']:>6,}"
        )
    added = cpu["memory"] - cpu["off"]
    lines.append(
        verdict(not found["off"][0]["otel_loaded"], "an untraced run loads no OpenTelemetry")
    )
    lines.append(verdict(added <= 0.3, f"in memory adds {added:.3f} ms/sample (target <= 0.3)"))
    return lines


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(child_run(kind, port, n, c)))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=1,000 at C=100, 2 rounds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3)")
    args = parser.parse_args()
    n, c, rounds = (1_000, 100, 2) if args.quick else (5_000, 500, 3)
    rounds = args.rounds or rounds
    print(f"vitals-engine otel  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print()
    print("\n".join(report(n, c, rounds)), flush=True)


if __name__ == "__main__":
    main()
