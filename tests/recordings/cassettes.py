"""The recordings in this directory read into plain `Interaction`s, whatever their format.

The formats (see SOURCES.md for which file is which):

- vcrpy YAML (`interactions:`, each a `request` and a `response`): the request body a
  string, the response's `body.string` a string or a `!!binary` (base64) body, gzip
  compressed as the wire had it; `response.status.code`; headers as lists. Bedrock's
  ConverseStream body is a `!!binary` AWS event stream (`application/vnd.amazon.eventstream`):
  binary frames, kept as bytes (`Interaction.frames()` splits and checks them).
- pydantic-ai's vcrpy serializer: the same, a JSON body kept as `parsed_body` (re-serialised
  here: equal as JSON, not byte for byte), an SSE body verbatim in `body.string`.
- R vcr (ellmer, `http_interactions:`): `response.status` an int (or `status_code` under
  it), `body.string` the decoded body, headers as strings.
- vercel/ai fixtures: `<name>.chunks.txt` holds one SSE data payload a line (the stream is
  rebuilt as `event: <type>` / `data: <line>` events, as OpenAI frames them), `<name>.json`
  an error body. Neither recorded a request, a status or headers: the path and status are
  the ones `VERCEL` names (the status an assumption, said there).

Bodies are the bytes the wire carried once its Content-Encoding is undone (a recorded SSE
body is served byte for byte); the headers keep what a client reads (`content-type`,
request ids, rate-limit headers), lower-cased, without the framing headers
(`content-encoding`, `content-length`, `transfer-encoding`, `connection`) and cookies.
The request's host is kept (`host`: cloud platforms name the region, resource or account
there), its path as recorded (percent-escapes such as Bedrock's `%3A` left as they are) and
its query string (Azure's `api-version=`, Gemini's `alt=sse`).

Example:
    >>> [(i.method, i.path, i.status) for i in load("anthropic/ellmer__anthropic-basic.yml")]
    [('POST', '/v1/messages', 200)]
    >>> stream = load("bedrock/pydantic-ai__test_bedrock_model_stream.yaml")[0]
    >>> stream.host, [frame.event_type for frame in stream.frames()][:2]
    ('bedrock-runtime.us-east-1.amazonaws.com', ['messageStart', 'contentBlockDelta'])
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pytest

__all__ = ["EVENTSTREAM", "HERE", "VERCEL", "Frame", "Interaction", "load"]

HERE = Path(__file__).parent

#: What the vercel/ai fixtures did not record: the endpoint, and the status of a body
#: fixture. OpenAI answers `insufficient_quota` with a 429 (its error-codes guide); a
#: stream's error events come in a 200.
VERCEL = {
    "openai_responses/vercel-ai__openai-error.1.chunks.txt": ("/v1/responses", 200),
    "openai_responses/vercel-ai__openai-error.1.json": ("/v1/responses", 429),
}

#: The content type of an AWS event stream (Bedrock's ConverseStream reply).
EVENTSTREAM = "application/vnd.amazon.eventstream"

_FRAMING = frozenset(
    ("content-encoding", "content-length", "transfer-encoding", "connection", "set-cookie")
)


@dataclass(frozen=True)
class Interaction:
    """One recorded request and the reply the live API gave it."""

    method: str
    path: str
    query: str
    request_body: Any  # the request's JSON, decoded; None when it had none
    status: int
    headers: dict[str, str] = field(repr=False)  # lower-case names
    body: bytes = field(repr=False)
    host: str = ""  # the request's host; "" where the recording has none (vercel/ai)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def streamed(self) -> bool:
        """An SSE stream (an AWS event stream is not one: see `eventstream`)."""
        return "text/event-stream" in self.content_type

    @property
    def eventstream(self) -> bool:
        """An AWS event stream (binary frames, Bedrock's ConverseStream)."""
        return EVENTSTREAM in self.content_type

    def json(self) -> Any:
        """The response body as JSON (a streamed one is not)."""
        return json.loads(self.body)

    def frames(self) -> list[Frame]:
        """The frames of an AWS event-stream body, in order, each one's prelude and
        message CRC32 checked (a ValueError if one is wrong or the body ends mid-frame)."""
        return _frames(self.body)

    def events(self) -> list[Any]:
        """The JSON data of each event of a streamed response (`[DONE]` left out); of an
        AWS event stream, `{event type: payload}` a frame, as boto3 yields them (an
        exception frame as `{exception type: payload}`)."""
        if self.eventstream:
            return [{f.event_type: json.loads(f.payload)} for f in self.frames()]
        out = []
        for line in self.body.decode().splitlines():
            if line.startswith("data:"):
                data = line.removeprefix("data:").strip()
                if data and data != "[DONE]":
                    out.append(json.loads(data))
        return out


class Frame(NamedTuple):
    """One frame of an AWS event stream: its headers (`:message-type` `event` or
    `exception`, `:event-type` or `:exception-type`, `:content-type`) and its payload."""

    headers: dict[str, Any]
    payload: bytes

    @property
    def event_type(self) -> str:
        """`:event-type` (e.g. `contentBlockDelta`), or `:exception-type` of an exception."""
        return self.headers.get(":event-type") or self.headers.get(":exception-type", "")


def _frames(body: bytes) -> list[Frame]:
    """Split an AWS event stream: each frame is a 12-byte prelude (total length, headers
    length, CRC32 of those 8 bytes), the headers, the payload and a CRC32 of all before it."""
    out, at = [], 0
    while at < len(body):
        if len(body) - at < 16:
            raise ValueError(f"event stream: {len(body) - at} bytes left at {at}, not a frame")
        total, size, prelude_crc = struct.unpack_from(">III", body, at)
        frame = body[at : at + total]
        if len(frame) != total or total < 16 + size:
            raise ValueError(f"event stream: frame at {at} claims {total} bytes")
        if zlib.crc32(frame[:8]) != prelude_crc:
            raise ValueError(f"event stream: prelude CRC wrong at {at}")
        if zlib.crc32(frame[:-4]) != struct.unpack_from(">I", frame, total - 4)[0]:
            raise ValueError(f"event stream: message CRC wrong at {at}")
        out.append(Frame(_frame_headers(frame[12 : 12 + size]), frame[12 + size : -4]))
        at += total
    return out


def _frame_headers(raw: bytes) -> dict[str, Any]:
    """An event-stream frame's headers: name length (1 byte), name, a value type (1 byte)
    and the value (types 0/1 true/false, 2-5 integers, 6 bytes and 7 a string with a 2-byte
    length, 8 a timestamp in ms, 9 a UUID)."""
    out: dict[str, Any] = {}
    at = 0
    while at < len(raw):
        size = raw[at]
        name = raw[at + 1 : at + 1 + size].decode()
        kind = raw[at + 1 + size]
        at += 2 + size
        if kind in (0, 1):
            value: Any = kind == 0
        elif kind in (2, 3, 4, 5, 8):
            fmt = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}[kind]
            value = struct.unpack_from(fmt, raw, at)[0]
            at += struct.calcsize(fmt)
        elif kind in (6, 7):
            length = struct.unpack_from(">H", raw, at)[0]
            value = raw[at + 2 : at + 2 + length]
            value = value.decode() if kind == 7 else value
            at += 2 + length
        elif kind == 9:
            value, at = raw[at : at + 16], at + 16
        else:
            raise ValueError(f"event stream: header {name!r} has unknown type {kind}")
        out[name] = value
    return out


@cache
def _load(name: str) -> tuple[Interaction, ...]:
    path = HERE / name
    if name in VERCEL:
        return (_vercel(path, *VERCEL[name]),)
    yaml = pytest.importorskip("yaml")  # pyyaml: a dev dependency (`make setup`)
    with path.open("rb") as file:
        data = yaml.load(file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if "http_interactions" in data:  # R vcr
        return tuple(_interaction(i["request"], i["response"]) for i in data["http_interactions"])
    return tuple(_interaction(i["request"], i["response"]) for i in data["interactions"])


def load(name: str) -> list[Interaction]:
    """The interactions of the recording `name` (a path under this directory), in the
    order they were recorded."""
    return list(_load(name))


def _interaction(request: dict[str, Any], response: dict[str, Any]) -> Interaction:
    url = urlsplit(request["uri"])
    headers = _headers(response.get("headers") or {})
    return Interaction(
        method=request["method"].upper(),
        path=url.path,
        query=url.query,
        request_body=_request_json(request),
        status=_status(response["status"]),
        headers=headers,
        body=_body(response),
        host=url.hostname or "",
    )


def _status(status: Any) -> int:
    if isinstance(status, dict):  # vcrpy {code, message}; R vcr {status_code, message}
        status = status.get("code", status.get("status_code"))
    return int(status)


def _headers(raw: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in raw.items():
        if name.lower() in _FRAMING:
            continue
        out[name.lower()] = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return out


def _text(body: Any) -> bytes:
    """A recorded body (`string:` under it, or itself) as the bytes of the wire, a gzip
    encoding undone (known by its magic bytes, not the header: some recorders decoded the
    body and kept `content-encoding`, ellmer's says `br` over plain JSON)."""
    if isinstance(body, dict):
        body = body.get("string", "")
    if body is None:
        return b""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _body(response: dict[str, Any]) -> bytes:
    if "parsed_body" in response:  # pydantic-ai: JSON re-serialised as YAML
        return json.dumps(response["parsed_body"], ensure_ascii=False).encode()
    return _text(response.get("body"))


def _request_json(request: dict[str, Any]) -> Any:
    if "parsed_body" in request:
        return request["parsed_body"]
    raw = _text(request.get("body"))
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _vercel(path: Path, where: str, status: int) -> Interaction:
    """A vercel/ai fixture: a stream rebuilt from its data payloads, or a body."""
    text = path.read_bytes()
    if path.name.endswith(".chunks.txt"):
        events = []
        for line in text.decode().splitlines():
            if line.strip():
                kind = json.loads(line).get("type", "message")
                events.append(f"event: {kind}\ndata: {line}\n\n")
        body, kind = "".join(events).encode(), "text/event-stream; charset=utf-8"
    else:
        body, kind = text, "application/json"
    return Interaction("POST", where, "", None, status, {"content-type": kind}, body)
