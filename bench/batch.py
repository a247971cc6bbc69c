"""Batch mode at scale: 100,000 samples whose model calls go in batches, against the mock
server's batch API (a batch ends 5 s after it was submitted), beside a live run of
10,000 samples of the same task in the same invocation.

    .venv/bin/python bench/batch.py            # N=100,000 in batches, 10,000 live (about 2 minutes)
    .venv/bin/python bench/batch.py --quick    # N=10,000 in batches, 2,000 live

Each run is `Task(generate(chat_openai(...)), detect_includes())` with its log on, in a
fresh child process, against `python -m vitals_engine.testing --batch-delay 5` in another
process, after a warm-up sample. The batched run uses `Batch(size=10_000, wait=5,
poll=2)` at `max_concurrency=100`: samples lend their seats while they wait, so each
batch fills.

Measured: wall time, CPU per sample of the run's process, its peak RSS, the log's size,
and the journal's size at the end of the run (what its batch records take of it).
Targets: CPU under 0.2 ms per sample in batch mode; peak RSS under 2x the live run of
10,000.
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

HERE = Path(__file__).resolve().parent
DELAY = 5.0


import throughput as _throughput  # noqa: E402  (bench/ is this script's folder)

mock_server, verdict = _throughput.mock_server, _throughput.verdict


def _journal_sizes() -> dict[str, int]:
    """Measure each run's journal (gone once its log is written) as it is finalized:
    its whole size, and the part its batch records take."""
    from vitals_engine.log.writer import LogWriter

    sizes = {"journal": 0, "batch_records": 0}
    finalize = LogWriter.finalize

    def measured(self: Any, *args: Any, **kwargs: Any) -> Any:
        sizes["journal"] = self.journal.stat().st_size
        with self.journal.open("rb") as fh:  # line by line: the run's peak RSS stays its own
            sizes["batch_records"] = sum(len(x) for x in fh if x.startswith(b'{"kind":"batch"'))
        return finalize(self, *args, **kwargs)

    LogWriter.finalize = measured  # type: ignore[method-assign]
    return sizes


def child_run(kind: str, port: int, n: int) -> dict[str, Any]:
    import vitals_engine as ve

    journal = _journal_sizes()

    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    chat = ve.chat_openai("gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench")
    options: dict[str, Any] = {"max_concurrency": 100, "progress": False}
    if kind == "batch":
        options["batch"] = ve.Batch(size=10_000, wait=5, poll=2)
    with tempfile.TemporaryDirectory() as logs:
        warm = ve.Task(data[:1], solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
        warm.eval(progress=False)  # loads what a run loads on first use
        task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        task.eval(fail_on_error=False, **options)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        size = task.log_path.stat().st_size if task.log_path else 0
        records = task._state.records or []
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "log_mb": size / 1e6,
        "journal_mb": journal["journal"] / 1e6,
        "batch_records_mb": journal["batch_records"] / 1e6,
        "finished": sum(1 for r in records if r.score is not None and r.error is None),
    }


def in_child(kind: str, port: int, n: int) -> dict[str, Any]:
    return _throughput.in_child(kind, port, n, 0, script=__file__)


def report(n: int, live_n: int) -> list[str]:
    with mock_server("--batch-delay", str(DELAY)) as port:
        live = in_child("live", port, live_n)
        batched = in_child("batch", port, n)
    cpu_ms = batched["cpu"] / n * 1000
    lines = [
        f"batch mode: N={n:,} (batches of up to 10,000 that end {DELAY:g} s after submission), "
        f"beside a live run of N={live_n:,}",
        f"  {'live':<8} wall {live['wall']:7.2f} s  CPU {live['cpu'] / live_n * 1000:6.3f} "
        f"ms/sample  peak RSS {live['rss_mb']:5.0f} MB  log {live['log_mb']:6.1f} MB  "
        f"finished {live['finished']}/{live_n}",
        f"  {'batched':<8} wall {batched['wall']:7.2f} s  CPU {cpu_ms:6.3f} ms/sample  "
        f"peak RSS {batched['rss_mb']:5.0f} MB  log {batched['log_mb']:6.1f} MB  "
        f"finished {batched['finished']}/{n}",
        f"  journal of the batched run {batched['journal_mb']:.1f} MB, of which batch "
        f"records {batched['batch_records_mb']:.1f} MB "
        f"({batched['batch_records_mb'] * 1e6 / n:.0f} bytes per sample)",
    ]
    lines += [
        verdict(cpu_ms < 0.2, f"CPU {cpu_ms:.3f} ms/sample in batch mode (target < 0.2)"),
        verdict(
            batched["rss_mb"] < 2 * live["rss_mb"],
            f"peak RSS {batched['rss_mb'] / live['rss_mb']:.2f}x the live run of "
            f"{live_n:,} (target < 2x)",
        ),
    ]
    return lines


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(child_run(kind, port, n)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=10,000 in batches, 2,000 live")
    args = parser.parse_args()
    n, live_n = (10_000, 2_000) if args.quick else (100_000, 10_000)
    print(f"vitals-engine batch mode  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print()
    print("\n".join(report(n, live_n)), flush=True)


if __name__ == "__main__":
    main()
