"""Agents benchmark: `ve.react()` samples with bash in a sandbox per sample, beside Inspect's.

    .venv/bin/python bench/agents.py                 # N=500, 6 steps, C=100, bwrap, local, Inspect
    .venv/bin/python bench/agents.py --quick         # N=100
    .venv/bin/python bench/agents.py --kinds bwrap --samples 200 --concurrency 50
    .venv/bin/python bench/agents.py --kinds local --no-inspect
    .venv/bin/python bench/agents.py --bridge        # and what the bridge adds to a call

Each sample is one agent: 6 model calls that each ask for a bash command (`echo step k`,
run in the sample's sandbox), then a call that submits. The model is the mock server's
(`python -m vitals_engine.testing --agent-steps 6`) in another process at 100 ms
latency, so the ideal wall time is ceil(N / C) x 7 x 100 ms plus the commands' own time.
Each run is a fresh child process (its peak RSS its own), which first runs one sample
untimed: what a run loads on first use is loaded before the clock starts, so the figures
are the run's own work. Printed per kind:

- how many samples completed: each ran its 6 commands (their outputs `step 1` ...
  `step 6`), made 7 model calls and submitted the answer that scores correct. A row
  where some did not says so instead of its figures;
- wall time and its ratio to the ideal;
- CPU per step (the engine's process: its model calls, tools, transcript and log,
  divided by the N x 7 model calls), and per sample; the commands' own processes are
  not counted;
- sandbox start and removal, p50 and p99 (timed around the kind's create and remove);
- peak RSS of the run, and of the process per live sandbox at C at once.

`--inspect` (the default when `inspect_ai` and `openai` are importable; `--no-inspect`
skips it) adds a row for Inspect's own agent doing the same work against the same mock
server, in a child process of its own: `inspect_ai.agent.react()` with
`inspect_ai.tool.bash()` in Inspect's "local" sandbox, the model `openai/gpt-4.1-mini`
(Inspect's OpenAI provider, on Chat Completions as ours) at the mock's base URL, with
max_samples, max_connections, max_sandboxes and max_subprocesses all C (Inspect's
default for the last is the CPU count, which would queue the commands). The mock puts
each command in the argument the request's bash tool declares (`command` for Inspect's,
`cmd` for ours); Inspect's react() submits through its `submit(answer)` tool, as the
mock's trajectory calls it. Inspect's log goes to a temporary directory. Its sandbox
start and removal are timed around the local sandbox's sample_init and sample_cleanup.
Inspect's bash() runs a login shell (`bash --login`), which reads the user's profile
(where that runs `pyenv init`, 200 ms a command): the child runs with HOME, and its
working directory, an empty temporary directory, so the profile of the machine's user
is not timed and nothing Inspect keeps under HOME is left behind.

Targets (issue #43): bwrap start p50 <= 20 ms; CPU per step <= 1 ms; 100 live bwrap
sandboxes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
from throughput import mock_server

ROOT = Path(__file__).resolve().parents[1]
LATENCY = 0.1
STEPS = 6
#: What each sample's commands print, in order, when they ran.
OUTPUTS = [f"step {k}" for k in range(1, STEPS + 1)]
ANSWER = "done"
INSPECT_MODEL = "openai/gpt-4.1-mini"


def _rows(samples: int) -> list[dict[str, str]]:
    return [{"input": f"Task {i}: go.", "target": ANSWER} for i in range(samples)]


def _timed(fn: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
    """Async `fn`, each call's seconds appended to `into`."""

    async def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - began)

    return timed


def _figures(
    wall: float, cpu: float, samples: int, times: dict[str, list[float]]
) -> dict[str, Any]:
    calls = samples * (STEPS + 1)
    got: dict[str, Any] = {
        "wall": wall,
        "cpu_per_step_ms": cpu / calls * 1000,
        "cpu_per_sample_ms": cpu / samples * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "samples": samples,
    }
    for name, values in (("start", times["starts"]), ("remove", times["removals"])):
        if values:
            got[f"{name}_p50_ms"] = statistics.median(values) * 1000
            got[f"{name}_p99_ms"] = _p99(values) * 1000
    return got


def child(kind: str, samples: int, concurrency: int, port: int) -> dict[str, Any]:
    """One run of `ve.react()` in this process (called in a child): its figures."""
    import vitals_engine as ve
    from vitals_engine.engine import run as run_module
    from vitals_engine.sandboxes import kinds

    made = kinds.sandbox_kind
    times: dict[str, list[float]] = {"starts": [], "removals": []}

    def timed_kind(spec):  # times each create and remove of the run's kind
        kind_ = made(spec)
        kind_.create = _timed(kind_.create, times["starts"])
        kind_.remove = _timed(kind_.remove, times["removals"])
        return kind_

    run_module.sandbox_kind = timed_kind
    chat = ve.chat_openai("gpt-4.1-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    with tempfile.TemporaryDirectory() as logs:

        def task(rows: list[dict[str, str]]) -> ve.Task:
            agent = ve.react(chat, tools=[ve.bash(timeout=60)])
            return ve.Task(rows, agent, ve.detect_includes(), sandbox=kind, dir=logs)

        task(_rows(1)).eval(progress=False)  # warm-up: first-use loading off the clock
        for kept in times.values():
            kept.clear()
        timed_task = task(_rows(samples))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        timed_task.eval(max_concurrency=concurrency, max_sandboxes=concurrency, progress=False)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        frame = timed_task.get_samples()
    shortfalls = [
        _ours_shortfall(score, chat_)
        for score, chat_ in zip(frame["score"], frame["solver_chat"], strict=True)
    ]
    shortfalls += ["not run"] * (samples - len(shortfalls))
    return _count(shortfalls, _figures(wall, cpu, samples, times))


def _ours_shortfall(score: Any, chat: Any) -> str | None:
    """What a sample of ours did not do of the work (None: it did it all)."""
    from vitals_engine import ContentToolResult

    if chat is None:
        return "no transcript"
    turns = chat.turns
    outputs = [
        content.text.strip()
        for turn in turns
        for content in getattr(turn, "contents", [])
        if isinstance(content, ContentToolResult) and content.name == "bash"
    ]
    calls = sum(1 for turn in turns if turn.role == "assistant")
    return _shortfall(score, outputs, calls)


def _shortfall(score: Any, outputs: list[str], calls: int) -> str | None:
    """What a sample scored `score`, whose bash commands printed `outputs` in `calls` model
    calls, did not do of the work (None: it did it all)."""
    if outputs != OUTPUTS:
        wrong = next((o for o, want in zip(outputs, OUTPUTS, strict=False) if o != want), None)
        said = f", one said {' '.join(wrong.split())[:120]!r}" if wrong is not None else ""
        return f"{len(outputs)} bash calls{said}"
    if calls != STEPS + 1:
        return f"{calls} model calls"
    if score != "C":
        return f"scored {score!r}"
    return None


def _count(shortfalls: list[str | None], figures: dict[str, Any]) -> dict[str, Any]:
    """`figures` with how many samples completed, and the first shortfall if any."""
    missing = [why for why in shortfalls if why is not None]
    figures["completed"] = figures["samples"] - len(missing)
    if missing:
        figures["error"] = missing[0].splitlines()[0][:200]
    return figures


def inspect_child(samples: int, concurrency: int, port: int) -> dict[str, Any]:
    """One run of Inspect's `react()` in this process (called in a child): its figures."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.agent import react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import includes
    from inspect_ai.tool import bash

    times = _time_inspect_local_sandbox()
    model = get_model(
        INSPECT_MODEL,
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="x",
        responses_api=False,  # Chat Completions, as ours (Inspect's default for this model)
    )
    limits = {
        "max_samples": concurrency,
        "max_connections": concurrency,
        "max_sandboxes": concurrency,
        "max_subprocesses": concurrency,
    }

    def task(rows: list[dict[str, str]]) -> Task:
        dataset = [Sample(input=row["input"], target=row["target"]) for row in rows]
        agent = react(tools=[bash(timeout=60)])
        return Task(dataset=dataset, solver=agent, scorer=includes(), sandbox="local")

    with tempfile.TemporaryDirectory() as logs:
        run = {"model": model, "log_dir": logs, "display": "none", "fail_on_error": False}
        inspect_eval(task(_rows(1)), **run)  # warm-up: first-use loading off the clock
        for kept in times.values():
            kept.clear()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        [log] = inspect_eval(task(_rows(samples)), **run, **limits)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        ran = list(log.samples or [])  # read from the log file, while it is there
    shortfalls = [_inspect_shortfall(sample) for sample in ran]
    shortfalls += [f"not run ({log.status}: {log.error})"] * (samples - len(shortfalls))
    return _count(shortfalls, _figures(wall, cpu, samples, times))


def _time_inspect_local_sandbox() -> dict[str, list[float]]:
    """Time each sample_init and sample_cleanup of Inspect's local sandbox (empty lists
    when this version of Inspect keeps it elsewhere)."""
    try:
        from inspect_ai.util._sandbox.local import LocalSandboxEnvironment as Local
    except ImportError:
        return {"starts": [], "removals": []}
    times: dict[str, list[float]] = {"starts": [], "removals": []}
    init = _timed(Local.sample_init, times["starts"])  # bound to the class already
    cleanup = _timed(Local.sample_cleanup, times["removals"])
    Local.sample_init = classmethod(lambda cls, *args, **kw: init(*args, **kw))
    Local.sample_cleanup = classmethod(lambda cls, *args, **kw: cleanup(*args, **kw))
    return times


def _inspect_shortfall(sample: Any) -> str | None:
    """What an Inspect sample did not do of the work (None: it did it all)."""
    if sample.error is not None:
        return f"error: {sample.error.message}"
    score = next(iter(sample.scores.values())).value if sample.scores else None
    outputs = [
        (message.error.message if message.error else message.text).strip()
        for message in sample.messages
        if message.role == "tool" and message.function == "bash"
    ]
    calls = sum(1 for event in sample.events if event.event == "model")
    return _shortfall(score, outputs, calls)


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


def run_child(call: str, *args: Any, home: str | None = None) -> dict[str, Any]:
    """`agents.<call>(*args)` in a fresh Python process: its figures. With `home`, the
    process runs there with HOME set to it (and no XDG_* directories elsewhere)."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/bench']; "
        "import agents; call = getattr(agents, sys.argv[2]); "
        "args = [int(a) if a.isdigit() else a for a in sys.argv[3:]]; "
        "print(json.dumps(call(*args)))"
    )
    env = None
    if home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")} | {"HOME": home}
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), call, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=home or ROOT,
        env=env,
    )
    if out.returncode != 0:
        sys.exit(f"{call} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_row(label: str, got: dict[str, Any], ideal: float) -> None:
    done = f"{got['completed']}/{got['samples']} done"
    if got["completed"] < got["samples"]:
        print(
            f"{label:7} FAILED: {done}, {got['samples'] - got['completed']} samples did not run "
            f"their {STEPS} commands and submit {ANSWER!r} in {STEPS + 1} calls; no figures "
            f"(first: {got['error']})",
            flush=True,
        )
        return
    sandbox = "  ".join(
        f"{name} p50 {got[f'{name}_p50_ms']:.1f} p99 {got[f'{name}_p99_ms']:.1f} ms"
        if f"{name}_p50_ms" in got
        else f"{name} n/a"
        for name in ("start", "remove")
    )
    print(
        f"{label:7} {done}  wall {got['wall']:6.2f} s ({got['wall'] / ideal:4.2f}x ideal)  "
        f"CPU {got['cpu_per_step_ms']:.2f} ms/step, {got['cpu_per_sample_ms']:.1f} ms/sample  "
        f"{sandbox}  peak RSS {got['peak_rss_mb']:.0f} MB",
        flush=True,
    )


def inspect_missing() -> str | None:
    """Why Inspect's row cannot run here, or None."""
    for module, why in (
        ("inspect_ai", "inspect_ai is not installed"),
        ("openai", "openai (Inspect's OpenAI provider needs it) is not installed"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{why}; the dev dependencies have both"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--kinds", default="bwrap,local")
    parser.add_argument("--quick", action="store_true", help="N=100")
    parser.add_argument("--live", type=int, default=100, help="sandboxes held at once")
    parser.add_argument(
        "--inspect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run Inspect's react() the same way (default: when it is installed)",
    )
    parser.add_argument(
        "--bridge",
        action="store_true",
        help="also measure what the bridge adds to a model call (bench/bridge.py)",
    )
    args = parser.parse_args()
    samples = 100 if args.quick else args.samples
    c = args.concurrency
    kinds = [kind for kind in args.kinds.split(",") if kind]
    missing = inspect_missing()
    if args.inspect and missing:
        sys.exit(f"--inspect: {missing}")
    with_inspect = args.inspect is not False and missing is None
    ideal = math.ceil(samples / c) * (STEPS + 1) * LATENCY
    print(f"agents: N={samples}, {STEPS} bash steps + submit, C={c}, latency {LATENCY * 1000:g} ms")
    print(f"ideal wall {ideal:.2f} s (model latency alone); {os.cpu_count()} CPUs")
    if args.inspect is None and missing:
        print(f"(no Inspect row: {missing})")
    with mock_server("--agent-steps", str(STEPS)) as port:
        for kind in kinds:
            print_row(kind, run_child("child", kind, samples, c, port), ideal)
        if with_inspect:
            with tempfile.TemporaryDirectory() as home:
                got = run_child("inspect_child", samples, c, port, home=home)
            print_row("inspect", got, ideal)
            print(
                "        (Inspect's react() + bash() in its local sandbox: compare with the "
                "local row)"
            )
    if args.bridge:
        import bridge

        bridge.rows(100 if args.quick else 300)
    for kind in kinds:
        held = live_sandboxes(kind, args.live)
        print(
            f"{kind:6} {held['live']:.0f} sandboxes alive at once, "
            f"{held['kb_per_sandbox']:.0f} KB of memory each"
        )


if __name__ == "__main__":
    main()
