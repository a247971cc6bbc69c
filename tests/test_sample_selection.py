"""Running part of a dataset: `limit=`, `sample_ids=`, `shuffle=` and `seed=` choose the
samples once, before the run, the same way in any process; the log's header records
them as Inspect does, and a resumed run with the same options continues the same ones."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import vitals_engine as ve
from tests import helpers
from vitals_engine.cli import main
from vitals_engine.dataset import load_dataset, select_rows

sums = functools.partial(helpers.sums, ids=True)


class Asked:
    """A solver noting the id of each sample it is asked."""

    def __init__(self) -> None:
        self.ids: list[Any] = []

    def __call__(self, input: str, sample: ve.Sample) -> str:
        self.ids.append(sample.id)
        return input


def task_of(directory: Path, n: int = 20, solver: Any = None) -> ve.Task:
    return ve.Task(
        sums(range(1, n + 1)),
        solver=solver or Asked(),
        scorer=ve.detect_includes(),
        dir=directory,
        name="pick",
    )


def header(task: ve.Task) -> dict[str, Any]:
    assert task.log_path is not None
    return json.loads(Path(task.log_path).read_text())["eval"]


def ids_of(task: ve.Task) -> list[Any]:
    return task.get_samples()["id"].to_list()


# -- choosing rows ---------------------------------------------------------------------


def test_the_same_seed_picks_the_same_rows_another_seed_another_order():
    """Shuffling is `random.Random(seed)`: one seed, one order; `limit` takes its head."""
    rows = load_dataset(sums(range(1, 51)))

    def pick(seed: int, limit: int | None = None) -> list[Any]:
        return [r.id for r in select_rows(rows, limit=limit, shuffle=True, seed=seed)]

    assert pick(1) == pick(1)
    assert pick(1) != pick(2)
    assert sorted(pick(1)) == list(range(1, 51))
    assert pick(1, limit=10) == pick(1)[:10]
    assert [r.id for r in select_rows(rows, limit=3)] == [1, 2, 3]


def test_the_order_is_the_same_in_another_process():
    """No hash() in the shuffle: a process with another hash seed picks the same rows."""
    code = textwrap.dedent(
        """
        from vitals_engine.dataset import load_dataset, select_rows
        rows = load_dataset([{"id": f"r{i}", "input": "q", "target": "a"} for i in range(40)])
        print([r.id for r in select_rows(rows, limit=8, shuffle=True, seed=7)])
        """
    )
    here = load_dataset([{"id": f"r{i}", "input": "q", "target": "a"} for i in range(40)])
    expected = str([r.id for r in select_rows(here, limit=8, shuffle=True, seed=7)])
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
        )
        assert out.stdout.strip() == expected


def test_sample_ids_pick_those_rows_in_the_datasets_order():
    """Ids given as text match int ids of the same digits (as the command line gives them)."""
    rows = load_dataset(sums(range(1, 11)))
    assert [r.id for r in select_rows(rows, sample_ids=[7, "3"])] == [3, 7]
    text_ids = load_dataset([{"id": f"q-{i}", "input": "q", "target": "a"} for i in range(9)])
    assert [r.id for r in select_rows(text_ids, sample_ids=["q-4"])] == ["q-4"]


def test_an_unknown_sample_id_lists_some_that_exist():
    """The ids not found, and the first ids of the dataset with its size."""
    rows = load_dataset(sums(range(1, 11)))
    with pytest.raises(
        ve.DatasetError,
        match=r"No sample of the dataset has the id 99, 'x'; its ids: 1, 2, 3, 4, 5, \.\.\. "
        r"\(10 in all\)",
    ):
        select_rows(rows, sample_ids=[3, 99, "x"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"limit": 0}, r"`limit` must be a whole number of at least 1, not 0"),
        ({"limit": True}, r"`limit` must be a whole number"),
        ({"sample_ids": []}, r"`sample_ids` must be a non-empty list of ids"),
        ({"sample_ids": [1.5]}, r"`sample_ids` holds 1\.5: an id is an int or a str"),
        ({"seed": "one"}, r"`seed` must be a whole number, not 'one'"),
    ],
)
def test_wrong_selection_options_are_config_errors(tmp_path, options, message):
    """Each option is checked before anything runs."""
    with pytest.raises(ve.ConfigError, match=message):
        task_of(tmp_path).eval(**options)
    assert not list(tmp_path.glob("*.json*"))


# -- runs -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_shuffled_limited_run_takes_the_same_samples_each_time(tmp_path):
    """Two runs with one seed solve the same samples in the same order; the log's header
    says how they were chosen (`limit`, `sample_shuffle`: the seed; `shuffled`)."""
    first, second = Asked(), Asked()
    task = task_of(tmp_path / "a", solver=first)
    await task.eval_async(limit=5, shuffle=True, seed=11, max_concurrency=1)
    again = task_of(tmp_path / "b", solver=second)
    await again.eval_async(limit=5, shuffle=True, seed=11, max_concurrency=1)
    assert first.ids == second.ids
    assert len(first.ids) == 5
    assert ids_of(task) == first.ids
    spec = header(task)
    assert spec["config"]["limit"] == 5
    assert spec["config"]["sample_shuffle"] == 11
    assert "sample_id" not in spec["config"]
    assert spec["dataset"]["shuffled"] is True
    assert spec["dataset"]["sample_ids"] == first.ids
    assert spec["dataset"]["samples"] == 5


@pytest.mark.anyio
async def test_a_shuffle_without_a_seed_logs_the_seed_it_drew(tmp_path):
    """The seed drawn is in the header: passing it repeats the order."""
    first = task_of(tmp_path / "a")
    await first.eval_async(shuffle=True, limit=4)
    seed = header(first)["config"]["sample_shuffle"]
    assert isinstance(seed, int)
    again = task_of(tmp_path / "b")
    await again.eval_async(shuffle=True, limit=4, seed=seed)
    assert ids_of(again) == ids_of(first)


@pytest.mark.anyio
async def test_sample_ids_run_only_those_and_the_header_says_so(tmp_path):
    """`sample_ids=` runs those samples; `eval.config.sample_id` lists them."""
    asked = Asked()
    task = task_of(tmp_path, solver=asked)
    await task.eval_async(sample_ids=[3, 7, "12"])
    assert sorted(asked.ids) == [3, 7, 12]
    spec = header(task)
    assert spec["config"]["sample_id"] == [3, 7, "12"]
    assert spec["dataset"]["sample_ids"] == [3, 7, 12]
    assert spec["dataset"]["shuffled"] is False
    assert "limit" not in spec["config"]


@pytest.mark.anyio
async def test_a_run_without_a_selection_logs_none(tmp_path):
    """Every sample, in order: no selection fields in the header."""
    task = task_of(tmp_path, n=3)
    await task.eval_async()
    spec = header(task)
    assert not {"limit", "sample_id", "sample_shuffle"} & set(spec["config"])
    assert spec["dataset"]["sample_ids"] == [1, 2, 3]


@pytest.mark.anyio
async def test_a_resumed_run_continues_the_same_selection(tmp_path):
    """Resumed with the same options, a run solves only the samples of its selection
    that had not finished; its log holds exactly the selection."""
    first = Asked()
    done = task_of(tmp_path, solver=first)
    await done.eval_async(limit=4, shuffle=True, seed=3, max_concurrency=1)
    chosen = list(first.ids)
    journal = await helpers.killed_journal(done, keep=2)
    kept = {s.id for s in ve.read_log(journal).samples}
    assert len(kept) == 2

    again = Asked()
    task = task_of(tmp_path, solver=again)
    await task.eval_async(resume=True, limit=4, shuffle=True, seed=3, max_concurrency=1)
    assert again.ids == [i for i in chosen if i not in kept]
    assert task.log_path is not None
    final = ve.read_log(task.log_path)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == sorted(chosen)
    assert header(task)["config"]["sample_shuffle"] == 3


# -- the command line -------------------------------------------------------------------

TASK_FILE = """
import vitals_engine as ve

pick = ve.Task(
    [{"id": i, "input": f"word{i}", "target": f"word{i}"} for i in range(1, 21)],
    solver=lambda input: input,
    scorer=ve.detect_includes(),
    name="pick",
)
"""


def only_log(directory: Path) -> dict[str, Any]:
    (path,) = [p for p in directory.glob("*.json") if p.name != "listing.json"]
    return json.loads(path.read_text())


def test_the_command_line_limits_and_shuffles_with_a_seed(tmp_path):
    """`--limit N --shuffle --seed N` reach the run: the same samples as the API picks."""
    path = tmp_path / "evals.py"
    path.write_text(TASK_FILE)
    logs = tmp_path / "logs"
    flags = ["--limit", "3", "--shuffle", "--seed", "4", "--no-progress"]
    assert main(["eval", str(path), "--log-dir", str(logs), *flags]) == 0
    log = only_log(logs)
    assert log["eval"]["config"]["limit"] == 3
    assert log["eval"]["config"]["sample_shuffle"] == 4
    rows = load_dataset([{"id": i, "input": "q", "target": "a"} for i in range(1, 21)])
    expected = [r.id for r in select_rows(rows, limit=3, shuffle=True, seed=4)]
    assert log["eval"]["dataset"]["sample_ids"] == expected


def test_the_command_line_runs_the_sample_ids_given(tmp_path, capsys):
    """`--sample-id` repeats; an id the dataset lacks is a usage error (exit 2)."""
    path = tmp_path / "evals.py"
    path.write_text(TASK_FILE)
    logs = tmp_path / "logs"
    assert (
        main(["eval", str(path), "--log-dir", str(logs), "--sample-id", "3", "--sample-id", "7"])
        == 0
    )
    log = only_log(logs)
    assert sorted(s["id"] for s in log["samples"]) == [3, 7]
    assert log["eval"]["config"]["sample_id"] == ["3", "7"]
    capsys.readouterr()
    assert (
        main(["eval", str(path), "--log-dir", str(tmp_path / "other"), "--sample-id", "nope"]) == 2
    )
    assert "No sample of the dataset has the id 'nope'" in capsys.readouterr().err


def test_an_estimate_is_of_the_samples_a_selection_takes():
    """`limit=`, `sample_ids=` and `shuffle=` select the rows an estimate projects over,
    as they select those of the run: 3 of 10 rows is 3 requests, not 10."""
    task = ve.Task(helpers.sums(10), ve.generate(ve.chat_mock()), ve.detect_includes())
    assert task.estimate_cost(local=True, limit=3).rows["requests"].to_list() == [3]
    assert task.estimate_cost(local=True, sample_ids=[2, 5]).rows["requests"].to_list() == [2]
    sampled = task.estimate_cost(sample=2, limit=4, shuffle=True, seed=3, progress=False)
    assert sampled.rows["requests"].to_list() == [4]


def test_the_command_lines_estimate_is_of_the_samples_selected(tmp_path, capsys):
    """`vitals eval --estimate --estimate-local --limit 3`: the estimate of 3 samples."""
    task_file = tmp_path / "evals.py"
    task_file.write_text(
        textwrap.dedent(
            """
            import vitals_engine as ve
            task = ve.Task(
                [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(10)],
                ve.generate(ve.chat_mock()),
                ve.detect_includes(),
            )
            """
        )
    )
    assert main(["eval", str(task_file), "--estimate", "--estimate-local", "--limit", "3"]) == 0
    assert "of 3 samples" in capsys.readouterr().out
