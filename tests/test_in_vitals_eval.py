"""`IN_VITALS_EVAL=true` while a run solves and scores, and as it was once runs end."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.engine.eval_env import IN_VITALS_EVAL, in_vitals_eval

DATA = [{"input": "a", "target": "a"}, {"input": "b", "target": "b"}]


def _seeing(seen: list[tuple[str, str | None]]) -> ve.Task:
    """A task whose solver and scorer note what IN_VITALS_EVAL says when they run."""

    def solver(input: str) -> str:
        seen.append(("solver", os.environ.get(IN_VITALS_EVAL)))
        return input

    def scorer(sample: ve.SolvedSample) -> str:
        seen.append(("scorer", os.environ.get(IN_VITALS_EVAL)))
        return "C"

    return ve.Task(DATA, solver, scorer, name="seeing")


def test_solver_and_scorer_see_it_and_it_is_unset_after(tmp_path, monkeypatch):
    """A solver and a scorer see IN_VITALS_EVAL=true; after the run it is unset again."""
    monkeypatch.delenv(IN_VITALS_EVAL, raising=False)
    seen: list[tuple[str, str | None]] = []
    task = _seeing(seen)
    task.dir = tmp_path
    task.eval(progress=False)
    assert sorted(seen) == [("scorer", "true")] * 2 + [("solver", "true")] * 2
    assert IN_VITALS_EVAL not in os.environ


def test_a_value_set_before_is_restored(tmp_path, monkeypatch):
    """A value the environment had before the run is put back when it ends."""
    monkeypatch.setenv(IN_VITALS_EVAL, "no")
    seen: list[tuple[str, str | None]] = []
    task = _seeing(seen)
    task.dir = tmp_path
    task.eval(progress=False)
    assert {value for _, value in seen} == {"true"}
    assert os.environ[IN_VITALS_EVAL] == "no"


def test_restored_when_the_run_fails(tmp_path, monkeypatch):
    """A run that a broken solver contract ends still restores the environment."""
    monkeypatch.delenv(IN_VITALS_EVAL, raising=False)

    def solver(input: str) -> str:
        raise ve.SolverError("broken on purpose")

    task = ve.Task(DATA, solver, ve.detect_includes(), name="broken", dir=tmp_path)
    with pytest.raises(ve.SolverError, match="broken on purpose"):
        task.eval(progress=False)
    assert IN_VITALS_EVAL not in os.environ


def test_scoring_alone_sets_it(tmp_path, monkeypatch):
    """`task.score()` after `task.solve()` sets it too: the scorer sees it."""
    monkeypatch.delenv(IN_VITALS_EVAL, raising=False)
    seen: list[tuple[str, str | None]] = []
    task = _seeing(seen)
    task.dir = tmp_path
    task.solve(progress=False)
    seen.clear()
    task.score(progress=False)
    assert seen == [("scorer", "true")] * 2
    assert IN_VITALS_EVAL not in os.environ


def test_nested_scopes_restore_only_when_the_last_ends(monkeypatch):
    """Overlapping scopes (two runs, in two threads) leave it set until the last ends."""
    monkeypatch.setenv(IN_VITALS_EVAL, "before")
    first_in, second_out = threading.Event(), threading.Event()
    during: list[str | None] = []

    def other() -> None:
        with in_vitals_eval():
            first_in.set()
            second_out.wait(5)
            during.append(os.environ.get(IN_VITALS_EVAL))

    thread = threading.Thread(target=other)
    thread.start()
    assert first_in.wait(5)
    with in_vitals_eval():
        assert os.environ[IN_VITALS_EVAL] == "true"
    assert os.environ[IN_VITALS_EVAL] == "true"  # the other is still going
    second_out.set()
    thread.join(5)
    assert during == ["true"]
    assert os.environ[IN_VITALS_EVAL] == "before"


@pytest.mark.anyio
async def test_two_runs_at_once_in_one_loop(tmp_path, monkeypatch):
    """Two runs in one event loop: the first to end leaves it set for the other, whose
    solver still sees it; when both have ended it is unset."""
    monkeypatch.delenv(IN_VITALS_EVAL, raising=False)
    started, release = anyio.Event(), anyio.Event()
    late: list[str | None] = []

    async def waiting(input: str) -> str:
        started.set()
        await release.wait()
        late.append(os.environ.get(IN_VITALS_EVAL))
        return input

    slow = ve.Task(DATA[:1], waiting, ve.detect_includes(), name="slow", dir=tmp_path)
    quick = ve.Task(DATA, lambda input: input, ve.detect_includes(), name="quick", dir=tmp_path)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: slow.eval_async(progress=False))
            await started.wait()
            await quick.eval_async(progress=False)
            assert os.environ.get(IN_VITALS_EVAL) == "true"
            release.set()
    assert late == ["true"]
    assert IN_VITALS_EVAL not in os.environ
