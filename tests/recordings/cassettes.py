"""The recordings in this directory read into plain `Interaction`s, whatever their format.

The formats (see SOURCES.md for which file is which):

- vcrpy YAML (`interactions:`, each a `request` and a `response`): the request body a
  string, the response's `body.string` a string or a `!!binary` (base64) body, gzip
  compressed as the wire had it; `response.status.code`; headers as lists.
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

Example:
    >>> [(i.method, i.path, i.status) for i in load("anthropic/ellmer__anthropic-basic.yml")]
    [('POST', '/v1/messages', 200)]
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

__all__ = ["HERE", "VERCEL", "Interaction", "load"]

HERE = Path(__file__).parent

#: What the vercel/ai fixtures did not record: the endpoint, and the status of a body
#: fixture. OpenAI answers `insufficient_quota` with a 429 (its error-codes guide); a
#: stream's error events come in a 200.
VERCEL = {
    "openai_responses/vercel-ai__openai-error.1.chunks.txt": ("/v1/responses", 200),
    "openai_responses/vercel-ai__openai-error.1.json": ("/v1/responses", 429),
}

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

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def streamed(self) -> bool:
        return "text/event-stream" in self.content_type

    def json(self) -> Any:
        """The response body as JSON (a streamed one is not)."""
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """The JSON data of each event of a streamed response (`[DONE]` left out)."""
        out = []
        for line in self.body.decode().splitlines():
            if line.startswith("data:"):
                data = line.removeprefix("data:").strip()
                if data and data != "[DONE]":
                    out.append(json.loads(data))
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
