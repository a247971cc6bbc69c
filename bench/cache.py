"""The cache of model replies: a 10,000-sample run, then the same run again, answered
wholly from the cache, against the mock server at 100 ms latency.

    .venv/bin/python bench/cache.py            # N=10,000 (about a minute)
    .venv/bin/python bench/cache.py --quick    # N=2,000

Each row runs in a fresh child process, against `python -m vitals_engine.testing` in
another, after a warm-up sample: `Task(generate(chat_openai(...)), detect_includes())`
at the default `max_concurrency` (32), with its log on.

- live, no cache: the run as it is without `cache=` (what the cache's absence costs);
- live, filling the cache: the same run with `cache=Cache(dir=...)`, every call a miss
  whose reply is stored;
- cached: the same run again on that store, every call a hit (no request sent).

Measured: wall time, CPU per sample, peak RSS, requests sent (the run's own count of
calls not answered by the cache), and the store's size. Targets: the cached run at most
0.3 ms CPU per sample, and at least 20x faster than the live run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
import throughput as _throughput  # bench/ is this script's folder

mock_server, verdict, LATENCY = _throughput.mock_server, _throughput.verdict, _throughput.LATENCY


def child_run(kind: str, port: int, n: int, store: str) -> dict[str, Any]:
    import vitals_engine as ve

    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    chat = ve.chat_openai("gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench")
    cache = ve.Cache(dir=store) if kind != "plain" else None
    with tempfile.TemporaryDirectory() as logs:
        warm = ve.Task(
            [{"input": "What's 0+0?", "target": "0"}],
            ve.generate(chat),
            ve.detect_includes(),
            dir=logs,
        )
        warm.eval(progress=False, cache=ve.Cache(dir=logs) if cache else None)
        task = ve.Task(data, ve.generate(chat), ve.detect_includes(), dir=logs)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        task.eval(progress=False, cache=cache)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        finished = task.get_samples().filter(ve_score_ok()).height
        cost = task.get_cost()
        sent = cost.filter(~cost["cached"])["requests"].sum()
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "requests": int(sent),
        "finished": finished,
        "store_mb": sum(p.stat().st_size for p in Path(store).glob("*")) / 1e6,
    }


def ve_score_ok() -> Any:
    import polars as pl

    return pl.col("score") == "C"


def in_child(kind: str, port: int, n: int, store: str) -> dict[str, Any]:
    os.environ["VITALS_BENCH_STORE"] = store  # the child's environment
    return _throughput.in_child(kind, port, n, 0, script=__file__)


def row(label: str, r: dict[str, Any], n: int) -> str:
    return (
        f"  {label:<24} wall {r['wall']:6.2f} s  CPU {r['cpu'] / n * 1000:5.3f} ms/sample  "
        f"peak RSS {r['rss_mb']:4.0f} MB  requests {r['requests']:>6,}  "
        f"finished {r['finished']:,}/{n:,}"
    )


def report(n: int) -> list[str]:
    with tempfile.TemporaryDirectory() as store, mock_server() as port:
        plain = in_child("plain", port, n, store)
        filling = in_child("fill", port, n, store)
        cached = in_child("cached", port, n, store)
    cpu_ms = cached["cpu"] / n * 1000
    speedup = filling["wall"] / cached["wall"]
    return [
        f"cache: N={n:,} at max_concurrency 32, mock latency {LATENCY * 1000:.0f} ms",
        row("live, no cache", plain, n),
        row("live, filling the cache", filling, n),
        row("cached", cached, n),
        f"  store {cached['store_mb']:.1f} MB ({cached['store_mb'] * 1e6 / n:.0f} bytes a reply)",
        verdict(cpu_ms <= 0.3, f"cached run CPU {cpu_ms:.3f} ms/sample (target <= 0.3)"),
        verdict(
            speedup >= 20, f"cached run {speedup:.1f}x faster than the live run (target >= 20x)"
        ),
        verdict(cached["requests"] == 0, f"cached run sent {cached['requests']} requests"),
    ]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        store = os.environ["VITALS_BENCH_STORE"]
        print(json.dumps(child_run(kind, port, n, store)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000")
    args = parser.parse_args()
    n = 2_000 if args.quick else 10_000
    print(f"vitals-engine cache  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print()
    print("\n".join(report(n)), flush=True)


if __name__ == "__main__":
    main()
