"""A budget for a run: `eval(cost_budget=, token_budget=)`, and `chat_*(cost_budget=)` per model
(`eval(model_cost_budget=)` for every model).

The run starts no sample that could take the spending past the budget, lets the
samples at work finish, writes its log with status "cancelled" and the reason, and
raises `BudgetExceeded`; `resume=True` continues it. Runs go against the local mock
server over HTTP, whose replies to prompts of one length cost the same each time.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import openai
from vitals_engine.pacing.budget import WARMUP, Budget
from vitals_engine.vocab.turns import TokenUsage
from vitals_engine.vocab.usage import UsageLedger

MODEL = "gpt-4.1-mini"
JUDGE = "gpt-4.1"


def sums(n: int) -> list[dict[str, str]]:
    """Prompts of one length, so every sample costs the same."""
    return [{"input": f"What's {i:04d}+1?", "target": str(i + 1)} for i in range(n)]


def sums_task(server, tmp_path, n: int = 200, model: str = MODEL, **options) -> ve.Task:
    return ve.Task(
        sums(n), ve.generate(openai(server, model, **options)), ve.detect_includes(), dir=tmp_path
    )


def per_sample(task: ve.Task, column: str = "cost") -> float:
    """What one sample of a uniform run spent (dollars, or tokens)."""
    frame = task.get_cost()
    samples = task.get_samples().height
    if column == "tokens":
        return (frame["input_tokens"].sum() + frame["output_tokens"].sum()) / samples
    return frame[column].sum() / samples


async def stopped(task: ve.Task, **options) -> ve.BudgetExceeded:
    with pytest.raises(ve.BudgetExceeded) as raised:
        await task.eval_async(**options)
    return raised.value


# -- the run stops at its budget -------------------------------------------------------


@pytest.mark.anyio
async def test_a_run_stops_within_one_samples_cost_of_its_budget(server, tmp_path):
    probe = sums_task(server, tmp_path, 10)
    await probe.eval_async()
    one = per_sample(probe)
    assert one > 0
    budget = 40.5 * one
    server.reset()
    task = sums_task(server, tmp_path)
    error = await stopped(task, cost_budget=budget)
    spent = task.get_cost()["cost"].sum()
    assert budget - one <= spent <= budget
    assert server.requests == task.get_samples().height == 40
    assert error.spent == pytest.approx(spent)
    assert error.reason == f"budget reached: ${spent:.4f} of ${budget:.4f}"
    assert str(task.log_path) in str(error)
    assert "resume=True" in str(error)


@pytest.mark.anyio
async def test_the_log_of_a_stopped_run_is_complete_and_says_why(server, tmp_path):
    task = sums_task(server, tmp_path)
    error = await stopped(task, cost_budget=0.0005)
    log = ve.read_log(task.log_path)
    assert log.status == "cancelled"
    assert error.reason in log.header.error.message
    finished = task.get_samples()
    assert len(log.samples) == finished.height > 0
    assert all(sample.error is None and sample.scores for sample in log.samples)
    assert log.get_cost()["cost"].sum() == pytest.approx(task.get_cost()["cost"].sum())
    assert task.metrics == {"accuracy": 1.0}  # over the samples that finished


@pytest.mark.anyio
async def test_resume_continues_a_stopped_run_with_a_budget_of_its_own(server, tmp_path):
    task = sums_task(server, tmp_path, 60)
    await stopped(task, cost_budget=0.0005)
    first = server.requests
    assert 0 < first < 60
    await task.eval_async(resume=True, cost_budget=1.0)
    assert server.requests == 60  # each sample sent once over the two runs
    log = ve.read_log(task.log_path)
    assert log.status == "success"
    assert sorted(s.id for s in log.samples) == list(range(1, 61))


@pytest.mark.anyio
async def test_a_token_budget_stops_the_run_within_one_samples_tokens(server, tmp_path):
    probe = sums_task(server, tmp_path, 10)
    await probe.eval_async()
    one = per_sample(probe, "tokens")
    budget = int(30.5 * one)
    server.reset()
    task = sums_task(server, tmp_path)
    error = await stopped(task, token_budget=budget)
    frame = task.get_cost()
    used = frame["input_tokens"].sum() + frame["output_tokens"].sum()
    assert budget - one <= used <= budget
    assert error.reason == f"token budget reached: {used:,} of {budget:,} tokens"


@pytest.mark.anyio
async def test_a_run_within_its_budget_is_not_stopped(server, tmp_path):
    task = sums_task(server, tmp_path, 20)
    await task.eval_async(cost_budget=100.0, token_budget=10**9)
    assert ve.read_log(task.log_path).status == "success"
    assert server.requests == 20


@pytest.mark.anyio
async def test_calls_answered_by_the_cache_spend_nothing_of_the_budget(server, tmp_path):
    cache = ve.Cache(dir=tmp_path / "cache")
    warm = sums_task(server, tmp_path, 50)
    await warm.eval_async(cache=cache)
    spent = warm.get_cost()["cost"].sum()
    again = sums_task(server, tmp_path, 50)
    await again.eval_async(cache=cache, cost_budget=spent / 10)
    assert server.requests == 50  # the first run's only
    assert ve.read_log(again.log_path).status == "success"


@pytest.mark.anyio
async def test_before_any_sample_has_finished_only_a_few_are_at_work(server, tmp_path):
    server.latency = 0.02
    chat = openai(server, MODEL)
    at_work = finished = most_before_first = 0

    async def solver(input: str) -> str:
        nonlocal at_work, finished, most_before_first
        at_work += 1
        if finished == 0:
            most_before_first = max(most_before_first, at_work)
        reply = await chat.clone().chat_async(input)
        at_work -= 1
        finished += 1
        return reply

    task = ve.Task(sums(40), solver, ve.detect_includes(), dir=tmp_path)
    await task.eval_async(cost_budget=10.0, max_concurrency=32)
    assert 1 <= most_before_first <= WARMUP
    assert server.peak_in_flight > WARMUP  # once costs were known, the run went wide


# -- budgets per model ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_models_own_budget_stops_the_run_when_that_model_would_pass_it(server, tmp_path):
    judge = openai(server, JUDGE, cost_budget=0.004)
    task = ve.Task(
        sums(200),
        ve.generate(openai(server, MODEL)),
        ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path,
    )
    error = await stopped(task)
    cost = task.get_cost()
    judged = cost.filter(cost["role"] == "scorer")["cost"].sum()
    one = judged / task.get_samples().height
    assert 0.004 - one <= judged <= 0.004
    assert error.reason.startswith(f"budget of openai/{JUDGE} reached: $")
    assert task.get_samples().height < 200


@pytest.mark.anyio
async def test_a_model_cost_budget_for_the_run_caps_each_model(server, tmp_path):
    task = sums_task(server, tmp_path)
    error = await stopped(task, model_cost_budget=0.0005)
    assert error.reason.startswith(f"budget of openai/{MODEL} reached: $")
    assert task.get_cost()["cost"].sum() <= 0.0005


# -- unknown prices and bad budgets ------------------------------------------------------


@pytest.mark.anyio
async def test_a_model_of_unknown_price_under_a_budget_is_refused_before_any_request(
    server, tmp_path
):
    task = sums_task(server, tmp_path, 5, model="house-model-7")
    with pytest.raises(ve.ConfigError, match=r"house-model-7.*ve\.set_price"):
        await task.eval_async(cost_budget=1.0)
    assert server.requests == 0
    assert list(tmp_path.glob("*.json")) == []  # refused before the run began


@pytest.mark.anyio
async def test_a_hidden_model_of_unknown_price_is_refused_at_its_first_call(server, tmp_path):
    chat = openai(server, "house-model-7")

    async def solver(input: str) -> str:
        return await chat.clone().chat_async(input)

    task = ve.Task(sums(5), solver, ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match="house-model-7"):
        await task.eval_async(cost_budget=1.0)
    assert server.requests == 0


@pytest.mark.anyio
async def test_a_token_budget_needs_no_price(server, tmp_path):
    task = sums_task(server, tmp_path, 5, model="house-model-7")
    await task.eval_async(token_budget=10**6)
    assert server.requests == 5


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("cost_budget", -1),
        ("cost_budget", 0),
        ("cost_budget", True),
        ("cost_budget", "5"),
        ("token_budget", 1.5),
        ("token_budget", 0),
        ("model_cost_budget", -2),
    ],
)
def test_a_budget_that_is_not_a_positive_amount_is_a_config_error(tmp_path, option, value):
    task = ve.Task(sums(1), ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match=option):
        task.eval(**{option: value})


def test_a_budget_with_a_ray_backend_is_a_config_error(tmp_path):
    task = ve.Task(sums(1), ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match="backend"):
        task.eval(cost_budget=1.0, backend=ve.Ray())


def test_a_models_cost_budget_must_be_positive():
    with pytest.raises(ve.ConfigError, match="cost_budget"):
        ve.chat_mock(cost_budget=-2)


# -- the projection ------------------------------------------------------------------------


class _AtWork(msgspec.Struct):
    usage: UsageLedger


def _ledger(cost: float, tokens: int = 0) -> UsageLedger:
    ledger = UsageLedger()
    ledger.record("solver", "OpenAI", MODEL, TokenUsage(tokens, 0), cost)
    return ledger


def test_the_projection_counts_what_samples_at_work_will_still_spend():
    budget = Budget(cost=10.0)
    # 8 finished at $1 each; two at work have spent $0.5 each: $9 spent, $1 still to come
    at_work = [_AtWork(_ledger(0.5)), _AtWork(_ledger(0.5))]
    assert not budget.admits(_ledger(9.0), 8, at_work)  # 9 + 1 + 1 > 10
    assert budget.reason(_ledger(9.0)) == "budget reached: $9.00 of $10.00"
    assert Budget(cost=11.0).admits(_ledger(9.0), 8, at_work)  # 9 + 1 + 1 <= 11


def test_before_anything_finished_a_sample_is_guessed_from_its_prompt():
    budget = Budget(cost=1.0, first_guess=(0.3, 100))
    assert budget.admits(UsageLedger(), 0, [_AtWork(UsageLedger())] * 2)  # 3 x 0.3
    assert not budget.admits(UsageLedger(), 0, [_AtWork(UsageLedger())] * 3)  # 4 x 0.3
    assert budget.warming(0, WARMUP)
    assert not budget.warming(1, WARMUP)
    assert not Budget().warming(0, 100)  # no budget, no warm-up


def test_samples_the_cache_answered_say_nothing_of_what_a_sent_one_costs():
    budget = Budget(cost=1.5)
    spent = _ledger(1.0)  # six finished from the cache (free); one at work sent a $1 call
    assert not budget.admits(spent, 6, [_AtWork(_ledger(1.0))], paid=0)  # 1 + 1 > 1.5
    assert budget.admits(UsageLedger(), 6, [_AtWork(UsageLedger())], paid=0)  # all cached
    assert budget.warming(0, WARMUP)  # a few at work until a sent sample finishes
    # once one sent sample finished: $1 a sample, whatever the cache answered besides
    assert not Budget(cost=1.9).admits(spent, 7, [], paid=1)


def test_cached_calls_are_not_counted():
    ledger = UsageLedger()
    ledger.record("solver", "OpenAI", MODEL, TokenUsage(1000, 1000), 0.0, cached=True)
    assert ledger.spent() == (0.0, 0)
    assert Budget(tokens=10).admits(ledger, 5, [])


@pytest.mark.anyio
async def test_concurrent_runs_each_keep_their_own_budget(server, tmp_path):
    async def both() -> list[BaseException | None]:
        outcomes: list[BaseException | None] = [None, None]

        async def one(i: int, budget: float) -> None:
            task = tasks[i] = sums_task(server, tmp_path / str(i), 60)
            try:
                await task.eval_async(cost_budget=budget)
            except ve.BudgetExceeded as exc:
                outcomes[i] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0, 0.0001)
            tg.start_soon(one, 1, 100.0)
        return outcomes

    tasks: list[ve.Task] = [None, None]  # type: ignore[list-item]
    tight, loose = await both()
    assert isinstance(tight, ve.BudgetExceeded)
    assert tasks[0].get_cost()["cost"].sum() <= 0.0001  # the other run's spending is not its
    assert loose is None
    assert tasks[1].get_samples().height == 60


@pytest.mark.anyio
async def test_a_stream_its_budget_stops_ends_with_budget_exceeded(server, tmp_path):
    task = sums_task(server, tmp_path)
    seen = 0

    async def consume() -> None:
        nonlocal seen
        async with task.stream_async(cost_budget=0.0005) as samples:
            async for _ in samples:
                seen += 1

    with pytest.raises(ve.BudgetExceeded):
        await consume()
    assert 0 < seen == server.requests < 200
    assert ve.read_log(task.log_path).status == "cancelled"


# -- the command line ----------------------------------------------------------------------


def _task_file(server, tmp_path, n: int) -> str:
    path = tmp_path / "spend.py"
    path.write_text(
        "import vitals_engine as ve\n"
        f"chat = ve.chat_openai({MODEL!r}, base_url={server.base_url()!r}, api_key='k')\n"
        "from tests.test_budget import sums\n"
        f"data = sums({n})\n"
        "task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes())\n"
    )
    return str(path)


def test_the_command_line_stops_at_its_cost_budget_and_resumes(server, tmp_path, capsys):
    """`--cost-budget` stops the run (exit 1) and `--resume` with a larger one finishes it."""
    from vitals_engine.cli import main

    task_file = _task_file(server, tmp_path, 200)
    logs = ["--log-dir", str(tmp_path / "logs"), "--no-progress"]
    assert main(["eval", task_file, "--cost-budget", "0.0005", *logs]) == 1
    err = capsys.readouterr().err
    assert "budget reached: $" in err
    stopped_at = server.requests
    assert 0 < stopped_at < 200
    assert main(["eval", task_file, "--resume", "--cost-budget", "10", *logs]) == 0
    assert server.requests == 200


def test_the_old_budget_flag_still_works_and_says_so(server, tmp_path, capsys):
    """`--max-cost`, the old spelling, is `--cost-budget` with a warning naming it."""
    from vitals_engine.cli import main

    task_file = _task_file(server, tmp_path, 200)
    logs = ["--log-dir", str(tmp_path / "logs"), "--no-progress"]
    assert main(["eval", task_file, "--max-cost", "0.0005", *logs]) == 1
    err = capsys.readouterr().err
    assert "--max-cost is deprecated" in err
    assert "use --cost-budget" in err
    assert "budget reached: $" in err


def test_the_command_line_caches_replies_in_the_directory_given(server, tmp_path, capsys):
    from vitals_engine.cli import main

    task_file = _task_file(server, tmp_path, 5)
    options = ["--cache", str(tmp_path / "cache"), "--log-dir", str(tmp_path), "--no-progress"]
    assert main(["eval", task_file, *options]) == 0
    assert main(["eval", task_file, *options]) == 0
    assert server.requests == 5
    assert (tmp_path / "cache" / "replies.sqlite").exists()
    capsys.readouterr()


@pytest.mark.parametrize("flag", ["--cost-budget", "--token-budget", "--max-cost", "--max-tokens"])
def test_a_budget_flag_that_is_not_positive_is_a_usage_error(tmp_path, flag, capsys):
    from vitals_engine.cli import main

    assert main(["eval", str(tmp_path / "none.py"), flag, "0"]) == 2
    assert flag in capsys.readouterr().err


@pytest.mark.anyio
async def test_samples_the_cache_answered_do_not_lower_what_a_sample_is_expected_to_cost(
    server, tmp_path
):
    """Six samples answered by the cache, then paid ones: what one costs is learnt from
    the paid samples only, so the run does not pass its budget of 1.5 samples."""
    cache = ve.Cache(dir=tmp_path / "cache")
    warm = sums_task(server, tmp_path / "warm", 6)
    await warm.eval_async(cache=cache)
    one = per_sample(warm)
    server.reset()
    task = sums_task(server, tmp_path, 12)
    await stopped(task, cache=cache, cost_budget=1.5 * one, max_concurrency=1)
    assert server.requests == 1
    assert task.get_cost()["cost"].sum() == pytest.approx(one)


@pytest.mark.anyio
async def test_a_resumed_run_keeps_the_cached_calls_of_the_run_it_resumes_apart(server, tmp_path):
    cache = ve.Cache(dir=tmp_path / "cache")
    warm = sums_task(server, tmp_path / "warm", 6)
    await warm.eval_async(cache=cache)
    one = per_sample(warm)
    task = sums_task(server, tmp_path, 12)
    await stopped(task, cache=cache, cost_budget=1.05 * one, max_concurrency=1)
    assert 6 < server.requests < 12  # the first six came from the cache, then a few went
    await task.eval_async(resume=True, cache=cache, cost_budget=1.0)
    cost = task.get_cost()
    assert cost.select("cached", "requests").rows() == [(False, 6), (True, 6)]
    assert cost.filter(cost["cached"])["cost"].sum() == 0
    assert ve.read_log(task.log_path).get_cost().equals(cost)
