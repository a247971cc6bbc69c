"""Scores as a column, and the metrics computed over it.

The score column's type follows the values: the grades I < P < C become an
ordered polars Enum, numbers a Float64, booleans a Boolean, anything else
(a custom grade scheme) a String.

polars is imported when a column is built, not with this module: `import
vitals_engine` stays cheap, and `GRADE_DTYPE` is made on first access.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError, MetricError
from .samples import GRADES

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "Metric",
    "accuracy",
    "check_metrics",
    "compute_metrics",
    "grade_dtype",
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


def numeric_value(value: Any) -> float | None:
    """A score as a number: C=1, P=0.5, I=0, numbers and booleans as they are; else None."""
    if isinstance(value, str):
        return _GRADE_VALUE.get(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return None


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
    import polars as pl

    results: dict[str, float] = {}
    for name, fn in metrics.items():
        value = fn(scores)
        if hasattr(value, "item") and not isinstance(value, pl.Series):
            value = value.item()  # numpy scalars
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            shown = repr(value) if not isinstance(value, pl.Series) else "a Series"
            raise MetricError(
                f"Each metric function must return a single number; metric '{name}' "
                f"returned a {type(value).__name__} ({shown[:60]})."
            )
        results[name] = float(value)
    return results
