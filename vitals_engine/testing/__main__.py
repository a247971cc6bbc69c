"""`python -m vitals_engine.testing --port 8765 --latency 0.1`: serve the mock models."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util

from .server import MockServer


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m vitals_engine.testing",
        description="Serve mock OpenAI, Anthropic and Gemini models on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--failure-rate",
        type=float,
        default=0.0,
        help="share of requests answered 429 + Retry-After",
    )
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument("--rpm", type=int, default=None, help="requests per minute before 429")
    args = parser.parse_args()
    server = MockServer(args.port, host=args.host, latency=args.latency, keep_log=False)
    if args.failure_rate:
        server.failure_rate(args.failure_rate, "429", retry_after=args.retry_after)
    if args.rpm:
        server.rpm(args.rpm)
    print(
        f"Mock models at http://{args.host}:{args.port}/v1 (OpenAI, Anthropic) "
        f"and /v1beta (Gemini). Ctrl-C stops.",
        flush=True,
    )
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        runner = uvloop.run
    else:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(server.serve_forever())


if __name__ == "__main__":
    main()
