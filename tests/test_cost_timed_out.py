"""Attempts that time out are counted: a provider bills a request it processed even when
the client gave up waiting, so an attempt that timed out after its request went out is
charged its input tokens (estimated from the request: about 4 characters a token) at
the model's input price. The cost table counts such attempts in `timed_out` (not in
`requests`, the replies), a log gives the same table back, and the summary says so.
Attempts time out against the local mock server's hanging requests (`fail("hang")`).
"""

from __future__ import annotations

import pytest

import vitals_engine as ve
from tests.helpers import openai, sums
from vitals_engine.pricing.cost import cost_of
from vitals_engine.report import format_cost
from vitals_engine.vocab.turns import TokenUsage

MODEL = "gpt-4.1-mini"
#: "lorem " x 400 and "What's 0+0?": 2,411 characters, guessed as 602 tokens; the mock
#: counts its 402 words.
PROMPT = "lorem " * 400
GUESSED, REAL = 602, 402


def dollars(input: int, output: int = 0) -> float:
    cost = cost_of("OpenAI", MODEL, TokenUsage(input=input, output=output))
    assert cost is not None
    return cost


def one_sample(server, tmp_path) -> ve.Task:
    chat = openai(server, MODEL)
    return ve.Task(sums(1, PROMPT), ve.generate(chat), ve.detect_includes(), dir=tmp_path)


@pytest.mark.anyio
async def test_an_attempt_that_timed_out_is_charged_its_input(server, tmp_path):
    """One attempt hangs past its timeout, the retry is answered: the row has one reply
    and one timed-out attempt, whose guessed input is in its tokens and cost."""
    server.fail("hang", times=1)
    task = one_sample(server, tmp_path)
    await task.eval_async(retry=ve.Retry(timeout=0.3, max_attempts=2, backoff=0))
    assert server.requests == 2
    (row,) = task.get_cost().to_dicts()
    output = row["output_tokens"]
    assert (row["requests"], row["timed_out"]) == (1, 1)
    assert row["input_tokens"] == REAL + GUESSED
    assert row["cost"] == pytest.approx(dollars(REAL, output) + dollars(GUESSED))
    assert ve.read_log(task.log_path).get_cost().equals(task.get_cost())
    assert "1 attempt timed out after the request was sent" in format_cost(task)


@pytest.mark.anyio
async def test_a_call_given_up_after_timeouts_is_charged_each_attempt(server, tmp_path):
    """Every attempt hangs: the sample fails, and the cost table still has what was sent."""
    server.fail("hang", times=2)
    task = one_sample(server, tmp_path)
    retry = ve.Retry(timeout=0.3, max_attempts=2, backoff=0)
    await task.eval_async(retry=retry, fail_on_error=False)
    assert task.get_samples()["error"].to_list()[0] is not None
    (row,) = task.get_cost().to_dicts()
    assert (row["requests"], row["timed_out"]) == (0, 2)
    assert (row["input_tokens"], row["output_tokens"]) == (2 * GUESSED, 0)
    assert row["cost"] == pytest.approx(2 * dollars(GUESSED))
    assert ve.read_log(task.log_path).get_cost().equals(task.get_cost())


@pytest.mark.anyio
async def test_a_budget_counts_attempts_that_timed_out(server, tmp_path):
    """The attempt that timed out is in what the budget counts: with it, the retry would
    pass the budget, so the retry is not sent."""
    server.fail("hang", times=1)
    task = one_sample(server, tmp_path)
    retry = ve.Retry(timeout=0.3, max_attempts=3, backoff=0)
    budget = dollars(GUESSED) * 1.5
    with pytest.raises(ve.BudgetExceeded) as raised:
        await task.eval_async(retry=retry, cost_budget=budget)
    assert server.requests == 1
    assert raised.value.spent == pytest.approx(dollars(GUESSED))
    assert task.get_cost()["cost"].sum() == pytest.approx(dollars(GUESSED))
