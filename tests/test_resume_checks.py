"""Resume reuses only what still holds: a logged sample is kept when its input, target,
solver model and scorer match this run's row; ids gone from the dataset leave the log;
a run of another solver, scorer or model is refused unless resumed anyway."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import vitals_engine as ve
from tests import helpers

pytestmark = pytest.mark.anyio

#: The rows of this module's tasks carry their numbers as ids.
sums = functools.partial(helpers.sums, ids=True)


class Asked:
    """A solver answering through `solver_chat` and noting each input it is asked."""

    def __init__(self) -> None:
        self.inputs: list[str] = []

    def solver(self) -> Any:
        asked = self.inputs

        async def answer(input: str, solver_chat: ve.Chat | None = None) -> ve.Solution:
            asked.append(input)
            chat = (solver_chat or ve.chat_mock()).clone()
            return ve.Solution(await chat.chat_async(input), chat=chat)

        return answer


def task_of(data: list[dict[str, Any]], solver: Any, directory: Path, **options: Any) -> ve.Task:
    options.setdefault("scorer", ve.detect_includes())
    return ve.Task(data, solver=solver, dir=directory, name="t", **options)


async def test_changed_rows_run_again_and_ids_gone_leave_the_log(tmp_path: Path) -> None:
    """Same ids, new data: a changed input or target is solved again, an id no longer in
    the dataset is left out of the final log, unchanged rows are not asked again."""
    first = Asked()
    done = task_of(sums(range(1, 7)), first.solver(), tmp_path)
    await done.eval_async()
    await helpers.killed_journal(done, keep=6)

    data = sums([1, 2, 3, 4, 5, 7])
    data[3]["input"] = "What's 40+4?"  # id 4: a new question
    data[3]["target"] = "44"
    data[4]["target"] = "ten"  # id 5: a new target
    again = Asked()
    task = task_of(data, again.solver(), tmp_path)
    await task.eval_async(resume=True)
    assert sorted(again.inputs) == ["What's 40+4?", "What's 5+5?", "What's 7+7?"]
    final = ve.read_log(task.log_path)
    assert final.status == "success"
    by_id = {s.id: s for s in final.samples}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 7]  # 6 is gone from the dataset
    assert by_id[4].input == "What's 40+4?"
    assert by_id[5].target == "ten"
    assert final.get_samples().height == 6


async def test_fewer_epochs_leave_the_later_epochs_out(tmp_path: Path) -> None:
    """A run resumed with fewer epochs keeps only the epochs it runs."""
    asked = Asked()
    done = task_of(sums(range(1, 3)), asked.solver(), tmp_path, epochs=2)
    await done.eval_async()
    await helpers.killed_journal(done, keep=3)
    task = task_of(sums(range(1, 3)), asked.solver(), tmp_path)
    await task.eval_async(resume=True, epochs=1)
    final = ve.read_log(task.log_path)
    assert sorted((s.id, s.epoch) for s in final.samples) == [(1, 1), (2, 1)]


async def test_another_model_is_refused_unless_resumed_anyway(tmp_path: Path) -> None:
    """A run resumed on another model is a ConfigError that says none of its samples would
    be kept and suggests a new run, not resuming anyway (which would buy every reply
    again); with resume_anyway=True every sample of the old model is solved again on the
    new one."""
    asked = Asked()
    done = task_of(sums(range(1, 5)), asked.solver(), tmp_path)
    await done.eval_async(solver_chat=ve.chat_mock(model="old-model"))
    await helpers.killed_journal(done, keep=3)

    task = task_of(sums(range(1, 5)), asked.solver(), tmp_path)
    new_model = ve.chat_mock(model="new-model")
    with pytest.raises(ve.ConfigError, match=r"mock/old-model.*None of its 3") as refused:
        await task.eval_async(resume=True, solver_chat=new_model)
    assert "run without resume" in str(refused.value)
    assert "resume_anyway" not in str(refused.value)
    asked.inputs.clear()
    await task.eval_async(resume=True, resume_anyway=True, solver_chat=new_model)
    assert len(asked.inputs) == 4
    final = ve.read_log(task.log_path)
    assert {s.output.model for s in final.samples} == {"mock/new-model"}


async def test_another_scorer_or_solver_is_refused(tmp_path: Path) -> None:
    """The scorer and the solver of a resumed run are those it was run with."""
    asked = Asked()
    done = task_of(sums(range(1, 4)), asked.solver(), tmp_path)
    await done.eval_async()
    journal = await helpers.killed_journal(done, keep=2)

    scorer = task_of(sums(range(1, 4)), asked.solver(), tmp_path, scorer=ve.detect_exact())
    with pytest.raises(ve.ConfigError, match="the scorer 'detect_includes"):
        await scorer.eval_async(resume=journal)

    async def other(input: str) -> str:
        return input

    solver = task_of(sums(range(1, 4)), other, tmp_path)
    with pytest.raises(ve.ConfigError, match="the solver 'answer'") as refused:
        await solver.eval_async(resume=journal)
    assert "resume_anyway=True" in str(refused.value)
    assert "keeps 2 of 2 finished samples" in str(refused.value)
    assert journal.exists()  # a refused resume touches nothing
