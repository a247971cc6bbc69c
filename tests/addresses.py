"""Ports for tests: a free one to start a server on, and one that refuses connections where
nothing has answered in this process.

The kernel hands ports out again, and the suite starts many servers: a port that is free
now may be one an earlier test's server answered on. A refusal there means "the server
went away" to the providers (retried), not "nothing is listening" (fails at once), so a
test of the second needs `refusing_port()`, never a bare `free_port()`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from vitals_engine.providers.answered import ANSWERED, origin

__all__ = ["free_port", "refusing_port"]


def free_port() -> int:
    """A port nothing listens on now (bound, then closed): for a server to start on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answered(port: int) -> bool:
    return any(origin(f"http://{host}:{port}") in ANSWERED for host in ("127.0.0.1", "localhost"))


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port of 127.0.0.1 where connections are refused and no server answered in this
    process. It stays bound (without listening) until the block ends, so no server started
    meanwhile takes it."""
    with ExitStack() as held:
        while True:
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if not _answered(port):  # else keep it bound, so the kernel offers another
                yield port
                return
