"""Bridge benchmark: what the bridge adds to each model call an agent makes through it.

    .venv/bin/python bench/bridge.py              # N=300 calls a row
    .venv/bin/python bench/agents.py --bridge     # the same, after the agents' rows

An agent (a client process of its own: Python's http.client on one kept-alive
connection, as a CLI's HTTP client would) makes N calls one after another, in Anthropic's
Messages format, non-streamed and streamed:

- to the mock server (`python -m vitals_engine.testing`, latency 100 ms) itself;
- to `ve.bridge(chat)` in an engine process, whose chat (Anthropic's, at the same mock)
  serves each call through the call pipeline.

Printed: the agent's latency per call (p50, p99) to the mock and through the bridge,
beside the engine's own call (`call_model`, no bridge, in the engine process): what the
bridge adds is the difference between the last two. And the engine process's CPU per
call, bridged and its own: the difference is the bridge's own CPU (its HTTP server,
reading the request, writing the reply).

Targets (issue #44): the bridge adds <= 1 ms of CPU and <= 2 ms of latency per call.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)
from throughput import ROOT, mock_server

CLIENT = r"""
import http.client, json, sys, time
host, port, path, key, n, stream = sys.argv[1:7]
body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream == "1",
                   "messages": [{"role": "user", "content": "What's 2+2?"}]})
headers = {"content-type": "application/json", "x-api-key": key,
           "anthropic-version": "2023-06-01"}
connection = http.client.HTTPConnection(host, int(port))
took = []
for _ in range(int(n) + 5):
    started = time.perf_counter()
    connection.request("POST", path, body, headers)
    response = connection.getresponse()
    data = response.read()
    assert response.status == 200, data
    took.append(time.perf_counter() - started)
print(json.dumps(took[5:]))
"""


def _client(port: int, path: str, key: str, n: int, stream: bool) -> list[float]:
    """The agent: `n` calls (after 5 untimed), each call's seconds."""
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, "127.0.0.1", str(port), path, key, str(n), str(int(stream))],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def engine(port: int, n: int, stream: bool) -> dict[str, Any]:
    """In a child process: the engine's own calls (their seconds and CPU), then the bridge
    serving the agent's (the engine's CPU, the agent's seconds)."""
    import anyio

    import vitals_engine as ve
    from vitals_engine.chats.dispatch import call_model
    from vitals_engine.vocab.model_calls import ChatRequest
    from vitals_engine.vocab.turns import Turn

    chat = ve.chat_anthropic(
        "claude-sonnet-4-5",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="x",
        params={"max_tokens": 64},
    )

    async def measure() -> dict[str, Any]:
        request = ChatRequest([Turn.user("What's 2+2?")])
        for _ in range(5):
            await call_model(chat.provider, request)
        own: list[float] = []
        cpu = time.process_time()
        for _ in range(n):
            started = time.perf_counter()
            await call_model(chat.provider, request)
            own.append(time.perf_counter() - started)
        own_cpu = (time.process_time() - cpu) / n
        async with ve.bridge(chat) as address:
            bridge_port = int(address.base_url.rsplit(":", 1)[1])
            cpu = time.process_time()
            took = await anyio.to_thread.run_sync(
                _client, bridge_port, "/v1/messages", address.api_key, n, stream
            )
            bridged_cpu = (time.process_time() - cpu) / (n + 5)
        return {"own_cpu": own_cpu, "bridged_cpu": bridged_cpu, "took": took, "own": own}

    return anyio.run(measure)


def run_child(port: int, n: int, stream: bool) -> dict[str, Any]:
    """`engine()` in a fresh Python process."""
    code = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/bench']; "
        "import bridge; print(json.dumps(bridge.engine(int(sys.argv[2]), int(sys.argv[3]), "
        "sys.argv[4] == '1')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), str(port), str(n), str(int(stream))],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"the bridged run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rows(n: int) -> None:
    """Print the bridge's rows: a non-streamed and a streamed call."""
    print(f"bridge: N={n} calls one after another, mock latency 100 ms, Anthropic's Messages API")
    with mock_server() as port:
        for stream in (False, True):
            direct = _client(port, "/v1/messages", "x", n, stream)
            got = run_child(port, n, stream)
            bridged, own = got["took"], got["own"]
            print(
                f"  {'stream' if stream else 'json  '}  agent's latency p50/p99: to the mock "
                f"{_p(direct, 0.5):.1f}/{_p(direct, 0.99):.1f} ms, through the bridge "
                f"{_p(bridged, 0.5):.1f}/{_p(bridged, 0.99):.1f} ms; the engine's own call "
                f"{_p(own, 0.5):.1f}/{_p(own, 0.99):.1f} ms: the bridge adds "
                f"{_p(bridged, 0.5) - _p(own, 0.5):+.2f} ms at p50, "
                f"{_p(bridged, 0.99) - _p(own, 0.99):+.2f} ms at p99"
            )
            print(
                f"          engine CPU per call: {got['own_cpu'] * 1000:.2f} ms its own call, "
                f"{got['bridged_cpu'] * 1000:.2f} ms bridged: the bridge's own "
                f"{(got['bridged_cpu'] - got['own_cpu']) * 1000:.2f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    rows(parser.parse_args().calls)


if __name__ == "__main__":
    main()
