"""Ray benchmark: one eval on 2 Ray workers beside the same eval in a single process.

    .venv/bin/python bench/ray.py            # N=20,000 at C=2,000, then N=100,000 (5 minutes)
    .venv/bin/python bench/ray.py --quick    # N=2,000 at C=400

Each eval is `Task(generate(chat_openai(...)), detect_includes())` with the log
on, in a fresh child process, against `python -m vitals_engine.testing` in
another process at 100 ms latency: once in process (`task.eval(max_concurrency=C)`)
and once with `backend=ve.Ray(workers=2, max_concurrency=C)` on a local Ray the
child starts with `ray.init(num_cpus=2)`. Both warm up first: one sample, and on
Ray one per worker, which also starts the workers.

Measured for the Ray run:

- driver CPU: the child's `time.process_time()` over the run (all its threads,
  Ray's own in the driver included);
- worker CPU: the CPU of each worker actor's process over the run, from
  `/proc/<pid>/stat` (the bench gives the actor class a `pid()` method; the
  workers and the limits hub were started by the warm-up run and kept for this
  one, as a process's second run finds them);
- Ray's own processes (raylet, GCS, the limits hub, idle pooled workers): the
  CPU of the driver's other descendants over the run, from `/proc/<pid>/stat`;
- calls to the run's limits hub (every endpoint coordinator's count, from
  `driver.LAST_REPORT`) per 1,000 requests;
- peak RSS of the driver, and its peak RSS at N=20,000 and N=100,000 (`--quick`:
  N=2,000 and N=10,000).

Targets:

- driver CPU at most 0.1 ms per sample;
- total CPU per sample (driver + workers + Ray's processes) at most 1.5x the
  single-process run's;
- coordinator calls at most 20 per 1,000 requests;
- driver memory flat: peak RSS at N=100,000 under 1.5x that at N=20,000.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)

HERE = Path(__file__).resolve().parent
# This file is named ray.py: drop its folder from the path so `import ray` is Ray.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

ROOT = HERE.parent
LATENCY = 0.1
#: Ray workers (`--workers`; passed to the child runs through the environment).
WORKERS = int(os.environ.get("VITALS_BENCH_RAY_WORKERS", "2"))
MEMORY_N = (20_000, 100_000)  # --quick: (2_000, 10_000)
TICK = os.sysconf("SC_CLK_TCK")


def _bench_throughput() -> Any:
    """bench/throughput.py as a module (this folder is off the path: see above)."""
    spec = importlib.util.spec_from_file_location("bench_throughput", HERE / "throughput.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The mock server and the verdicts are the throughput bench's, at the same latency.
_throughput = _bench_throughput()
mock_server, ideal, verdict = _throughput.mock_server, _throughput.ideal, _throughput.verdict


# -- what runs in a child process -------------------------------------------------------


def descendants_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system) of every live descendant of `root`, by pid, from /proc."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / TICK
    found: dict[int, float] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = cpu[child]
                frontier.append(child)
    return found


def child_run(kind: str, port: int, n: int, c: int) -> dict[str, Any]:
    import resource

    import vitals_engine as ve

    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    chat = ve.chat_openai("gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench")
    options: dict[str, Any] = {"max_concurrency": c}
    workers: list[int] = []
    if kind == "ray":
        import ray

        from vitals_engine.distributed import driver

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=WORKERS, include_dashboard=False, logging_level="ERROR")

        class BenchWorker(driver.SampleWorker):
            """The library's worker, plus its process id."""

            def pid(self) -> int:
                return os.getpid()

        driver.SampleWorker = BenchWorker  # type: ignore[misc]
        options = {"backend": ve.Ray(workers=WORKERS, max_concurrency=c)}
    with tempfile.TemporaryDirectory() as logs:
        # A sample per worker first: the modules a run loads on first use (polars, the HTTP
        # client, Ray's driver side) are loaded, and the Ray workers and limits hub started
        # (kept for the next run), before the clock starts.
        first = data[: WORKERS if kind == "ray" else 1]
        warm = ve.Task(first, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
        warm.eval(progress=False, **options)
        task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
        before = descendants_cpu(os.getpid())
        wall0, cpu0 = time.perf_counter(), time.process_time()
        task.eval(progress=False, retry=ve.Retry(max_attempts=20), fail_on_error=False, **options)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        after = descendants_cpu(os.getpid())
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        records = task._state.records or []
        if kind == "ray":
            import ray

            from vitals_engine.distributed.pool import POOL

            workers = [ray.get(worker.pid.remote()) for worker in POOL.idle()]
        calls = (
            sum(r["calls"] for r in getattr(driver, "LAST_REPORT", {}).values())
            if kind == "ray"
            else 0
        )
    spent = {pid: cpu_s - before.get(pid, 0.0) for pid, cpu_s in after.items()}
    worker_cpu = [spent.get(pid, 0.0) for pid in workers] if kind == "ray" else []
    return {
        "wall": wall,
        "cpu": cpu,
        "workers_cpu": sum(worker_cpu),
        "workers_reported": len(worker_cpu),
        "system_cpu": sum(spent.values()) - sum(worker_cpu) if kind == "ray" else 0.0,
        "rss_mb": rss,
        "coordinator_calls": calls,
        "finished": sum(1 for r in records if r.score is not None and r.error is None),
    }


def in_child(kind: str, port: int, n: int, c: int) -> dict[str, Any]:
    return _throughput.in_child(kind, port, n, c, script=__file__)


# -- the report ----------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def ms(seconds: float, n: int) -> float:
    return seconds / n * 1000


def report(n: int, c: int, memory_n: tuple[int, int]) -> list[str]:
    with mock_server() as port:
        local = in_child("local", port, n, c)
        remote = in_child("ray", port, n, c)
        sizes = {m: (remote if m == n else in_child("ray", port, m, c)) for m in memory_n}
    local_ms = ms(local["cpu"], n)
    driver_ms = ms(remote["cpu"], n)
    workers_ms = ms(remote["workers_cpu"], n)
    system_ms = ms(remote["system_cpu"], n)
    total_ms = driver_ms + workers_ms + system_ms
    small, large = (sizes[m]["rss_mb"] for m in memory_n)
    return [
        f"N={n:,}, C={c:,} ({_count(WORKERS, 'Ray worker')}), latency {LATENCY * 1000:.0f} ms, "
        f"ideal {ideal(n, c):.2f} s",
        f"  {'single process':<16} wall {local['wall']:6.2f} s  CPU {local_ms:6.3f} ms/sample  "
        f"peak RSS {local['rss_mb']:5.0f} MB  finished {local['finished']}/{n}",
        f"  {'Ray':<16} wall {remote['wall']:6.2f} s  peak RSS of the driver "
        f"{remote['rss_mb']:5.0f} MB  finished {remote['finished']}/{n}",
        f"    driver CPU            {driver_ms:6.3f} ms/sample",
        f"    worker CPU            {workers_ms:6.3f} ms/sample "
        f"(sum over {_count(remote['workers_reported'], 'actor')})",
        f"    Ray's own processes   {system_ms:6.3f} ms/sample (raylet, GCS, idle workers)",
        f"    total                 {total_ms:6.3f} ms/sample",
        f"  coordinator calls     {remote['coordinator_calls'] / n * 1000:6.2f} per 1,000 requests",
        "  driver peak RSS: " + ", ".join(f"N={m:,} {sizes[m]['rss_mb']:.0f} MB" for m in memory_n),
        verdict(driver_ms <= 0.1, f"driver CPU {driver_ms:.3f} ms/sample (target <= 0.1)"),
        verdict(
            total_ms <= 1.5 * local_ms,
            f"total CPU {total_ms / local_ms:.2f}x the single process's (target <= 1.5x)",
        ),
        verdict(
            remote["coordinator_calls"] / n * 1000 <= 20,
            f"coordinator calls {remote['coordinator_calls'] / n * 1000:.2f} per 1,000 requests "
            "(target <= 20)",
        ),
        verdict(
            large < 1.5 * small,
            f"driver peak RSS {large / small:.2f}x for {memory_n[1] // memory_n[0]}x the "
            "samples (target < 1.5x)",
        ),
    ]


def main() -> None:
    global WORKERS
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(child_run(kind, port, n, c)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000 at C=400")
    parser.add_argument(
        "--workers", type=int, default=WORKERS, help=f"Ray workers (default {WORKERS})"
    )
    args = parser.parse_args()
    os.environ["VITALS_BENCH_RAY_WORKERS"] = str(args.workers)
    WORKERS = args.workers
    n, c = (2_000, 400) if args.quick else (20_000, 2_000)
    memory_n = (2_000, 10_000) if args.quick else MEMORY_N
    import ray

    print(
        f"vitals-engine on Ray  (python {sys.version.split()[0]}, ray {ray.__version__}, "
        f"{os.cpu_count()} CPUs)"
    )
    print()
    print("\n".join(report(n, c, memory_n)), flush=True)


if __name__ == "__main__":
    main()
