"""`python -m vitals_engine.testing --port 8765 --latency 0.1`: serve the mock models.

`--stream-delay 0.05` spaces the events of streamed replies, to watch them arrive."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import signal
from collections.abc import Callable
from pathlib import Path

import msgspec

from .brain import MockReply, MockRequest
from .server import MockServer
from .trajectories import trajectory


async def _serve(server: MockServer) -> None:
    """Serve until SIGTERM or Ctrl-C."""
    loop = asyncio.get_running_loop()
    serving = asyncio.ensure_future(server.serve_forever())
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, serving.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await serving


def agent_script(steps: int, submit: str = "done") -> Callable[[MockRequest], MockReply]:
    """The `--agent-steps` model: `steps` bash calls (`echo step k`), then `submit(answer)`.

    Each command goes in the argument the request's `bash` tool declares (its first
    required parameter): `cmd` for `ve.bash()`, `command` for Inspect's `bash()`; `cmd`
    when the request offers no `bash` tool. So agents of either kind run the commands.
    """
    scripts: dict[str, Callable[[MockRequest], MockReply]] = {}

    def reply(request: MockRequest) -> MockReply:
        key = _command_argument(request)
        if key not in scripts:
            calls = [("bash", {key: f"echo step {k}"}) for k in range(1, steps + 1)]
            scripts[key] = trajectory(*calls, submit=submit)
        return scripts[key](request)

    return reply


def _command_argument(request: MockRequest) -> str:
    """The argument the request's `bash` tool takes its command in (`cmd` if none says)."""
    for tool in request.tools:
        if tool.get("name") == "bash":
            parameters = tool.get("parameters") or {}
            named = parameters.get("required") or list(parameters.get("properties") or {})
            if named:
                return str(named[0])
    return "cmd"


def _write_record(server: MockServer, path: Path) -> None:
    rows = [
        {
            "at": r.at,
            "answered": r.answered,
            "model": r.model,
            "prompt": r.request.prompt,
            "outcome": r.outcome,
        }
        for r in server.log
    ]
    path.write_bytes(msgspec.json.encode(rows))


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m vitals_engine.testing",
        description="Serve mock OpenAI (Chat Completions and Responses), Anthropic and Gemini "
        "models on 127.0.0.1.",
        epilog="Replies stream (server-sent events, as each API streams them) when a request "
        'asks: OpenAI and Anthropic with "stream": true in the body, Gemini with '
        ":streamGenerateContent?alt=sse.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--stream-delay",
        type=float,
        default=0.0,
        help="seconds between two events of a streamed reply",
    )
    parser.add_argument(
        "--failure-rate",
        type=float,
        default=0.0,
        help="share of requests answered 429 + Retry-After",
    )
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument(
        "--batch-delay",
        type=float,
        default=None,
        help="seconds from a batch's submission until it has ended (batch APIs)",
    )
    parser.add_argument("--rpm", type=int, default=None, help="requests per minute before 429")
    parser.add_argument(
        "--agent-steps",
        type=int,
        default=None,
        metavar="N",
        help="answer as an agent: N bash steps (`echo step k`, in the argument the "
        "request's bash tool declares: cmd, or command for Inspect's), then "
        'submit("done")',
    )
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="on exit, write every request (arrival, answer time, model, prompt, outcome) "
        "to this JSON file",
    )
    args = parser.parse_args()
    server = MockServer(
        args.port,
        host=args.host,
        latency=args.latency,
        keep_log=args.record is not None,
        stream_delay=args.stream_delay,
    )
    if args.failure_rate:
        server.failure_rate(args.failure_rate, "429", retry_after=args.retry_after)
    if args.rpm:
        server.rpm(args.rpm)
    if args.batch_delay is not None:
        server.batch_delay = args.batch_delay
    if args.agent_steps is not None:
        server.script(agent_script(args.agent_steps))
    print(
        f"Mock models at http://{args.host}:{args.port}/v1 (OpenAI chat/completions and "
        f"responses, Anthropic) "
        f"and /v1beta (Gemini). Ctrl-C or SIGTERM stops.",
        flush=True,
    )
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        runner = uvloop.run
    else:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(_serve(server))
    if args.record is not None:
        _write_record(server, args.record)


if __name__ == "__main__":
    main()
