"""The run's options are one object (`engine/options.py`): parsed and checked once, then
handed down whole to the run, to Ray workers and to every run of an eval set.

Each option is declared once, in the table (`engine/option_table.py`), and everything else
is made from it: the typed keywords and the run's fields (`engine/option_types.py`,
written by `make options`), the checks, the command line's flags, the subsets `solve()`
and `score()` take, what `estimate_cost()` refuses. A new option needs its entry there and
a value in `every_option()` below; these tests then show it accepted by every entry point
and reaching the Ray workers with no other edit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.engine.options import OPTION_NAMES, EvalOptions, RunOptions
from vitals_engine.task import task as task_module
from vitals_engine.task.eval_set import EvalSetFailedError

DATA = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in (1, 2)]

#: The options that do not go with a backend yet (a `ConfigError` says so).
NOT_ON_RAY = ("batch", "cost_budget", "token_budget", "model_cost_budget")


def every_option(directory: Path) -> dict[str, Any]:
    """A value other than its default for every run option (a new option needs one here)."""
    return {
        "epochs": 3,
        "max_concurrency": 5,
        "rate_limits": ve.RateLimits(rpm=6000),
        "retry": ve.Retry(max_attempts=2),
        "fail_on_error": 0.5,
        "progress": True,
        "log_format": "eval",
        "resume_anyway": True,
        "backend": ve.Ray(workers=1),
        "batch": ve.Batch(size=5),
        "cache": ve.Cache(dir=str(directory / "cache")),
        "cost_budget": 1.5,
        "token_budget": 1000,
        "model_cost_budget": 0.5,
        "message_limit": 40,
        "token_limit": 200_000,
        "time_limit": 600.0,
        "working_limit": 300.0,
        "cost_limit": 2.0,
        "max_sandboxes": 8,
        "limit": 2,
        "sample_ids": (1, 2),
        "shuffle": True,
        "seed": 1,
    }


def here(directory: Path) -> dict[str, Any]:
    """Every option but the backend: a run in this process."""
    return {k: v for k, v in every_option(directory).items() if k != "backend"}


def on_ray(directory: Path) -> dict[str, Any]:
    """Every option that goes with a backend."""
    return {k: v for k, v in every_option(directory).items() if k not in NOT_ON_RAY}


def test_each_option_is_a_key_of_eval_options_a_field_of_run_options_and_documented(tmp_path):
    """`EvalOptions` (what users pass) and `RunOptions` (what a run reads) name the same
    options, each documented once, in `EvalOptions`; the values below are not defaults."""
    keys = EvalOptions.__optional_keys__ | EvalOptions.__required_keys__
    assert sorted(keys) == sorted(OPTION_NAMES)
    doc = EvalOptions.__doc__ or ""
    assert [name for name in OPTION_NAMES if f"\n        {name}: " not in doc] == []
    given = every_option(tmp_path)
    assert list(given) == list(OPTION_NAMES)
    defaults = RunOptions()
    assert [n for n in OPTION_NAMES if getattr(defaults, n) == given[n]] == []
    assert sorted({*here(tmp_path), *on_ray(tmp_path)}) == sorted(OPTION_NAMES)


def test_the_option_types_are_what_the_table_makes():
    """`engine/option_types.py` is exactly what the table renders (`make options` writes it)."""
    from vitals_engine.engine import option_render, option_types

    assert Path(option_types.__file__).read_text() == option_render.render()


def test_solve_and_score_take_the_options_the_table_gives_them():
    """`SolveOptions` and `ScoreOptions` are the table's subsets, and the "did you mean" of
    a misspelt option of solve() or score() knows them."""
    from vitals_engine.engine.option_table import OPTIONS
    from vitals_engine.engine.options import ScoreOptions, SolveOptions, options_of

    assert sorted(SolveOptions.__optional_keys__) == sorted(options_of("solve"))
    assert sorted(ScoreOptions.__optional_keys__) == sorted(options_of("score"))
    assert options_of("score") == ("max_concurrency", "rate_limits", "retry", "progress")
    assert set(options_of("solve")) - set(options_of("score")) == {"epochs"}
    assert len(options_of("eval")) == len(OPTIONS)


def test_the_command_line_reads_back_every_option_it_spells(tmp_path):
    """`vitals eval` and `vitals score` have a flag for each option the table spells, and
    reading the parsed flags back gives each option's value (None when not given)."""
    from vitals_engine.cli.parser import build_parser
    from vitals_engine.cli.run_flags import run_options

    parser = build_parser()
    args = parser.parse_args(
        ["eval", "t.py", "--epochs", "2", "--rpm", "60", "--cost-budget", "3", "--shuffle",
         "--sample-id", "a", "--sample-id", "b", "--no-progress", "--cache", str(tmp_path)]
    )  # fmt: skip
    got = run_options(args, "eval")
    assert got["epochs"] == 2
    assert got["rate_limits"] == ve.RateLimits(rpm=60)
    assert got["cost_budget"] == 3.0
    assert (got["shuffle"], got["sample_ids"], got["progress"]) == (True, ["a", "b"], False)
    assert got["cache"] == ve.Cache(dir=str(tmp_path))
    assert got["max_concurrency"] is None
    assert got["backend"] is None
    scored = run_options(
        parser.parse_args(["score", "run.json", "--max-concurrency", "3"]), "score"
    )
    assert scored == {"max_concurrency": 3, "rate_limits": None, "progress": None}


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [("limits", "rate_limits", ve.RateLimits(rpm=60)), ("max_cost", "cost_budget", 2.0),
     ("max_tokens", "token_budget", 100)],
)  # fmt: skip
def test_an_options_old_name_warns_and_is_taken_as_the_new(tmp_path, seen, old, new, value):
    """`eval(limits=)`, `eval(max_cost=)`, `eval(max_tokens=)`: each warns that it is
    deprecated, naming the new keyword, and the run gets the value under the new name."""
    with pytest.warns(DeprecationWarning, match=rf"eval\({old}=\) is deprecated.*eval\({new}=\)"):
        run_eval(new_task(tmp_path), {old: value})
    assert getattr(seen[0], new) == value


def test_an_old_limits_with_a_cost_cap_is_every_models_cost_budget(tmp_path, seen):
    """`eval(limits=ve.Limits(max_cost=2))`, as written before: its rate limits are the
    run's and its cost cap every model's budget (`model_cost_budget`)."""
    with pytest.warns(DeprecationWarning, match="ve.Limits is deprecated"):
        old = ve.Limits(rpm=60, max_cost=2.0)
    with pytest.warns(DeprecationWarning, match="rate_limits"):
        run_eval(new_task(tmp_path), {"limits": old})
    assert seen[0].model_cost_budget == 2.0
    assert seen[0].rate_limits.rpm == 60


class Stop(Exception):
    """Raised by the spy in place of the run, once it has seen the run's options."""


@pytest.fixture
def seen(monkeypatch) -> list[RunOptions]:
    """The options each run was handed (the run itself does not start)."""
    handed: list[RunOptions] = []

    async def spy(setup, state, options, **_: Any) -> None:
        handed.append(options)
        raise Stop

    monkeypatch.setattr(task_module, "run_task", spy)
    return handed


def new_task(directory: Path) -> ve.Task:
    return ve.Task(DATA, solver=str.upper, scorer=ve.detect_includes(), dir=directory)


def run_eval(task: ve.Task, options: dict[str, Any]) -> None:
    with pytest.raises(Stop):
        task.eval(**options)


def run_eval_async(task: ve.Task, options: dict[str, Any]) -> None:
    with pytest.raises(Stop):
        anyio.run(lambda: task.eval_async(**options))


def run_stream_async(task: ve.Task, options: dict[str, Any]) -> None:
    async def consume() -> None:
        async with task.stream_async(**options) as samples:
            async for _ in samples:
                pass

    with pytest.raises(Stop):
        anyio.run(consume)


def run_eval_set(task: ve.Task, options: dict[str, Any]) -> None:
    with pytest.raises(EvalSetFailedError) as failed:
        ve.eval_set([task], **options)
    assert [type(e) for e in failed.value.errors.values()] == [Stop]


def run_eval_set_async(task: ve.Task, options: dict[str, Any]) -> None:
    with pytest.raises(EvalSetFailedError):
        anyio.run(lambda: ve.eval_set_async([task], **options))


@pytest.mark.parametrize("group", [here, on_ray])
@pytest.mark.parametrize(
    "entry",
    [run_eval, run_eval_async, run_stream_async, run_eval_set, run_eval_set_async],
    ids=lambda entry: entry.__name__.removeprefix("run_"),
)
def test_every_entry_point_takes_every_option_and_hands_them_on_whole(tmp_path, seen, entry, group):
    """eval(), eval_async(), stream_async(), eval_set() and eval_set_async() take every run
    option as a keyword and hand the run one `RunOptions` holding each value given."""
    options = group(tmp_path)
    entry(new_task(tmp_path), options)
    assert seen == [RunOptions.check(**options)]


def test_a_misspelt_option_is_named_before_any_run_of_a_set(tmp_path, seen):
    """An eval set checks its options once, before any run: a wrong value is a ConfigError
    with the message eval() gives; a misspelt name still gets its "did you mean"."""
    with pytest.raises(ve.ConfigError, match="`max_concurrency` must be a whole number"):
        ve.eval_set([new_task(tmp_path)], max_concurrency=0)
    with pytest.raises(ve.ConfigError, match="Did you mean `max_concurrency`"):
        new_task(tmp_path).eval(max_concurency=5)
    assert seen == []


def test_every_option_reaches_the_ray_workers_whole(local_ray, tmp_path, monkeypatch):
    """A run on Ray sends each worker the run's options whole (`WorkerPlan.options`): every
    option that goes with a backend, at a value other than its default, is in the plan, and
    the worker's run is built from it, with the worker's share of the concurrency."""
    from ray import cloudpickle

    from vitals_engine.distributed import driver
    from vitals_engine.distributed.worker import SampleWorker, WorkerPlan

    plans: list[WorkerPlan] = []

    def plan(**fields: Any) -> WorkerPlan:
        plans.append(WorkerPlan(**fields))
        return plans[-1]

    monkeypatch.setattr(driver, "WorkerPlan", plan)
    options = on_ray(tmp_path)
    task = ve.Task(DATA, ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    task.eval(**options)
    assert task.metrics == {"accuracy": 1.0}
    expected = RunOptions.check(**options)
    assert [p.options for p in plans] == [expected]

    async def worker_run_options() -> RunOptions:
        worker = SampleWorker()
        await worker.begin(cloudpickle.dumps(plans[0]))
        try:
            return worker._run().options
        finally:
            await worker.end()

    share = plans[0].concurrency
    assert anyio.run(worker_run_options) == dataclasses.replace(expected, max_concurrency=share)
