"""What a provider says of a finished batch, read as it comes: addresses it gives resolved
against the base URL as RFC 3986 says (the API key going only to the base URL's own
server), and a results file read line by line, its good lines taken and its bad ones
reported."""

from __future__ import annotations

import json

import pytest

from tests.recordings.cassettes import Interaction
from tests.replay_server import ReplayServer
from vitals_engine.providers.anthropic import AnthropicProvider
from vitals_engine.providers.anthropic_batch import AnthropicBatchApi

pytestmark = pytest.mark.anyio

KEY = "sk-ant-batch-secret"
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "4"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 1},
}


def answer(path: str, body: object, status: int = 200, jsonl: bool = False) -> Interaction:
    data = (
        b"".join(json.dumps(line).encode() + b"\n" for line in body)  # type: ignore[attr-defined]
        if jsonl
        else json.dumps(body).encode()
    )
    return Interaction("GET", path, "", None, status, {"content-type": "application/json"}, data)


def ended(results_url: str) -> Interaction:
    batch = {
        "id": "msgbatch_1",
        "type": "message_batch",
        "processing_status": "ended",
        "request_counts": {"succeeded": 1, "errored": 0, "expired": 0, "canceled": 0},
        "results_url": results_url,
    }
    return answer("/v1/messages/batches/msgbatch_1", batch)


def succeeded(custom_id: str) -> dict:
    return {"custom_id": custom_id, "result": {"type": "succeeded", "message": MESSAGE}}


@pytest.fixture
def api():
    with ReplayServer() as server:
        provider = AnthropicProvider("claude-test", base_url=server.url("/v1"), api_key=KEY)
        yield AnthropicBatchApi(provider), server


@pytest.mark.parametrize(
    "results_url",
    [
        "/v1/messages/batches/msgbatch_1/results",  # root-relative, as some servers answer
        "messages/batches/msgbatch_1/results",  # relative to the base URL's path
        "{base}/messages/batches/msgbatch_1/results",  # whole
    ],
)
async def test_a_results_url_is_resolved_against_the_base_url(api, results_url):
    batches, server = api
    results_url = results_url.format(base=server.url("/v1"))
    results = answer("/v1/messages/batches/msgbatch_1/results", [succeeded("s1")], jsonl=True)
    server.serve(ended(results_url), results)
    state = await batches.state("msgbatch_1")
    (outcome,) = await batches.outcomes(state)
    assert (outcome.custom_id, outcome.kind) == ("s1", "succeeded")
    assert [r.path for r in server.received] == [
        "/v1/messages/batches/msgbatch_1",
        "/v1/messages/batches/msgbatch_1/results",
    ]
    assert all(r.headers["x-api-key"] == KEY for r in server.received)


async def test_the_key_goes_only_to_the_base_url_s_own_server(api):
    """A results file on another host (a storage bucket's signed URL, say) is fetched
    without the API key."""
    batches, server = api
    with ReplayServer() as storage:
        elsewhere = storage.url("/bucket/results.jsonl")
        server.serve(ended(elsewhere))
        storage.serve(answer("/bucket/results.jsonl", [succeeded("s1")], jsonl=True))
        state = await batches.state("msgbatch_1")
        (outcome,) = await batches.outcomes(state)
    assert outcome.kind == "succeeded"
    (fetched,) = storage.received
    assert "x-api-key" not in fetched.headers
    assert KEY not in json.dumps(fetched.headers)
    assert server.received[0].headers["x-api-key"] == KEY
