"""Transport benchmark: requests/s and client CPU per request against the local mock server.

    .venv/bin/python bench/transport.py                # concurrency 10, 100 and 1,000
    .venv/bin/python bench/transport.py --quick        # fewer requests, concurrency 10 and 100
    .venv/bin/python bench/transport.py --concurrency 10,100,1000 --latency 0.1

The mock server (`python -m vitals_engine.testing`) runs in a subprocess, so
its CPU is not counted against the clients; its own CPU per request is shown
apart. Each client POSTs an OpenAI chat-completions body to
`/v1/chat/completions` with C concurrent workers, over a pool of C keep-alive
connections, after a warm-up of one request per worker that opens the pool.

Clients, side by side:

1. bare: raw asyncio streams, one keep-alive connection per worker, a
   minimal HTTP/1.1 POST and just enough parsing to read the body. The floor.
2. AiohttpTransport on asyncio (what runs use on asyncio).
3. HttpxTransport on trio (sharded: one AsyncClient per 10 connections).
4. HttpxTransport on asyncio (sharded the same way).
5. plain httpx.AsyncClient with one pool of C connections on asyncio, for reference.

asyncio runs use uvloop when it is installed, as `vitals_engine` does
(`--no-uvloop` for the standard loop). See bench/README.md for the columns.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4.1-mini"
BODY = json.dumps(
    {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Answer with a number only."},
            {"role": "user", "content": "What's 2+2?"},
        ],
        "max_tokens": 16,
    },
    separators=(",", ":"),
).encode()
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}

Send = Callable[[], Awaitable[bool]]


@dataclass
class Result:
    """One client at one concurrency: how long it took and what it cost."""

    client: str
    concurrency: int
    requests: int  # completed in the measured part
    wall: float = 0.0
    cpu: float = 0.0
    server_cpu: float | None = None
    errors: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    failure: str = ""
    capped: bool = False  # stopped at --max-seconds before all planned requests


# -- the mock server, in a subprocess ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def mock_server(latency: float) -> Iterator[tuple[int, int]]:
    """Start `python -m vitals_engine.testing` on a free port; yield (port, pid)."""
    port = _free_port()
    command = [sys.executable, "-m", "vitals_engine.testing", "--port", str(port)]
    command += ["--latency", str(latency)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mock server exited with code {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("mock server did not open its port in 20 s") from None
                time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) used so far by process `pid`, where /proc exists."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# -- driving the workers ----------------------------------------------------------------------

#: After the time cap, how long in-flight requests may take before they are cancelled.
GRACE = 2.0


class Meter:
    """Hands out the work, counts completions and errors, times the measured part of a run.

    Workers take no new request once `max_seconds` have passed; requests still in
    flight `GRACE` seconds later are cancelled and not counted.
    """

    def __init__(self, server_pid: int, max_seconds: float) -> None:
        self.server_pid = server_pid
        self.max_seconds = max_seconds or math.inf
        self.deadline = math.inf
        self.remaining = self.done = self.errors = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.cut = False
        self.wall = self.cpu = 0.0
        self.server_cpu: float | None = None

    @property
    def hard_limit(self) -> float | None:
        return None if math.isinf(self.max_seconds) else self.max_seconds + GRACE

    async def work(self, send: Send) -> None:
        while self.remaining > 0 and time.perf_counter() < self.deadline:
            self.remaining -= 1
            try:
                ok = await send()
            except Exception as exc:
                self.kinds[type(exc).__name__] += 1
                ok = False
            else:
                if not ok:
                    self.kinds["status != 200"] += 1
            self.done += 1
            self.errors += not ok

    def start(self, requests: int) -> None:
        self.remaining, self.done, self.errors, self.cut = requests, 0, 0, False
        self.kinds.clear()
        gc.collect()
        self._server0 = _process_cpu(self.server_pid)
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        self.deadline = self._wall0 + self.max_seconds

    def stop(self) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = time.process_time() - self._cpu0
        server1 = _process_cpu(self.server_pid)
        if self._server0 is not None and server1 is not None:
            self.server_cpu = server1 - self._server0

    def check_warm_up(self) -> None:
        if self.done and self.errors == self.done:
            raise RuntimeError(f"every warm-up request failed: {dict(self.kinds)}")

    def result(self, client: str, concurrency: int, planned: int) -> Result:
        return Result(
            client,
            concurrency,
            self.done,
            self.wall,
            self.cpu,
            self.server_cpu,
            self.errors,
            kinds=dict(self.kinds),
            capped=self.done < planned,
        )


async def drive_asyncio(meter: Meter, senders: list[Send], requests: int) -> None:
    """Warm up (one request per worker), then time `requests` requests over the workers."""
    for count in (len(senders), requests):
        meter.start(count)
        tasks = [asyncio.ensure_future(meter.work(send)) for send in senders]
        _, pending = await asyncio.wait(tasks, timeout=meter.hard_limit)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        meter.cut = bool(pending)
        if count == len(senders):
            meter.check_warm_up()
    meter.stop()


async def drive_trio(meter: Meter, senders: list[Send], requests: int) -> None:
    """`drive_asyncio` for trio."""
    import trio

    for count in (len(senders), requests):
        meter.start(count)
        limit = meter.hard_limit
        with trio.move_on_after(math.inf if limit is None else limit) as scope:
            async with trio.open_nursery() as nursery:
                for send in senders:
                    nursery.start_soon(meter.work, send)
        meter.cut = scope.cancelled_caught
        if count == len(senders):
            meter.check_warm_up()
    meter.stop()


# -- the clients ------------------------------------------------------------------------------


async def bare_client(url: str, port: int, concurrency: int, requests: int, meter: Meter) -> None:
    """Raw asyncio streams: a minimal HTTP/1.1 POST over one keep-alive connection per worker."""
    raw = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY
    connections = await asyncio.gather(
        *(asyncio.open_connection("127.0.0.1", port) for _ in range(concurrency))
    )

    def sender(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Send:
        async def send() -> bool:
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            start = head.lower().index(b"\r\ncontent-length:") + 17
            await reader.readexactly(int(head[start : head.index(b"\r\n", start)]))
            return head[9:12] == b"200"

        return send

    try:
        await drive_asyncio(meter, [sender(r, w) for r, w in connections], requests)
    finally:
        for _, writer in connections:
            writer.close()
        for _, writer in connections:
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def transport_sender(transport, url: str) -> Send:
    from vitals_engine.providers.transport import Timeouts

    timeouts = Timeouts()

    async def send() -> bool:
        response = await transport.post(url, HEADERS, BODY, timeouts)
        return response.status == 200

    return send


async def aiohttp_client(url: str, port: int, concurrency: int, requests: int, meter: Meter):
    """Our AiohttpTransport, pool sized to the concurrency."""
    from vitals_engine.providers.transport import AiohttpTransport

    transport = AiohttpTransport(pool_size=concurrency)
    try:
        await drive_asyncio(meter, [transport_sender(transport, url)] * concurrency, requests)
    finally:
        await transport.aclose()


async def httpx_sharded_asyncio(url: str, port: int, concurrency: int, requests: int, meter):
    """Our HttpxTransport (sharded) on asyncio."""
    from vitals_engine.providers.transport import HttpxTransport

    transport = HttpxTransport(pool_size=concurrency)
    try:
        await drive_asyncio(meter, [transport_sender(transport, url)] * concurrency, requests)
    finally:
        await transport.aclose()


async def httpx_sharded_trio(url: str, port: int, concurrency: int, requests: int, meter):
    """Our HttpxTransport (sharded) on trio."""
    from vitals_engine.providers.transport import HttpxTransport

    transport = HttpxTransport(pool_size=concurrency)
    try:
        await drive_trio(meter, [transport_sender(transport, url)] * concurrency, requests)
    finally:
        await transport.aclose()


async def httpx_plain(url: str, port: int, concurrency: int, requests: int, meter: Meter):
    """One httpx.AsyncClient whose single pool holds C connections."""
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(600.0, connect=10.0, pool=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def send() -> bool:
            response = await client.post(url, content=BODY, headers=HEADERS)
            return response.status_code == 200

        await drive_asyncio(meter, [send] * concurrency, requests)


#: key: (label, backend, client)
CLIENTS = {
    "bare": ("bare asyncio streams (floor)", "asyncio", bare_client),
    "aiohttp": ("AiohttpTransport, asyncio", "asyncio", aiohttp_client),
    "httpx-trio": ("HttpxTransport sharded, trio", "trio", httpx_sharded_trio),
    "httpx-asyncio": ("HttpxTransport sharded, asyncio", "asyncio", httpx_sharded_asyncio),
    "httpx-plain": ("httpx.AsyncClient 1 pool, asyncio", "asyncio", httpx_plain),
}


def run_one(
    key: str, port: int, pid: int, concurrency: int, requests: int, uvloop: bool, cap: float
) -> Result:
    """Run one client at one concurrency in a fresh event loop; never raises."""
    label, backend, client = CLIENTS[key]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    meter = Meter(pid, cap)
    try:
        if backend == "trio":
            import trio

            trio.run(client, url, port, concurrency, requests, meter)
        else:
            factory = None
            if uvloop:
                import uvloop as uv

                factory = uv.new_event_loop
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(client(url, port, concurrency, requests, meter))
    except Exception as exc:
        result = Result(label, concurrency, requests, errors=meter.errors)
        result.failure = f"{type(exc).__name__}: {exc}"[:80]
        return result
    return meter.result(label, concurrency, requests)


# -- the table --------------------------------------------------------------------------------


def header() -> str:
    return (
        f"{'C':>5}  {'client':<34} {'requests':>8} {'wall s':>7} {'ideal s':>7} "
        f"{'req/s':>7} {'CPU ms/req':>10} {'CPU %':>6} {'srv ms/req':>10} {'errors':>6}"
    )


def row(result: Result, latency: float) -> str:
    ideal = result.requests / result.concurrency * latency
    mark = "*" if result.capped else " "
    start = f"{result.concurrency:>5}  {result.client:<34} {result.requests:>7}{mark}"
    if result.failure:
        return f"{start}  FAILED: {result.failure}"
    per_request = result.cpu / result.requests * 1000
    server = (
        f"{result.server_cpu / result.requests * 1000:>10.2f}"
        if result.server_cpu is not None
        else f"{'-':>10}"
    )
    return (
        f"{start} {result.wall:>7.2f} {ideal:>7.2f} {result.requests / result.wall:>7.0f} "
        f"{per_request:>10.3f} {result.cpu / result.wall * 100:>6.0f} {server} {result.errors:>6}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, C = 10 and 100")
    parser.add_argument("--concurrency", help="comma-separated, default 10,100,1000")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency, seconds")
    parser.add_argument("--requests", type=int, help="requests per run (default max(2000, 5*C))")
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"subset of {','.join(CLIENTS)}"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=10.0,
        help="stop a run's measured part after this long (0: never); default 10",
    )
    parser.add_argument("--no-uvloop", action="store_true", help="standard asyncio loop")
    args = parser.parse_args()

    default = "10,100" if args.quick else "10,100,1000"
    levels = [int(c) for c in (args.concurrency or default).split(",")]
    keys = [k.strip() for k in args.clients.split(",") if k.strip()]
    unknown = [k for k in keys if k not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {list(CLIENTS)}")
    uvloop = not args.no_uvloop and importlib.util.find_spec("uvloop") is not None

    def count(c: int) -> int:
        if args.requests:
            return args.requests
        return max(500, 5 * c) if args.quick else max(2000, 5 * c)

    loop = "uvloop" if uvloop else "asyncio stdlib loop"
    print(
        f"Transport benchmark: mock server at {args.latency * 1000:g} ms latency "
        f"(subprocess), OpenAI chat-completions POST; asyncio runs on {loop}; "
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}",
        flush=True,
    )
    print(header(), flush=True)
    started = time.perf_counter()
    capped = False
    with mock_server(args.latency) as (port, pid):
        for c in levels:
            for key in keys:
                result = run_one(key, port, pid, c, count(c), uvloop, args.max_seconds)
                capped = capped or result.capped
                print(row(result, args.latency), flush=True)
                if result.kinds:
                    kinds = ", ".join(f"{k} x{n}" for k, n in result.kinds.items())
                    print(f"{'':7}errors: {kinds}", flush=True)
            print(flush=True)
    if capped:
        print(
            f"* hit the {args.max_seconds:g} s cap before all its requests: it took no new "
            f"request after {args.max_seconds:g} s, cancelled any still in flight "
            f"{GRACE:g} s later, and counts only completed ones (--max-seconds 0: no cap)"
        )
    print(f"total {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
