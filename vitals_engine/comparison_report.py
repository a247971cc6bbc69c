"""The text of a comparison: what `print(compare(a, b))` and `print(compare_models(runs))`
show, as `report.py` writes a run's summary.

It reads a comparison through what it shows (`ComparedRuns`, `ComparedModels`), so that
`comparison.py`, which computes comparisons, uses it for their `__str__` without this
module knowing how they were computed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ._words import plural

if TYPE_CHECKING:
    import polars as pl

__all__ = ["ComparedModels", "ComparedRuns", "comparison_set_text", "comparison_text"]

#: The changed samples listed under a comparison (the rest are counted).
_SHOWN_CHANGES = 10


class ComparedRuns(Protocol):
    """What the text of two runs compared reads (`comparison.Comparison` holds it)."""

    @property
    def name_a(self) -> str: ...
    @property
    def name_b(self) -> str: ...
    @property
    def metrics(self) -> pl.DataFrame: ...
    @property
    def changed(self) -> pl.DataFrame: ...
    @property
    def cost(self) -> pl.DataFrame: ...
    @property
    def time(self) -> tuple[float | None, float | None]: ...
    @property
    def only_a(self) -> list[tuple[int | str, int]]: ...
    @property
    def only_b(self) -> list[tuple[int | str, int]]: ...
    @property
    def unscored(self) -> int: ...
    @property
    def inputs_differ(self) -> int: ...
    @property
    def graded(self) -> bool: ...
    @property
    def epochs(self) -> int: ...
    @property
    def scorer(self) -> str | None: ...
    @property
    def by_scorer(self) -> Mapping[str, ComparedRuns]: ...


class ComparedModels(Protocol):
    """What the text of an eval set's models compared reads (`comparison.ComparisonSet`)."""

    @property
    def metrics(self) -> pl.DataFrame: ...
    @property
    def skipped(self) -> list[str]: ...
    def __iter__(self) -> Iterator[Any]: ...


def _number(value: float) -> str:
    return f"{value:.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.2g}"


def _signed(value: float) -> str:
    return ("+" if value >= 0 else "") + _number(value)


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.2f} s" if value < 10 else f"{value:,.0f} s"


def _metric_line(row: dict[str, Any]) -> str:
    a, b = ("?" if v is None else _number(v) for v in (row["a"], row["b"]))
    shown = f"{row['metric']} {a} → {b}"
    if row["difference"] is None:
        return shown
    if row["test"] is None:
        return shown + f" ({_signed(row['difference'])}; as the runs report it, untested)"
    if row["low"] is None:
        interval = "no interval from one sample"
    else:
        interval = f"95% CI {_signed(row['low'])}\u2013{_signed(row['high'])}"
    return (
        shown
        + f" ({_signed(row['difference'])}, {interval}), {row['test']} {_p(row['p_value'])}, "
        + plural(row["n_pairs"], "pair")
    )


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _changes_line(comparison: ComparedRuns) -> str:
    changed = comparison.changed
    what = "grade" if comparison.graded else "score"
    if changed.height == 0:
        return f"No sample changed {what}."
    counts = Counter(
        f"{_shown(x)}→{_shown(y)}"
        if comparison.graded or x is None or y is None
        else ("up" if y > x else "down")
        for x, y in zip(changed["score_a"].to_list(), changed["score_b"].to_list(), strict=True)
    )
    parts = ", ".join(f"{n} {change}" for change, n in counts.most_common())
    if comparison.epochs > 1:
        return f"{plural(changed.height, '(sample, epoch) pair')} changed {what}: {parts}"
    return f"{plural(changed.height, 'sample')} changed {what}: {parts}"


def _cost_line(comparison: ComparedRuns) -> str:
    a, b = comparison.cost.iter_rows(named=True)
    tokens = [("unknown" if r["tokens"] is None else f"{r['tokens']:,}") for r in (a, b)]
    time_a, time_b = comparison.time
    return (
        f"cost {_money(a['cost'])} vs {_money(b['cost'])}; tokens {tokens[0]} vs {tokens[1]}; "
        f"time {_seconds(time_a)} vs {_seconds(time_b)}"
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _changes_table(changed: pl.DataFrame) -> str:
    rows = [
        [
            str(r["id"]),
            str(r["epoch"]),
            _shown(r["score_a"]),
            _shown(r["score_b"]),
            " ".join((r["input"] or "").split())[:50],
        ]
        for r in changed.head(_SHOWN_CHANGES).iter_rows(named=True)
    ]
    table = _table(["id", "epoch", "A", "B", "input"], rows)
    if changed.height > _SHOWN_CHANGES:
        table += f"\n... and {changed.height - _SHOWN_CHANGES:,} more (see .changed)"
    return table


def comparison_text(comparison: ComparedRuns) -> str:
    """What `print(compare(a, b))` shows: the runs, each metric's difference and test, the
    changes, cost and time, what was left out, and the samples that changed."""
    lines = [f"A: {comparison.name_a}", f"B: {comparison.name_b}", ""]
    if comparison.scorer is not None:
        lines.append(f"Scorer {comparison.scorer}:")
    lines += [_metric_line(row) for row in comparison.metrics.iter_rows(named=True)]
    for name, other in comparison.by_scorer.items():
        lines.append(f"Scorer {name}:")
        lines += [_metric_line(row) for row in other.metrics.iter_rows(named=True)]
    lines.append(_changes_line(comparison))
    lines.append(_cost_line(comparison))
    if comparison.only_a or comparison.only_b:
        lines.append(
            f"Not paired: {plural(len(comparison.only_a), 'sample')} only in A, "
            f"{len(comparison.only_b):,} only in B"
        )
    if comparison.unscored:
        lines.append(f"Left out: {plural(comparison.unscored, 'pair')} one run did not score")
    if comparison.inputs_differ:
        lines.append(
            f"Note: the input differs between the runs in "
            f"{plural(comparison.inputs_differ, 'paired sample')}"
        )
    if comparison.changed.height:
        lines += ["", _changes_table(comparison.changed)]
    return "\n".join(lines)


def comparison_set_text(comparisons: ComparedModels) -> str:
    """What `print(compare_models(eval_set))` shows: one line per task, model and metric,
    then each comparison in full."""
    rows = []
    for r in comparisons.metrics.iter_rows(named=True):
        shown = ["" if r[c] is None else _number(r[c]) for c in ("a", "b")]
        rows.append(
            [
                r["task"],
                str(r["model_a"]),
                str(r["model_b"]),
                r["metric"],
                *shown,
                "" if r["difference"] is None else _signed(r["difference"]),
                "" if r["low"] is None else f"{_signed(r['low'])}\u2013{_signed(r['high'])}",
                "" if r["p_value"] is None else _p(r["p_value"]).removeprefix("p = "),
                r["test"] or "",
            ]
        )
    header = ["task", "model A", "model B", "metric", "A", "B", "B - A", "95% CI", "p", "test"]
    table = _table(header, rows)
    if comparisons.skipped:
        runs = plural(len(comparisons.skipped), "run")
        table += f"\nNot compared: {runs} without scores ({', '.join(comparisons.skipped)})"
    return "\n\n\n".join([table, *(str(c) for c in comparisons)])
