"""Quality gates: a run's metrics compared with the least each may be.

`check_thresholds(log, {"accuracy": 0.8})` reads the metrics from the log's header
(`results.scores`: one entry per scorer, each with its metrics) and returns one
`ThresholdCheck` per threshold. A threshold is named as the log names the metric:
`scorer/metric` (`"detect_includes/accuracy"`), or the plain metric name when only one
scorer of the run has a metric of that name. A name that matches no metric, or more
than one, is a `ConfigError` that lists the names there are.

A check passes when the run succeeded and its metric is at least the threshold. A run
that did not succeed (status "error", "cancelled", or still "started") passes none of
its checks, whatever its metrics; when it has no results at all, the names cannot be
checked, and each check fails for that reason.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import ConfigError

if TYPE_CHECKING:  # the log's modules are imported when a log is checked: `vitals --help`
    from .log import schema as s  # parses `--fail-under` without them
    from .log.logged_eval import LoggedEval
    from .task.task import Task

__all__ = ["ThresholdCheck", "check_thresholds", "parse_threshold"]


@dataclass(frozen=True)
class ThresholdCheck:
    """One metric of one run compared with its threshold.

    Attributes:
        task: the run's task.
        name: the threshold's name as given (`"accuracy"`, `"detect_includes/accuracy"`).
        scorer: the scorer whose metric it is (None: the run has no results).
        metric: the metric's name.
        threshold: the least the metric may be.
        value: the metric's value (None: the run has no value for it).
        status: the run's status ("success", "error", "cancelled", "started").

    Example:
        >>> check = ThresholdCheck("sums", "accuracy", "detect_includes", "accuracy",
        ...                        0.8, 0.72, "success")
        >>> check.passed, check.line()
        (False, 'FAIL sums: accuracy 0.72 < 0.80')
    """

    task: str
    name: str
    scorer: str | None
    metric: str
    threshold: float
    value: float | None
    status: str

    @property
    def passed(self) -> bool:
        """Whether the run succeeded with the metric at least at its threshold."""
        return self.status == "success" and self.value is not None and self.value >= self.threshold

    def reason(self) -> str:
        """The comparison in words: `accuracy 0.72 < 0.80`, `accuracy 0.91 >= 0.80`, or
        why there was nothing to compare."""
        if self.value is None:
            why = "no results" if self.scorer is None else "no value"
            return f"{self.name}: {why} (the run ended with status {self.status})"
        shown, limit = _shown(self.value, self.threshold)
        sign = ">=" if self.value >= self.threshold else "<"
        text = f"{self.name} {shown} {sign} {limit}"
        if self.status != "success":
            text += f", but the run ended with status {self.status}"
        return text

    def line(self, label: str | None = None) -> str:
        """One line: `FAIL sums: accuracy 0.72 < 0.80` (or `ok ...`); `label` names the
        run instead of its task (e.g. "sums on openai/gpt-4.1-mini")."""
        return f"{'ok' if self.passed else 'FAIL'} {label or self.task}: {self.reason()}"


def parse_threshold(text: str) -> tuple[str, float]:
    """`"NAME=VALUE"` as (name, value), as `vitals eval --fail-under` takes it.

    Example:
        >>> parse_threshold("detect_includes/accuracy=0.9")
        ('detect_includes/accuracy', 0.9)
    """
    name, sep, number = text.rpartition("=")
    name = name.strip()
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not sep or not name or not math.isfinite(value):
        raise ConfigError(
            f"A threshold is METRIC=VALUE (accuracy=0.8, or scorer/metric=0.8), not {text!r}."
        )
    return name, value


def check_thresholds(
    log: LoggedEval | s.EvalLog | Task | str | Path,
    thresholds: Mapping[str, float],
) -> list[ThresholdCheck]:
    """Compare a run's metrics with `thresholds` (name -> the least the metric may be);
    one check per threshold, in their order. `log`: a log read (`read_log`), its path, its
    header, or a `Task` that ran (its log is read).

    Raises `ConfigError` for a name that matches no metric of the run, or several, and
    for a threshold that is not a finite number (as `--fail-under` does).

    Example:
        >>> checks = ve.check_thresholds(task, {"accuracy": 0.8})
        >>> all(c.passed for c in checks)
        True
        >>> [c.line() for c in checks if not c.passed]
        []
    """
    from .log import schema as s

    for name, limit in thresholds.items():
        _check_limit(name, limit)
    header = _header(log)
    results = header.results
    scores = results.scores if isinstance(results, s.EvalResults) else []
    task, status = header.eval.task, header.status
    if not scores:
        return [
            ThresholdCheck(task, name, None, name.rpartition("/")[2], float(limit), None, status)
            for name, limit in thresholds.items()
        ]
    metrics = {(score.name, key): value for score in scores for key, value in _values(score)}
    checks = []
    for name, limit in thresholds.items():
        scorer, metric = _resolve(name, metrics, task)
        value = metrics[scorer, metric]
        checks.append(ThresholdCheck(task, name, scorer, metric, float(limit), value, status))
    return checks


def _check_limit(name: str, limit: object) -> None:
    """A threshold must be a finite number: a NaN fails every check whatever the metric."""
    if isinstance(limit, bool) or not isinstance(limit, numbers.Real) or not math.isfinite(limit):
        raise ConfigError(
            f"Threshold {name!r} must be a finite number (e.g. {{{name!r}: 0.8}}), not {limit!r}."
        )


def _header(log: LoggedEval | s.EvalLog | Task | str | Path) -> s.EvalLog:
    from .log import schema as s
    from .log.logged_eval import LoggedEval
    from .log.reader import read_log

    if isinstance(log, s.EvalLog):
        return log
    if isinstance(log, LoggedEval):
        return log.header
    if isinstance(log, str | Path):
        return read_log(log, header_only=True).header
    path = log.log_path
    if path is None:
        raise ConfigError(f"Task '{log.name}' has no log yet: run it before checking it.")
    return read_log(path, header_only=True).header


def _values(score: s.EvalScore) -> list[tuple[str, float | None]]:
    """A scorer's metrics as numbers (None for a value that is none)."""
    from .log.logged_eval import metric_values_of

    found = []
    for key, value in metric_values_of(score).items():
        number = float(value) if isinstance(value, int | float) else None
        found.append((key, number if number is None or math.isfinite(number) else None))
    return found


def _resolve(
    name: str, metrics: Mapping[tuple[str, str], float | None], task: str
) -> tuple[str, str]:
    """The (scorer, metric) a threshold's name means: a metric name only one scorer has
    (a metric whose own name has a `/` is found whole first), or `scorer/metric`, the
    scorer named as the log names it (`detect_includes(case_sensitive=False)`) or by its
    function's name alone (`detect_includes`) when only one scorer has that name."""
    plain = [key for key in metrics if key[1] == name]
    scorer, _, metric = name.rpartition("/")
    named = [key for key in metrics if key[1] == metric and scorer in (key[0], _short(key[0]))]
    exact = [key for key in named if key[0] == scorer]
    found = plain or exact or named
    if len(found) == 1:
        return found[0]
    names = ", ".join(_known(metrics))
    if found:
        raise ConfigError(
            f"Threshold '{name}' of task '{task}': several scorers have that metric; name "
            f"one as scorer/metric. The metrics: {names}."
        )
    raise ConfigError(
        f"Threshold '{name}': task '{task}' has no such metric. Its metrics: {names}."
    )


def _short(scorer: str) -> str:
    """A scorer's name without its arguments: `detect_includes(case_sensitive=False)` ->
    `detect_includes`."""
    return scorer.partition("(")[0]


def _known(metrics: Mapping[tuple[str, str], float | None]) -> list[str]:
    """Every metric as `scorer/metric` (the scorer by its short name where no other scorer
    has it), with its plain name first where no other scorer has that metric."""
    metric_counts = Counter(metric for _, metric in metrics)
    short_counts = Counter(_short(scorer) for scorer in {scorer for scorer, _ in metrics})
    shown = []
    for scorer, metric in metrics:
        full = f"{_short(scorer) if short_counts[_short(scorer)] == 1 else scorer}/{metric}"
        shown.append(f"{metric} ({full})" if metric_counts[metric] == 1 else full)
    return shown


def _shown(value: float, threshold: float) -> tuple[str, str]:
    """Both numbers with as many decimals as the threshold has (at least 2), and more while
    the value would look equal to the threshold without being so."""
    decimals = 2
    while decimals < 6 and float(f"{threshold:.{decimals}f}") != threshold:
        decimals += 1
    while decimals < 12 and f"{value:.{decimals}f}" == f"{threshold:.{decimals}f}":
        if value == threshold:
            break
        decimals += 1
    return f"{value:.{decimals}f}", f"{threshold:.{decimals}f}"
