"""Scores as a column, and the metrics computed over it.

The score column's type follows the values: the grades I < P < C become an
ordered polars Enum, numbers a Float64, booleans a Boolean, anything else
(a custom grade scheme) a String.

polars is imported when a column is built, not with this module: `import
vitals_engine` stays cheap, and `GRADE_DTYPE` is made on first access.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError, MetricError
from .samples import GRADES, Sample, SampleRecord, Score
from .statistics.intervals import MetricStat, bootstrap_stderr, mean_stderr, t_interval
from .statistics.reducers import numeric_value, reduce_epochs

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "Metric",
    "accuracy",
    "check_metrics",
    "compute_metrics",
    "grade_dtype",
    "measure_records",
    "metric_stats",
    "numeric_value",
    "score_series",
]

_GRADE_VALUE = {"I": 0.0, "P": 0.5, "C": 1.0}

Metric = Callable[["pl.Series"], Any]


@cache
def grade_dtype() -> pl.Enum:
    """The ordered grades I < P < C as a polars Enum (also `GRADE_DTYPE`)."""
    import polars as pl

    return pl.Enum(list(GRADES))


def __getattr__(name: str) -> Any:
    if name == "GRADE_DTYPE":
        return grade_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def score_series(values: Sequence[Any], name: str = "score") -> pl.Series:
    """The score column for `values`, typed by what they are.

    Example:
        >>> score_series(["C", "I"]).dtype
        Enum(categories=['I', 'P', 'C'])
    """
    import polars as pl

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, str) and v in _GRADE_VALUE for v in present):
        return pl.Series(name, values, dtype=grade_dtype())
    if present and all(isinstance(v, bool) for v in present):
        return pl.Series(name, values, dtype=pl.Boolean)
    if present and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in present):
        return pl.Series(name, [None if v is None else float(v) for v in values], dtype=pl.Float64)
    return pl.Series(name, [None if v is None else str(v) for v in values], dtype=pl.String)


def accuracy(scores: pl.Series) -> float | None:
    """Mean score on 0..1: C=1, P=0.5, I=0; numbers and booleans averaged.

    Unscored samples (null) are left out. Returns None for other strings,
    where accuracy has no meaning.

    Example:
        >>> accuracy(score_series(["P", "I"]))
        0.25
    """
    import polars as pl

    present = scores.drop_nulls()
    if present.len() == 0:
        return None
    if present.dtype == grade_dtype():
        numeric = present.cast(pl.String).replace_strict(_GRADE_VALUE, return_dtype=pl.Float64)
        return float(numeric.mean())  # type: ignore[arg-type]
    if present.dtype in (pl.Boolean, pl.Float64, pl.Int64):
        return float(present.cast(pl.Float64).mean())  # type: ignore[arg-type]
    return None


def check_metrics(metrics: Any) -> dict[str, Metric] | None:
    """Validate a user's metrics: None, or a dict of name -> function(scores)."""
    if metrics is None:
        return None
    if not isinstance(metrics, Mapping) or not all(
        isinstance(k, str) and callable(v) for k, v in metrics.items()
    ):
        raise ConfigError(
            "`metrics` must be a dict of name -> function(scores) -> number, or None, "
            f"not {type(metrics).__name__}. Example: metrics={{'pct_correct': my_fn}}."
        )
    if not metrics:
        raise ConfigError("`metrics` is an empty dict; pass None for the default accuracy.")
    return dict(metrics)


def compute_metrics(scores: pl.Series, metrics: Mapping[str, Metric] | None) -> dict[str, float]:
    """Apply `metrics` (default: accuracy) to the score column."""
    if metrics is None:
        value = accuracy(scores)
        return {} if value is None else {"accuracy": value}
    results: dict[str, float] = {}
    for name, fn in metrics.items():
        results[name] = _as_number(name, fn(scores))
    return results


def _as_number(name: str, value: Any) -> float:
    """A metric function's result as a float, or a `MetricError` saying what it was."""
    import polars as pl

    if hasattr(value, "item") and not isinstance(value, pl.Series):
        value = value.item()  # numpy scalars
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        shown = repr(value) if not isinstance(value, pl.Series) else "a Series"
        raise MetricError(
            f"Each metric function must return a single number; metric '{name}' "
            f"returned a {type(value).__name__} ({shown[:60]})."
        )
    if not math.isfinite(value):
        raise MetricError(
            f"Metric '{name}' returned {value}: a metric's value is a finite number (a log "
            "cannot hold another). Check the metric for an empty or zero division."
        )
    return float(value)


def metric_stats(
    scores: pl.Series,
    metrics: Mapping[str, Metric] | None,
    clusters: Sequence[Hashable] | None = None,
    *,
    seed: int = 0,
) -> dict[str, MetricStat]:
    """`compute_metrics`, each value with its standard error and 95% interval.

    `clusters` gives each score's cluster (default: each score its own). `accuracy`
    gets the analytic standard error of a mean, cluster-robust, and an interval clipped
    to 0..1 when the scores lie there; any other metric function a bootstrap over
    clusters (1,000 draws from `seed`: the same each time).

    Example:
        >>> stats = metric_stats(score_series(["C", "C", "I", "C"]), None)
        >>> round(stats["accuracy"].stderr, 3), stats["accuracy"].clusters
        (0.25, 4)
    """
    keys: Sequence[Hashable] = clusters if clusters is not None else range(scores.len())
    if len(keys) != scores.len():
        raise MetricError(f"{len(keys)} cluster keys for {scores.len()} scores.")
    present = [i for i, null in enumerate(scores.is_null().to_list()) if not null]
    stats: dict[str, MetricStat] = {}
    for name, value in compute_metrics(scores, metrics).items():
        fn = accuracy if metrics is None else metrics[name]
        if fn is accuracy:
            counted = [numeric_value(v) or 0.0 for v in scores.gather(present).to_list()]
            used = [keys[i] for i in present]
            stderr = mean_stderr(counted, used)
            bounded = all(0.0 <= x <= 1.0 for x in counted)
            bounds = (0.0, 1.0) if bounded else None
        else:

            def resampled(rows: pl.Series, fn: Metric = fn, name: str = name) -> float:
                return _as_number(name, fn(scores.gather(rows)))

            used = list(keys)
            stderr = bootstrap_stderr(resampled, used, seed=seed)
            bounds = None
        count = len(set(used))
        if stderr is not None and not math.isfinite(stderr):
            stderr = None
        low, high = t_interval(value, stderr, count, bounds=bounds)
        stats[name] = MetricStat(value, stderr, low, high, n=len(present), clusters=count)
    return stats


def measure_records(
    records: Sequence[SampleRecord],
    metrics: Mapping[str, Metric] | None,
    *,
    reducer: str | None = None,
    cluster: Callable[[Sample], Hashable] | None = None,
    scorer: str | None = None,
) -> dict[str, MetricStat]:
    """The metrics, with their statistics, of the records that finished without error,
    over the scores of `scorer` (a name of the task's several; None: the primary).

    With a `reducer`, each sample's epochs are first reduced to one score (see
    `statistics.reducers`). Scores are clustered by `cluster(sample)`, by default the
    sample's id: its epochs form one cluster.

    Example:
        >>> measure_records(task._state.records, None, reducer="mean")["accuracy"].value
        0.75
    """
    finished = [r for r in records if r.error is None]
    key = cluster or (lambda sample: sample.id)
    if reducer is None:
        values = [_value(r.score_by(scorer)) for r in finished]
        keys = [key(r.sample) for r in finished]
    else:
        by_sample: dict[Any, list[SampleRecord]] = {}
        for record in finished:
            by_sample.setdefault(record.sample.id, []).append(record)
        epochs = [sorted(group, key=lambda r: r.sample.epoch) for group in by_sample.values()]
        values = [reduce_epochs([_value(r.score_by(scorer)) for r in g], reducer) for g in epochs]
        keys = [key(g[0].sample) for g in epochs]
    return metric_stats(score_series(values), metrics, keys)


def _value(score: Score | None) -> Any:
    return score.value if score is not None else None
