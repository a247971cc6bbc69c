"""`vitals eval`: run the Task(s) of a Python file, print their summaries, say how it went."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import BudgetExceeded, ConfigError, DatasetError, EvalFailedError
from ..caching.options import Cache
from ..chats.chat import Chat
from ..chats.constructors import chat as make_chat
from ..distributed.backend import Ray
from ..pacing.limits import Limits
from ..report import summary
from ..task.task import Task
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


def _takes_solver_chat(task: Task) -> bool:
    return task.takes("solver_chat")


def _swapped_chat(model: str, task: Task) -> Chat:
    """A chat with `model` that keeps the system prompt and tools of the solver's own chat."""
    current = getattr(task.solver, "solver_chat", None)
    if not isinstance(current, Chat):
        return make_chat(model)
    swapped = make_chat(model, system_prompt=current.system_prompt)
    for tool in current.tools:
        swapped.register_tool(tool.fn, name=tool.name)
    return swapped


@dataclass
class _Outcome:
    task: Task
    code: int


def _backend(args: argparse.Namespace) -> Ray | None:
    """`--ray [ADDRESS]` and `--workers N` as the run's backend (None: this process)."""
    address = getattr(args, "ray", None)
    workers = getattr(args, "workers", None)
    if address is None:
        if workers is not None:
            raise UsageError("--workers is the number of Ray workers: give --ray with it.")
        return None
    return Ray(address=None if address == "local" else address, workers=workers)


def run_eval(args: argparse.Namespace) -> int:
    """`vitals eval FILE.py[:task]`: run the file's task(s); the worst exit code of them."""
    path, name = _split_target(args.target)
    if not path.exists():
        raise UsageError(f"File not found: {path}")
    if not path.is_file():
        raise UsageError(f"{path} is not a file: give a Python file with a Task in it.")
    if path.suffix != ".py":
        raise UsageError(f"{path} is not a Python file (.py).")

    estimating = _estimating(args)
    with imported(path) as module:
        tasks = find_tasks_or_fail(module, path, name)
        if isinstance(args.resume, str) and len(tasks) > 1:
            names = ", ".join(n for n, _ in tasks)
            raise UsageError(
                f"--resume {args.resume} continues one task, but {path.name} has "
                f"{len(tasks)} ({names}); pick one with {path}:NAME."
            )
        backend = _backend(args)
        routed: list[dict[str, Any]] = [{} for _ in tasks]
        if args.model:
            for attr, task in tasks:
                if not _takes_solver_chat(task):
                    raise UsageError(
                        f"--model cannot swap the model of task '{task.name}' ({attr}): its "
                        "solver takes no `solver_chat` argument. Use ve.generate(...) or give "
                        "the solver a `solver_chat` parameter."
                    )
            routed = [{"solver_chat": _swapped_chat(args.model, task)} for _, task in tasks]
        options: dict[str, Any] = {
            "epochs": args.epochs,
            "max_concurrency": args.max_concurrency,
            "limits": Limits(rpm=args.rpm) if args.rpm is not None else None,
            "fail_on_error": args.fail_on_error,
            "progress": False if args.no_progress else None,
            "log_format": args.log_format,
            "resume": args.resume,
            "resume_anyway": args.resume_anyway,
            "backend": backend,
            "batch": True if getattr(args, "batch", False) else None,
            "cache": _cache(getattr(args, "cache", None)),
            "max_cost": getattr(args, "max_cost", None),
            "max_tokens": getattr(args, "max_tokens", None),
        }
        debug = bool(getattr(args, "debug", False))
        if estimating:
            return _estimate_tasks([task for _, task in tasks], routed, options, args, debug)
        outcomes: list[_Outcome] = []
        for (_, task), kwargs in zip(tasks, routed, strict=True):
            if args.log_dir:
                task.dir = Path(args.log_dir)
            outcomes.append(_run_task(task, options, kwargs, debug))
            if outcomes[-1].code == EXIT_INTERRUPTED:
                break
    return max((o.code for o in outcomes), default=EXIT_OK)


def _cache(given: str | bool | None) -> Cache | None:
    """`--cache` (the default store) or `--cache DIR`."""
    if given is None or given is False:
        return None
    return Cache() if given is True else Cache(dir=given)


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
_ESTIMATE_OPTIONS = ("max_concurrency", "limits", "fail_on_error", "progress", "backend", "batch")


def _estimate_tasks(
    tasks: list[Task],
    routed: list[dict[str, Any]],
    options: dict[str, Any],
    args: argparse.Namespace,
    debug: bool,
) -> int:
    """`--estimate`: print what each task's eval would cost; the worst exit code of them."""
    codes = []
    run_options = {k: v for k, v in options.items() if k in _ESTIMATE_OPTIONS}
    for task, kwargs in zip(tasks, routed, strict=True):
        codes.append(_estimate_task(task, run_options, kwargs, args, debug))
        if codes[-1] == EXIT_INTERRUPTED:
            break
    return max(codes, default=EXIT_OK)


def _estimate_task(
    task: Task,
    options: dict[str, Any],
    routed: dict[str, Any],
    args: argparse.Namespace,
    debug: bool,
) -> int:
    prefix = f"vitals eval: task '{task.name}': "
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
    print(f"Task {task.name}: the estimated cost of its eval\n\n{estimate}\n", flush=True)
    return EXIT_OK


def _run_task(task: Task, options: dict[str, Any], routed: dict[str, Any], debug: bool) -> _Outcome:
    """Run one task, print its summary, and say how it went as an exit code."""
    prefix = f"vitals eval: task '{task.name}': "
    try:
        task.eval(**options, **routed)
    except (EvalFailedError, BudgetExceeded) as exc:
        _print_summary(task)
        report(exc, debug, prefix=prefix)
        return _Outcome(task, EXIT_FAILED)
    except (ConfigError, DatasetError) as exc:
        if task.log_path is not None:
            _print_summary(task)
        report(exc, debug, prefix=prefix)
        return _Outcome(task, EXIT_USAGE if task.log_path is None else EXIT_FAILED)
    except KeyboardInterrupt:
        if task.log_path is not None:
            _print_summary(task)
        say(prefix + "interrupted; the finished samples are in the log.")
        return _Outcome(task, EXIT_INTERRUPTED)
    except Exception as exc:
        if task.log_path is not None:
            _print_summary(task)
        report(exc, debug, prefix=f"{prefix}the run failed: {type(exc).__name__}: ")
        return _Outcome(task, EXIT_FAILED)
    _print_summary(task)
    return _Outcome(task, EXIT_OK)


def _print_summary(task: Task) -> None:
    try:
        text = summary(task)
    except Exception as exc:  # a half-finished task may not summarize; the log is what counts
        text = f"Task {task.name}: no summary ({type(exc).__name__}: {exc})"
        if task.log_path is not None:
            text += f"\n\nLog: {task.log_path}"
    print(text + "\n", flush=True)
