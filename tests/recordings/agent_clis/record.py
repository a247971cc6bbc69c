"""Recording server for coding-agent CLIs (Claude Code, Codex CLI).

Test tooling, kept next to the recordings it produced. It listens on
127.0.0.1, writes every request it receives to ``OUT/NNN-METHOD-path.json``
as ``{method, path, query, headers, body}`` (Authorization / x-api-key /
cookie values replaced by "<redacted>", body parsed from JSON with key order
kept, or kept as text / base64 when it is not JSON), and answers with scripted
replies that walk the CLI through one tool call:

* Anthropic Messages (``POST .../messages``): if the request offers tools and
  the conversation does not yet hold a ``tool_result``, reply with a
  ``tool_use`` of the shell tool (``Bash``) running ``cat notes.txt``;
  otherwise reply with the text ``The answer is flag{x}.`` and ``end_turn``.
  Streams (SSE) when the request says ``stream: true``.
* OpenAI Responses (``POST .../responses``): same script, with a
  ``function_call`` (or ``custom_tool_call`` / ``local_shell_call``, whichever
  the offered shell tool needs) and then an assistant ``message``.

The replies sent are saved under ``OUT/replies/`` with the same numbering.

Usage::

    python record.py --out DIR [--port 0] [--port-file FILE] [--scenario bash|toolsearch]

``--scenario toolsearch`` (Anthropic only) first calls ``ToolSearch`` with
``select:WebSearch,WebFetch`` and then goes on as ``bash``.

The bound port is printed on stdout as ``PORT <n>`` (and written to
``--port-file``). Stop it with SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

REDACT = {"authorization", "x-api-key", "proxy-authorization", "cookie"}
COMMAND = "cat notes.txt"
ANSWER = "The answer is flag{x}."


class Recorder:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "replies").mkdir(exist_ok=True)
        self.n = 0

    def name(self, method: str, path: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", path.strip("/").replace("/", "-")) or "root"
        return f"{self.n:03d}-{method}-{slug}"

    async def record(self, request: web.Request) -> tuple[str, Any]:
        self.n += 1
        raw = await request.read()
        headers = [
            [k, "<redacted>" if k.lower() in REDACT else v] for k, v in request.headers.items()
        ]
        body: Any = None
        body_kind = "empty"
        if raw:
            data = raw
            if request.headers.get("content-encoding", "").lower() == "zstd":
                try:
                    import zstandard

                    data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
                except Exception:  # pragma: no cover - recorded as base64 below
                    data = raw
            try:
                body = json.loads(data)
                body_kind = "json"
            except (UnicodeDecodeError, json.JSONDecodeError):
                try:
                    body = data.decode("utf-8")
                    body_kind = "text"
                except UnicodeDecodeError:
                    body = base64.b64encode(raw).decode()
                    body_kind = "base64"
        entry = {
            "method": request.method,
            "path": request.path,
            "query": [[k, v] for k, v in request.query.items()],
            "headers": headers,
            "body": body,
        }
        if body_kind not in ("json", "empty"):
            entry["body_encoding"] = body_kind
        name = self.name(request.method, request.path)
        (self.out / f"{name}.json").write_text(
            json.dumps(entry, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(f"{time.strftime('%H:%M:%S')} {name} {len(raw)}B", file=sys.stderr, flush=True)
        return name, body

    def save_reply(self, name: str, status: int, content_type: str, text: str) -> None:
        ext = "sse" if content_type.startswith("text/event-stream") else "json"
        (self.out / "replies" / f"{name}.{ext}").write_text(
            f"# status {status} {content_type}\n{text}", encoding="utf-8"
        )


def sse(events: list[tuple[str, dict]]) -> str:
    return "".join(f"event: {ev}\ndata: {json.dumps(data)}\n\n" for ev, data in events)


# --------------------------------------------------------------------------- Anthropic


SCENARIO = "bash"  # or "toolsearch": ToolSearch "select:WebSearch,WebFetch" first, then Bash


def anthropic_tool_call(body: dict) -> dict | None:
    """The tool_use block to send, or None when the final answer is due."""
    tools = body.get("tools") or []
    results = sum(
        1
        for msg in body.get("messages") or []
        if isinstance(msg.get("content"), list)
        for b in msg["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    if SCENARIO == "toolsearch" and tools:
        if results == 0:
            return {
                "name": "ToolSearch",
                "input": {"query": "select:WebSearch,WebFetch", "max_results": 5},
            }
        results -= 1
    if results:
        return None
    for tool in tools:
        if tool.get("name") == "Bash":
            return {"name": "Bash", "input": {"command": COMMAND, "description": "Read notes.txt"}}
    for tool in tools:
        props = (tool.get("input_schema") or {}).get("properties") or {}
        if "command" in props:
            return {"name": tool["name"], "input": {"command": COMMAND}}
    return None


def anthropic_reply(body: dict) -> tuple[str, str]:
    model = body.get("model", "claude-test")
    msg_id = "msg_" + uuid.uuid4().hex[:24]
    call = anthropic_tool_call(body)
    usage_in = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    if call is not None:
        tool_id = "toolu_" + uuid.uuid4().hex[:24]
        block_start = {"type": "tool_use", "id": tool_id, "name": call["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call["input"])}
        final_block = {**block_start, "input": call["input"]}
        stop = "tool_use"
    else:
        block_start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": ANSWER}
        final_block = {"type": "text", "text": ANSWER}
        stop = "end_turn"
    if not body.get("stream"):
        return "application/json", json.dumps(
            {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [final_block],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {**usage_in, "output_tokens": 20},
            }
        )
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage_in,
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block_start},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "text/event-stream", sse(events)


# --------------------------------------------------------------------------- Responses


def responses_tool_call(body: dict) -> dict | None:
    """The output item for the shell call, or None when the final answer is due."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            return None
    tools = body.get("tools") or []
    call_id = "call_" + uuid.uuid4().hex[:24]
    # Prefer a function tool whose schema takes a command.
    preferred = ["exec_command", "shell_command", "shell"]
    fn_tools = {t.get("name"): t for t in tools if t.get("type") == "function"}
    for name in preferred + list(fn_tools):
        tool = fn_tools.get(name)
        if not tool:
            continue
        props = (tool.get("parameters") or {}).get("properties") or {}
        if "cmd" in props:
            args: dict = {"cmd": COMMAND}
        elif "command" in props:
            if props["command"].get("type") == "array":
                args = {"command": ["bash", "-lc", COMMAND]}
            else:
                args = {"command": COMMAND}
        else:
            continue
        return {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:24],
            "status": "completed",
            "name": name,
            "arguments": json.dumps(args),
            "call_id": call_id,
        }
    if any(t.get("type") == "local_shell" for t in tools):
        return {
            "type": "local_shell_call",
            "id": "lsh_" + uuid.uuid4().hex[:24],
            "call_id": call_id,
            "status": "completed",
            "action": {"type": "exec", "command": ["bash", "-lc", COMMAND], "env": {}},
        }
    return None


def responses_reply(body: dict) -> tuple[str, str]:
    model = body.get("model", "gpt-test")
    resp_id = "resp_" + uuid.uuid4().hex[:24]
    item = responses_tool_call(body)
    if item is None:
        item = {
            "type": "message",
            "id": "msg_" + uuid.uuid4().hex[:24],
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
        }
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }
    base = {
        "id": resp_id,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "output": [],
        "usage": None,
    }
    full = {**base, "status": "completed", "output": [item], "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps(full)
    seq = iter(range(1000))
    events: list[tuple[str, dict]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress"},
            },
        ),
        (
            "response.in_progress",
            {
                "type": "response.in_progress",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress"},
            },
        ),
    ]
    if item["type"] == "message":
        start = {**item, "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item": start,
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "sequence_number": next(seq),
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": ANSWER,
                },
            ),
            (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "sequence_number": next(seq),
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "text": ANSWER,
                },
            ),
            (
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "sequence_number": next(seq),
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "part": {**part, "text": ANSWER},
                },
            ),
        ]
    else:
        start = {**item, "status": "in_progress"}
        if item["type"] == "function_call":
            start["arguments"] = ""
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item": start,
                },
            )
        )
        if item["type"] == "function_call":
            events += [
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": 0,
                        "delta": item["arguments"],
                    },
                ),
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": 0,
                        "arguments": item["arguments"],
                    },
                ),
            ]
    events += [
        (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            },
        ),
        (
            "response.completed",
            {"type": "response.completed", "sequence_number": next(seq), "response": full},
        ),
    ]
    return "text/event-stream", sse(events)


# --------------------------------------------------------------------------- server


def build_app(rec: Recorder) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        name, body = await rec.record(request)
        path = request.path.rstrip("/")
        status, ctype, text = 200, "application/json", "{}"
        if request.method == "POST" and path.endswith("/messages/count_tokens"):
            text = json.dumps({"input_tokens": 100})
        elif request.method == "POST" and path.endswith("/messages") and isinstance(body, dict):
            ctype, text = anthropic_reply(body)
        elif request.method == "POST" and path.endswith("/responses") and isinstance(body, dict):
            ctype, text = responses_reply(body)
        elif request.method == "GET" and path.endswith("/models"):
            # Anthropic-style list and Codex-style {"models": [...]} in one.
            text = json.dumps(
                {
                    "data": [],
                    "has_more": False,
                    "first_id": None,
                    "last_id": None,
                    "object": "list",
                    "models": [],
                }
            )
        elif (
            request.method in ("HEAD", "GET") and path in ("", "/v1")
        ) or request.method == "POST":
            text = "{}"
        else:
            status = 404
            text = json.dumps(
                {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": f"not found: {request.path}"},
                }
            )
        rec.save_reply(name, status, ctype, text)
        if ctype == "text/event-stream":
            resp = web.StreamResponse(
                status=status,
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            )
            await resp.prepare(request)
            for chunk in text.split("\n\n"):
                if chunk:
                    await resp.write((chunk + "\n\n").encode())
            await resp.write_eof()
            return resp
        return web.Response(
            status=status,
            text=text,
            content_type=ctype,
            headers={"request-id": "req_" + uuid.uuid4().hex[:24]},
        )

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", type=Path)
    ap.add_argument("--scenario", choices=["bash", "toolsearch"], default="bash")
    args = ap.parse_args()
    global SCENARIO
    SCENARIO = args.scenario
    runner = web.AppRunner(build_app(Recorder(args.out)), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    if args.port_file:
        args.port_file.write_text(str(port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
