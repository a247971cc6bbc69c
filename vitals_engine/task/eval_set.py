"""Many runs at once: every task on every model, in one event loop (`eval_set`).

Each (task, model) is one run of a clone of the task, its solver's chat swapped for the
model (`model_chat`, which `vitals eval --model` uses too), with its own log in the
task's directory. The runs go at once (at most `max_tasks` of them), sharing each
endpoint's limits as every run of one event loop does (`pacing/limits.py`).

A run's log names its task and its model (`eval.task`, `eval.model`), so `resume=True`
finds the newest log of each (task, model): an unfinished one is resumed (only its
unfinished samples run; a journal is unfinished whatever it says, and resuming one whose
run ended finishes its log, sending nothing), a finished one is kept as it is (its
`LoggedEval` stands in the set), and a pair with no log runs afresh.

A run that fails does not stop the others. When all have ended, the set raises one
`EvalSetFailedError` (an `EvalFailedError`) naming every failed run, with the set
itself (`.eval_set`: every log written, the results of the runs that went well) and
each run's error (`.errors`). An interrupt (Ctrl-C, a KeyboardInterrupt or SystemExit
from a solver) cancels every run: each logs what it finished, status "cancelled", and
the interrupt is raised as itself; `resume=True` continues the set.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import anyio

from .._errors import ConfigError, EvalSetFailedError, VitalsError
from .._sync import Interrupted, carry, raise_carried, run_sync
from .._words import plural
from ..chats.by_name import chat as make_chat
from ..chats.chat import Chat
from ..engine.options import EvalKeywords, RunOptions
from ..log.journal_format import JOURNAL_SUFFIX, journal_path
from ..log.logged_eval import LoggedEval
from ..log.reader import read_log
from ..transport.pool import transport_scope
from .resume import UNFINISHED
from .spill import sharing_whole_samples
from .stores import pull_runs
from .task import Task

if TYPE_CHECKING:
    import polars as pl

__all__ = ["EvalSet", "EvalSetFailedError", "eval_set", "eval_set_async", "model_chat"]


def model_chat(model: str | Chat, task: Task) -> Chat:
    """The chat that runs `task`'s solver on `model`: a `Chat` as given; a
    "provider/model" id as a new chat that keeps the system prompt and tools of the
    solver's own chat. A solver without a `solver_chat` parameter is a `ConfigError`.

    Example:
        >>> task.eval(solver_chat=model_chat("anthropic/claude-sonnet-4-5", task))
    """
    if not task.takes("solver_chat"):
        raise ConfigError(
            f"Cannot run task '{task.name}' on another model: its solver takes no "
            "`solver_chat` argument. Use ve.generate(...) or give the solver a "
            "`solver_chat` parameter."
        )
    if isinstance(model, Chat):
        return model
    current = getattr(task.solver, "solver_chat", None)
    if not isinstance(current, Chat):
        return make_chat(model)
    swapped = make_chat(model, system_prompt=current.system_prompt)
    for tool in current.tools:
        swapped.register_tool(tool.fn, name=tool.name)
    return swapped


@dataclass(slots=True)
class _Run:
    """One (task, model) of a set: the clone that runs, or the finished log kept."""

    task: Task
    model: str | None
    routed: dict[str, Any] = field(default_factory=dict)
    resume: Path | None = None
    kept: LoggedEval | None = None
    error: Exception | None = None

    @property
    def label(self) -> str:
        return f"{self.task.name} on {self.model}" if self.model else self.task.name

    @property
    def result(self) -> Task | LoggedEval:
        return self.kept if self.kept is not None else self.task

    @property
    def log_path(self) -> Path | None:
        return self.kept.path if self.kept is not None else self.task.log_path


class EvalSet:
    """The runs of an eval set, one per (task, model), task-major.

    `tasks` holds the Task of each run (a clone of the task given; for a pair a resumed
    set found finished, the `LoggedEval` of its log), `labels` each run as "task on
    model", `models` the models as "provider/model", `log_paths` each run's log (None:
    no log, the run failed before it started), `errors` each failed run's error by label.

    Example:
        >>> runs = eval_set([arithmetic, spelling], models=["openai/gpt-4.1-mini",
        ...                                                 "anthropic/claude-sonnet-4-5"])
        >>> print(runs)                        # one line per task x model
        >>> runs.get_samples().group_by("task", "model").agg(pl.col("score"))
        >>> runs.get_cost()["cost"].sum()
    """

    def __init__(self, runs: list[_Run], models: list[str]) -> None:
        self._runs = runs
        self.models = models

    @property
    def tasks(self) -> list[Task | LoggedEval]:
        return [run.result for run in self._runs]

    @property
    def log_paths(self) -> list[Path | None]:
        return [run.log_path for run in self._runs]

    @property
    def labels(self) -> list[str]:
        """Each run as "task on model" (the task alone when the set has no models)."""
        return [run.label for run in self._runs]

    @property
    def errors(self) -> dict[str, Exception]:
        return {run.label: run.error for run in self._runs if run.error is not None}

    def get_samples(self) -> pl.DataFrame:
        """Every run's samples (`Task.get_samples()`), with `task` and `model` first (a
        sample metadata column of either name is kept as `sample_task`/`sample_model`)."""
        return _stacked(
            [(run, run.result.get_samples()) for run in self._runs if _ran(run)], "sample_"
        )

    def get_cost(self) -> pl.DataFrame:
        """Every run's cost by role and model (`Task.get_cost()`), with the run's `task`
        and `model` first; the model each row's calls went to is `call_model`."""
        return _stacked([(run, run.result.get_cost()) for run in self._runs], "call_")

    def summary(self) -> str:
        """One line per task x model: status, samples, metrics, cost, time, log; then the
        failed runs' errors."""
        return _summary(self._runs)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        failed = sum(run.error is not None for run in self._runs)
        return f"<EvalSet: {plural(len(self._runs), 'run')}, {failed} failed>"


def eval_set(
    tasks: Task | Sequence[Task],
    models: str | Chat | Sequence[str | Chat] | None = None,
    *,
    max_tasks: int | None = None,
    resume: bool = False,
    view: bool = False,
    **options: Unpack[EvalKeywords],
) -> EvalSet:
    """Run every task on every model, all at once in one event loop; return the set.

    Args:
        tasks: a Task or a list of them (each with its own name). They are left as they
            were: each run is a clone.
        models: "provider/model" ids or Chats; each run's solver talks to its model (a
            model id keeps the system prompt and tools of the solver's own chat, as
            `vitals eval --model` does). None: each task on its own model.
        max_tasks: runs at once (default: all).
        resume: continue an interrupted set: the newest log of each (task, model) in
            its task's directory is resumed when unfinished and kept when finished; a
            (task, model) without one runs afresh.
        view: open the viewer once, at the end.
        **options: `Task.eval()`'s run options (`ve.EvalOptions`: `max_concurrency`,
            `limits`, `epochs`, `fail_on_error`, `cache`, ...), checked once, for every
            run; other keywords go to every run's solver and scorer. Runs draw no
            progress bar unless `progress=True`.

    Runs that call one endpoint share its limits (concurrency, rpm, tpm, pauses). A run
    that fails does not stop the others; at the end `EvalSetFailedError` names every
    failed run. Ctrl-C cancels every run and logs what each finished.

    Example:
        >>> runs = ve.eval_set([arithmetic, spelling],
        ...                    models=["openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5"],
        ...                    max_tasks=2, max_concurrency=50)
        >>> print(runs)
        >>> runs.get_samples()           # every sample, with `task` and `model` first
    """
    return run_sync(
        functools.partial(
            eval_set_async,
            tasks,
            models,
            max_tasks=max_tasks,
            resume=resume,
            view=view,
            **options,
        )
    )


async def eval_set_async(
    tasks: Task | Sequence[Task],
    models: str | Chat | Sequence[str | Chat] | None = None,
    *,
    max_tasks: int | None = None,
    resume: bool = False,
    view: bool = False,
    **options: Unpack[EvalKeywords],
) -> EvalSet:
    """The async form of `eval_set()` (asyncio or trio).

    Example:
        >>> runs = await ve.eval_set_async([arithmetic], models=["openai/gpt-4.1-mini"])
    """
    if max_tasks is not None and (
        isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1
    ):
        raise ConfigError(f"`max_tasks` must be a positive integer, not {max_tasks!r}.")
    given: dict[str, Any] = dict(options)
    runs, model_ids = _plan(_task_list(tasks), _model_list(models), given)
    if resume:
        _find_resumable(runs)
    if len(runs) > 1 and given.get("progress") is None:
        given["progress"] = False  # one bar per run would draw over each other
    checked, kwargs = RunOptions.parse(given)  # once, before any run starts
    await _run_all(runs, checked, kwargs, max_tasks)
    result = EvalSet(runs, model_ids)
    if view:
        next(run.task for run in runs).view()
    errors = result.errors
    if errors:
        lines = "; ".join(f"{label}: {type(e).__name__}: {e}" for label, e in errors.items())
        raise EvalSetFailedError(
            f"{len(errors)} of {plural(len(runs), 'run')} of the eval set failed ({lines}). "
            "The other runs finished; every log is written.",
            eval_set=result,
            errors=errors,
        )
    return result


async def _run_all(
    runs: list[_Run], options: RunOptions, kwargs: dict[str, Any], max_tasks: int | None
) -> None:
    """Every run not kept from a finished log, at most `max_tasks` at once, in order."""
    gate = anyio.Semaphore(max_tasks or len(runs))
    connections = options.max_concurrency * min(max_tasks or len(runs), len(runs))
    try:
        # one pool of connections for the set: runs on one endpoint reuse each other's
        # ... and one allowance of finished samples kept whole in memory (see spill.py)
        with sharing_whole_samples():
            async with (
                transport_scope(pool_size=connections, shared=True),
                anyio.create_task_group() as tg,
            ):
                for run in runs:
                    if run.kept is None:
                        await gate.acquire()  # here, so runs start in order (trio shuffles)
                        tg.start_soon(_run_one, run, gate, options, kwargs)
    except BaseException as exc:
        raise_carried(exc)
        raise


async def _run_one(
    run: _Run, gate: anyio.Semaphore, options: RunOptions, kwargs: dict[str, Any]
) -> None:
    """One run of the set, with the set's options whole (and its own model, if any)."""
    evaluate = run.task._evaluate  # what eval_async() runs once it has checked its options
    try:
        await carry(
            functools.partial(evaluate, options, {**kwargs, **run.routed}, resume=run.resume)
        )
    except Interrupted:
        raise  # an interrupt stops the set: the task group cancels every run
    except Exception as exc:
        run.error = exc
    finally:
        gate.release()


# -- planning ------------------------------------------------------------------------------


def _task_list(tasks: Task | Sequence[Task]) -> list[Task]:
    given = [tasks] if isinstance(tasks, Task) else list(tasks)
    if not given or not all(isinstance(t, Task) for t in given):
        raise ConfigError("eval_set() takes a Task or a non-empty list of Tasks.")
    seen: set[str] = set()
    for task in given:
        if task.name in seen:
            raise ConfigError(
                f"Two tasks of the eval set are named '{task.name}': give each its own "
                "Task(name=...). Their logs, and resume, tell runs apart by task and model."
            )
        seen.add(task.name)
    return given


def _model_list(models: str | Chat | Sequence[str | Chat] | None) -> list[str | Chat] | None:
    if models is None:
        return None
    given = [models] if isinstance(models, str | Chat) else list(models)
    if not given or not all(isinstance(m, str | Chat) for m in given):
        raise ConfigError(
            "`models` must be a list of 'provider/model' ids or Chats, e.g. "
            "['openai/gpt-4.1-mini', 'anthropic/claude-sonnet-4-5']."
        )
    return given


def _plan(
    tasks: list[Task], models: list[str | Chat] | None, options: dict[str, Any]
) -> tuple[list[_Run], list[str]]:
    """The runs of the set, task-major, and its models as ids; checks the models and
    their keys before anything runs."""
    if models is None:
        runs = [_Run(_fresh(task), _own_model(task)) for task in tasks]
        return runs, list(dict.fromkeys(run.model for run in runs if run.model))
    if "solver_chat" in options:
        raise ConfigError(
            "eval_set(models=...) gives each run its solver_chat: leave `solver_chat` out."
        )
    runs = []
    for task in tasks:
        for model in models:
            chat = model_chat(model, task)
            runs.append(_Run(_fresh(task), chat.provider.model_id, {"solver_chat": chat}))
    ids = list(dict.fromkeys(run.model for run in runs if run.model))
    if len(ids) < len(models):
        twice = next(m for m in ids if [r.model for r in runs[: len(models)]].count(m) > 1)
        raise ConfigError(f"`models` names {twice} twice: a (task, model) runs once in a set.")
    for run in runs[: len(ids)]:
        run.routed["solver_chat"].provider.check_key()
    return runs, ids


def _fresh(task: Task) -> Task:
    """A clone of `task` with nothing of its earlier runs: no results, no log."""
    twin = task.clone().set_solver(task.solver)
    twin.log_path = None
    return twin


def _own_model(task: Task) -> str | None:
    chat = getattr(task.solver, "solver_chat", None)
    return chat.provider.model_id if isinstance(chat, Chat) else None


def _find_resumable(runs: list[_Run]) -> None:
    """For each run, the newest log of its (task, model) in its task's directory: an
    unfinished one to resume, a finished one to keep (nothing to run)."""
    for directory in dict.fromkeys(run.task.dir for run in runs):
        group = [run for run in runs if run.task.dir == directory]
        wanted = {(run.task.name, _lower(run.model)): run for run in group}
        setup = group[0].task._setup
        pull_runs(setup, {run.task.name for run in group})  # a store's: into its staging
        for path, logged in _headers_newest_first(setup.dir):
            model = _lower(logged.model)
            run = wanted.pop((logged.task, model), None) or wanted.pop((logged.task, None), None)
            if run is None:
                continue
            status = "started" if path.suffix == JOURNAL_SUFFIX else logged.status
            if status not in UNFINISHED and journal_path(path).exists():
                run.resume = journal_path(path)  # killed before removing it: finish the run
            elif status in UNFINISHED:
                run.resume = path
            elif status == "success":
                run.kept = logged
            if not wanted:
                break


def _lower(model: str | None) -> str | None:
    return model.lower() if model else None


def _headers_newest_first(directory: Path) -> Iterator[tuple[Path, LoggedEval]]:
    """The logs and journals of `directory`, newest first, each header read only when
    reached; files that are not logs are passed over."""
    if not directory.is_dir():
        return
    found = []
    for path in directory.iterdir():
        if path.suffix in (".json", ".eval", JOURNAL_SUFFIX) and not path.name.startswith("."):
            with contextlib.suppress(OSError):
                found.append((path.stat().st_mtime, path))
    for _, path in sorted(found, reverse=True):
        try:
            yield path, read_log(path, header_only=True)
        except VitalsError:  # a manifest, a damaged file, one gone since
            continue


# -- results -------------------------------------------------------------------------------


def _ran(run: _Run) -> bool:
    return run.kept is not None or run.task.solved


def _stacked(frames: list[tuple[_Run, pl.DataFrame]], prefix: str) -> pl.DataFrame:
    """The runs' frames one after another, each with its run's `task` and `model` first
    (a column of the frame with either name is kept as prefix + name); a column whose
    types differ between runs (grades in one, numbers in another) becomes text."""
    import polars as pl

    named = []
    for run, frame in frames:
        clash = {c: prefix + c for c in ("task", "model") if c in frame.columns}
        named.append(
            frame.rename(clash).select(
                pl.lit(run.task.name, pl.String).alias("task"),
                pl.lit(run.model, pl.String).alias("model"),
                pl.all(),
            )
        )
    if not named:
        return pl.DataFrame(schema={"task": pl.String, "model": pl.String})
    types: dict[str, set[pl.DataType]] = {}
    for frame in named:
        for name, dtype in frame.schema.items():
            if dtype != pl.Null:
                types.setdefault(name, set()).add(dtype)
    mixed = [
        n for n, kinds in types.items() if len(kinds) > 1 and not all(k.is_numeric() for k in kinds)
    ]
    if mixed:
        named = [
            f.with_columns(pl.col(c).cast(pl.String) for c in mixed if c in f.columns)
            for f in named
        ]
    return pl.concat(named, how="diagonal_relaxed")


@dataclass(slots=True)
class _Row:
    task: str
    model: str
    status: str
    samples: str = "-"
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    cost: str = "-"
    time: str = "-"
    log: str = "-"


def _row(run: _Run) -> _Row:
    row = _Row(run.task.name, run.model or "-", "failed" if run.error else "not run")
    path = run.log_path
    if path is None:
        return row
    row.log = str(path) if path.parent != run.task._setup.dir else path.name
    try:
        header = read_log(path, header_only=True)
    except VitalsError:
        return row
    row.status = header.status
    row.metrics = dict(header.metrics or {})
    results = header.header.results
    completed = getattr(results, "completed_samples", None)
    row.samples = f"{completed:,}" if completed is not None else "-"
    costs = run.result.get_cost()["cost"].to_list()
    row.cost = "unknown" if None in costs else f"${sum(costs):.4f}"
    seconds = _seconds(header.header.stats.started_at, header.header.stats.completed_at)
    row.time = f"{seconds:.2f}s" if seconds is not None else "-"
    return row


def _seconds(started: str, completed: str) -> float | None:
    try:
        return (datetime.fromisoformat(completed) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return None


def _summary(runs: list[_Run]) -> str:
    rows = [_row(run) for run in runs]
    names = list(dict.fromkeys(name for row in rows for name in row.metrics))
    header = ["task", "model", "status", "samples", *names, "cost", "time", "log"]
    cells = [
        [
            row.task,
            row.model,
            row.status,
            row.samples,
            *(_metric(row.metrics.get(name)) for name in names),
            row.cost,
            row.time,
            row.log,
        ]
        for row in rows
    ]
    right = {3, *range(4, 4 + len(names)), 4 + len(names), 5 + len(names)}
    failed = sum(run.error is not None for run in runs)
    title = f"Eval set: {plural(len(runs), 'run')}, {failed} failed"
    parts = [title, _grid(header, cells, right)]
    directories = {run.task.dir for run in runs}
    if len(directories) == 1:
        parts.append(f"Logs in {directories.pop()}")
    errors = [
        f"  {run.label}: {type(run.error).__name__}: {run.error}" for run in runs if run.error
    ]
    if errors:
        parts.append("Failed:\n" + "\n".join(errors))
    return "\n\n".join(parts)


def _metric(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _grid(header: list[str], cells: list[list[str]], right: set[int]) -> str:
    """A plain text table: the columns in `right` aligned right, a rule under the header."""
    widths = [max(map(len, column)) for column in zip(header, *cells, strict=True)]

    def text(values: list[str]) -> str:
        padded = (
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )
        return "  ".join(padded).rstrip()

    return "\n".join([text(header), text(["-" * w for w in widths]), *map(text, cells)])
