"""The live viewer: an HTTP server for one log directory, in a thread of its own.

Why aiohttp in its own thread and event loop (and not `http.server` with a
thread per request): the page keeps one server-sent-events connection open
for as long as it is shown, which costs a thread each with `http.server`
and nothing with an event loop; aiohttp is already a core dependency; and a
loop of its own keeps the server independent of whatever the caller runs
(a script, a notebook's loop, a trio program). File reading and parsing run
in a small thread pool so a large log never stalls the event stream.

Live updates: while at least one page listens on `api/events`, a watcher
re-lists the directory every `POLL_SECONDS` (a stat per file; journals are
read from the byte where the last read stopped). Whatever a re-listing finds
changed (the watcher's, or one a request made) is sent as an event naming
the logs. Polling needs no platform-specific file notifications and keeps
the delay well under a second after the writer's flush (at least once a
second). The page then fetches `api/logs.json` and, for the log it shows,
only the rows changed since the version it holds. A running journal's
live-text sidecar is stat'ed on each re-listing too; an event that names it
under `live` makes the page fetch `api/logs/<file>/live.json` (and nothing
else), at most as often as the run rewrites it (a few times a second).

Safety: only GET/HEAD; files are served only from the package's static
files (a fixed list) and from logs the catalog found under the directory
(paths resolved and checked to stay inside it); a loopback server refuses
requests whose Host header names another host (DNS rebinding); every
response carries a Content-Security-Policy without inline scripts or
remote content, and `X-Content-Type-Options: nosniff`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from aiohttp import web

from .._errors import LogFormatError
from ..log.journal_format import JOURNAL_SUFFIX
from . import api
from .catalog import Catalog
from .paths import resolve_inside
from .site import ROBOTS, SECURITY_HEADERS, STATIC_DIR, STATIC_FILES
from .sources import Source

__all__ = ["POLL_SECONDS", "ViewServer", "make_app"]

T = TypeVar("T")

#: How often the watcher re-lists the directory while a page listens for events.
POLL_SECONDS = 0.25

_LOOPBACK_NAMES = {"localhost"}


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _request_host(request: web.Request) -> str:
    host = request.headers.get("Host", "")
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0]


class _Hub:
    """The pages listening on `api/events`: one queue each."""

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue[bytes | None]] = set()

    def subscribe(self) -> asyncio.Queue[bytes | None]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[bytes | None]) -> None:
        self.queues.discard(queue)

    def publish(self, message: bytes | None) -> None:
        for queue in self.queues:
            queue.put_nowait(message)


def _json(document: Any, status: int = 200) -> web.Response:
    return web.Response(body=api.encode(document), status=status, content_type="application/json")


def _json_bytes(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


_BAD_SINCE = "`since` must be a version: a whole number of at most 18 digits."


def _is_version(text: str) -> bool:
    """A `since=` a version can be: ASCII digits, few enough to be cheap to read."""
    return len(text) <= 18 and text.isascii() and text.isdigit()


def _not_found(what: str = "Not found.") -> web.Response:
    return _json({"error": what}, status=404)


class _Handlers:
    """The request handlers of one server: one dispatcher on the raw path."""

    def __init__(
        self, catalog: Catalog, executor: ThreadPoolExecutor, *, check_host: bool, poll: float
    ) -> None:
        self.catalog = catalog
        self.executor = executor
        self.check_host = check_host
        self.poll = poll
        self.hub = _Hub()
        self.static = {
            url: ((STATIC_DIR / name).read_bytes(), kind)
            for url, (name, kind) in STATIC_FILES.items()
        }
        self._watcher: asyncio.Task[None] | None = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        if self.check_host and not _is_loopback(_request_host(request)):
            return web.Response(status=403, text="Forbidden: this viewer answers on loopback only.")
        path = request.rel_url.raw_path
        if path in self.static:
            body, kind = self.static[path]
            return web.Response(body=body, content_type=kind, charset="utf-8")
        if path == "/robots.txt":
            return web.Response(body=ROBOTS, content_type="text/plain")
        if path == "/api/logs.json":
            return _json_bytes(await self._run(self._logs_json))
        if path == "/api/events":
            return await self.events(request)
        if path.startswith("/api/logs/"):
            return await self.log_api(request, _segments(path[len("/api/logs/") :]))
        if path.startswith("/logs/"):
            return await self.log_file(_segments(path[len("/logs/") :]))
        return _not_found()

    async def log_api(self, request: web.Request, segments: list[str]) -> web.StreamResponse:
        route = api.parse_log_route(segments)
        if route is None or not self._inside(route.file):
            return _not_found()
        try:
            if route.kind == "summaries":
                since = request.query.get("since", "")
                if since and not _is_version(since):
                    return _json({"error": _BAD_SINCE}, status=400)
                body = await self._run(
                    self._summaries_json, route.file, int(since) if since else None
                )
                return _not_found("No such log.") if body is None else _json_bytes(body)
            if route.kind == "live":
                body = await self._run(self._live_json, route.file)
                return _not_found("No such log.") if body is None else _json_bytes(body)
            if route.kind == "batches":
                body = await self._run(self._batches_json, route.file)
                return _not_found("No such log.") if body is None else _json_bytes(body)
            if route.id is None or route.epoch is None:
                return _not_found()
            body = await self._run(self.catalog.sample, route.file, route.id, route.epoch)
        except LogFormatError as exc:
            return _json({"error": str(exc)}, status=422)
        if body is None:
            return _not_found("No such sample.")
        return _json_bytes(body)

    def _inside(self, file: str) -> bool:
        """A log file under the directory, or a journal whose final log is (a journal gives way
        to its final log as its run ends: the catalog answers for it from that log)."""
        root = self.catalog.root
        if self.catalog.source.knows(file):
            return True
        stem = file.removesuffix(JOURNAL_SUFFIX)
        if stem == file:
            return False
        if self.catalog.final_of(file) is not None:  # the final log its start record named
            return True
        return any(resolve_inside(root, stem + ext) for ext in (".json", ".eval"))

    # Documents are built and encoded in the thread pool: 100,000 rows take a moment.

    def _logs_json(self) -> bytes:
        self.catalog.refresh()  # a stat per file: cheap, and the list is never stale
        return api.encode(api.logs_document(self.catalog, live=True))

    def _summaries_json(self, file: str, since: int | None) -> bytes | None:
        document = self.catalog.summaries(file, since)
        return None if document is None else api.encode(document)

    def _live_json(self, file: str) -> bytes | None:
        document = self.catalog.live(file)
        return None if document is None else api.encode(document)

    def _batches_json(self, file: str) -> bytes | None:
        document = self.catalog.batches(file)
        return None if document is None else api.encode(document)

    async def log_file(self, segments: list[str]) -> web.StreamResponse:
        relative = "/".join(segments)
        path = None
        if self.catalog.source.knows(relative):
            path = await self._run(self.catalog.path, relative)
        if path is None:
            final = await self._run(self.catalog.final_of, relative)
            if final is None:
                return _not_found()
            # the journal gave way to its final log (beside it) as its run ended: a relative
            # redirect, so a viewer served under a prefix follows it too
            raise web.HTTPTemporaryRedirect(quote(final.rsplit("/", 1)[-1]))
        kind = "application/json" if path.suffix == ".json" else "application/octet-stream"
        return web.FileResponse(path, headers={"Content-Type": kind})

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        queue = self.hub.subscribe()
        try:
            hello = api.encode({"version": self.catalog.version, "files": [], "hello": True})
            await response.write(b"retry: 1000\ndata: " + hello + b"\n\n")
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), timeout=15)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if message is None:
                    break
                await response.write(b"data: " + message + b"\n\n")
        except (ConnectionError, RuntimeError):
            pass  # the page went away
        finally:
            self.hub.unsubscribe(queue)
        return response

    async def watch(self) -> None:
        """While pages listen, re-list the directory and tell them what changed."""
        while True:
            await asyncio.sleep(self.poll)
            if not self.hub.queues:
                continue
            with contextlib.suppress(OSError):  # the directory went away for a moment
                await self._run(self.catalog.refresh)  # changes reach `_announce`

    def _announce(
        self, loop: asyncio.AbstractEventLoop, changed: set[str], version: int, live: set[str]
    ) -> None:
        """Tell the pages what a refresh (the watcher's or a request's) found changed."""
        message = api.encode({"version": version, "files": sorted(changed), "live": sorted(live)})
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(self.hub.publish, message)

    async def on_startup(self, app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        self.catalog.listeners.append(functools.partial(self._announce, loop))
        self._watcher = loop.create_task(self.watch())

    async def on_shutdown(self, app: web.Application) -> None:
        self.hub.publish(None)

    async def on_cleanup(self, app: web.Application) -> None:
        self.catalog.listeners.clear()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher


def _segments(raw: str) -> list[str]:
    """Decoded path segments; an encoded `/` separates too (as a static server would)."""
    return [part for segment in raw.split("/") for part in unquote(segment).split("/")]


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
    response.headers.setdefault("Cache-Control", "no-cache")


def make_app(
    catalog: Catalog,
    executor: ThreadPoolExecutor,
    *,
    check_host: bool = True,
    poll: float = POLL_SECONDS,
) -> web.Application:
    """The aiohttp application serving `catalog`'s directory.

    Example:
        >>> app = make_app(Catalog(Path("logs")), ThreadPoolExecutor(2))
        >>> web.run_app(app, host="127.0.0.1", port=7576)
    """
    handlers = _Handlers(catalog, executor, check_host=check_host, poll=poll)
    app = web.Application()
    app.router.add_get("/{tail:.*}", handlers.dispatch)
    app.on_response_prepare.append(_security_headers)
    app.on_startup.append(handlers.on_startup)
    app.on_shutdown.append(handlers.on_shutdown)
    app.on_cleanup.append(handlers.on_cleanup)
    return app


def _bind(host: str, port: int | None) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    return socket.create_server((host.strip("[]"), port or 0), family=family)


class ViewServer:
    """A running viewer: `url`, `stop()`; also a context manager.

    Example:
        >>> server = ViewServer(Path("logs")).start()
        >>> server.url
        'http://127.0.0.1:53117'
        >>> server.stop()
    """

    def __init__(
        self,
        dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        poll: float = POLL_SECONDS,
        source: Source | None = None,
    ) -> None:
        self.dir = dir.resolve()
        self.catalog = Catalog(self.dir, source=source)
        self.host = host
        self._poll = poll
        self._sock = _bind(host, port)
        self.port: int = self._sock.getsockname()[1]
        url_host = f"[{host.strip('[]')}]" if ":" in host else host
        self.url = f"http://{url_host}:{self.port}"
        self._thread = threading.Thread(target=self._main, name=f"vitals-view:{self.port}")
        self._thread.daemon = True
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def loopback_only(self) -> bool:
        """Whether the server listens on loopback only, and so refuses foreign Host headers
        (DNS rebinding); a server on another address answers anyone who can reach it."""
        return _is_loopback(self.host)

    def start(self) -> ViewServer:
        """Start serving in a background thread; returns once the server accepts requests."""
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure
        return self

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        executor = ThreadPoolExecutor(4, thread_name_prefix=f"vitals-view-io:{self.port}")
        app = make_app(self.catalog, executor, check_host=self.loopback_only, poll=self._poll)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        try:
            await runner.setup()
            await web.SockSite(runner, self._sock).start()
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            await runner.cleanup()
            self._sock.close()
            executor.shutdown(wait=False)
            return
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()
            self._sock.close()
            executor.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        """Whether the server still answers."""
        return self._thread.is_alive() and self._failure is None

    def stop(self) -> None:
        """Stop the server and wait for its thread (idempotent)."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stopping.set)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def wait(self) -> None:
        """Block until the server stops; Ctrl-C stops it (and the KeyboardInterrupt goes on)."""
        try:
            while self._thread.is_alive():
                self._thread.join(timeout=0.5)
        except KeyboardInterrupt:
            self.stop()
            raise

    def __enter__(self) -> ViewServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ViewServer {self.url} on {self.dir} ({state})>"
