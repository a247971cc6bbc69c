"""Transport benchmark: requests/s and client CPU per request against the local mock server.

    .venv/bin/python bench/transport.py                # concurrency 10, 100 and 1,000
    .venv/bin/python bench/transport.py --quick        # fewer requests, concurrency 10 and 100
    .venv/bin/python bench/transport.py --concurrency 10,100,1000 --latency 0.1

The mock server (`python -m vitals_engine.testing`) runs in a subprocess, so
its CPU is not counted against the clients (its own CPU per request is shown
apart). Each client run is a fresh child process that POSTs an OpenAI
chat-completions body to `/v1/chat/completions` from C concurrent workers
over C keep-alive connections: first a warm-up of one request per worker
(which opens the pool), then max(2000, 5*C) requests, timed with
`time.perf_counter()` and `time.process_time()`.

Clients, side by side:

1. bare: raw asyncio streams, one keep-alive connection per worker, a
   minimal HTTP/1.1 POST and just enough parsing to read the body. The floor.
2. AiohttpTransport on asyncio (what runs use on asyncio).
3. HttpxTransport on trio (sharded: one AsyncClient per 10 connections).
4. HttpxTransport on asyncio (sharded the same way).
5. plain httpx.AsyncClient, one pool of C connections, on asyncio, for reference.
6. Http11Transport (our own HTTP/1.1 client on anyio streams) on asyncio.
7. Http11Transport on trio.

A run's warm-up and its timed part may each take the larger of
--max-seconds and 1.5 x the ideal time; a run that hits that limit is
measured up to it and marked `*` (`w`: its warm-up hit it too). asyncio runs
use uvloop when it is installed, as `vitals_engine` does (--no-uvloop: the
standard loop). bench/README.md explains the columns.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import importlib.util
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps(
    {
        "model": "gpt-4.1-mini",
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
    """One client at one concurrency: what its timed part did, took and cost."""

    client: str
    concurrency: int
    requests: int = 0  # completed in the timed part
    wall: float = 0.0
    cpu: float = 0.0
    warm_up: float = 0.0  # seconds from the first warm-up request to the timed part
    setup: float = 0.0  # seconds to make the client (its pool, sessions, shards)
    server_cpu: float | None = None
    errors: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    capped: bool = False  # the timed part stopped at --max-seconds
    warm_up_cut: bool = False  # the warm-up did not finish within --max-seconds
    failure: str = ""


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
    # The server logs a traceback for each request a capped run abandons: keep them aside.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 20
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"mock server exited ({proc.returncode}):\n{tail}")
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


# -- one run, in a child process --------------------------------------------------------------


class Meter:
    """Runs the workers: a warm-up request each, then the timed requests; reports and exits.

    The timed part starts when every warm-up request is done, or `cap` seconds
    after the first one if they are not. It ends when the requests are done,
    or `cap` seconds after it began; then the result goes to the parent and
    the process ends at once, abandoning whatever is still in flight. A
    watchdog thread enforces both limits, so a client that hogs its event
    loop cannot stretch them much.
    """

    def __init__(
        self,
        result: Result,
        requests: int,
        server_pid: int,
        cap: float,
        emit: Callable[[dict[str, Any]], None],
    ) -> None:
        import anyio

        self.created = time.perf_counter()
        self.emit = emit
        self.result = result
        self.remaining = requests
        self.server_pid = server_pid
        self.cap = cap or None
        self.kinds: collections.Counter[str] = collections.Counter()
        self.warm = 0
        self.started = anyio.Event()  # wakes the workers that finished their warm-up
        self.begun = threading.Event()  # tells the watchdog that the timed part began
        self.lock = threading.Lock()
        self.timing = False

    async def _one(self, send: Send) -> None:
        try:
            ok = await send()
        except Exception as exc:
            ok = False
            self.kinds[type(exc).__name__] += 1
        else:
            if not ok:
                self.kinds["status not 200"] += 1
        if self.timing:
            self.result.requests += 1
            self.result.errors += not ok

    async def work(self, send: Send) -> None:
        await self._one(send)  # warm-up
        self.warm += 1
        if self.warm == self.result.concurrency:
            self._begin()
            self.started.set()
        await self.started.wait()
        while self.remaining > 0:
            self.remaining -= 1
            await self._one(send)

    def _begin(self, cut: bool = False) -> None:
        with self.lock:
            if self.timing:
                return
            self.kinds.clear()
            gc.collect()
            self.result.warm_up = time.perf_counter() - self._launched
            self.result.warm_up_cut = cut
            self._server0 = _process_cpu(self.server_pid)
            self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
            self.timing = True
            self.begun.set()

    def _report(self, capped: bool = False) -> None:
        """Send the result to the parent, then end the process on the spot."""
        self.lock.acquire()  # never released: the process ends holding it
        result = self.result
        result.wall = time.perf_counter() - self._wall0
        result.cpu = time.process_time() - self._cpu0
        server1 = _process_cpu(self.server_pid)
        if self._server0 is not None and server1 is not None:
            result.server_cpu = server1 - self._server0
        result.kinds = dict(self.kinds)
        result.capped = capped
        self.emit(asdict(result))
        os._exit(0)

    def _watchdog(self) -> None:
        if self.cap is None:
            return
        if not self.begun.wait(self.cap):
            self._begin(cut=True)
        time.sleep(max(0.0, self._wall0 + self.cap - time.perf_counter()))
        self._report(capped=True)

    async def drive(self, senders: list[Send]) -> None:
        import anyio

        self._launched = time.perf_counter()
        self.result.setup = self._launched - self.created
        threading.Thread(target=self._watchdog, daemon=True).start()
        async with anyio.create_task_group() as workers:
            for send in senders:
                workers.start_soon(self.work, send)
        self._report()


async def bare_client(url: str, port: int, meter: Meter) -> None:
    """Raw asyncio streams: a minimal HTTP/1.1 POST over one keep-alive connection per worker."""
    import asyncio

    raw = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY

    def sender() -> Send:
        streams: list[Any] = []

        async def send() -> bool:
            if not streams:  # the warm-up request opens the connection
                streams.extend(await asyncio.open_connection("127.0.0.1", port))
            reader, writer = streams
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            start = head.lower().index(b"\r\ncontent-length:") + 17
            await reader.readexactly(int(head[start : head.index(b"\r\n", start)]))
            return head[9:12] == b"200"

        return send

    await meter.drive([sender() for _ in range(meter.result.concurrency)])


def _transport_sender(transport: Any, url: str) -> Send:
    from vitals_engine.transport.base import Timeouts

    timeouts = Timeouts()

    async def send() -> bool:
        response = await transport.post(url, HEADERS, BODY, timeouts)
        return response.status == 200

    return send


async def aiohttp_transport(url: str, port: int, meter: Meter) -> None:
    """Our AiohttpTransport, its pool sized to the concurrency."""
    from vitals_engine.transport.aiohttp_client import AiohttpTransport

    transport = AiohttpTransport(pool_size=meter.result.concurrency)
    await meter.drive([_transport_sender(transport, url)] * meter.result.concurrency)


async def httpx_transport(url: str, port: int, meter: Meter) -> None:
    """Our HttpxTransport, sharded, on whichever backend runs it."""
    from vitals_engine.transport.httpx_client import HttpxTransport

    transport = HttpxTransport(pool_size=meter.result.concurrency)
    await meter.drive([_transport_sender(transport, url)] * meter.result.concurrency)


async def http11_transport(url: str, port: int, meter: Meter) -> None:
    """Our Http11Transport, its pool sized to the concurrency, on whichever backend runs it."""
    from vitals_engine.transport.http11 import Http11Transport

    transport = Http11Transport(pool_size=meter.result.concurrency)
    await meter.drive([_transport_sender(transport, url)] * meter.result.concurrency)


async def httpx_plain(url: str, port: int, meter: Meter) -> None:
    """One httpx.AsyncClient whose single pool holds C connections."""
    import httpx

    c = meter.result.concurrency
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(600.0, connect=10.0, pool=None))

    async def send() -> bool:
        response = await client.post(url, content=BODY, headers=HEADERS)
        return response.status_code == 200

    await meter.drive([send] * c)


#: key: (label, backend, client)
CLIENTS: dict[str, tuple[str, str, Callable[[str, int, Meter], Awaitable[None]]]] = {
    "bare": ("bare asyncio streams (floor)", "asyncio", bare_client),
    "aiohttp": ("AiohttpTransport, asyncio", "asyncio", aiohttp_transport),
    "httpx-trio": ("HttpxTransport sharded, trio", "trio", httpx_transport),
    "httpx-asyncio": ("HttpxTransport sharded, asyncio", "asyncio", httpx_transport),
    "httpx-plain": ("httpx.AsyncClient 1 pool, asyncio", "asyncio", httpx_plain),
    "http11-asyncio": ("Http11Transport, asyncio", "asyncio", http11_transport),
    "http11-trio": ("Http11Transport, trio", "trio", http11_transport),
}


def child(spec: tuple[Any, ...], conn: Any) -> None:
    """In the child process: run one client at one concurrency and send back its Result."""
    import anyio

    key, c, n, port, pid, cap, uvloop = spec
    label, backend, client = CLIENTS[key]
    try:
        meter = Meter(Result(label, c), n, pid, cap, conn.send)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        options = {"use_uvloop": True} if backend == "asyncio" and uvloop else {}
        anyio.run(client, url, port, meter, backend=backend, backend_options=options)
        raise RuntimeError("the run ended without reporting")
    except BaseException as exc:
        conn.send(asdict(Result(label, c, failure=f"{type(exc).__name__}: {exc}"[:90])))
        os._exit(1)


def _preload(keys: list[str], uvloop: bool) -> None:
    """Import what the children need once, so each forked child starts at once."""
    import anyio  # noqa: F401

    modules = {
        "vitals_engine.transport.aiohttp_client",
        "vitals_engine.transport.httpx_client",
        "vitals_engine.transport.http11",
    }
    modules |= {"httpx", "aiohttp"}
    modules |= {"trio"} if {"httpx-trio", "http11-trio"} & set(keys) else set()
    modules |= {"uvloop"} if uvloop else set()
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()  # the children's collections then skip everything imported here


def run_one(key: str, c: int, n: int, port: int, pid: int, cap: float, uvloop: bool) -> Result:
    """Run one client at one concurrency in a child process; never raises."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=child, args=((key, c, n, port, pid, cap, uvloop), sender))
    process.start()
    sender.close()
    limit = 2 * cap + 60 if cap else None
    try:
        if receiver.poll(limit):
            return Result(**receiver.recv())
        return Result(CLIENTS[key][0], c, failure=f"no result in {limit:g} s")
    except EOFError:
        return Result(CLIENTS[key][0], c, failure=f"child exited ({process.exitcode})")
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()


# -- the table --------------------------------------------------------------------------------


def header() -> str:
    return (
        f"{'C':>5}  {'client':<34} {'requests':>9} {'wall s':>7} {'ideal s':>7} "
        f"{'req/s':>7} {'CPU ms/req':>10} {'CPU %':>6} {'srv ms/req':>10} {'errors':>6} "
        f"{'warm-up s':>9} {'setup s':>7}"
    )


def row(result: Result, latency: float) -> str:
    mark = ("*" if result.capped else "") + ("w" if result.warm_up_cut else "")
    start = f"{result.concurrency:>5}  {result.client:<34} {result.requests:>7}{mark:<2}"
    if result.failure:
        return f"{start}  FAILED: {result.failure}"
    if not result.requests:
        return f"{start}  no request completed in {result.wall:.1f} s"
    ideal = result.requests / result.concurrency * latency
    per_request = result.cpu / result.requests * 1000
    server = (
        f"{result.server_cpu / result.requests * 1000:>10.2f}"
        if result.server_cpu is not None
        else f"{'-':>10}"
    )
    return (
        f"{start} {result.wall:>7.2f} {ideal:>7.2f} {result.requests / result.wall:>7.0f} "
        f"{per_request:>10.3f} {result.cpu / result.wall * 100:>6.0f} {server} {result.errors:>6} "
        f"{result.warm_up:>9.2f} {result.setup:>7.2f}"
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
        default=4.0,
        help="limit on a run's warm-up and on its timed part, at least 1.5 x the ideal "
        "time (0: none); default 4",
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
    _preload(keys, uvloop)

    def count(c: int) -> int:
        if args.requests:
            return args.requests
        return max(500, 5 * c) if args.quick else max(2000, 5 * c)

    loop = "uvloop" if uvloop else "the standard asyncio loop"
    print(
        f"Mock server (subprocess) at {args.latency * 1000:g} ms latency; OpenAI "
        f"chat-completions POSTs; asyncio runs on {loop}; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(header(), flush=True)
    started = time.perf_counter()
    marks: set[str] = set()
    with mock_server(args.latency) as (port, pid):
        for c in levels:
            for key in keys:
                limit = max(args.max_seconds, 1.5 * count(c) / c * args.latency)
                limit = limit if args.max_seconds else 0.0
                result = run_one(key, c, count(c), port, pid, limit, uvloop)
                marks |= {"*"} if result.capped else set()
                marks |= {"w"} if result.warm_up_cut else set()
                print(row(result, args.latency), flush=True)
                if result.kinds:
                    kinds = ", ".join(f"{k} x{n}" for k, n in result.kinds.items())
                    print(f"{'':7}errors: {kinds}", flush=True)
            print(flush=True)
    cap = f"{args.max_seconds:g} s or 1.5 x ideal, whichever is longer"
    if "*" in marks:
        print(f"*  timed part stopped at {cap}: counts only the requests done by then")
    if "w" in marks:
        print("w  warm-up unfinished at that limit too: timing began with it still running")
    print(f"total {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
