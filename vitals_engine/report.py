"""Plain-text summaries of a run: metrics, cost by role and model, time."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import VitalsError
from ._words import plural
from .log.reader import read_log
from .scorers.panel import panel_alpha
from .statistics.agreement import describe_agreement
from .statistics.corrected import describe_corrected
from .task.measuring import scorers_agreement

if TYPE_CHECKING:
    import polars as pl

    from .statistics.intervals import MetricStat
    from .task.task import Task

__all__ = ["cache_note", "format_cost", "format_metric", "summary", "ungraded_note"]


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    numeric = [
        all(
            r[i].replace(",", "").replace(".", "").replace("$", "").isdigit() or r[i] == "unknown"
            for r in rows
        )
        and bool(rows)
        for i in range(len(header))
    ]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def format_cost(task: Task) -> str:
    """The cost table of a task: one line per role and model, "(batch)" after the model
    of the calls sent in provider batches, "(cached)" after that of the calls the cache
    answered, and a line under it counting the attempts that timed out, if any did."""
    frame = task.get_cost()
    writes = frame.height > 0 and bool(frame["cache_write_tokens"].sum())
    rows = []
    for r in frame.iter_rows(named=True):
        cost = "unknown" if r["cost"] is None else f"${r['cost']:.4f}"
        marks = (" (batch)" if r["batch"] else "") + (" (cached)" if r["cached"] else "")
        written = [f"{r['cache_write_tokens']:,}"] if writes else []
        rows.append(
            [
                r["role"],
                f"{r['provider']}/{r['model']}" + marks,
                f"{r['requests']:,}",
                f"{r['input_tokens']:,}",
                f"{r['cached_input_tokens']:,}",
                *written,
                f"{r['output_tokens']:,}",
                cost,
            ]
        )
    if not rows:
        return "No model calls."
    heads = ["role", "model", "requests", "input", "cached input"]
    table = _table([*heads, *(["cache write"] if writes else []), "output", "cost"], rows)
    lost = int(frame["timed_out"].sum())
    if lost:
        table += (
            f"\n{plural(lost, 'attempt')} timed out after the request was sent: a provider may "
            "bill them, so their input (estimated from the request) is counted above."
        )
    return table


def _ungraded(frame: pl.DataFrame) -> int:
    """How many samples a judge scored without a grade (its reply had none)."""
    if "scorer_metadata" not in frame.columns:
        return 0
    return sum(_no_grade(m) for m in frame["scorer_metadata"].to_list())


def _no_grade(metadata: Any) -> bool:
    return isinstance(metadata, dict) and metadata.get("no_grade") is True


def ungraded_note(frame: pl.DataFrame) -> str | None:
    """The line saying how many samples the judge gave no grade, or None when all were graded.

    Example:
        >>> ungraded_note(task.get_samples())
        "3 samples were not graded: the judge's reply had no grade; see the explanation column."
    """
    count = _ungraded(frame)
    if not count:
        return None
    were = "sample was" if count == 1 else "samples were"
    return (
        f"{count:,} {were} not graded: the judge's reply had no grade; see the explanation column."
    )


def panel_note(frame: pl.DataFrame) -> str | None:
    """How far a judge panel agreed over the run's samples ("judges agree: alpha 0.74
    (nominal, 20 samples graded by 3 judges)"); None when no panel graded them."""
    if "scorer_metadata" not in frame.columns:
        return None
    alpha = panel_alpha(frame["scorer_metadata"].to_list())
    return describe_agreement(alpha) if alpha is not None else None


def human_note(task: Task) -> str | None:
    """Each scorer's mean corrected by the human grades, and how the judge agrees with
    them ("judge 0.84; corrected 0.71 (95% CI 0.65-0.77) from 200 human grades; ..."), or
    why there is none; None for a task without human grades.

    Example:
        >>> print(human_note(task))
        judge 0.84; corrected 0.71 (95% CI 0.65\u20130.77) from 200 human grades; ...
    """
    state = task._state  # the correction is the run's, kept with its state
    if state.corrected is None:
        return None
    several = len(task.scorer_names) > 1
    lines = []
    for name, result in state.corrected.items():
        agree = result.agreement
        text = describe_corrected(result)
        if not math.isnan(agree.agreement):
            kappa = "undefined" if math.isnan(agree.kappa) else f"{agree.kappa:.2f}"
            text += f"; judge and humans agree on {agree.agreement:.0%} (kappa {kappa})"
        lines.append(f"{name}: {text}" if several else text)
    if not lines:
        graded = state.human_graded or 0
        return (
            f"Not corrected by human grades: {plural(graded, 'scored sample')} "
            f"{'has' if graded == 1 else 'have'} one; correcting needs 2 at least."
        )
    return "\n".join(lines)


def cache_note(task: Task) -> str | None:
    """The line saying how many model calls the cache answered and how many were sent,
    or None when no run of the task since it last solved used a cache.

    Example:
        >>> cache_note(task.eval(cache=True))
        'Cache: 3 of 8 calls answered from the cache, 5 sent.'
    """
    state = task._state  # the counts are the run's, kept with its state
    hits, misses = state.cache_hits, state.cache_misses
    if hits is None or misses is None:
        return None
    calls = plural(hits + misses, "call")
    return f"Cache: {hits:,} of {calls} answered from the cache, {misses:,} sent."


def format_metric(name: str, value: float, stat: MetricStat | None = None) -> str:
    """A metric as the summary shows it: its value, and with statistics its standard
    error, 95% interval and how many scores (and clusters) it is over.

    Example:
        >>> format_metric("accuracy", 0.75, task.metric_stats["accuracy"])
        'accuracy = 0.75 ± 0.068 (95% CI 0.61-0.89, 40 samples)'
    """
    text = f"{name} = {value:.4g}"
    if stat is None or stat.stderr is None:
        return text
    text += f" ± {stat.stderr:.2g}"
    details = []
    if stat.low is not None and stat.high is not None:
        details.append(f"95% CI {stat.low:.3g}\u2013{stat.high:.3g}")
    if stat.n is not None:
        if stat.clusters is None or stat.clusters == stat.n:
            details.append(plural(stat.n, "sample"))
        else:
            details.append(f"{plural(stat.n, 'score')} in {plural(stat.clusters, 'cluster')}")
    return text + (f" ({', '.join(details)})" if details else "")


def _stopped_run_metrics(
    path: Path,
) -> tuple[dict[str, float | int | None] | None, dict[str, MetricStat] | None, str | None]:
    """The metrics (and their statistics) the log of a run that stopped before the end
    holds, and its status (the task keeps none in `metrics`); Nones for any other log."""
    try:
        logged = read_log(path, header_only=True)
    except VitalsError:
        return None, None, None
    if logged.status not in ("cancelled", "error"):
        return None, None, None
    return logged.metrics, logged.metric_stats, logged.status


def _metrics_text(
    values: dict[str, float] | dict[str, float | int | None] | None,
    stats: dict[str, MetricStat] | None,
) -> str:
    return "; ".join(
        format_metric(k, v, (stats or {}).get(k))
        for k, v in (values or {}).items()
        if v is not None
    )


def _by_scorer_text(task: Task) -> str | None:
    """With several scorers, a line of metrics per scorer and how far they agree (None:
    one scorer, or no metrics)."""
    state = task._state  # each scorer's statistics, kept with the run's state
    if state.scorer_stats is None or state.metrics is None:
        return None
    lines = ["Metrics by scorer:"]
    for name, stats in state.scorer_stats.items():
        values = {metric: stat.value for metric, stat in stats.items()}
        lines.append(f"  {name}: {_metrics_text(values, stats) or 'none'}")
    agreement = scorers_agreement(list(state.scorer_stats), state.records or [])
    if agreement is not None:
        lines.append(describe_scorers_agreement(agreement))
    return "\n".join(lines)


def describe_scorers_agreement(agreement: dict[str, Any]) -> str:
    """The agreement of a task's scorers as the summary says it.

    Example:
        >>> describe_scorers_agreement({"scorers_alpha": 0.5, "scorers_alpha_level": "nominal",
        ...                             "scorers_alpha_samples": 10, "scorers_pairs": [{}]})
        'scorers agree: alpha 0.50 (nominal, over 10 samples scored by each)'
    """
    alpha, samples = agreement.get("scorers_alpha"), agreement.get("scorers_alpha_samples") or 0
    if alpha is None:
        over = plural(samples, "sample")
        return f"scorers agree: alpha undefined (every score the same, or none shared; {over})"
    level, over = agreement.get("scorers_alpha_level"), plural(samples, "sample")
    return f"scorers agree: alpha {alpha:.2f} ({level}, over {over} scored by each)"


def summary(task: Task) -> str:
    """Metrics, ungraded samples, sample counts, time, cost table, the cache's hits and log
    path of a task's last run.

    Example:
        >>> print(summary(task.eval()))
    """
    frame = task.get_samples()
    parts = [f"Task {task.name}: {plural(frame.height, 'sample')}"]
    if task.solved:
        failed = frame["error"].is_not_null().sum() if "error" in frame.columns else 0
        parts[0] += f", {failed} failed"
    elapsed = task.elapsed
    if elapsed is not None:
        parts[0] += f", {elapsed:.2f}s"
    values, stats, stopped = task.metrics, task.metric_stats, None
    if values is None and task.solved and task.log_path is not None:
        values, stats, stopped = _stopped_run_metrics(task.log_path)
    metrics = _metrics_text(values, stats)
    parts.append(f"Metrics: {metrics or 'none'}")
    by_scorer = _by_scorer_text(task)
    if by_scorer is not None:
        parts[-1] = by_scorer
    if metrics and stopped is not None:
        parts[-1] += f" (of the samples scored before the run stopped: status {stopped})"
    for note in (panel_note(frame), ungraded_note(frame), human_note(task)):
        if note is not None:
            parts[-1] += f"\n{note}"
    parts.append(format_cost(task))
    cached = cache_note(task)
    if cached is not None:
        parts.append(cached)
    if task.log_path is not None:
        parts.append(f"Log: {task.log_path}")
    return "\n\n".join(parts)
