"""`vitals eval`: run the Task(s) of a Python file, print their summaries, say how it went."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import BudgetExceeded, ConfigError, DatasetError, EvalFailedError
from ..engine.option_table import OPTIONS
from ..report import summary
from ..task.eval_set import EvalSetFailedError, eval_set, model_chat
from ..task.task import Task
from .gates import FinishedRun, check_gate_names, check_junit_path, gated, gating
from .run_flags import run_options
from .shared import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, report, say
from .task_file import find_tasks_or_fail, imported

__all__ = ["run_eval"]


def _split_target(target: str) -> tuple[Path, str | None]:
    """`FILE.py:name` -> (FILE.py, name); a plain path (even `C:\\x.py`) -> (path, None)."""
    head, sep, tail = target.rpartition(":")
    if sep and head and tail.isidentifier() and not Path(target).exists():
        return Path(head), tail
    if sep and head and not tail:
        raise UsageError(f"'{target}': the task name after ':' is empty.")
    return Path(target), None


@dataclass
class _Outcome:
    task: Task
    code: int


def _checked_file(args: argparse.Namespace) -> tuple[Path, str | None]:
    """The task file and task name `FILE.py[:task]` names, checked to be a Python file."""
    path, name = _split_target(args.target)
    if not path.exists():
        raise UsageError(f"File not found: {path}")
    if not path.is_file():
        raise UsageError(f"{path} is not a file: give a Python file with a Task in it.")
    if path.suffix != ".py":
        raise UsageError(f"{path} is not a Python file (.py).")
    return path, name


def _check_resume(args: argparse.Namespace, path: Path, tasks: list[tuple[str, Task]]) -> None:
    """`--resume LOG` continues one run: one task, not an eval set."""
    if not isinstance(args.resume, str):
        return
    if len(tasks) > 1:
        names = ", ".join(n for n, _ in tasks)
        raise UsageError(
            f"--resume {args.resume} continues one task, but {path.name} has "
            f"{len(tasks)} ({names}); pick one with {path}:NAME."
        )
    if _as_set(args):
        raise UsageError(
            f"--resume {args.resume} continues one run; an eval set (several --model, "
            "--max-tasks) continues with --resume alone."
        )


def _as_set(args: argparse.Namespace) -> bool:
    """Several --model, or --max-tasks: every task on every model at once, as an eval set."""
    return len(args.model or []) > 1 or getattr(args, "max_tasks", None) is not None


def run_eval(args: argparse.Namespace) -> int:
    """`vitals eval FILE.py[:task]`: run the file's task(s), one after another; with
    several `--model` (or `--max-tasks`), every task on every model at once as an eval
    set. The worst exit code of the runs."""
    path, name = _checked_file(args)
    estimating = _estimating(args)
    if estimating and gating(args):
        raise UsageError("--fail-under and --junit check a run: leave out --estimate.")
    check_junit_path(args)
    with imported(path) as module:
        tasks = find_tasks_or_fail(module, path, name)
        check_gate_names([task for _, task in tasks], args)
        _check_resume(args, path, tasks)
        options: dict[str, Any] = {**run_options(args, "eval"), "resume": args.resume}
        models: list[str] = args.model or []
        # every (task, model), checked before anything runs: a model each solver can take
        pairs = [(task, {"solver_chat": model_chat(m, task)}) for _, task in tasks for m in models]
        if not models:
            pairs = [(task, {}) for _, task in tasks]
        debug = bool(getattr(args, "debug", False))
        if estimating:
            return _estimate_tasks(pairs, options, args, debug, named=len(models) > 1)
        if args.log_dir:
            for _, task in tasks:
                task.dir = args.log_dir
        if _as_set(args):
            finished: list[FinishedRun] = []
            max_tasks = getattr(args, "max_tasks", None)
            tasks_only = [task for _, task in tasks]
            code = _run_set(tasks_only, models, options, max_tasks, debug, finished)
            return gated(code, finished, args)
        return _run_one_by_one(pairs, options, debug, args)


def _run_one_by_one(
    pairs: list[tuple[Task, dict[str, Any]]],
    options: dict[str, Any],
    debug: bool,
    args: argparse.Namespace,
) -> int:
    """Each (task, model) in turn, until one is interrupted; the worst exit code, gated."""
    outcomes: list[_Outcome] = []
    for task, kwargs in pairs:
        outcomes.append(_run_task(task, options, kwargs, debug))
        if outcomes[-1].code == EXIT_INTERRUPTED:
            break
    finished = [FinishedRun(o.task.name, o.task.log_path, o.code) for o in outcomes]
    return gated(max((o.code for o in outcomes), default=EXIT_OK), finished, args)


def _estimating(args: argparse.Namespace) -> bool:
    """`--estimate`, checked against the options that go with it."""
    estimate = bool(getattr(args, "estimate", False))
    samples = getattr(args, "estimate_samples", None)
    local = bool(getattr(args, "estimate_local", False))
    if not estimate:
        if samples is not None or local:
            flag = "--estimate-samples" if samples is not None else "--estimate-local"
            raise UsageError(f"{flag} goes with --estimate: add it to print the estimate.")
        return False
    if args.resume is not None or args.resume_anyway:
        raise UsageError("--estimate runs a fresh sample of the task: leave out --resume.")
    if samples is not None and local:
        raise UsageError(
            "--estimate-samples and --estimate-local do not go together: the local count "
            "runs no sample."
        )
    return True


#: The eval options a sampled estimate runs with (its log is temporary, never resumed).
_ESTIMATE_OPTIONS = tuple(option.name for option in OPTIONS if option.estimate == "runs")


def _estimate_tasks(
    pairs: list[tuple[Task, dict[str, Any]]],
    options: dict[str, Any],
    args: argparse.Namespace,
    debug: bool,
    named: bool = False,
) -> int:
    """`--estimate`: print what each task's eval (on each model: `named` says which)
    would cost; the worst exit code of them."""
    codes = []
    sampled = {k: v for k, v in options.items() if k in _ESTIMATE_OPTIONS}
    if sampled.get("seed") is None:
        sampled.pop("seed", None)  # the estimate's own default picks its rows
    for task, kwargs in pairs:
        model = _model_of(kwargs) if named else ""
        codes.append(_estimate_task(task, sampled, kwargs, args, debug, model))
        if codes[-1] == EXIT_INTERRUPTED:
            break
    return max(codes, default=EXIT_OK)


def _estimate_task(
    task: Task,
    options: dict[str, Any],
    routed: dict[str, Any],
    args: argparse.Namespace,
    debug: bool,
    model: str = "",
) -> int:
    prefix = f"vitals eval: task '{task.name}'{model}: "
    try:
        estimate = task.estimate_cost(
            args.estimate_samples or 20,
            epochs=args.epochs,
            local=bool(args.estimate_local),
            **options,
            **routed,
        )
    except (ConfigError, DatasetError) as exc:
        report(exc, debug, prefix=prefix)
        return EXIT_USAGE
    except KeyboardInterrupt:
        say(prefix + "interrupted; nothing was estimated.")
        return EXIT_INTERRUPTED
    except Exception as exc:
        report(exc, debug, prefix=f"{prefix}the estimate failed: {type(exc).__name__}: ")
        return EXIT_FAILED
    print(f"Task {task.name}{model}: the estimated cost of its eval\n\n{estimate}\n", flush=True)
    return EXIT_OK


def _model_of(routed: dict[str, Any]) -> str:
    """The model `--model` gave a run, as " on provider/model" ("" for none)."""
    chat = routed.get("solver_chat")
    return f" on {chat.provider.model_id}" if chat is not None else ""


def _run_task(task: Task, options: dict[str, Any], routed: dict[str, Any], debug: bool) -> _Outcome:
    """Run one task, print its summary, and say how it went as an exit code."""
    prefix = f"vitals eval: task '{task.name}': "
    try:
        task.eval(**options, **routed)
    except KeyboardInterrupt:
        if task.log_path is not None:
            _print_summary(task)
        say(prefix + "interrupted; the finished samples are in the log.")
        return _Outcome(task, EXIT_INTERRUPTED)
    except Exception as exc:
        if task.log_path is not None:
            _print_summary(task)
        return _Outcome(task, _failed(exc, prefix, task.log_path is not None, debug))
    _print_summary(task)
    return _Outcome(task, EXIT_OK)


def _failed(exc: Exception, prefix: str, logged: bool, debug: bool) -> int:
    """Say why a run failed; its exit code (a usage error when a bad setup stopped it
    before it logged anything)."""
    if isinstance(exc, EvalFailedError | BudgetExceeded):
        report(exc, debug, prefix=prefix)
        return EXIT_FAILED
    if isinstance(exc, ConfigError | DatasetError):
        report(exc, debug, prefix=prefix)
        return EXIT_FAILED if logged else EXIT_USAGE
    report(exc, debug, prefix=f"{prefix}the run failed: {type(exc).__name__}: ")
    return EXIT_FAILED


def _run_set(
    tasks: list[Task],
    models: list[str],
    options: dict[str, Any],
    max_tasks: int | None,
    debug: bool,
    finished: list[FinishedRun] | None = None,
) -> int:
    """Every task on every model at once (`eval_set`): the combined summary, then why each
    failed run failed; the worst exit code of the runs. Each run, with its code, goes into
    `finished`."""
    finished = finished if finished is not None else []
    options = {**options, "resume": bool(options["resume"])}
    try:
        runs = eval_set(tasks, models or None, max_tasks=max_tasks, **options)
    except EvalSetFailedError as failure:
        runs = failure.eval_set
        print(f"{runs}\n", flush=True)
        for label, path in zip(runs.labels, runs.log_paths, strict=True):
            error = failure.errors.get(label)
            code = EXIT_OK
            if error is not None:
                code = _failed(error, f"vitals eval: {label}: ", path is not None, debug)
            finished.append(FinishedRun(label, path, code))
        return max((run.code for run in finished), default=EXIT_FAILED)
    except KeyboardInterrupt:
        say(
            "vitals eval: interrupted; each run's finished samples are in its log "
            "(--resume continues the set)."
        )
        return EXIT_INTERRUPTED
    print(f"{runs}\n", flush=True)
    finished += [
        FinishedRun(label, path, EXIT_OK)
        for label, path in zip(runs.labels, runs.log_paths, strict=True)
    ]
    return EXIT_OK


def _print_summary(task: Task) -> None:
    try:
        text = summary(task)
    except Exception as exc:  # a half-finished task may not summarize; the log is what counts
        text = f"Task {task.name}: no summary ({type(exc).__name__}: {exc})"
        if task.log_path is not None:
            text += f"\n\nLog: {task.log_path}"
    print(text + "\n", flush=True)
