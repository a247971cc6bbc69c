"""What authenticating each request costs on the cloud platforms: CPU per request signed
(Bedrock, SigV4) or carrying a refreshed token (Azure OpenAI with Microsoft Entra ID, Vertex
AI), against the same request authenticated once and for all, in the same run, against the
mock server.

    .venv/bin/python bench/cloud_auth.py            # 2,000 requests a row, 3 rounds
    .venv/bin/python bench/cloud_auth.py --quick    # 400 requests a row, 2 rounds: seconds

The mock server runs in a thread of this process; the client's CPU is the CPU of the
thread that runs the event loop (`time.thread_time()`), so the server's work (it checks
every signature with botocore, every token against those it issued) is not counted. Every
request has the same body. Each platform has two rows, run alternately after a warm-up of
each:

- Bedrock: signed afresh for each request, against a chat that signs its first request
  only and sends that signature again (the server checks it all the same);
- Azure OpenAI: an Entra ID token held and refreshed (`credential=`), against the
  api-key, which sits in the request's fixed headers;
- Vertex AI: its Application Default Credentials' token (held and refreshed), against a
  chat that takes its first request's headers and sends them again.

Printed: CPU per request of each row, the difference (what authenticating adds to a
request, with the rest of the call path around it), and botocore's signature alone
(`timeit`). Target: at most 0.1 ms added per request.
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

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "gemini-2.5-flash"
PROMPT = "What's 2+2?"


def _reusing(chat: Any) -> Any:
    """`chat` with its provider authenticating its first request only, then sending those
    headers again."""
    own = chat.provider.authorize
    fixed: dict[str, str] = {}

    async def authorize(url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        if not fixed:
            fixed.update(await own(url, {}, body))
        return {**headers, **fixed}

    chat.provider.authorize = authorize
    return chat


def _bedrock(server: Any) -> tuple[Any, Any]:
    import vitals_engine as ve
    from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY

    os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY
    os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_KEY
    url = server.base_url("bedrock")
    signed = ve.chat_aws_bedrock(BEDROCK_MODEL, region="us-east-1", base_url=url)
    unsigned = ve.chat_aws_bedrock(BEDROCK_MODEL, region="us-east-1", base_url=url)
    return signed, _reusing(unsigned)


class _MockEntraCredential:
    """An azure.core TokenCredential whose tokens the mock server issues."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from vitals_engine.testing.formats.azure_openai import AZURE

        token, expires = AZURE.issue()
        return type("AccessToken", (), {"token": token, "expires_on": int(expires)})()


def _azure(server: Any) -> tuple[Any, Any]:
    import vitals_engine as ve
    from vitals_engine.testing.formats.azure_openai import API_KEY

    url = server.base_url("azure")
    entra = ve.chat_azure_openai(url, deployment="gpt-5-mini", credential=_MockEntraCredential())
    keyed = ve.chat_azure_openai(url, deployment="gpt-5-mini", api_key=API_KEY)
    return entra, keyed


class _MockGoogleCredentials:
    """google-auth credentials whose tokens the mock server issues (as the metadata server)."""

    def __init__(self, server: Any) -> None:
        self._vertex = server.wire_format("vertex")
        self.token: str | None = None
        self.expiry: Any = None
        self.quota_project_id = None
        self.project_id = "bench-project"

    def refresh(self, request: Any) -> None:
        import datetime

        answer = self._vertex.issue("metadata")
        self.token = answer["access_token"]
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        self.expiry = now + datetime.timedelta(seconds=answer["expires_in"])


def _vertex(server: Any) -> tuple[Any, Any]:
    import vitals_engine as ve

    def chat() -> Any:
        return ve.chat_google_vertex(
            VERTEX_MODEL,
            project="bench-project",
            location="us-central1",
            credentials=_MockGoogleCredentials(server),
            base_url=server.base_url("vertex"),
        )

    return chat(), _reusing(chat())


PLATFORMS = {"Bedrock": _bedrock, "Azure OpenAI": _azure, "Vertex AI": _vertex}
#: Each platform's two rows: the one that authenticates each request, and the other.
ROWS = {
    "Bedrock": ("signed (SigV4)", "signature reused"),
    "Azure OpenAI": ("Entra ID token", "api-key"),
    "Vertex AI": ("ADC token", "headers reused"),
}


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
    url = f"{host}/model/{BEDROCK_MODEL.replace(':', '%3A')}/converse"
    number = 5000
    return timeit.timeit(lambda: auth.sign(keys, "POST", url, body), number=number) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 requests a row, 2 rounds")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--platform", choices=sorted(PLATFORMS), action="append")
    args = parser.parse_args()
    n = args.requests or (400 if args.quick else 2000)
    rounds = args.rounds or (2 if args.quick else 3)

    from vitals_engine.testing import MockServer

    print(f"requests per row: {n}, rounds: {rounds}, concurrency: {args.concurrency}")
    print(f"{'row':<38}{'CPU ms/request (median)':>26}{'rounds':>30}")
    worst = 0.0
    with MockServer(keep_log=False) as server:
        for platform in args.platform or PLATFORMS:
            authed, plain = PLATFORMS[platform](server)
            results: list[list[float]] = [[], []]
            for _ in range(rounds):
                results[0].append(anyio.run(_run, authed, n, args.concurrency))
                results[1].append(anyio.run(_run, plain, n, args.concurrency))
            medians = [statistics.median(values) for values in results]
            for name, values, median in zip(ROWS[platform], results, medians, strict=True):
                rows = ", ".join(f"{v * 1000:.3f}" for v in values)
                print(f"{platform + ': ' + name:<38}{median * 1000:>26.3f}{rows:>30}")
            added = medians[0] - medians[1]
            worst = max(worst, added)
            print(f"{platform + ': added':<38}{added * 1000:>26.3f}")
    alone = _signature_alone()
    print(f"{'SigV4 signature alone':<38}{alone * 1000:>26.3f}   (botocore SigV4Auth, timeit)")
    verdict = "met" if worst <= 0.0001 else "NOT met"
    print(
        f"target <= 0.100 ms added per request: {verdict} (the most added: {worst * 1000:.3f} ms)"
    )


if __name__ == "__main__":
    main()
