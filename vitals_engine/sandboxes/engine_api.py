"""The Docker Engine API over its unix socket, as the docker kind needs it: JSON requests,
a build's stream of messages, tar archives in and out, and an exec's attached stream.

No Docker SDK: each request opens a connection to the socket (`DOCKER_HOST=unix://...`,
or /var/run/docker.sock), writes HTTP/1.1 and reads the answer with our HTTP client's
reader (`transport.response`: the head, then the body by Content-Length, chunked or to
EOF). Paths are unversioned: the daemon speaks its own newest version (exec's
`WorkingDir` needs 1.35, Docker 17.12, or newer).

An exec's output comes back multiplexed on its connection (`/exec/{id}/start` without
`Upgrade`: a 200, then the raw stream): frames of an 8-byte header (the stream, 1 for
stdout or 2 for stderr, and the length) and that many bytes (`Frames`). Its input is
written on the same connection, then its write side is shut (the command's EOF).
"""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from math import inf
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import anyio.abc

from ..transport.connection import Connection
from ..transport.response import BodyReader, body_framing, read_body, read_head

__all__ = [
    "DEFAULT_SOCKET",
    "EngineAPI",
    "EngineError",
    "EngineUnreachable",
    "Frames",
    "Reply",
    "one_file",
    "tar_of",
]

DEFAULT_SOCKET = "/var/run/docker.sock"


class EngineError(Exception):
    """The daemon answered a request with an error status: `status` and its message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message


class EngineUnreachable(Exception):
    """Nothing answers at the daemon's socket, or the connection broke: the message says how."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON (as text when it is not JSON, e.g. /_ping's "OK")."""
        if "json" not in self.headers.get("content-type", "json"):
            return self.body.decode(errors="replace")
        return json.loads(self.body) if self.body else None


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", body.decode(errors="replace")))
    except (ValueError, AttributeError):
        return body.decode(errors="replace").strip()


class EngineAPI:
    """Requests to the Docker daemon at a unix socket.

    Example:
        >>> api = EngineAPI.from_env()
        >>> (await api.call("GET", "/version"))["ApiVersion"]
        '1.41'
    """

    def __init__(self, socket_path: str = DEFAULT_SOCKET) -> None:
        self.socket_path = socket_path

    @classmethod
    def from_env(cls) -> EngineAPI:
        """The daemon `DOCKER_HOST` names (`unix://` only), or the default socket."""
        host = os.environ.get("DOCKER_HOST", "")
        if not host:
            return cls()
        if host.startswith("unix://"):
            return cls(host[len("unix://") :])
        raise ValueError(
            f"DOCKER_HOST={host!r}: docker sandboxes reach the daemon over a unix socket "
            "(unix:///var/run/docker.sock); a daemon elsewhere is not supported."
        )

    async def _connect(self) -> Connection:
        try:
            stream = await anyio.connect_unix(self.socket_path)
        except FileNotFoundError:
            raise EngineUnreachable(f"there is no socket at {self.socket_path}") from None
        except OSError as exc:
            raise EngineUnreachable(f"cannot connect to {self.socket_path}: {exc}") from None
        return Connection(stream)

    @staticmethod
    def _head(
        method: str, path: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", "Host: docker"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send(
        self, method: str, path: str, body: bytes | None, headers: Mapping[str, str] | None
    ) -> tuple[Connection, int, dict[str, str], bool]:
        conn = await self._connect()
        try:
            await conn.stream.send(self._head(method, path, body, headers) + (body or b""))
            status, answer, keep = await _read_head(conn)
        except BaseException as exc:
            await _close(conn)
            if isinstance(exc, Exception) and not isinstance(exc, EngineError):
                raise EngineUnreachable(f"the daemon's connection broke: {exc!r}") from exc
            raise
        return conn, status, answer, keep

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """Send one request and read its whole answer."""
        target = _target(path, query)
        conn, status, answer, keep = await self._send(method, target, body, headers)
        data = b""
        try:
            if method != "HEAD":  # a HEAD's answer has no body, whatever its headers say
                data = await _read_body(conn, status, answer, keep)
        except Exception as exc:
            raise EngineUnreachable(f"the daemon's answer broke off: {exc!r}") from exc
        finally:
            await _close(conn)
        return Reply(status, answer, data)

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json_body: Any = None,
        ok: tuple[int, ...] = (200, 201, 204, 304),
    ) -> Any:
        """Send a JSON request; its JSON answer, or an `EngineError` for another status."""
        body = None if json_body is None else json.dumps(json_body).encode()
        headers = {"Content-Type": "application/json"} if body is not None else None
        if body is None and method in ("POST", "PUT"):
            body = b""
        reply = await self.request(method, path, query=query, body=body, headers=headers)
        if reply.status not in ok:
            raise EngineError(reply.status, _message(reply.body))
        return reply.json()

    async def messages(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: bytes,
        headers: Mapping[str, str],
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The JSON messages of a streamed answer (a build's), one at a time."""
        conn, status, answer, _keep = await self._send(method, _target(path, query), body, headers)
        try:
            framing, length = body_framing(status, answer)
            reader = BodyReader(conn, framing, length, inf, inf, None)
            if status != 200:
                data = bytearray()
                while piece := await reader.next():
                    data += piece
                raise EngineError(status, _message(bytes(data)))
            decoder = json.JSONDecoder()
            pending = ""
            while piece := await reader.next():
                pending += piece.decode(errors="replace")
                while pending := pending.lstrip():
                    try:
                        message, end = decoder.raw_decode(pending)
                    except ValueError:
                        break
                    pending = pending[end:]
                    yield message
        finally:
            await _close(conn)

    async def attach(self, path: str, json_body: Any) -> tuple[Connection, bytes]:
        """POST to an endpoint that hands its connection over to a raw stream (exec start):
        the connection, and the stream's bytes that came with the answer's head."""
        body = json.dumps(json_body).encode()
        conn, status, answer, keep = await self._send(
            "POST", path, body, {"Content-Type": "application/json"}
        )
        if status != 200 or "json" in answer.get("content-type", ""):
            try:
                data = await _read_body(conn, status, answer, keep)
            finally:
                await _close(conn)
            raise EngineError(status, _message(data))
        early = bytes(conn.buffer)
        conn.buffer.clear()
        return conn, early


async def _read_head(conn: Connection) -> tuple[int, dict[str, str], bool]:
    scope = anyio.CancelScope()  # no deadline: the caller bounds a request if it needs to
    with scope:
        return await read_head(conn, scope, inf, inf)
    raise EngineUnreachable("the daemon's answer was cut short")


async def _read_body(conn: Connection, status: int, headers: dict[str, str], keep: bool) -> bytes:
    scope = anyio.CancelScope()
    with scope:
        return (await read_body(conn, status, headers, keep, scope, inf, inf))[0]
    raise EngineUnreachable("the daemon's answer was cut short")


async def _close(conn: Connection) -> None:
    with anyio.CancelScope(shield=True):
        await conn.stream.aclose()


def _target(path: str, query: Mapping[str, Any] | None) -> str:
    if not query:
        return path
    pairs = {
        k: (json.dumps(v) if isinstance(v, dict) else str(v).lower() if isinstance(v, bool) else v)
        for k, v in query.items()
        if v is not None
    }
    return f"{path}?{urlencode(pairs, quote_via=quote)}"


class Frames:
    """Splits an exec's multiplexed stream into (stream, bytes) frames as bytes arrive.

    Example:
        >>> frames = Frames()
        >>> list(frames.feed(b"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x02hi"))
        [(1, b'hi')]
    """

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buffer = self.buffer
        buffer += data
        found = []
        while len(buffer) >= 8:
            stream, size = buffer[0], struct.unpack(">I", buffer[4:8])[0]
            if len(buffer) < 8 + size:
                break
            found.append((stream, bytes(buffer[8 : 8 + size])))
            del buffer[: 8 + size]
        return found


def tar_of(entries: Mapping[str, bytes], directories: tuple[str, ...] = ()) -> bytes:
    """A tar archive of `directories` (made, mode 755) and files (mode 644), by path.

    Example:
        >>> one_file(tar_of({"notes.txt": b"hi"}))
        b'hi'
    """
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in directories:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def one_file(archive: bytes) -> bytes:
    """The bytes of the one file in a tar archive (as GET .../archive returns it);
    IsADirectoryError when it holds a directory."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        first = tar.next()
        if first is None:
            raise FileNotFoundError("the archive is empty")
        if first.isdir():
            raise IsADirectoryError(first.name)
        extracted = tar.extractfile(first)
        if extracted is None:
            raise OSError(f"{first.name} is not a regular file")
        return extracted.read()
