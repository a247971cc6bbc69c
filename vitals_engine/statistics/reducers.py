"""Epoch reducers: a sample's scores over its epochs as one score, as Inspect reduces them.

`Task(epochs=5, reducer=...)` takes one of:

- `"mean"`: the mean, grades counted C = 1, P = 0.5, I = 0 (a number);
- `"mode"`: the most common score, kept as it is (a grade stays a grade); a tie goes
  to the value of the earliest epoch among the tied ones, as in Inspect;
- `"max"`: the highest score, by the same counting, kept as it is;
- `"pass_at_<k>"` (e.g. `"pass_at_2"`, Inspect's name for `pass_at(k)`): the chance
  that at least one of k epochs drawn from the sample's n is correct, Inspect's
  unbiased estimator `1 - C(n - c, k) / C(n, k)`, c the correct epochs (C, 1 or True).

Unscored epochs (None) are left out; a sample with none scored (or, for pass_at_k,
fewer than k) reduces to None.
"""

from __future__ import annotations

import math
import numbers
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .._errors import ConfigError, MetricError

__all__ = ["REDUCERS", "check_reducer", "numeric_value", "pass_at_k", "reduce_epochs"]

#: The reducers by name; `pass_at_<k>` besides.
REDUCERS = ("mean", "mode", "max")

_GRADE_VALUE = {"I": 0.0, "P": 0.5, "C": 1.0}
_PASS_AT = re.compile(r"pass_at_(\d+)")


def numeric_value(value: Any) -> float | None:
    """A score as a number: C=1, P=0.5, I=0, numbers and booleans as they are; else None.

    Example:
        >>> numeric_value("P"), numeric_value(True), numeric_value("excellent")
        (0.5, 1.0, None)
    """
    if isinstance(value, str):
        return _GRADE_VALUE.get(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def check_reducer(reducer: Any, epochs: int | None = None) -> str | None:
    """Validate `Task(reducer=)`: None, "mean", "mode", "max" or "pass_at_<k>" (k at
    least 1 and, for pass_at, no more than the task's `epochs`, default 1).

    Example:
        >>> check_reducer("pass_at_2", epochs=5)
        'pass_at_2'
    """
    if reducer is None or reducer in REDUCERS:
        return reducer
    match = _PASS_AT.fullmatch(reducer) if isinstance(reducer, str) else None
    if match is None:
        hint = " Write k as a number: 'pass_at_2'." if reducer == "pass_at_k" else ""
        raise ConfigError(
            "`reducer` must be None, 'mean', 'mode', 'max' or 'pass_at_<k>' "
            f"(e.g. 'pass_at_2'), not {reducer!r}.{hint}"
        )
    k = int(match.group(1))
    if k < 1:
        raise ConfigError(f"`reducer={reducer!r}`: k must be at least 1.")
    if k > (epochs or 1):
        raise ConfigError(
            f"`reducer={reducer!r}` needs at least {k} epochs per sample, and the task has "
            f"{epochs or 1}: pass `epochs={k}` or more."
        )
    return f"pass_at_{k}"


def reduce_epochs(scores: Sequence[Any], reducer: str) -> Any:
    """One sample's epoch scores reduced to one score (None when none is scored).

    Example:
        >>> reduce_epochs(["C", "I", "C"], "mean")
        0.6666666666666666
        >>> reduce_epochs(["I", "C", "C", "I"], "mode")   # a tie: the earliest wins
        'I'
        >>> reduce_epochs(["C", "I", "I"], "pass_at_2")
        0.6666666666666667
    """
    present = [s for s in scores if s is not None]
    match = _PASS_AT.fullmatch(reducer)
    if match is not None:
        return pass_at_k(present, int(match.group(1)))
    if not present:
        return None
    if reducer == "mode":
        return Counter(present).most_common(1)[0][0]
    counted = [_number(s, reducer) for s in present]
    if reducer == "mean":
        return math.fsum(counted) / len(counted)
    if reducer == "max":
        return present[counted.index(max(counted))]
    raise ConfigError(f"Unknown reducer {reducer!r}.")


def pass_at_k(scores: Sequence[Any], k: int) -> float | None:
    """The chance that at least one of `k` of these epochs drawn without replacement is
    correct (C, 1 or True): `1 - C(n - c, k) / C(n, k)`; None with fewer than k scores.

    Example:
        >>> pass_at_k(["C", "I", "I", "I"], 2)
        0.5
    """
    n = len(scores)
    if n < k:
        return None
    correct = sum(1 for s in scores if (numeric_value(s) or 0.0) >= 1.0)
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


def _number(score: Any, reducer: str) -> float:
    value = numeric_value(score)
    if value is None:
        raise MetricError(
            f"The {reducer!r} reducer counts grades (C = 1, P = 0.5, I = 0), numbers and "
            f"booleans, not {score!r}; reducer='mode' keeps any score."
        )
    return value
