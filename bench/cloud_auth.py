"""What signing costs: CPU per Bedrock request signed with SigV4 against the same request
unsigned, in the same run, against the mock server.

    .venv/bin/python bench/cloud_auth.py            # 2,000 requests a row, 3 rounds
    .venv/bin/python bench/cloud_auth.py --quick    # 400 requests a row, 2 rounds: seconds

The mock server runs in a thread of this process; the client's CPU is the CPU of the
thread that runs the event loop (`time.thread_time()`), so the server's work (it checks
every signature with botocore) is not counted. Every request has the same body. Each
round runs the signed chat, then the same chat signing only its first request and sending
that signature again (the server checks it all the same, so both rows cost the server
alike), alternating, after a warm-up of each.

Printed: CPU per request of each, the difference (what signing adds to a request, with
the rest of the call path around it), and botocore's signature alone (`timeit`). Target:
at most 0.1 ms added per request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import timeit
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
import anyio

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PROMPT = "What's 2+2?"


def _chats(base_url: str) -> tuple[Any, Any]:
    import vitals_engine as ve
    from vitals_engine.providers.bedrock import BedrockProvider

    class Unsigned(BedrockProvider):
        """Signs its first request only, then sends that signature again (the body is the
        same): the server checks the same signature either way, the client signs none."""

        fixed: dict[str, str] | None = None

        async def authorize(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
            if self.fixed is None:
                self.fixed = await super().authorize(url, {}, body)
            return {**headers, **self.fixed}

    signed = ve.chat_aws_bedrock(MODEL, region="us-east-1", base_url=base_url)
    unsigned = ve.chat_aws_bedrock(MODEL, region="us-east-1", base_url=base_url)
    unsigned.provider.__class__ = Unsigned
    return signed, unsigned


async def _run(chat: Any, n: int, concurrency: int) -> float:
    """CPU seconds of this thread per request, for `n` requests `concurrency` at a time."""
    from vitals_engine.transport.pool import transport_scope

    sent = iter(range(n))

    async def worker() -> None:
        for _ in sent:
            await chat.clone().chat_async(PROMPT)

    async with transport_scope(pool_size=concurrency):
        await chat.clone().chat_async(PROMPT)  # warm-up: connections, credentials
        cpu0 = time.thread_time()
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
        return (time.thread_time() - cpu0) / n


def _signature_alone() -> float:
    from vitals_engine.cloud.aws import AwsAuth, AwsKeys

    auth = AwsAuth("us-east-1")
    keys = AwsKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "token" * 60)
    body = b'{"messages":[{"role":"user","content":[{"text":"What is 2+2?"}]}]}'
    host = "https://bedrock-runtime.us-east-1.amazonaws.com"
    url = f"{host}/model/{MODEL.replace(':', '%3A')}/converse"
    number = 5000
    return timeit.timeit(lambda: auth.sign(keys, "POST", url, body), number=number) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 requests a row, 2 rounds")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    n = args.requests or (400 if args.quick else 2000)
    rounds = args.rounds or (2 if args.quick else 3)

    from vitals_engine.testing import MockServer
    from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY

    os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY
    os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_KEY
    with MockServer() as server:
        signed, unsigned = _chats(server.base_url("bedrock"))
        results: dict[str, list[float]] = {"signed": [], "unsigned": []}
        for _ in range(rounds):
            results["signed"].append(anyio.run(_run, signed, n, args.concurrency))
            results["unsigned"].append(anyio.run(_run, unsigned, n, args.concurrency))
    alone = _signature_alone()
    s, u = statistics.median(results["signed"]), statistics.median(results["unsigned"])
    print(f"requests per row: {n}, rounds: {rounds}, concurrency: {args.concurrency}")
    print(f"{'row':<24}{'CPU ms/request (median)':>26}{'rounds':>40}")
    for name, values in results.items():
        rows = ", ".join(f"{v * 1000:.3f}" for v in values)
        print(f"{name:<24}{(s if name == 'signed' else u) * 1000:>26.3f}{rows:>40}")
    print(f"{'added by signing':<24}{(s - u) * 1000:>26.3f}")
    print(f"{'SigV4 signature alone':<24}{alone * 1000:>26.3f}   (botocore SigV4Auth, timeit)")
    verdict = "met" if s - u <= 0.0001 else "NOT met"
    print(f"target <= 0.100 ms added per request: {verdict}")


if __name__ == "__main__":
    main()
