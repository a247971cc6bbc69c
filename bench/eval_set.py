"""Many runs at once: an eval set of 6 runs of 5,000 samples against one mock endpoint,
beside one run of 30,000 samples of the same work.

    .venv/bin/python bench/eval_set.py            # 6 x 5,000 beside 1 x 30,000, 3 rounds (4 min)
    .venv/bin/python bench/eval_set.py --quick    # 6 x 1,000 beside 1 x 6,000, at C=200
    .venv/bin/python bench/eval_set.py --rounds 6 # more rounds: this machine drifts
    .venv/bin/python bench/eval_set.py --instructions  # per sample, counted (15 min)

Each side runs in a fresh child process after a warm-up sample, against `python -m
vitals_engine.testing` (100 ms latency) in another process, recording every request.
The tasks are `Task(generate(chat_openai(...)), detect_includes())` with their logs on,
with `rate_limits=RateLimits(max_concurrency=C)` (C=1,000): the six runs of the set share the
endpoint's C requests in flight, as the single run has them to itself. The set runs
twice: each run at `max_concurrency=C` (what one would write; the endpoint's admission
keeps about C + C/8 samples at work across the runs, not 6 x C), and each at C/6 (the
endpoint's share, set by hand).

Measured: wall time, CPU per sample of the child process, its peak RSS, and the most
requests the server was answering at once (from when each arrived and was answered).
Targets: the set's wall within 1.3x of the single run's; its CPU per sample no worse
(within 5%); at most C requests in flight, set or not. Two processes doing the same
thing differ here by 10% and more, and the machine's speed drifts within a round, so
the measures run in rounds, in the reverse order every other round, and the targets
apply to the medians of each round's ratios. `--instructions` counts instead what
each side executes under valgrind (see `report_instructions`), which does not drift.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)

RUNS = 6

import throughput as _throughput  # noqa: E402  (bench/ is this script's folder)

mock_server, verdict, ideal = _throughput.mock_server, _throughput.verdict, _throughput.ideal


def child_run(kind: str, port: int, n: int, c: int, patient: bool = False) -> dict[str, Any]:
    """`kind` "set": an eval set of RUNS tasks of n samples, each run at max_concurrency
    C ("share": C / RUNS); "one": one task of RUNS x n. `patient`: timeouts long enough
    for a process running 50 times slower (under valgrind)."""
    import vitals_engine as ve

    timeouts = ve.Timeouts(connect=3600, read=3600, total=None) if patient else None
    chat = ve.chat_openai(
        "gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench", timeouts=timeouts
    )

    def task(name: str, count: int, logs: str) -> ve.Task:
        data = [{"input": f"{name}: What's {i}+{i}?", "target": str(2 * i)} for i in range(count)]
        return ve.Task(data, ve.generate(chat), ve.detect_includes(), name=name, dir=logs)

    options: dict[str, Any] = {
        "max_concurrency": c,
        "rate_limits": ve.RateLimits(max_concurrency=c),
        "progress": False,
        "retry": ve.Retry(max_attempts=20),
        "fail_on_error": False,
    }
    with tempfile.TemporaryDirectory() as logs:
        task("warm", 1, logs).eval(progress=False)  # loads what a run loads on first use
        wall0, cpu0 = time.perf_counter(), time.process_time()
        if kind in ("set", "share"):
            if kind == "share":
                options["max_concurrency"] = c // RUNS
            ran = ve.eval_set([task(f"part{k}", n, logs) for k in range(RUNS)], **options).tasks
        else:
            ran = [task("whole", RUNS * n, logs).eval(**options)]
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        records = [r for t in ran if isinstance(t, ve.Task) for r in t._state.records or []]
        finished = sum(1 for r in records if r.score is not None and r.error is None)
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "finished": finished,
    }


def peak_in_flight(record: Path) -> int:
    """The most requests the server was answering at once, from its record."""
    marks = []
    for r in json.loads(record.read_bytes()):
        marks += [(r["at"], 1), (r["answered"], -1)]
    now = peak = 0
    for _, step in sorted(marks):
        now += step
        peak = max(peak, now)
    return peak


def measure(kind: str, n: int, c: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "requests.json"
        with mock_server(record=record) as port:
            result = _throughput.in_child(kind, port, n, c, script=__file__)
        result["peak"] = peak_in_flight(record)
    # the logs just written go to the disk now, not during the next measure
    os.sync()
    return result


KINDS = ("one", "set", "share")

#: Samples per run of the two sizes counted in instructions, and their concurrency.
COUNTED = (300, 600)
COUNTED_C = 300


def instructions(kind: str, port: int, n: int, c: int) -> tuple[int, int]:
    """The instructions a child running `kind` executes, start and warm-up included
    (valgrind's callgrind counts them: unlike CPU time, the same run counts the same
    on a busy or a quiet machine), and the samples it finished."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
                sys.executable,
                __file__,
                "--child",
                kind,
                str(port),
                str(n),
                str(c),
                "--patient",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    counted = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or counted is None:
        raise RuntimeError(f"{kind} child under valgrind failed:\n{out.stderr[-3000:]}")
    return int(counted.group(1)), json.loads(out.stdout.strip().splitlines()[-1])["finished"]


def report_instructions() -> list[str]:
    """Instructions per sample of the set and of the single run: the difference between
    RUNS x 600 and RUNS x 300 samples (start, warm-up and each run's setup cancel out),
    over the 1,800 samples between them; about 15 minutes."""
    small, large = COUNTED
    c = COUNTED_C
    lines = [
        f"instructions (callgrind): {RUNS} runs of {small} and of {large} samples beside one "
        f"run of {RUNS * small} and of {RUNS * large}, C={c} per run on an endpoint of {c}"
    ]
    per_sample: dict[str, float] = {}
    unfinished = 0
    with mock_server() as port:
        for kind in ("one", "set"):
            counts = {}
            for n in (small, large):
                counts[n], finished = instructions(kind, port, n, c)
                unfinished += RUNS * n - finished
            per_sample[kind] = (counts[large] - counts[small]) / (RUNS * (large - small))
            lines.append(
                f"  {kind:<4} {counts[small] / 1e6:8,.0f} M and {counts[large] / 1e6:8,.0f} M "
                f"instructions: {per_sample[kind] / 1e3:,.0f} k per sample"
            )
    ratio = per_sample["set"] / per_sample["one"]
    return [
        *lines,
        verdict(unfinished == 0, "every run finished all its samples"),
        verdict(
            ratio <= 1.05, f"set: instructions per sample {ratio:.3f}x the single run's (<= 1.05x)"
        ),
    ]


def report(n: int, c: int, rounds: int) -> list[str]:
    """`rounds` rounds of the three measures, the order reversed every other round (so a
    machine slowing down or speeding up over a round does not favour one side); each
    side's ratio to the single run of its own round, and the targets on their medians."""
    total = RUNS * n
    labels = {
        "one": f"one run, C={c:,}",
        "set": f"set, C={c:,} per run",
        "share": f"set, C={c // RUNS:,} per run",
    }

    def line(label: str, r: dict[str, Any]) -> str:
        return (
            f"  {label:<22} wall {r['wall']:6.2f} s  ({r['wall'] / ideal(total, c):4.2f}x ideal)  "
            f"CPU {r['cpu'] / total * 1000:5.3f} ms/sample  peak RSS {r['rss_mb']:5.0f} MB  "
            f"in flight at most {r['peak']:,}  finished {r['finished']:,}/{total:,}"
        )

    lines = [
        f"eval set: {RUNS} runs of {n:,} samples at once beside one run of {total:,}, "
        f"RateLimits(max_concurrency={c:,}) on one endpoint; latency "
        f"{_throughput.LATENCY * 1000:.0f} ms, ideal {ideal(total, c):.2f} s; "
        f"{rounds} round{'s' if rounds > 1 else ''}"
    ]
    ratios: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in KINDS[1:]}
    results: list[dict[str, Any]] = []
    for number in range(rounds):
        order = KINDS if number % 2 == 0 else KINDS[::-1]
        measured = {kind: measure(kind, n, c) for kind in order}
        results += measured.values()
        lines.append(f"round {number + 1} ({', '.join(order)}):")
        lines += [line(labels[kind], measured[kind]) for kind in KINDS]
        one = measured["one"]
        for kind in KINDS[1:]:
            ratios[kind]["wall"].append(measured[kind]["wall"] / one["wall"])
            ratios[kind]["cpu"].append(measured[kind]["cpu"] / one["cpu"])

    def shown(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}x" for v in values)

    lines.append("against the single run of the same round (median of the rounds):")
    for kind in KINDS[1:]:
        wall, cpu = ratios[kind]["wall"], ratios[kind]["cpu"]
        lines += [
            verdict(
                statistics.median(wall) <= 1.3,
                f"{labels[kind]}: wall {shown(wall)}, median "
                f"{statistics.median(wall):.2f}x (<= 1.3x)",
            ),
            verdict(
                statistics.median(cpu) <= 1.05,
                f"{labels[kind]}: CPU/sample {shown(cpu)}, median "
                f"{statistics.median(cpu):.2f}x (<= 1.05x)",
            ),
        ]
    unfinished = sum(1 for r in results if r["finished"] != total)
    peak = max(r["peak"] for r in results)
    return [
        *lines,
        verdict(unfinished == 0, f"every run finished all {total:,} samples"),
        verdict(peak <= c, f"at most {peak:,} requests in flight (limit {c:,})"),
    ]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(child_run(kind, port, n, c, patient="--patient" in sys.argv)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 x 1,000 beside 6,000, C=200")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three measures")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per sample under valgrind instead (about 15 minutes)",
    )
    args = parser.parse_args()
    if args.instructions:
        if shutil.which("valgrind") is None:
            sys.exit("--instructions needs valgrind (apt-get install valgrind)")
        print(f"vitals-engine eval set  (python {sys.version.split()[0]})")
        print()
        print("\n".join(report_instructions()), flush=True)
        return
    n, c = (1_000, 200) if args.quick else (5_000, 1_000)
    print(f"vitals-engine eval set  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print()
    print("\n".join(report(n, c, max(1, args.rounds))), flush=True)


if __name__ == "__main__":
    main()
