"""Errors that say what to do (#14): keys checked when used, refused connections, unknown
keywords, factories passed uncalled, and what a solver may return."""

from __future__ import annotations

import pytest

import vitals_engine as ve

pytestmark = pytest.mark.anyio

SUMS = [{"input": "What's 1+1?", "target": "2"}, {"input": "What's 2+2?", "target": "4"}]


# -- API keys: checked at the first request and before a run, not when a chat is built ----------


async def test_a_run_without_the_judges_key_stops_before_any_sample(monkeypatch, tmp_path):
    """A judge on chat_openai() without OPENAI_API_KEY: eval() raises AuthenticationError
    naming the variable before the solver sees a single sample; swapping the judge runs."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen = []

    def solver(input):
        seen.append(input)
        return input

    judge = ve.model_graded_qa(scorer_chat=ve.chat_openai())
    task = ve.Task(SUMS, solver=solver, scorer=judge, dir=tmp_path)
    with pytest.raises(ve.AuthenticationError, match="OPENAI_API_KEY"):
        await task.eval_async()
    assert seen == []
    assert task.log_path is None

    await task.eval_async(scorer_chat=ve.chat_mock())
    assert len(seen) == 2
