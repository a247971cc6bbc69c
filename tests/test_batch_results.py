"""What a provider says of a finished batch, read as it comes: addresses it gives resolved
against the base URL as RFC 3986 says (the API key going only to the base URL's own
server), and a results file read line by line, its good lines taken and its bad ones
reported."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.recordings.cassettes import Interaction
from tests.replay_server import ReplayServer
from vitals_engine.batching.apis import batch_api
from vitals_engine.providers.anthropic import AnthropicProvider
from vitals_engine.providers.anthropic_batch import AnthropicBatchApi
from vitals_engine.providers.batch_api import BatchEntry
from vitals_engine.providers.google import GeminiProvider
from vitals_engine.providers.openai import OpenAIProvider
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import ContentText, Turn

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


# -- bad lines, over the mock server's batch APIs -----------------------------------------------

FLAWS = ("no-id", "null-id", "numeric-id", "duplicate", "junk", "truncated")


async def ended_batch(server, fmt: str, count: int):
    """`count` requests submitted through `fmt`'s batch API (custom ids r0, r1, ...), polled
    until the batch has ended: the API and the batch's last state."""
    maker = {"openai": OpenAIProvider, "anthropic": AnthropicProvider, "google": GeminiProvider}
    provider = maker[fmt](f"{fmt}-test", base_url=server.base_url(fmt), api_key="k")
    api = batch_api(provider)
    entries = [
        BatchEntry(f"r{i}", provider.body(ChatRequest((Turn("user", (ContentText(f"q{i}"),)),))))
        for i in range(count)
    ]
    batch_id = await api.submit(entries, "vb-test")
    with anyio.fail_after(10):
        while not (state := await api.state(batch_id)).ended:  # noqa: ASYNC110
            await anyio.sleep(0.005)
    return api, state


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
async def test_a_results_file_with_bad_lines_is_read_line_by_line(server, fmt):
    """A line without a custom id, with a null one, with a number, a junk line and a
    truncated last line are each an "unreadable" outcome saying where (under the id it
    names, when it names one of ours); the good lines are read, the duplicate too (the
    queue keeps the first); nothing raises. The provider's counts say all six ran."""
    server.batch_delay = 0
    server.spoil_batch_results(*FLAWS)
    api, state = await ended_batch(server, fmt, 6)
    assert state.answered == 6
    outcomes = await api.outcomes(state)
    read = [(o.custom_id, o.kind) for o in outcomes]
    unreadable = ("", "unreadable")
    assert read == [unreadable] * 3 + [
        ("r3", "succeeded"),
        ("r4", "succeeded"),
        ("r3", "succeeded"),
        unreadable,
        ("r5", "unreadable"),
    ]
    assert all(
        "line" in str(o.body) or "response" in str(o.body)
        for o in outcomes
        if o.kind == "unreadable"
    )


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
async def test_the_provider_counts_results_missing_from_its_files(server, fmt):
    """Two requests left out of the results, still counted: `answered` says six ended
    while only four outcomes are read."""
    server.batch_delay = 0
    server.spoil_batch_results(lost=2)
    api, state = await ended_batch(server, fmt, 6)
    assert state.answered == 6
    assert sorted(o.custom_id for o in await api.outcomes(state)) == ["r2", "r3", "r4", "r5"]


async def test_a_gemini_response_without_its_key_takes_its_place_only_when_all_are_there(server):
    """Gemini's responses come in the order sent: one without its key is the request
    sent in its place, as long as every response is there; with one more (a junk
    response), places say nothing and it cannot be read."""
    server.batch_delay = 0
    server.spoil_batch_results("no-id")
    api, state = await ended_batch(server, "google", 3)
    assert [(o.custom_id, o.kind) for o in await api.outcomes(state)] == [
        ("r0", "succeeded"),
        ("r1", "succeeded"),
        ("r2", "succeeded"),
    ]
    server.spoil_batch_results("no-id", "junk")
    api, state = await ended_batch(server, "google", 3)
    assert [(o.custom_id, o.kind) for o in await api.outcomes(state)] == [
        ("", "unreadable"),
        ("r1", "succeeded"),
        ("r2", "succeeded"),
        ("", "unreadable"),
    ]
