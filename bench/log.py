"""Log benchmark: what writing costs per sample, and how fast logs read back.

    .venv/bin/python bench/log.py              # 100,000-sample logs
    .venv/bin/python bench/log.py --quick      # 20,000
    .venv/bin/python bench/log.py --inspect    # also time Inspect's reader on the big log

Targets:
- writing adds at most 0.05 ms CPU per sample on top of the run: composing
  the sample's record, appending it to the journal, composing the final log;
- reading a 100,000-sample log of our own into a DataFrame: under 5 s;
  beside it, Inspect's `read_eval_log` on the same kind of file (5,000
  samples unless --inspect, which tries the big one);
- a header-only read of any log under 50 ms, whatever its size.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
import msgspec

import vitals_engine as ve
from vitals_engine.engine.gc_tuning import relaxed_gc
from vitals_engine.log.compose import compose_sample
from vitals_engine.log.writer import LogWriter


def run_eval(n: int, directory: Path) -> ve.Task:
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    task = ve.Task(
        data,
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=directory,
    )
    task.eval(max_concurrency=500, progress=False)
    return task


def write_cost(task: ve.Task, directory: Path) -> tuple[float, float]:
    """CPU ms per sample to compose + encode each sample, append the journal, compose the log,
    under the garbage-collector settings a run has (`relaxed_gc`)."""
    records = task._state.records or []
    header = ve.read_log(task.log_path, header_only=True).header
    writer = LogWriter(directory / "bench.json", header)
    gc.collect()
    with relaxed_gc():
        cpu0 = time.process_time()
        samples = [compose_sample(r, "detect_includes") for r in records]
        compose = time.process_time() - cpu0

    async def write() -> None:
        writer._open()
        for sample in samples:
            writer.add(sample)  # encodes it
        await writer.close()

    with relaxed_gc():
        cpu1 = time.process_time()
        asyncio.run(write())
        writer.finalize(header)
        io = time.process_time() - cpu1
    return compose / len(records) * 1000, io / len(records) * 1000


def big_log(task: ve.Task, n: int, directory: Path, suffix: str) -> Path:
    """A log of `n` samples made by repeating the task's samples under new ids."""
    logged = ve.read_log(task.log_path)
    base = logged.samples
    header = msgspec.structs.replace(logged.header, samples=msgspec.UNSET)
    path = directory / f"2026-01-01T00-00-00+00-00_big_{n}{suffix}"
    writer = LogWriter(path, header)

    async def write() -> None:
        writer._open()
        for i in range(n):
            sample = msgspec.structs.replace(base[i % len(base)], id=i + 1)
            writer.add(sample)
        await writer.close()

    asyncio.run(write())
    return writer.finalize(header)


def running_journal(task: ve.Task, n: int, directory: Path) -> Path:
    """The journal of a run still going: `n` samples, no final header."""
    logged = ve.read_log(task.log_path)
    header = msgspec.structs.replace(logged.header, samples=msgspec.UNSET, status="started")
    writer = LogWriter(directory / "2026-01-01T00-00-00+00-00_running_x.json", header)

    async def write() -> None:
        writer._open()
        for i in range(n):
            writer.add(msgspec.structs.replace(logged.samples[i % 5000], id=i + 1))
        await writer.close()

    asyncio.run(write())
    return writer.journal


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--inspect", action="store_true", help="Inspect's reader on the big log")
    args = parser.parse_args()
    big = 20_000 if args.quick else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print(f"vitals-engine log benchmark (python {sys.version.split()[0]})")
        task = run_eval(5000, directory / "run")
        compose_ms, io_ms = min(
            (write_cost(task, directory / f"write{i}") for i in range(3)), key=sum
        )
        total = compose_ms + io_ms
        print(
            "\nwriting, per sample (5,000 samples, generate() + detect_includes(), with events;"
            " best of 3):"
        )
        print(f"  compose {compose_ms:.3f} ms CPU; encode, journal, final log {io_ms:.3f} ms CPU")
        print(
            f"  [{'ok' if total <= 0.05 else 'MISS'}] {total:.3f} ms CPU per sample "
            "(target <= 0.05)"
        )

        five = task.log_path
        print(f"\nreading ({five.stat().st_size / 1e6:.1f} MB for 5,000 samples):")
        ours5 = timed(lambda: ve.read_log(five).get_samples(), 2)
        print(f"  vitals-engine read_log(...).get_samples(): {ours5:.2f} s")
        from inspect_ai.log import read_eval_log

        theirs5 = timed(lambda: read_eval_log(str(five)))
        print(f"  inspect_ai read_eval_log:                  {theirs5:.2f} s")

        for suffix in (".json", ".eval"):
            path = big_log(task, big, directory / "big", suffix)
            size = path.stat().st_size / 1e6
            gc.collect()
            full = timed(lambda p=path: ve.read_log(p).get_samples(), 3)
            header = timed(lambda p=path: ve.read_log(p, header_only=True), 5)
            print(f"\n{big:,}-sample {suffix} log ({size:.0f} MB):")
            print(
                f"  [{'ok' if full < 5 else 'MISS'}] full read into a DataFrame {full:.2f} s, "
                "best of 3 (target < 5 s)"
            )
            print(
                f"  [{'ok' if header < 0.05 else 'MISS'}] header-only read "
                f"{header * 1000:.1f} ms (target < 50 ms)"
            )
            if args.inspect and suffix == ".json":
                theirs = timed(lambda p=path: read_eval_log(str(p)))
                print(f"  inspect_ai read_eval_log: {theirs:.1f} s")
        running = running_journal(task, big, directory / "journal")
        header = timed(lambda: ve.read_log(running, header_only=True), 5)
        print(
            f"\n{big:,}-sample journal of a running eval ({running.stat().st_size / 1e6:.0f} MB):"
        )
        print(
            f"  [{'ok' if header < 0.05 else 'MISS'}] header-only read "
            f"{header * 1000:.1f} ms (target < 50 ms)"
        )


if __name__ == "__main__":
    main()
