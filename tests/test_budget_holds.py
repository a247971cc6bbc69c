"""A budget that holds: each model call holds room in the budget before it is sent, and
the run stays within its budget however the costs of its calls rise.

A call claims its prompt's tokens (guessed from the request) and its output allowance
(`max_tokens`, else the dearest reply of its model so far) at the model's price; it goes
when that fits beside what is spent and what the calls under way hold, waits while it
does not and a call under way may free room, and is refused (not sent) when none can:
the run then stops as a budget stops it. The runs go against the local mock server at
`max_concurrency=100`, its replies `LATENCY` seconds late so that many calls are under
way at once, their costs scripted (`server.script`) to rise after the first few replies,
and spend at most their budget plus one call's cost (before each call held room, they
spent 50 to 200 calls' cost over it).
"""

from __future__ import annotations

import itertools

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import all_blocked, openai, sums
from vitals_engine.pacing.budget import Budget
from vitals_engine.pricing.cost import cost_of
from vitals_engine.pricing.table import batch_share
from vitals_engine.providers.mock import count_tokens
from vitals_engine.testing import MockReply
from vitals_engine.vocab.turns import TokenUsage

MODEL = "gpt-4.1-mini"
JUDGE = "gpt-4.1"
#: Output tokens of a cheap reply and of a dear one (the dear one: its max_tokens).
CHEAP, DEAR = 5, 1000
#: The replies that come cheap before the dear ones.
FIRST_CHEAP = 20
#: Words of the long prompts (the mock counts a prompt's tokens as its words).
LONG = 400
#: Seconds the mock server takes to answer: calls under way pile up as they would live.
LATENCY = 0.05


def dollars(input: int, output: int, model: str = MODEL) -> float:
    cost = cost_of("OpenAI", model, TokenUsage(input=input, output=output))
    assert cost is not None
    return cost


def rising(model: str | None = None, text: str = "ok", dear: int = DEAR):
    """A script: the first `FIRST_CHEAP` replies (of `model`, or of any) say `CHEAP` output
    tokens, every later one `dear`; other models' replies say "ok"."""
    count = itertools.count()

    def script(request):
        if model is not None and request.model != model:
            return MockReply(text="ok")
        return MockReply(text=text, output_tokens=CHEAP if next(count) < FIRST_CHEAP else dear)

    return script


def long_sums(n: int) -> list[dict[str, str]]:
    """`sums(n)`, each prompt after `LONG` words (about 1.5 tokens each as the budget
    guesses, 1 as the mock counts)."""
    return sums(n, "lorem " * LONG)


async def stopped(task: ve.Task, **options) -> ve.BudgetExceeded:
    with pytest.raises(ve.BudgetExceeded) as raised:
        await task.eval_async(**options)
    return raised.value


def spent(task: ve.Task) -> float:
    return task.get_cost()["cost"].sum()


# -- runs whose calls grow dearer ----------------------------------------------------------


@pytest.mark.anyio
async def test_replies_that_grow_dearer_under_max_tokens_stay_within_the_budget(server, tmp_path):
    """20 cheap replies, then dear ones as long as `max_tokens` lets them be: each call
    holds its `max_tokens`, so 100 at once cannot pass the budget."""
    server.latency = LATENCY
    server.script(rising())
    one = dollars(2, DEAR)
    budget = 25 * one
    chat = openai(server, MODEL, params={"max_tokens": DEAR})
    task = ve.Task(sums(300), ve.generate(chat), ve.detect_includes(), dir=tmp_path)
    error = await stopped(task, cost_budget=budget, max_concurrency=100)
    assert budget - one < spent(task) <= budget + one
    assert error.spent == pytest.approx(spent(task))
    assert task.get_samples().height < 300
    log = ve.read_log(task.log_path)
    assert log.status == "cancelled"
    assert log.get_cost()["cost"].sum() == pytest.approx(spent(task))


@pytest.mark.anyio
async def test_prompts_that_grow_longer_stay_within_the_budget(server, tmp_path):
    """20 short prompts, then long ones, no `max_tokens`: each call holds its prompt's
    guessed tokens and the dearest output its model gave so far."""
    server.latency = LATENCY
    server.script(lambda request: MockReply(text="ok"))
    rows = sums(FIRST_CHEAP) + long_sums(280)
    one = dollars(LONG + 2, 1)
    budget = 25 * one
    task = ve.Task(rows, ve.generate(openai(server, MODEL)), ve.detect_includes(), dir=tmp_path)
    await stopped(task, cost_budget=budget, max_concurrency=100)
    assert budget - 2 * one < spent(task) <= budget + one  # the guess is 1.5 x the prompt


@pytest.mark.anyio
async def test_a_judge_whose_replies_grow_dearer_stays_within_the_budget(server, tmp_path):
    """The judge's replies grow dear after 20: its calls hold their `max_tokens`, and the
    samples whose judge call no longer fits stop unfinished (not logged)."""
    server.latency = LATENCY
    server.script(rising(JUDGE, text="GRADE: C", dear=600))
    judge = openai(server, JUDGE, params={"max_tokens": 600})
    task = ve.Task(
        sums(300),
        ve.generate(openai(server, MODEL)),
        ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    budget = 0.1
    await stopped(task, cost_budget=budget, max_concurrency=100)
    prompts = [count_tokens(r.request.all_text) for r in server.log if r.model == JUDGE]
    one = dollars(max(prompts), 600, JUDGE)  # the dearest judge call
    assert budget - 2 * one < spent(task) <= budget + one
    log = ve.read_log(task.log_path)
    assert all(sample.scores for sample in log.samples)  # every sample logged was judged
    assert len(log.samples) == task.get_samples().height


@pytest.mark.anyio
async def test_retries_after_timeouts_stay_within_the_budget(server, tmp_path):
    """The first 10 requests hang and time out: each is charged its prompt, and its retry
    takes its room anew, so the run with rising costs still stays within the budget."""
    server.latency = LATENCY
    server.script(rising())
    server.fail("hang", times=10)
    one = dollars(LONG + 2, DEAR)
    budget = 25 * one
    chat = openai(server, MODEL, params={"max_tokens": DEAR})
    task = ve.Task(long_sums(300), ve.generate(chat), ve.detect_includes(), dir=tmp_path)
    retry = ve.Retry(timeout=0.3, max_attempts=4, backoff=0)
    await stopped(task, cost_budget=budget, max_concurrency=100, retry=retry)
    cost = task.get_cost()
    assert cost["timed_out"].sum() == 10
    assert budget - one < spent(task) <= budget + one


@pytest.mark.anyio
async def test_batch_mode_with_replies_that_grow_dearer_stays_within_the_budget(server, tmp_path):
    """In batch mode each call holds its `max_tokens` at the batch price while its batch
    runs."""
    server.batch_delay = 0.02
    server.script(rising())
    share = batch_share("OpenAI")
    assert share is not None
    one = share * dollars(2, DEAR)
    budget = 25 * one
    chat = openai(server, MODEL, params={"max_tokens": DEAR})
    task = ve.Task(sums(300), ve.generate(chat), ve.detect_includes(), dir=tmp_path)
    batch = ve.Batch(size=50, wait=0.05, poll=0.02)
    await stopped(task, cost_budget=budget, max_concurrency=100, batch=batch)
    cost = task.get_cost()
    assert cost["batch"].all()
    assert budget - one < spent(task) <= budget + one


@pytest.mark.anyio
async def test_a_token_budget_holds_each_calls_max_tokens(server, tmp_path):
    """A budget in tokens holds the same way: a call's prompt and `max_tokens`."""
    server.latency = LATENCY
    server.script(rising())
    one = 2 + DEAR
    budget = 25 * one
    chat = openai(server, MODEL, params={"max_tokens": DEAR})
    task = ve.Task(sums(300), ve.generate(chat), ve.detect_includes(), dir=tmp_path)
    error = await stopped(task, token_budget=budget, max_concurrency=100)
    frame = task.get_cost()
    used = frame["input_tokens"].sum() + frame["output_tokens"].sum()
    assert budget - one < used <= budget + one
    assert error.reason.startswith(f"token budget reached: {used:,} of {budget:,} tokens")


@pytest.mark.anyio
async def test_a_sample_whose_call_did_not_fit_is_run_again_on_resume(server, tmp_path):
    """The retry after a timeout would pass the budget: it is not sent, the sample is not
    logged, and a resumed run with more budget runs it."""
    server.fail("hang", times=1)
    rows = long_sums(1)
    one = dollars(LONG + 2, 1)
    task = ve.Task(rows, ve.generate(openai(server, MODEL)), ve.detect_includes(), dir=tmp_path)
    retry = ve.Retry(timeout=0.3, max_attempts=3, backoff=0)
    error = await stopped(task, cost_budget=1.5 * one, retry=retry)
    assert server.requests == 1  # the attempt that timed out, charged; no retry
    assert task.get_cost()["timed_out"].to_list() == [1]
    assert error.reason.startswith("budget reached: $")
    log = ve.read_log(task.log_path)
    assert (log.status, len(log.samples)) == ("cancelled", 0)
    await task.eval_async(resume=True, cost_budget=1.0, retry=retry)
    assert server.requests == 2
    assert ve.read_log(task.log_path).status == "success"


# -- the holds alone ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_call_that_does_not_fit_waits_until_one_under_way_frees_room():
    one = dollars(1000, 1000)
    budget = Budget(cost=2.5 * one)
    first = await budget.hold("OpenAI", MODEL, 1000, 1000)
    await budget.hold("OpenAI", MODEL, 1000, 1000)
    held = []
    async with anyio.create_task_group() as tg:

        async def third() -> None:
            held.append(await budget.hold("OpenAI", MODEL, 1000, 1000))

        tg.start_soon(third)
        await all_blocked()
        assert (held, budget.waiting) == ([], 1)
        assert first is not None
        budget.ledger.record("solver", "OpenAI", MODEL, TokenUsage(1000, 10), dollars(1000, 10))
        first.settle(TokenUsage(1000, 10))  # it cost less than it held: room for the third
    assert len(held) == 1
    assert budget.refused is None


@pytest.mark.anyio
async def test_a_call_that_cannot_fit_with_nothing_under_way_is_refused():
    one = dollars(1000, 1000)
    budget = Budget(cost=1.5 * one)
    first = await budget.hold("OpenAI", MODEL, 1000, 1000)
    assert first is not None
    refused: list[ve.BudgetExceeded] = []

    async def second() -> None:
        with pytest.raises(ve.BudgetExceeded) as raised:
            await budget.hold("OpenAI", MODEL, 1000, 1000)
        refused.append(raised.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await all_blocked()
        assert budget.waiting == 1  # the first may yet cost less than it holds
        budget.ledger.record("solver", "OpenAI", MODEL, TokenUsage(1000, 990), one)
        first.settle(TokenUsage(1000, 990))  # it did not: nothing under way, no room
    (error,) = refused
    assert "it was not sent" in str(error)
    assert not budget.admits(budget.ledger, 1, [], 1)  # no more samples start
    assert budget.reason(budget.ledger) == (
        f"budget reached: ${one:.4f} of ${1.5 * one:.4f}; the next call could cost up to "
        f"${one:.4f}, more than is left"
    )


@pytest.mark.anyio
async def test_a_models_first_call_without_max_tokens_goes_alone():
    budget = Budget(cost=1.0)
    first = await budget.hold("OpenAI", MODEL, 100, None)
    assert first is not None
    held = []
    async with anyio.create_task_group() as tg:

        async def second() -> None:
            held.append(await budget.hold("OpenAI", MODEL, 100, None))

        tg.start_soon(second)
        await all_blocked()
        assert held == []  # nothing is known of the model's output yet
        first.settle(TokenUsage(100, 700))
    assert budget.outputs == {("OpenAI", MODEL): 700}
    (cap,) = budget.caps
    assert cap.held == pytest.approx(dollars(100, 700))  # the second holds 700 output


@pytest.mark.anyio
async def test_a_calls_room_is_taken_anew_after_an_attempt_that_timed_out():
    one = dollars(1000, 0)
    budget = Budget(tokens=2500)
    hold = await budget.hold("OpenAI", MODEL, 1000, 100)
    assert hold is not None
    budget.ledger.record("solver", "OpenAI", MODEL, TokenUsage(1000), one, timed_out=True)
    await hold.again()  # 1000 spent + 1100 held <= 2500
    budget.ledger.record("solver", "OpenAI", MODEL, TokenUsage(1000), one, timed_out=True)
    with pytest.raises(ve.BudgetExceeded):
        await hold.again()  # 2000 spent + 1100 > 2500, and nothing else is under way
    hold.settle()
    (cap,) = budget.caps
    assert (cap.held, cap.holders) == (0, 0)


@pytest.mark.anyio
async def test_a_models_own_cap_holds_only_its_calls():
    budget = Budget()
    budget.on_call("OpenAI", JUDGE, 0.01)
    assert await budget.hold("OpenAI", MODEL, 1000, 1000) is None
    assert await budget.hold("OpenAI", JUDGE, 1000, 1000) is not None


@pytest.mark.anyio
async def test_a_dearer_reply_raises_what_the_models_calls_under_way_hold():
    """Calls without `max_tokens` hold the dearest output seen; when a reply is dearer,
    those still under way hold as much, and a new call waits for room."""
    budget = Budget(cost=3.5 * dollars(100, 1000))
    probe = await budget.hold("OpenAI", MODEL, 100, None)
    assert probe is not None
    probe.settle(TokenUsage(100, 5))
    first = await budget.hold("OpenAI", MODEL, 100, None)
    second = await budget.hold("OpenAI", MODEL, 100, None)
    assert first is not None
    assert second is not None
    (cap,) = budget.caps
    assert cap.held == pytest.approx(2 * dollars(100, 5))
    budget.ledger.record("solver", "OpenAI", MODEL, TokenUsage(100, 1000), dollars(100, 1000))
    first.settle(TokenUsage(100, 1000))
    assert cap.held == pytest.approx(dollars(100, 1000))  # the second, as dear as the first
    held = []
    async with anyio.create_task_group() as tg:

        async def third() -> None:
            held.append(await budget.hold("OpenAI", MODEL, 100, None))

        async def fourth() -> None:
            held.append(await budget.hold("OpenAI", MODEL, 100, None))

        tg.start_soon(third)
        await all_blocked()
        assert len(held) == 1  # 1 spent + 1 held + 1 <= 3.5
        tg.start_soon(fourth)
        await all_blocked()
        assert (len(held), budget.waiting) == (1, 1)  # 1 spent + 2 held + 1 > 3.5
        second.settle(TokenUsage(100, 5))
    assert len(held) == 2
