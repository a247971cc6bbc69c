"""Log benchmark: what writing costs per sample, and how fast logs read back.

    .venv/bin/python bench/log.py              # 100,000-sample logs
    .venv/bin/python bench/log.py --quick      # 20,000
    .venv/bin/python bench/log.py --inspect    # also time Inspect's reader on the big log
    .venv/bin/python bench/log.py --s3         # only the run into an S3 server (moto's, here)

Targets:
- writing adds at most 0.05 ms CPU per sample on top of the run: composing
  the sample's record, appending it to the journal, composing the final log;
- reading a 100,000-sample log of our own into a DataFrame: under 5 s;
  beside it, Inspect's `read_eval_log` on the same kind of file (5,000
  samples unless --inspect, which tries the big one);
- a header-only read of any log under 50 ms, whatever its size;
- a run logging to S3 as fast as one logging to disk (samples per second), its
  journal in the store within the shipping interval plus one PUT.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
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


def _s3_server() -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server in a process of its own (in this one it would take the run's CPU)."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
            return server, endpoint
        except OSError:
            time.sleep(0.05)
    server.terminate()
    raise RuntimeError("moto's S3 server did not start")


def s3_run(n: int, interval: float) -> None:
    """A run of `n` samples (mock model at 20 ms, concurrency 200) to disk, then into a
    local S3 server: samples per second of each, and how long each shipment took."""
    import os

    import boto3

    from vitals_engine.storage.location import Store
    from vitals_engine.storage.shipper import Shipper

    server, endpoint = _s3_server()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL_S3=endpoint,
        VITALS_SHIP_INTERVAL=str(interval),
    )
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-logs")
    puts: list[tuple[float, float, int]] = []  # (when done, seconds, bytes)
    put = Store.put

    def timed_put(self: Store, name: str, data: bytes) -> None:
        t0 = time.perf_counter()
        put(self, name, data)
        if name.endswith(".seg"):
            puts.append((time.perf_counter(), time.perf_counter() - t0, len(data)))

    Store.put = timed_put  # type: ignore[method-assign]
    publish = Shipper.publish
    published: list[float] = []

    def timed_publish(self: Shipper, final: Path) -> bool:
        t0 = time.perf_counter()
        try:
            return publish(self, final)
        finally:
            published.append(time.perf_counter() - t0)

    Shipper.publish = timed_publish  # type: ignore[method-assign]
    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["VITALS_STAGING_DIR"] = str(Path(tmp) / "staging")
            rates = {}
            for where in (str(Path(tmp) / "disk"), "s3://bench-logs/qa"):
                chat = ve.chat_mock(latency=0.02)
                task = ve.Task(data, ve.generate(chat), ve.detect_includes(), name="qa", dir=where)
                t0 = time.perf_counter()
                task.eval(max_concurrency=200, progress=False)
                rates[where.split(":")[0] if "://" in where else "disk"] = n / (
                    time.perf_counter() - t0
                )
    finally:
        Store.put = put  # type: ignore[method-assign]
        Shipper.publish = publish  # type: ignore[method-assign]
        server.terminate()
        server.wait()
    seconds = sorted(s for _, s, _ in puts)
    head = f"{n:,}-sample run, mock model at 20 ms, concurrency 200, shipping every {interval:g} s"
    print(f"\n{head}:")
    print(f"  to disk {rates['disk']:,.0f} samples/s; to S3 (moto, loopback) {rates['s3']:,.0f}/s")
    if seconds:
        mb = sum(b for _, _, b in puts) / 1e6
        median, worst = seconds[len(seconds) // 2] * 1000, seconds[-1] * 1000
        print(f"  {len(puts)} segments ({mb:.1f} MB); a PUT took {median:.0f} ms (median),")
        print(f"  {worst:.0f} ms at most: a sample reaches the store within {interval:g} s + that")
    if published:
        print(f"  final log put, checked and segments removed in {published[-1] * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--inspect", action="store_true", help="Inspect's reader on the big log")
    parser.add_argument("--s3", action="store_true", help="only the run into an S3 server")
    args = parser.parse_args()
    if args.s3:
        print(f"vitals-engine log benchmark (python {sys.version.split()[0]})")
        s3_run(5000 if args.quick else 20_000, 1.0)
        return
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
