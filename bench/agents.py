"""Agents benchmark: `ve.react()` samples with bash in a sandbox per sample.

    .venv/bin/python bench/agents.py                 # N=500, 6 steps, C=100, bwrap and local
    .venv/bin/python bench/agents.py --quick         # N=100
    .venv/bin/python bench/agents.py --kinds bwrap --samples 200 --concurrency 50

Each sample is one agent: 6 model calls that each ask for a bash command (`echo step k`,
run in the sample's sandbox), then a call that submits. The model is the mock server's
(`python -m vitals_engine.testing --agent-steps 6`) in another process at 100 ms
latency, so the ideal wall time is ceil(N / C) x 7 x 100 ms plus the commands' own time.
Each run is a fresh child process (its peak RSS its own). Printed per kind:

- wall time and its ratio to the ideal;
- CPU per step (the engine's process: its model calls, tools, transcript and log,
  divided by the N x 7 model calls), and per sample;
- sandbox start and removal, p50 and p99 (timed around the kind's create and remove);
- peak RSS of the run, and of the process per live sandbox at C at once.

Targets (issue #43): bwrap start p50 <= 20 ms; CPU per step <= 1 ms; 100 live bwrap
sandboxes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
from throughput import mock_server

ROOT = Path(__file__).resolve().parents[1]
LATENCY = 0.1
STEPS = 6


def child(kind: str, samples: int, concurrency: int, port: int) -> dict[str, float]:
    """One run in this process (called in a child): its figures."""
    import vitals_engine as ve
    from vitals_engine.sandboxes import kinds

    starts: list[float] = []
    removals: list[float] = []
    made = kinds.sandbox_kind

    def timed_kind(spec):  # times each create and remove of the run's kind
        kind_ = made(spec)
        create, remove = kind_.create, kind_.remove

        async def timed_create(**kw):
            began = time.perf_counter()
            try:
                return await create(**kw)
            finally:
                starts.append(time.perf_counter() - began)

        async def timed_remove(sandbox):
            began = time.perf_counter()
            try:
                await remove(sandbox)
            finally:
                removals.append(time.perf_counter() - began)

        kind_.create, kind_.remove = timed_create, timed_remove
        return kind_

    from vitals_engine.engine import run as run_module

    run_module.sandbox_kind = timed_kind
    chat = ve.chat_openai("gpt-4.1-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    rows = [{"input": f"Task {i}: go.", "target": "done"} for i in range(samples)]
    with tempfile.TemporaryDirectory() as logs:
        task = ve.Task(
            rows,
            ve.react(chat, tools=[ve.bash(timeout=60)]),
            ve.detect_includes(),
            sandbox=kind,
            dir=logs,
        )
        cpu0, wall0 = time.process_time(), time.perf_counter()
        task.eval(max_concurrency=concurrency, max_sandboxes=concurrency, progress=False)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert task.metrics == {"accuracy": 1.0}, task.metrics
    calls = samples * (STEPS + 1)
    return {
        "wall": wall,
        "cpu_per_step_ms": cpu / calls * 1000,
        "cpu_per_sample_ms": cpu / samples * 1000,
        "start_p50_ms": statistics.median(starts) * 1000,
        "start_p99_ms": _p99(starts) * 1000,
        "remove_p50_ms": statistics.median(removals) * 1000,
        "remove_p99_ms": _p99(removals) * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def live_sandboxes(kind: str, count: int) -> dict[str, float]:
    """`count` sandboxes of `kind` alive at once, each running `sleep`: whether they all
    start, and the memory the machine gives them (from /proc/meminfo's MemAvailable)."""
    import anyio

    from vitals_engine.sandboxes import SandboxSpec, sandbox_kind

    def available_kb() -> int:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
        return 0

    async def main() -> dict[str, float]:
        made = sandbox_kind(SandboxSpec(kind))
        await made.check()
        before = available_kb()
        boxes = []
        async with anyio.create_task_group() as tg:
            for i in range(count):
                boxes.append(await made.create(run_id="bench", sample_id=str(i), epoch=1))
            for box in boxes:
                tg.start_soon(box.exec, "sleep 2")
            await anyio.sleep(1)
            used = before - available_kb()
        for box in boxes:
            await made.remove(box)
        return {"live": len(boxes), "kb_per_sandbox": used / count}

    return anyio.run(main)


def run_child(kind: str, samples: int, concurrency: int, port: int) -> dict[str, float]:
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/bench']; "
        "import agents; print(json.dumps(agents.child(*sys.argv[2:3], int(sys.argv[3]), "
        "int(sys.argv[4]), int(sys.argv[5]))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), kind, str(samples), str(concurrency), str(port)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--kinds", default="bwrap,local")
    parser.add_argument("--quick", action="store_true", help="N=100")
    parser.add_argument("--live", type=int, default=100, help="sandboxes held at once")
    args = parser.parse_args()
    samples = 100 if args.quick else args.samples
    c = args.concurrency
    ideal = math.ceil(samples / c) * (STEPS + 1) * LATENCY
    print(f"agents: N={samples}, {STEPS} bash steps + submit, C={c}, latency {LATENCY * 1000:g} ms")
    print(f"ideal wall {ideal:.2f} s (model latency alone); {os.cpu_count()} CPUs")
    with mock_server("--agent-steps", str(STEPS)) as port:
        for kind in args.kinds.split(","):
            got = run_child(kind, samples, c, port)
            print(
                f"{kind:6} wall {got['wall']:6.2f} s ({got['wall'] / ideal:4.2f}x ideal)  "
                f"CPU {got['cpu_per_step_ms']:.2f} ms/step, "
                f"{got['cpu_per_sample_ms']:.1f} ms/sample  "
                f"start p50 {got['start_p50_ms']:.1f} p99 {got['start_p99_ms']:.1f} ms  "
                f"remove p50 {got['remove_p50_ms']:.1f} p99 {got['remove_p99_ms']:.1f} ms  "
                f"peak RSS {got['peak_rss_mb']:.0f} MB"
            )
    for kind in args.kinds.split(","):
        held = live_sandboxes(kind, args.live)
        print(
            f"{kind:6} {held['live']:.0f} sandboxes alive at once, "
            f"{held['kb_per_sandbox']:.0f} KB of memory each"
        )


if __name__ == "__main__":
    main()
