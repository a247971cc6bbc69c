"""The batch queues' policies (when a batch goes, what a call gets back, how many wait),
with the provider's batch API played by an in-process stand-in and a virtual clock.
The same queues against the mock server's real batch APIs: tests/test_batch_mode.py."""

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.batching.queues import BatchQueues
from vitals_engine.providers.batch_api import BatchApi, BatchOutcome, BatchState, BatchUnsupported
from vitals_engine.providers.openai import OpenAIProvider
from vitals_engine.testing.clock import VirtualClock
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import ContentText, Turn

pytestmark = pytest.mark.anyio


def reply(text):
    return {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


class StandIn(BatchApi):
    """A batch API in this process: each batch ends at its first poll; `script` says
    each request's outcome (by its prompt), by default a reply echoing the prompt
    ("lost": left out of the results; `counting`: its state counts every request ended)."""

    def __init__(self, provider, clock, script=None):
        super().__init__(provider)
        self.clock = clock
        self.script = script or {}
        self.batches = {}  # id -> [(custom_id, prompt)]
        self.submitted = []  # (virtual time, prompts)
        self.unsupported = False
        self.failing_polls = 0
        self.failing_reads = 0
        self.counting = False
        self.reads = []  # virtual times the results were read

    async def submit(self, entries, key=""):
        if self.unsupported:
            raise BatchUnsupported("no batch API here", status=404)
        batch_id = f"b{len(self.batches)}"
        prompts = [e.body["messages"][-1]["content"] for e in entries]
        self.batches[batch_id] = [(e.custom_id, p) for e, p in zip(entries, prompts, strict=True)]
        self.submitted.append((self.clock.now(), prompts))
        return batch_id

    async def state(self, batch_id):
        if self.failing_polls:
            self.failing_polls -= 1
            raise ve.ProviderUnavailable("the status endpoint blinked", status=503)
        answered = len(self.batches[batch_id]) if self.counting else None
        return BatchState(batch_id, "ended", True, results=batch_id, answered=answered)

    async def outcomes(self, state):
        self.reads.append(self.clock.now())
        if self.failing_reads:
            self.failing_reads -= 1
            raise ve.ProviderUnavailable("the results file blinked", status=503)
        found = []
        for custom_id, prompt in self.batches[state.results]:
            plan = self.script.get(prompt)
            if isinstance(plan, list):
                plan = plan.pop(0) if plan else None
            if plan == "lost":
                continue
            if plan in ("expired", "cancelled"):
                found.append(BatchOutcome(custom_id, plan))
            elif isinstance(plan, int):
                error = {"error": {"message": f"HTTP {plan} for {prompt}"}}
                found.append(BatchOutcome(custom_id, "errored", plan, error))
            else:
                found.append(BatchOutcome(custom_id, "succeeded", 200, reply(f"re: {prompt}")))
        return found

    async def cancel(self, batch_id):
        pass


def provider():
    return OpenAIProvider("gpt-test", base_url="http://127.0.0.1:9/v1", api_key="sk-test")


def request(prompt):
    return ChatRequest((Turn("user", (ContentText(prompt),)),))


async def run_calls(options, prompts, script=None, *, setup=None):
    """Each prompt's call through one run's queues (at once): the stand-in, and each
    call's reply text or error, in order."""
    clock = VirtualClock()
    model = provider()
    api = StandIn(model, clock, script)
    if setup is not None:
        setup(api)
    got = {}

    async def one(index, prompt):
        try:
            turn, batch_id = await queues.call(model, request(prompt))
            assert batch_id in api.batches
            got[index] = turn.text
        except ve.VitalsError as exc:
            got[index] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.drive)
        async with (
            BatchQueues(options, clock, apis=lambda _: api) as queues,
            anyio.create_task_group() as calls,
        ):
            for index, prompt in enumerate(prompts):
                calls.start_soon(one, index, prompt)
        tg.cancel_scope.cancel()
    return api, [got[i] for i in range(len(prompts))]


async def test_a_batch_goes_when_full_or_when_its_first_request_has_waited_long_enough():
    prompts = [f"q{i}" for i in range(5)]
    api, replies = await run_calls(ve.Batch(size=2, wait=60, poll=30, max_pending=5), prompts)
    assert replies == [f"re: q{i}" for i in range(5)]
    assert [len(p) for _, p in api.submitted] == [2, 2, 1]
    assert [t for t, _ in api.submitted] == [0, 0, 60]  # the last one waited for more
    assert sorted(p for _, ps in api.submitted for p in ps) == prompts  # each sent once


async def test_a_request_that_expired_or_was_cancelled_goes_in_the_next_batch():
    script = {"q1": ["expired", "cancelled"]}
    api, replies = await run_calls(ve.Batch(size=3, wait=1, poll=1), ["q0", "q1"], script)
    assert replies == ["re: q0", "re: q1"]
    assert [sorted(p) for _, p in api.submitted] == [["q0", "q1"], ["q1"], ["q1"]]


async def test_a_request_the_batch_failed_raises_the_error_a_live_call_would():
    script = {"bad": 400, "busy": 429}
    _, replies = await run_calls(ve.Batch(size=3, wait=1, poll=1), ["ok", "bad", "busy"], script)
    assert replies[0] == "re: ok"
    assert isinstance(replies[1], ve.ProviderError)
    assert not replies[1].retryable
    assert "HTTP 400 for bad" in str(replies[1])
    assert isinstance(replies[2], ve.RateLimitError)


async def test_at_most_max_pending_calls_wait_in_batches_at_once():
    prompts = [f"q{i}" for i in range(10)]
    api, replies = await run_calls(ve.Batch(size=100, wait=5, max_pending=3), prompts)
    assert replies == [f"re: {p}" for p in prompts]
    assert [len(p) for _, p in api.submitted] == [3, 3, 3, 1]


async def test_a_server_without_batches_stops_the_run_with_a_config_error():
    def unsupported(api):
        api.unsupported = True

    api, replies = await run_calls(ve.Batch(size=2, wait=1), ["q0", "q1", "q2"], setup=unsupported)
    assert all(isinstance(r, ve.ConfigError) for r in replies)
    assert "no batch API" in str(replies[0])
    assert "batch" in str(replies[0]).lower()
    assert api.submitted == []


async def test_a_poll_that_fails_is_tried_again_and_loses_nothing():
    def blinking(api):
        api.failing_polls = 2

    api, replies = await run_calls(ve.Batch(size=2, poll=10), ["q0", "q1"], setup=blinking)
    assert replies == ["re: q0", "re: q1"]
    assert len(api.submitted) == 1


async def test_a_request_that_keeps_expiring_goes_in_four_batches_then_fails_for_good():
    """Sent again three times (the README's limit), under one custom id; then a
    `ProviderError` the retry policy does not retry."""
    script = {"q0": ["expired"] * 10}
    api, replies = await run_calls(ve.Batch(size=3, wait=1, poll=1), ["q0"], script)
    assert isinstance(replies[0], ve.ProviderError)
    assert not replies[0].retryable
    assert "expired in 4 batches" in str(replies[0])
    assert [p for _, p in api.submitted] == [["q0"]] * 4
    assert len({cid for batch in api.batches.values() for cid, _ in batch}) == 1


async def test_results_that_cannot_be_fetched_for_a_while_are_fetched_again_not_sent_again():
    def blinking(api):
        api.failing_reads = 2

    api, replies = await run_calls(ve.Batch(size=2, poll=8), ["q0", "q1"], setup=blinking)
    assert replies == ["re: q0", "re: q1"]
    assert len(api.submitted) == 1
    assert [t - api.reads[0] for t in api.reads] == [0, 8, 24]  # after poll, then twice that


async def test_a_result_the_provider_counts_but_left_out_is_asked_for_again():
    def counting(api):
        api.counting = True

    script = {"q1": ["lost", None]}  # missing at the first read only
    api, replies = await run_calls(ve.Batch(size=2, poll=8), ["q0", "q1"], script, setup=counting)
    assert replies == ["re: q0", "re: q1"]
    assert len(api.submitted) == 1
    assert len(api.reads) == 2


async def test_a_result_the_provider_lost_fails_after_four_reads_and_is_not_sent_again():
    """Asked for again after `poll`, twice and four times that; then the call fails with
    an error that is not retried (the request ran and was paid for)."""

    def counting(api):
        api.counting = True

    script = {"q1": "lost"}
    api, replies = await run_calls(ve.Batch(size=2, poll=8), ["q0", "q1"], script, setup=counting)
    assert replies[0] == "re: q0"
    assert isinstance(replies[1], ve.ProviderError)
    assert not replies[1].retryable
    assert "lost its result" in str(replies[1])
    assert len(api.submitted) == 1
    assert [t - api.reads[0] for t in api.reads] == [0, 8, 24, 56]


async def test_a_request_the_provider_does_not_count_as_ended_counts_as_expired():
    """Missing from the results and not in the provider's counts (or no counts): it never
    ran, so it goes in the next batch."""
    script = {"q1": ["lost"]}
    api, replies = await run_calls(ve.Batch(size=2, wait=1, poll=8), ["q0", "q1"], script)
    assert replies == ["re: q0", "re: q1"]
    assert [sorted(p) for _, p in api.submitted] == [["q0", "q1"], ["q1"]]
    assert len(api.reads) == 2  # one per batch: no counts, nothing asked again
