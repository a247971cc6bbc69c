"""`vitals score LOG --scorer FILE.py:NAME`: score a saved log's outputs again, solving nothing,
into a new log; print its summary, say how it went."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

from .._errors import ConfigError
from ..report import summary
from ..rescoring import RescorableLog, check_scorer, read_log
from ..storage.location import is_url
from ..task.task import Task
from .run_flags import run_options
from .shared import EXIT_FAILED, EXIT_OK, RunError, UsageError, say
from .task_file import imported

__all__ = ["load_scorer", "run_score"]


def run_score(args: argparse.Namespace) -> int:
    """`vitals score LOG --scorer FILE.py:NAME`: the log's finished samples scored by NAME
    into a new log (beside LOG, or in `--dir`); its summary printed. Exit 1 when samples
    failed while scoring."""
    if not args.scorer:
        raise UsageError(
            "vitals score: give the scorer to grade with: --scorer FILE.py:NAME, NAME a "
            "scorer in the file (e.g. strict_judge = ve.model_graded_qa(...)) or a function "
            "without arguments returning one."
        )
    source = args.log
    if not is_url(source) and not Path(source).exists():
        raise UsageError(f"Log not found: {source}")
    file, name = _split_scorer(args.scorer)
    options = run_options(args, "score")
    with imported(file) as module:
        scorer = load_scorer(module, file, name)
        logged = read_log(source)
        _, left_out = logged.finished_records()
        task = logged.rescore(scorer, dir=args.dir, human=args.human, **options)
    return _report(task, logged, left_out)


def _split_scorer(target: str) -> tuple[Path, str]:
    """`FILE.py:NAME` -> (FILE.py, NAME), the file checked."""
    head, sep, name = target.rpartition(":")
    if not sep or not head or not name.isidentifier():
        raise UsageError(
            f"--scorer {target}: give FILE.py:NAME, the file that defines the scorer and "
            "its name (e.g. evals.py:strict_judge)."
        )
    path = Path(head)
    if not path.is_file():
        raise UsageError(f"--scorer {target}: file not found: {path}")
    if path.suffix != ".py":
        raise UsageError(f"--scorer {target}: {path} is not a Python file (.py).")
    return path, name


def load_scorer(module: ModuleType, path: Path, name: str) -> Any:
    """The scorer `name` of the imported file: a scorer (function or object), or a function
    without arguments that returns one. A missing name lists the file's candidates.

    Example:
        >>> with imported(Path("evals.py")) as module:
        ...     scorer = load_scorer(module, Path("evals.py"), "strict_judge")
    """
    if not hasattr(module, name):
        known = ", ".join(_candidates(module))
        raise UsageError(
            f"No '{name}' in {path.name}."
            + (f" Scorers there: {known}." if known else " It defines no scorer.")
        )
    found = getattr(module, name)
    if isinstance(found, Task) or not callable(found) or inspect.isclass(found):
        raise UsageError(
            f"'{name}' in {path.name} is a {type(found).__name__}, not a scorer (a function "
            "of the solved sample, or a function without arguments returning one)."
        )
    if _takes_no_arguments(found):
        found = _made(found, name, path)
    try:
        check_scorer(found)
    except ConfigError as exc:
        raise UsageError(f"--scorer {path}:{name}: {exc}") from None
    return found


def _takes_no_arguments(fn: Any) -> bool:
    """Whether `fn` is called without arguments (a function making a scorer)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return inspect.isfunction(fn) and not any(
        p.default is inspect.Parameter.empty
        or p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for p in params
    )


def _made(fn: Any, name: str, path: Path) -> Any:
    """What the scorer-making function `fn` returns."""
    try:
        return fn()
    except (ConfigError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise RunError(
            f"making the scorer '{name}' of {path.name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _candidates(module: ModuleType) -> list[str]:
    """The names in the file that could be scorers: its own functions, and the callable
    objects it made (`ve.model_graded_qa(...)`, `ve.detect_includes()`)."""
    names = []
    for attr, value in vars(module).items():
        if attr.startswith("_") or inspect.isclass(value) or inspect.ismodule(value):
            continue
        if not callable(value) or isinstance(value, Task):
            continue
        if inspect.isfunction(value) and value.__module__ != module.__name__:
            continue  # imported
        if getattr(value, "__vitals_factory__", None) is not None:
            continue  # ve.model_graded_qa itself
        names.append(attr)
    return names


def _report(task: Task, logged: RescorableLog, left_out: int) -> int:
    """Print the new run's summary and what was left out; the exit code."""
    rescored = len(task.get_samples())
    note = f"Re-scored {rescored} of the samples of {logged.source} (nothing was solved)."
    if left_out:
        note += f" {left_out} left out: not finished (no result, or failed while solving)."
    print(f"{note}\n\n{summary(task)}\n", flush=True)
    frame = task.get_samples()
    failed = int(frame["error"].is_not_null().sum()) if "error" in frame.columns else 0
    if failed:
        say(
            f"vitals score: {failed} of {rescored} samples failed while scoring; their errors "
            f"are in the log: {task.log_path}"
        )
        return EXIT_FAILED
    return EXIT_OK
