"""Engine throughput benchmark: whole evals against the local mock server.

    .venv/bin/python bench/throughput.py            # every scenario (a few minutes)
    .venv/bin/python bench/throughput.py --quick    # smaller N
    .venv/bin/python bench/throughput.py --only big,storm

Each eval is `Task(generate(chat_openai(...)), detect_includes())` with the log
on, in a fresh child process (so peak RSS is that run's own), against
`python -m vitals_engine.testing` in another process at 100 ms latency. Beside
it, in the same way, a bare minimal client (raw asyncio streams, one
keep-alive connection per worker) sends the same requests: the floor.

Scenarios and their targets:

- big:    N=5,000, C=1,000: at most 0.5 ms CPU per sample; wall within 3x
          of the bare client's.
- medium: N=1,000, C=100: wall within 1.3x of the ideal ceil(N/C) x latency.
- memory: N=5,000 and N=50,000 at C=1,000: peak RSS of the larger under
          twice that of the smaller.
- storm:  N=5,000, C=1,000 with 5% of requests answered 429 + Retry-After 1 s:
          every sample finishes, no request is sent before its Retry-After,
          wall within 2x of the same run without failures. A sample answered
          429 k times in a row needs k x (latency + 1 s) more, whatever the
          engine does; the scenario prints that floor beside the wall.
- storm100: the same at C=100, a run long beside the Retry-After.
- budget: N=5,000, C=1,000, with and without `cost_budget` (one the run never reaches, so
          every call holds room in the budget and none waits): the CPU a budget adds.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)

ROOT = Path(__file__).resolve().parents[1]
LATENCY = 0.1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def mock_server(*extra: str, record: Path | None = None) -> Iterator[int]:
    """`python -m vitals_engine.testing` on a free port in a subprocess; yields the port."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "vitals_engine.testing",
        "--port",
        str(port),
        "--latency",
        str(LATENCY),
        *extra,
    ]
    if record is not None:
        command += ["--record", str(record)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the mock server did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


# -- what runs in a child process -------------------------------------------------------


def child_engine(
    port: int, n: int, c: int, budget: bool = False, scorers: int = 1
) -> dict[str, Any]:
    import resource

    import vitals_engine as ve

    options: dict[str, Any] = {}
    if budget:  # a budget the run never reaches: every call holds room, none waits
        ve.set_price("OpenAI", "gpt-bench", input=1.0, output=1.0)
        options["cost_budget"] = 1e6

    data = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]
    chat = ve.chat_openai("gpt-bench", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench")
    with tempfile.TemporaryDirectory() as logs:
        # One sample first: the modules a run loads on first use (polars, the HTTP client)
        # are loaded before the clock starts, so the figures are the run's own work.
        warm = ve.Task(data[:1], solver=ve.generate(chat), scorer=ve.detect_includes(), dir=logs)
        warm.eval(progress=False)
        scorer = [ve.detect_includes(), ve.detect_exact()][:scorers]
        task = ve.Task(data, solver=ve.generate(chat), scorer=scorer, dir=logs)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        task.eval(
            max_concurrency=c,
            progress=False,
            retry=ve.Retry(max_attempts=20),
            fail_on_error=False,
            **options,
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        records = task._state.records or []
        size = task.log_path.stat().st_size if task.log_path else 0
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": rss,
        "finished": sum(1 for r in records if r.score is not None and r.error is None),
        "failed": sum(1 for r in records if r.error is not None),
        "accuracy": (task.metrics or {}).get("accuracy"),
        "retries": sum(r.retries for r in task._state.records or []),
        "log_mb": size / 1e6,
    }


def child_bare(port: int, n: int, c: int) -> dict[str, Any]:
    import asyncio
    import resource

    async def run() -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)

        async def worker() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
                body = json.dumps(
                    {
                        "model": "gpt-bench",
                        "messages": [{"role": "user", "content": f"What's {i}+{i}?"}],
                    }
                ).encode()
                head = (
                    f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                )
                writer.write(head.encode() + body)
                head = await reader.readuntil(b"\r\n\r\n")
                start = head.lower().index(b"\r\ncontent-length:") + 17
                json.loads(await reader.readexactly(int(head[start : head.index(b"\r\n", start)])))
            writer.close()

        await asyncio.gather(*(worker() for _ in range(c)))

    wall0, cpu0 = time.perf_counter(), time.process_time()
    asyncio.run(run())
    return {
        "wall": time.perf_counter() - wall0,
        "cpu": time.process_time() - cpu0,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "finished": n,
    }


def in_child(kind: str, port: int, n: int, c: int, script: str = __file__) -> dict[str, Any]:
    """Run `script --child kind port n c` in a fresh process; what it printed last, as JSON."""
    out = subprocess.run(
        [sys.executable, script, "--child", kind, str(port), str(n), str(c)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- scenarios -----------------------------------------------------------------------------


def ideal(n: int, c: int) -> float:
    return math.ceil(n / c) * LATENCY


def line(label: str, r: dict[str, Any], n: int, c: int) -> str:
    cpu_ms = r["cpu"] / n * 1000
    return (
        f"  {label:<22} wall {r['wall']:6.2f} s  ({r['wall'] / ideal(n, c):4.2f}x ideal)  "
        f"CPU {cpu_ms:5.3f} ms/sample  peak RSS {r['rss_mb']:6.0f} MB  "
        f"finished {r['finished']}/{n}"
    )


def verdict(ok: bool, text: str) -> str:
    return f"  [{'ok' if ok else 'MISS'}] {text}"


def scenario_big(n: int, c: int) -> list[str]:
    with mock_server() as port:
        bare = in_child("bare", port, n, c)
        engine = in_child("engine", port, n, c)
    cpu_ms = engine["cpu"] / n * 1000
    return [
        f"big: N={n:,}, C={c:,}, latency {LATENCY * 1000:.0f} ms, ideal {ideal(n, c):.2f} s",
        line("bare client", bare, n, c),
        line("vitals-engine eval", engine, n, c),
        verdict(cpu_ms <= 0.5, f"CPU {cpu_ms:.3f} ms/sample (target <= 0.5)"),
        verdict(
            engine["wall"] <= 3 * bare["wall"],
            f"wall {engine['wall'] / bare['wall']:.2f}x the bare client's (target <= 3x)",
        ),
    ]


def scenario_medium(n: int, c: int) -> list[str]:
    with mock_server() as port:
        engine = in_child("engine", port, n, c)
    ratio = engine["wall"] / ideal(n, c)
    return [
        f"medium: N={n:,}, C={c:,}, ideal {ideal(n, c):.2f} s",
        line("vitals-engine eval", engine, n, c),
        verdict(ratio <= 1.3, f"wall {ratio:.2f}x ideal (target <= 1.3x)"),
    ]


def scenario_memory(small: int, large: int, c: int) -> list[str]:
    with mock_server() as port:
        a = in_child("engine", port, small, c)
        b = in_child("engine", port, large, c)
    ratio = b["rss_mb"] / a["rss_mb"]
    return [
        f"memory: N={small:,} and N={large:,} at C={c:,}",
        line(f"N={small:,}", a, small, c),
        line(f"N={large:,}", b, large, c),
        verdict(
            ratio < 2,
            f"peak RSS {ratio:.2f}x for {large // small}x the samples "
            f"(target < 2x); log {b['log_mb']:.0f} MB",
        ),
    ]


def scenario_storm(n: int, c: int) -> list[str]:
    with mock_server() as port:
        calm = in_child("engine", port, n, c)
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "requests.json"
        with mock_server("--failure-rate", "0.05", "--retry-after", "1", record=record) as port:
            storm = in_child("engine", port, n, c)
        requests = json.loads(record.read_bytes())
    by_prompt: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in requests:
        by_prompt[r["prompt"]].append(r)
    early = sum(
        1
        for tries in by_prompt.values()
        for a, b in itertools.pairwise(tries)
        if a["outcome"] == "429" and b["at"] < a["answered"] + 1.0
    )
    limited = sum(1 for r in requests if r["outcome"] == "429")
    # What the 429s cost at the least: each sample's first request as the engine sent it,
    # then for each 429 the latency and the 1 s Retry-After, then the answered request.
    start = min(r["at"] for r in requests)
    floor = (
        max(
            tries[0]["at"] - start + sum(r["outcome"] == "429" for r in tries) * (LATENCY + 1.0)
            for tries in by_prompt.values()
        )
        + LATENCY
    )
    longest = max(sum(r["outcome"] == "429" for r in tries) for tries in by_prompt.values())
    ratio = storm["wall"] / calm["wall"]
    return [
        f"storm: N={n:,}, C={c:,}, 5% answered 429 + Retry-After 1 s",
        line("no failures", calm, n, c),
        line("5% 429s", storm, n, c),
        f"  {limited} requests answered 429; {storm['retries']} retries; the longest run of "
        f"429s for one sample: {longest}",
        f"  floor {floor:.2f} s: the sample that waited longest, from its first request, with "
        f"no time lost to its 429s beyond their latency and Retry-After",
        verdict(storm["finished"] == n, f"{storm['finished']}/{n} samples finished"),
        verdict(early == 0, f"{early} requests sent before their Retry-After"),
        f"  wall {storm['wall']:.2f} s = floor + {storm['wall'] - floor:.2f} s",
        verdict(ratio <= 2, f"wall {ratio:.2f}x the run without failures (target <= 2x)"),
    ]


def scenario_budget(n: int, c: int) -> list[str]:
    with mock_server() as port:
        plain = in_child("engine", port, n, c)
        budgeted = in_child("engine-budget", port, n, c)
    extra = (budgeted["cpu"] - plain["cpu"]) / n * 1000
    return [
        f"budget: N={n:,}, C={c:,}, with and without cost_budget (never reached)",
        line("no budget", plain, n, c),
        line("cost_budget", budgeted, n, c),
        f"  the budget adds {extra:+.3f} ms CPU per sample",
    ]


def scenario_scorers(n: int, c: int) -> list[str]:
    with mock_server() as port:
        one = in_child("engine", port, n, c)
        two = in_child("engine-two-scorers", port, n, c)
    extra = (two["cpu"] - one["cpu"]) / n * 1000
    return [
        f"scorers: N={n:,}, C={c:,}, one scorer and two (detect_includes, detect_exact)",
        line("one scorer", one, n, c),
        line("two scorers", two, n, c),
        f"  the second scorer adds {extra:+.3f} ms CPU per sample, "
        f"wall {two['wall'] / one['wall']:.2f}x; log {one['log_mb']:.1f} -> {two['log_mb']:.1f} MB",
    ]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, port, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        if kind == "bare":
            result = child_bare(port, n, c)
        else:
            result = child_engine(
                port,
                n,
                c,
                budget=kind == "engine-budget",
                scorers=2 if kind == "engine-two-scorers" else 1,
            )
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller N everywhere")
    parser.add_argument("--only", default="big,medium,memory,storm,storm100,budget,scorers")
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    print(f"vitals-engine throughput  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    runs = {
        "big": lambda: scenario_big(5000 // scale, 1000),
        "medium": lambda: scenario_medium(1000 // scale, 100 // scale),
        "memory": lambda: scenario_memory(5000 // scale, 50_000 // scale, 1000),
        "storm": lambda: scenario_storm(5000 // scale, 1000),
        "storm100": lambda: scenario_storm(5000 // scale, 100),
        "budget": lambda: scenario_budget(5000 // scale, 1000),
        "scorers": lambda: scenario_scorers(5000 // scale, 1000),
    }
    for name in args.only.split(","):
        print()
        print("\n".join(runs[name.strip()]()), flush=True)


if __name__ == "__main__":
    main()
