"""Judge panels: several judges grade each sample, and one rule combines their grades.

`model_graded_qa(judges=[...], combine=...)` asks every judge of the panel at once
(one task each, under its own endpoint's limits, each call priced under the scorer
role) and keeps each judge's grade and reply in the score's metadata under
`"judges"`. The rules:

- `"majority"`: the grade most judges gave; a tie goes to the lowest of the tied
  grades (I below P below C; other letters after them, alphabetically), so a split
  panel never rounds a sample up;
- `"mean"`: the mean of C = 1, P = 0.5, I = 0, kept as the number (a score in 0..1,
  which `accuracy` averages as it does any number);
- `"min"` / `"max"`: the lowest / highest grade, as a grade;
- a function of the list of grades (one per judge, None where a judge gave none)
  returning the score's value.

Judges that gave no grade are left out of the built-in rules; a sample none of the
panel graded scores None. Over a run, the panel's agreement is Krippendorff's alpha
(nominal) over the samples' grades: `panel_alpha`.

Invariant: a judge that fails (its provider's error after retries) fails the sample
with that error, as a lone judge would; the other judges' calls are cancelled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from .._errors import ConfigError, ScorerError
from ..statistics.agreement import Alpha, PairAgreement, krippendorff_alpha, pairwise_agreement

__all__ = ["COMBINE_RULES", "Combine", "combine_grades", "panel_alpha", "resolve_combine"]

Grade: TypeAlias = str | None
#: A built-in rule's name, or a function of the judges' grades returning the value.
Combine: TypeAlias = str | Callable[[list[Grade]], Any]

#: The built-in rules of `combine=`.
COMBINE_RULES = ("majority", "mean", "min", "max")

_POINTS = {"I": 0.0, "P": 0.5, "C": 1.0}
_RANK = {"I": 0, "P": 1, "C": 2}


def resolve_combine(name: str, combine: Any) -> Callable[[list[Grade]], Any]:
    """The function a `combine=` argument names (a `ConfigError` for an unknown rule)."""
    if callable(combine):
        return combine
    if combine not in COMBINE_RULES:
        raise ConfigError(
            f"{name}: combine must be one of {', '.join(map(repr, COMBINE_RULES))} "
            f"or a function of the list of grades, not {combine!r}."
        )
    return _RULES[combine]


def combine_grades(grades: list[Grade], combine: Combine) -> Any:
    """The panel's value from its judges' grades.

    Example:
        >>> combine_grades(["C", "I", "C"], "majority"), combine_grades(["C", "I"], "majority")
        ('C', 'I')
        >>> combine_grades(["C", "P", None], "mean"), combine_grades(["C", "P"], "min")
        (0.75, 'P')
    """
    return resolve_combine("combine_grades", combine)(grades)


def _order(grade: str) -> tuple[int, str]:
    return _RANK.get(grade, len(_RANK)), grade


def _majority(grades: list[Grade]) -> Grade:
    counts = Counter(g for g in grades if g is not None)
    if not counts:
        return None
    top = max(counts.values())
    return min((g for g, n in counts.items() if n == top), key=_order)


def _points(grades: list[Grade]) -> list[float]:
    given = [g for g in grades if g is not None]
    unknown = sorted({g for g in given if g not in _POINTS})
    if unknown:
        raise ScorerError(
            f"combine='mean', 'min' and 'max' take the grades C, P and I, not {unknown}; "
            "use 'majority' or a function for other grades."
        )
    return [_POINTS[g] for g in given]


def _mean(grades: list[Grade]) -> float | None:
    points = _points(grades)
    return sum(points) / len(points) if points else None


def _extreme(pick: Callable[[list[float]], float]) -> Callable[[list[Grade]], Grade]:
    def rule(grades: list[Grade]) -> Grade:
        points = _points(grades)
        if not points:
            return None
        value = pick(points)
        return next(g for g, p in _POINTS.items() if p == value)

    return rule


_RULES: dict[str, Callable[[list[Grade]], Any]] = {
    "majority": _majority,
    "mean": _mean,
    "min": _extreme(min),
    "max": _extreme(max),
}


def panel_alpha(metadatas: Iterable[Any]) -> Alpha | None:
    """Krippendorff's alpha (nominal) of a panel over the samples whose score metadata
    hold `"judges"` (None when no sample was graded by a panel).

    Example:
        >>> meta = [{"judges": [{"model": "a", "grade": "C"}, {"model": "b", "grade": "I"}]}]
        >>> panel_alpha(meta).units
        1
    """
    rows = _panel_rows(metadatas)
    if not rows:
        return None
    return krippendorff_alpha(rows)


def panel_pairs(metadatas: Iterable[Any]) -> list[PairAgreement]:
    """Percent agreement and Cohen's kappa of each pair of a panel's judges, named by
    their models, over the samples both graded.

    Example:
        >>> meta = [{"judges": [{"model": "a", "grade": "C"}, {"model": "b", "grade": "C"}]}]
        >>> panel_pairs(meta)[0].agreement
        1.0
    """
    metadatas = list(metadatas)
    rows = _panel_rows(metadatas)
    if not rows:
        return []
    names = _judge_names(metadatas, len(rows[0]))
    return pairwise_agreement({name: [row[i] for row in rows] for i, name in enumerate(names)})


def _panel_rows(metadatas: Iterable[Any]) -> list[list[Grade | None]]:
    """Each panel-graded sample's grades by judge position, padded to the widest panel."""
    rows: list[list[Grade | None]] = []
    for metadata in metadatas:
        judges = metadata.get("judges") if isinstance(metadata, dict) else None
        if isinstance(judges, list) and judges:
            rows.append([j.get("grade") if isinstance(j, dict) else None for j in judges])
    width = max((len(row) for row in rows), default=0)
    return [[*row, *[None] * (width - len(row))] for row in rows]


def _judge_names(metadatas: Iterable[Any], width: int) -> list[str]:
    """The judges' names by position: the model of the first sample that names it, made
    unique by position where two judges share a model."""
    names: list[str | None] = [None] * width
    for metadata in metadatas:
        judges = metadata.get("judges") if isinstance(metadata, dict) else None
        for i, judge in enumerate(judges if isinstance(judges, list) else []):
            if i < width and names[i] is None and isinstance(judge, dict):
                names[i] = str(judge.get("model") or "") or None
        if all(names):
            break
    labels = [name or f"judge {i + 1}" for i, name in enumerate(names)]
    return [
        label if labels.count(label) == 1 else f"{label} ({i + 1})"
        for i, label in enumerate(labels)
    ]
