"""The models of today in whole runs, on the mock server over real HTTP: the Responses API
in a tool loop, Anthropic's prompt cache priced to the cent, pauses continued, an account's
spent quota and a request every sample would have refused stopping the run with its
finished samples kept."""

from __future__ import annotations

import json

import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import sums
from tests.netservers import answer_each, raw_server, response
from vitals_engine.testing import MockReply
from vitals_engine.testing.brain import answer

pytestmark = pytest.mark.anyio

KEY = "sk-test"
SUMS = sums(10, start=1)
LONG = "Grade the answer against the rubric, point by point. " * 400  # ~4,000 words


def events(path) -> list[dict]:
    log = json.loads(path.read_text())
    return [e for s in log["samples"] for e in s["events"] if e["event"] == "model"]


# -- the Responses API ---------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


async def test_a_reasoning_model_s_tool_loop_on_the_responses_api(server, tmp_path):
    """Each step sends back the reasoning it was given (encrypted: nothing is stored at the
    server), and the log's model events record the effort as Inspect names it."""
    server.reasoning_tokens = 3

    def thinking(request):
        reply = answer(request)
        reply.reasoning = "Adding the numbers."
        return reply

    server.script(thinking)
    chat = ve.chat_openai(
        "o4-mini", base_url=server.base_url(), api_key=KEY, api="responses", reasoning="high"
    )
    chat.register_tool(add)
    sums = [{"input": f"Use add on {i} and {i}.", "target": str(2 * i)} for i in (1, 2, 3)]
    task = ve.Task(sums, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    assert task.metrics["accuracy"] == 1.0
    sent = [r.body for r in server.log]
    assert all(body["store"] is False for body in sent)
    followups = [
        b for b in sent if any(i.get("type") == "function_call_output" for i in b["input"])
    ]
    assert len(followups) == 3
    for body in followups:
        kinds = [item.get("type", "message") for item in body["input"]]
        assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
        assert body["input"][1]["encrypted_content"]
    configs = [e["config"] for e in events(task.log_path)]
    assert configs
    assert all(c == {"reasoning_effort": "high"} for c in configs)
    cost = task.get_cost()
    assert cost["reasoning_tokens"].sum() == 3 * 6


async def test_a_server_without_the_responses_api_stops_the_run_at_the_first_call(tmp_path):
    """A 404 at /responses that is not OpenAI's "no such model": the run stops saying to
    use Chat Completions, and no second request goes out."""
    not_found = response(b'{"detail":"Not Found"}', status="404 Not Found")
    async with raw_server(answer_each(not_found)) as raw:
        base_url = f"http://127.0.0.1:{raw.port}/v1"
        chat = ve.chat_openai("qwen3", base_url=base_url, api_key=KEY, api="responses")
        task = ve.Task(SUMS, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
        with pytest.raises(ve.ConfigError, match='api="chat_completions"'):
            await task.eval_async(max_concurrency=1)
    assert len(raw.requests) == 1


# -- an account's spent quota -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4.1-mini"), ("google", "gemini-2.5-flash")]
)
async def test_a_spent_quota_stops_the_run_keeping_the_finished_samples(
    server, tmp_path, provider, model
):
    """Not retried (the account has no credit: waiting will not help): the run stops at the
    first such answer, its log holds the samples that finished, and resume goes on."""

    def solver(input: str) -> str:
        if input == "What's 4+4?":
            server.fail("quota", times=None)
        return chat.clone().chat(input)

    chat = ve.chat(f"{provider}/{model}", base_url=server.base_url(provider), api_key=KEY)
    task = ve.Task(SUMS, solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.QuotaExhausted, match="quota or billing") as info:
        await task.eval_async(max_concurrency=1, retry=ve.Retry(backoff=0))
    assert not info.value.retryable
    assert server.requests == 4  # three answered, then the quota's answer, not retried
    log = ve.read_log(task.log_path)
    assert log.status == "error"
    assert sorted(log.get_samples()["id"].to_list()) == [1, 2, 3]


# -- the same refusal, sample after sample ----------------------------------------------------


async def test_the_same_client_error_on_every_first_call_stops_the_run(server, tmp_path):
    """An unknown model (or a parameter the model refuses) fails every sample alike: after
    three identical refusals and no success, the run stops instead of sending 1,000."""
    server.fail("404", times=None)
    chat = ve.chat_openai("gpt-nonexistent", base_url=server.base_url(), api_key=KEY)
    task = ve.Task(SUMS * 100, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ProviderError, match="The run stops: this same error ended its first"):
        await task.eval_async(max_concurrency=4)
    assert len(server.log) <= 3 + 4  # three to judge, the rest already in flight


async def test_refusals_after_a_success_fail_only_their_samples(server, tmp_path):
    """Once a call succeeded the requests are sound: later refusals depend on the sample
    (a prompt too long ...), so each fails its own sample and the run goes on."""
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key=KEY)

    def solver(input: str) -> str:
        if input != "What's 1+1?":
            server.fail("400", times=1)
        return chat.clone().chat(input)

    task = ve.Task(SUMS, solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(max_concurrency=1, fail_on_error=False)
    assert task.get_samples()["error"].null_count() == 1
    assert server.requests == len(SUMS)  # each sent once: a 400 is not retried


# -- Anthropic's prompt cache -----------------------------------------------------------------


async def test_a_shared_rubric_is_written_once_then_read_and_priced_so(server, tmp_path):
    """prompt_cache="auto": the long system prompt the samples share is written to the cache
    by the first call (at 1.25x input) and read by the rest (at 0.1x); the cost table, the
    log's usage and the price add up to the cent."""
    server.min_cacheable_tokens = 1000
    ve.set_price(
        "Anthropic", "claude-cache-test", input=3, output=15, cached_input=0.3, cache_write=3.75
    )
    chat = ve.chat_anthropic(
        "claude-cache-test", base_url=server.base_url("anthropic"), api_key=KEY, system_prompt=LONG
    )
    task = ve.Task(SUMS[:4], solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(max_concurrency=1)
    (row,) = task.get_cost().iter_rows(named=True)
    prefix = len(LONG.split())
    assert row["cache_write_tokens"] == prefix
    assert row["cached_input_tokens"] == 3 * prefix
    expected = (
        row["input_tokens"] * 3 + prefix * 3.75 + 3 * prefix * 0.3 + row["output_tokens"] * 15
    ) / 1e6
    assert row["cost"] == pytest.approx(expected, rel=1e-12)
    header = json.loads(task.log_path.read_text())
    usage = header["stats"]["model_usage"]["anthropic/claude-cache-test"]
    assert usage["input_tokens_cache_write"] == prefix
    assert usage["input_tokens_cache_read"] == 3 * prefix
    assert all(e["config"]["cache_prompt"] is True for e in events(task.log_path))


async def test_hour_long_writes_cost_twice_the_input(server):
    server.min_cacheable_tokens = 1000
    ve.set_price(
        "Anthropic",
        "claude-hour-test",
        input=3,
        output=15,
        cached_input=0.3,
        cache_write=3.75,
        cache_write_1h=6,
    )
    chat = ve.chat_anthropic(
        "claude-hour-test",
        base_url=server.base_url("anthropic"),
        api_key=KEY,
        system_prompt=LONG,
        prompt_cache="1h",
    )
    await chat.chat_async("What's 2+2?")
    tokens = chat.last_turn().tokens
    assert tokens.cache_write == tokens.cache_write_1h == len(LONG.split())
    expected = (tokens.input * 3 + tokens.cache_write_1h * 6 + tokens.output * 15) / 1e6
    assert chat.get_cost() == pytest.approx(expected, rel=1e-12)


# -- a paused turn ----------------------------------------------------------------------------


async def test_a_paused_turn_is_continued_and_its_legs_added_up(server, tmp_path):
    """stop_reason "pause_turn" is not the answer: the paused content goes back and the
    model goes on; the reply holds both legs' text and the usage of both."""
    legs = iter(
        [
            MockReply("Searching. ", finish="pause_turn", web_searches=["2+2"], output_tokens=7),
            MockReply("2 + 2 = 4", output_tokens=5),
        ]
    )
    server.script(lambda request: next(legs))
    chat = ve.chat_anthropic("claude-test", base_url=server.base_url("anthropic"), api_key=KEY)
    task = ve.Task(SUMS[1:2], solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    assert task.metrics["accuracy"] == 1.0
    assert task.get_samples()["result"].to_list() == ["Searching. 2 + 2 = 4"]
    first, second = (r.body for r in server.log)
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1]["role"] == "assistant"
    (row,) = task.get_cost().iter_rows(named=True)
    assert row["output_tokens"] == 12
    assert row["requests"] == 1  # one call, in two legs


# -- tiers ----------------------------------------------------------------------------------


async def test_a_flex_call_is_priced_at_flex(server):
    ve.set_price(
        "OpenAI",
        "gpt-tier-test",
        input=1.25,
        output=10,
        tiers={"flex": {"input": 0.625, "output": 5}},
    )
    chat = ve.chat_openai(
        "gpt-tier-test", base_url=server.base_url(), api_key=KEY, api="responses",
        params={"service_tier": "flex"},
    )  # fmt: skip
    await chat.chat_async("What's 2+2?")
    turn = chat.last_turn()
    assert turn.service_tier == "flex"
    tokens = turn.tokens
    assert turn.cost == pytest.approx((tokens.input * 0.625 + tokens.output * 5) / 1e6)
    assert msgspec.json.decode(msgspec.json.encode(server.log[-1].body))["service_tier"] == "flex"
