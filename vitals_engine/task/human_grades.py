"""Human grades of some samples (`Task(human="grade")`): checked when the task is made,
and used after each run to correct each scorer's mean by them (prediction-powered
inference, `statistics/corrected.py`).

A sample's human grade is its value in the named metadata column: a grade C, P or I, a
number or a boolean (or either written as text, as a CSV holds it); empty (None, NaN)
where nobody graded it. The correction takes the
samples that finished and were scored, paired with their human grade where they have
one, clustered as the task's metrics are (a sample's epochs; `Task(cluster=)`'s
column), each sample's epochs reduced first when the task has a reducer. It needs two
human grades at least; with fewer, it is left out and the summary says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from typing import Any

from .._errors import ConfigError
from ..dataset import DatasetRow, known_columns
from ..samples import SampleRecord
from ..statistics.corrected import CorrectedMean, corrected_mean
from ..statistics.reducers import numeric_value, reduce_epochs
from .state import TaskSetup

__all__ = ["check_human", "correct_by_humans", "human_grade"]


#: A grade written as a number in a file read as text (a CSV's `1`, `0.5`).
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def human_grade(metadata: dict[str, Any], column: str) -> Any:
    """A sample's human grade in `column` (None: not graded). A file's text is read as
    written, so a grade written `1`, `0.5` or `true` is that number or boolean here."""
    value = metadata.get(column)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if _NUMBER.fullmatch(text):
            return float(text)
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
    return value


def check_human(human: Any, rows: Sequence[DatasetRow]) -> str | None:
    """`Task(human=)`: None, or a metadata column whose values are grades, numbers or
    booleans (empty where a row has none), present in some row.

    Example:
        >>> check_human("grade", [DatasetRow(1, "2+2", "4", {"grade": "C"})])
        'grade'
    """
    if human is None:
        return None
    if not isinstance(human, str) or not human:
        raise ConfigError(
            f"`human` must name the metadata column of human grades, not {human!r}. "
            "Example: human='grade'."
        )
    graded = 0
    for row in rows:
        value = human_grade(row.metadata, human)
        if value is None:
            continue
        if isinstance(value, bool) or numeric_value(value) is not None:
            graded += 1
            continue
        raise ConfigError(
            f"`human={human!r}`: sample {row.id!r} has {value!r} in that column; a human "
            "grade is C, P or I, a number or a boolean (empty where nobody graded it)."
        )
    if not graded:
        raise ConfigError(
            f"`human={human!r}`: no row has a human grade in that column (metadata columns: "
            f"{known_columns(rows)}). A dataset read with read_dataset(human=...) keeps them "
            "as 'human'."
        )
    return human


def correct_by_humans(
    setup: TaskSetup, records: Sequence[SampleRecord]
) -> tuple[dict[str, CorrectedMean], int]:
    """Each scorer's mean corrected by the human grades, by scorer name (those that
    could be: two human grades at least), and how many scored samples have one.

    Example:
        >>> corrected, graded = correct_by_humans(task._setup, task._state.records)
        >>> corrected["model_graded_qa"].corrected.value
        0.71
    """
    if setup.human is None:
        return {}, 0
    found: dict[str, CorrectedMean] = {}
    graded = 0
    names = setup.scorer_names
    for name in names:
        judge, human, keys = _pairs(setup, records, name if len(names) > 1 else None)
        graded = max(graded, sum(h is not None for h in human))
        if sum(h is not None for h in human) >= 2:
            bounds = (0.0, 1.0) if all(0 <= v <= 1 for v in _numbers(judge, human)) else None
            found[name] = corrected_mean(judge, human, keys, bounds=bounds)
    return found, graded


def _pairs(
    setup: TaskSetup, records: Sequence[SampleRecord], scorer: str | None
) -> tuple[list[Any], list[Any], list[Hashable]]:
    """The scored samples' judge scores, human grades (None: not graded) and clusters,
    each sample's epochs reduced first when the task has a reducer."""
    assert setup.human is not None
    column = setup.human
    scored = [r for r in records if r.error is None and _value(r, scorer) is not None]
    if setup.reducer is None:
        return (
            [_value(r, scorer) for r in scored],
            [human_grade(r.sample.metadata, column) for r in scored],
            [setup.cluster_of(r.sample) for r in scored],
        )
    by_sample: dict[Any, list[SampleRecord]] = {}
    for record in scored:
        by_sample.setdefault(record.sample.id, []).append(record)
    groups = list(by_sample.values())
    return (
        [reduce_epochs([_value(r, scorer) for r in g], setup.reducer) for g in groups],
        [human_grade(g[0].sample.metadata, column) for g in groups],
        [setup.cluster_of(g[0].sample) for g in groups],
    )


def _value(record: SampleRecord, scorer: str | None) -> Any:
    score = record.score_by(scorer)
    return score.value if score is not None else None


def _numbers(*columns: Sequence[Any]) -> list[float]:
    return [n for column in columns for v in column if (n := numeric_value(v)) is not None]
