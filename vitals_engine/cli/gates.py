"""`vitals eval --fail-under METRIC=VALUE --junit FILE`: after the runs, each run's
metrics against the thresholds, a line per failure, the JUnit report, and the exit code.

The metrics are read from each run's log (`check_thresholds`), so what is gated is what
was logged. A threshold whose name matches no metric of a run is a usage error (exit 2)
that lists the metrics there are. A name no task could log (a misspelt metric or
scorer) is found before anything runs (`check_gate_names`); the rest once the run has
logged its metrics. A metric
below its threshold makes `vitals eval` exit with `EXIT_BELOW_THRESHOLD` (3), unless a
run failed or was interrupted: those codes (1, 130) say more, and win.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigError, LogFormatError
from ..log.logged_eval import LoggedEval
from ..log.reader import read_log
from ..task.task import Task
from ..thresholds import ThresholdCheck, check_thresholds
from .junit import JUnitRun, write_junit
from .shared import EXIT_BELOW_THRESHOLD, EXIT_INTERRUPTED, EXIT_OK, UsageError

__all__ = ["FinishedRun", "apply_gates", "check_gate_names", "check_junit_path", "gated", "gating"]


@dataclass(frozen=True)
class FinishedRun:
    """A run `vitals eval` made: its label ("task", or "task on model"), its log (None:
    it wrote none) and its exit code."""

    label: str
    log_path: str | Path | None
    code: int


def gating(args: argparse.Namespace) -> bool:
    """Whether the command has gates to apply or a report to write after its runs."""
    return bool(getattr(args, "fail_under", None) or getattr(args, "junit", None))


def check_gate_names(tasks: Sequence[Task], args: argparse.Namespace) -> None:
    """Before any run: a usage error for a `--fail-under` name that no task's metrics
    could have (its metric names, `accuracy_corrected` with human grades, under each of
    its scorers' names or their functions' names).

    Example:
        >>> check_gate_names([task], parse(["--fail-under", "acuracy=0.8"]))
        Traceback (most recent call last):
        UsageError: --fail-under acuracy=0.8: no task has a metric 'acuracy' ...
    """
    for name, limit in getattr(args, "fail_under", None) or []:
        if any(name in _gate_names(task) for task in tasks):
            continue
        known = sorted({n for task in tasks for n in _gate_names(task)})
        raise UsageError(
            f"--fail-under {name}={limit:g}: no task has a metric {name!r} "
            f"(these could be gated: {', '.join(known)})."
        )


def check_junit_path(args: argparse.Namespace) -> None:
    """Before any run: a usage error for a `--junit` path the report could not be written
    to (a folder, a folder that cannot be made, a place this user may not write), so that
    nothing is spent on a run whose report would be lost.

    Example:
        >>> check_junit_path(parse(["--junit", "reports"]))
        Traceback (most recent call last):
        UsageError: --junit reports: that is a folder; name the report's file ...
    """
    junit: str | None = getattr(args, "junit", None)
    if junit is None:
        return
    path = Path(junit)
    if path.is_dir():
        raise UsageError(
            f"--junit {junit}: that is a folder; name the report's file, e.g. "
            f"--junit {path / 'report.xml'}."
        )
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest folder there is: the rest is made
    if not folder.is_dir():
        raise UsageError(f"--junit {junit}: cannot make its folder: {folder} is a file.")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise UsageError(f"--junit {junit}: this user may not write to {target}.")


def _gate_names(task: Task) -> set[str]:
    """The threshold names a run of `task` will log: each metric alone, and as
    `scorer/metric` under each scorer's name and its function's name."""
    setup = task._setup  # the configured metrics, known before any run
    metrics = list(setup.metric_fns or {"accuracy": None})
    if setup.human is not None:
        metrics.append("accuracy_corrected")
    names = set(metrics)
    for scorer in task.scorer_names:
        for label in {scorer, scorer.split("(", 1)[0]}:
            names.update(f"{label}/{metric}" for metric in metrics)
    return names


def gated(code: int, runs: Sequence[FinishedRun], args: argparse.Namespace) -> int:
    """The command's exit code once its gates are applied to `runs`: `code` when a run
    failed (or when there are no gates), else what the gates say. Nothing is checked
    after an interruption."""
    if code == EXIT_INTERRUPTED or not gating(args):
        return code
    gates = apply_gates(runs, args)
    return code if code != EXIT_OK else gates


def apply_gates(runs: Sequence[FinishedRun], args: argparse.Namespace) -> int:
    """Check every run against `--fail-under`, print a line per check that failed (or one
    line saying all held), write `--junit`; `EXIT_BELOW_THRESHOLD` when a check failed,
    else `EXIT_OK` (a failed run has its own code already).

    Example:
        >>> apply_gates([FinishedRun("sums", task.log_path, 0)], args)
        0
    """
    thresholds = dict(getattr(args, "fail_under", None) or [])
    junit: str | None = getattr(args, "junit", None)
    reports: list[JUnitRun] = []
    failed: list[str] = []
    count = 0
    for run in runs:
        log = _read(run.log_path, whole=junit is not None)
        checks = _checks(log, thresholds) if thresholds and log is not None else []
        count += len(checks)
        failed += [check.line(run.label) for check in checks if not check.passed]
        if thresholds and log is None:
            failed.append(f"FAIL {run.label}: the run wrote no log to check")
        reports.append(JUnitRun(run.label, log, checks, None if log else "the run wrote no log"))
    for line in failed:
        print(line, flush=True)
    if thresholds and not failed:
        print(f"Thresholds: all {count} met.", flush=True)
    if junit is not None:
        write_junit(junit, reports)
        print(f"JUnit report: {junit}", flush=True)
    return EXIT_BELOW_THRESHOLD if failed else EXIT_OK


def _read(path: str | Path | None, whole: bool) -> LoggedEval | None:
    """The run's log, header only unless its samples are needed; None when there is none."""
    if path is None:
        return None
    try:
        return read_log(path, header_only=not whole)
    except LogFormatError:
        return None


def _checks(log: LoggedEval, thresholds: dict[str, float]) -> list[ThresholdCheck]:
    try:
        return check_thresholds(log, thresholds)
    except ConfigError as exc:
        raise UsageError(f"--fail-under: {exc}") from None
