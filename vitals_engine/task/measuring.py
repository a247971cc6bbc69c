"""What a task's scores tell: each scorer's metrics with their statistics, a judge
panel's agreement, and the agreement of several scorers over the same samples.

Agreement is Krippendorff's alpha over every rater at once, and percent agreement and
Cohen's kappa for each pair (`statistics/agreement.py`). Scorers are compared at the
nominal level when every score is a grade or a bool, else at the interval level (grades
counted C = 1, P = 0.5, I = 0, as the metrics count them).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from .._errors import VitalsError
from ..metrics import measure_records
from ..samples import SampleRecord
from ..scorers.panel import panel_alpha, panel_pairs
from ..statistics.agreement import Alpha, PairAgreement, krippendorff_alpha, pairwise_agreement
from ..statistics.intervals import MetricStat
from .state import TaskSetup

__all__ = ["measure_scorers", "panel_metadata", "scored_so_far", "scorers_agreement"]


def measure_scorers(
    setup: TaskSetup, records: Sequence[SampleRecord]
) -> dict[str, dict[str, MetricStat]]:
    """Each scorer's metrics with their statistics, by scorer name in the task's order
    (the primary first), over the records that finished without error.

    Example:
        >>> list(measure_scorers(task._setup, task._state.records))
        ['detect_includes', 'model_graded_qa']
    """
    names = setup.scorer_names or [None]
    return {
        name or "": measure_records(
            records,
            setup.metric_fns,
            reducer=setup.reducer,
            cluster=setup.cluster_of,
            scorer=name if len(names) > 1 else None,
        )
        for name in names
    }


def scored_so_far(
    setup: TaskSetup, records: Sequence[SampleRecord]
) -> dict[str, dict[str, MetricStat]] | None:
    """Each scorer's metrics over the samples scored before a run stopped, for its log
    (None: none scored, or a metric that cannot cope with a partial run)."""
    scored = [r for r in records if r.score is not None and r.error is None]
    if not scored:
        return None
    try:
        stats = measure_scorers(setup, scored)
    except VitalsError:
        return None
    return stats if any(stats.values()) else None


def panel_metadata(records: Iterable[SampleRecord], scorer: str | None) -> dict[str, Any] | None:
    """A judge panel's agreement over the run's scored samples (of scorer `scorer`, None:
    the primary), for its results score's metadata; None when no sample was graded by a
    panel. An undefined statistic is None."""
    metadatas = [
        score.metadata
        for r in records
        if r.error is None and (score := r.score_by(scorer)) is not None
    ]
    alpha = panel_alpha(metadatas)
    if alpha is None:
        return None
    return {
        "judges_alpha": _number(alpha.value),
        "judges_alpha_level": alpha.level,
        "judges_alpha_samples": alpha.units,
        "judges_alpha_judges": alpha.raters,
        "judges_pairs": _pairs(panel_pairs(metadatas)),
    }


def scorers_agreement(
    names: Sequence[str], records: Iterable[SampleRecord]
) -> dict[str, Any] | None:
    """The agreement of a task's several scorers over the samples each scored, for the
    log's results metadata (None: fewer than two scorers).

    Example:
        >>> scorers_agreement(["includes", "judge"], records)["scorers_alpha"]
        0.62
    """
    if len(names) < 2:
        return None
    ratings: dict[str, list[Hashable | None]] = {name: [] for name in names}
    for record in records:
        if record.error is not None or record.scores is None:
            continue
        for name in names:
            score = record.scores.get(name)
            ratings[name].append(_rating(score.value if score is not None else None))
    level = "nominal" if _all_labels(ratings) else "interval"
    alpha: Alpha = krippendorff_alpha(ratings, level)
    return {
        "scorers_alpha": _number(alpha.value),
        "scorers_alpha_level": alpha.level,
        "scorers_alpha_samples": alpha.units,
        "scorers_pairs": _pairs(pairwise_agreement(ratings)),
    }


def _rating(value: Any) -> Hashable | None:
    return value if isinstance(value, Hashable) else None


def _all_labels(ratings: dict[str, list[Hashable | None]]) -> bool:
    return all(
        v is None or isinstance(v, str | bool) for values in ratings.values() for v in values
    )


def _pairs(pairs: list[PairAgreement]) -> list[dict[str, Any]]:
    return [
        {
            "raters": [str(pair.raters[0]), str(pair.raters[1])],
            "samples": pair.units,
            "agreement": _number(pair.agreement),
            "kappa": _number(pair.kappa),
        }
        for pair in pairs
    ]


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value
