"""`view()`: serve a log directory to a browser, in the foreground or the background.

The servers started here are remembered per directory (a second `view()` of
the same directory replaces the first) and stopped when the process exits.
The HTTP server's own imports are not free, so `server.py` is imported only
when a viewer starts.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import ConfigError
from ..config import DEFAULT_LOG_DIR, log_dir
from ..storage.location import as_store

if TYPE_CHECKING:
    from .server import ViewServer
    from .sources import Source

__all__ = ["view"]

_servers: dict[Path, ViewServer] = {}
_servers_lock = threading.Lock()


def _interactive() -> bool:
    """A person at a terminal: stdout is a TTY and no test runner is driving us."""
    if "pytest" in sys.modules or os.environ.get("PYTEST_CURRENT_TEST"):
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False


def _in_event_loop_or_notebook() -> bool:
    """Whether blocking here would freeze a running event loop (a notebook, async code)."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    return "ipykernel" in sys.modules


def view(
    dir: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    open_browser: bool | None = None,
    block: bool = True,
) -> ViewServer:
    """Serve the logs of `dir` (default `ve.log_dir()`, else "logs") to a browser. `dir`
    may be an object store's URL (`s3://bucket/prefix`): the list reads each log's header
    in ranges, and a log's samples are fetched when its page is opened.

    Prints `Viewer running at http://host:port`; on a host other than loopback
    (e.g. "0.0.0.0") it also warns, on stderr, that the viewer is reachable from the
    network and without its Host-header check. `port=None` picks a free
    port. The browser opens when `open_browser` is True, or when it is None
    and a person is at a terminal (not under pytest). With `block=True` the
    call serves until Ctrl-C (which stops the server and is re-raised). With
    `block=False`, or when called from a running event loop or a notebook,
    the server runs in a background thread and the returned `ViewServer` has
    `.url` and `.stop()`. A viewer already serving the same directory is
    stopped first.

    Raises `ConfigError` if the directory does not exist.

    Example:
        >>> server = view("logs", block=False)
        Viewer running at http://127.0.0.1:53117
        >>> server.url
        'http://127.0.0.1:53117'
        >>> server.stop()
    """
    given = dir if dir is not None else (log_dir() or DEFAULT_LOG_DIR)
    directory, source = _directory(given)
    key = directory.resolve()
    with _servers_lock:
        previous = _servers.pop(key, None)
    if previous is not None:
        previous.stop()
    from .server import ViewServer

    server = ViewServer(directory, host=host, port=port, source=source).start()
    with _servers_lock:
        _servers[key] = server
    print(f"Viewer running at {server.url}", flush=True)
    if not server.loopback_only:
        print(
            f"Warning: the viewer listens on {host}, so anyone who can reach this machine on "
            f"the network can read these logs, and the Host-header check that guards a "
            f"loopback viewer against DNS rebinding is off. Serve on 127.0.0.1 (the default) "
            f"to keep it to this machine.",
            file=sys.stderr,
            flush=True,
        )
    if open_browser if open_browser is not None else _interactive():
        webbrowser.open(server.url)
    if block and not _in_event_loop_or_notebook():
        server.wait()
    return server


def _directory(given: str | os.PathLike[str]) -> tuple[Path, Source | None]:
    """The directory to serve, and its source when the logs are in an object store."""
    store = as_store(given)
    if store is not None:
        from .stored_source import StoredSource

        store.check()
        stored = StoredSource(store)
        return stored.root, stored
    directory = Path(given)
    if not directory.is_dir():
        raise ConfigError(f"Log directory '{directory}' not found.")
    return directory, None


@atexit.register
def _stop_all() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()
