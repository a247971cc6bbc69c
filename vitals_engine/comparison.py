"""Two runs of one task side by side: `compare(a, b)`, and every model of an eval set
against a baseline: `compare_models(eval_set)`. Their text is `comparison_report.py`'s.

Samples are paired by (id, epoch); a sample in one run only is counted, not paired.
Differences are B - A. The mean score (`accuracy`: C = 1, P = 0.5, I = 0, numbers and
booleans as they are) is compared over the pairs both runs scored, with one method per
case:

- both runs' scores pass or fail (C/I, booleans, 0/1): McNemar's test on the discordant
  pairs for the p-value, exact when each sample has one pair, and clustered by sample id
  (Durkalski's, test "McNemar (clustered)") when any sample has several epochs paired,
  since a sample's epochs are not independent; the interval is the paired difference
  +/- Student's t standard errors, clustered by sample id too, within -1..1.
- any other scores (P grades, numbers): a paired bootstrap (2,000 seeded draws of the
  samples, each with all its epochs) for both the p-value and the percentile interval.

Runs whose metrics were clustered by a metadata column (`Task(cluster="topic")`, which
their logs record) are compared clustered by it too, as `compare(..., cluster=)` asks:
the pairs of one topic count as one cluster in the test, the interval and the draws.

The runs' other metrics (custom ones) are shown as each run reports them, without a
test: only their values are known, not how they vary.

Runs of several scorers are compared by their primary (first) scorer, or by the one
`scorer=` names; the other scorers both runs have are compared too, each on its own
(`Comparison.by_scorer`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._errors import ConfigError, TaskStateError, VitalsError
from .comparison_report import comparison_set_text, comparison_text
from .log.logged_eval import LoggedEval
from .log.reader import read_log
from .statistics.paired import (
    Bootstrap,
    McNemar,
    mcnemar_clustered,
    paired_bootstrap,
    paired_difference,
)
from .statistics.reducers import numeric_value
from .task.task import Task

if TYPE_CHECKING:
    import polars as pl
    from typing_extensions import deprecated

    from .task.eval_set import EvalSet
else:
    _F = TypeVar("_F")

    def deprecated(message: str) -> Callable[[_F], _F]:
        """A no-op at run time: it marks an overload for type checkers (PEP 702), and
        compare() itself warns."""
        return lambda fn: fn


__all__ = ["Comparison", "ComparisonSet", "compare", "compare_models"]

Run = Task | LoggedEval | str | Path

_KEY = ["id", "epoch"]
_SIDE_COLUMNS = ("input", "score", "answer", "value", "cluster")


@dataclass
class _Run:
    """What a comparison needs of one run."""

    task: str
    model: str | None
    samples: pl.DataFrame  # id, epoch, input, score, answer, value (the score as a number)
    metrics: dict[str, float | int | None]
    cost: pl.DataFrame
    seconds: float | None
    #: The metadata column its metrics were clustered by (None: by sample).
    cluster: str | None = None
    #: Its samples as `get_samples()` gives them (for the cluster column's values).
    frame: pl.DataFrame | None = None
    #: Each scorer's metrics by name, the primary's first (several scorers).
    by_scorer: dict[str, dict[str, float | int | None]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.task} ({self.model})" if self.model else self.task


# -- the runs ------------------------------------------------------------------------------


def _task_model(task: Task, frame: pl.DataFrame) -> str | None:
    """The solver's model as `provider/model`: as its log names it, else its chats."""
    if task.log_path is not None:
        try:
            return read_log(task.log_path, header_only=True).model
        except VitalsError:
            pass
    if "solver_chat" in frame.columns:
        for chat in frame["solver_chat"].to_list():
            provider = getattr(chat, "provider", None)
            if provider is not None:
                return provider.model_id
    return None


def _log_seconds(logged: LoggedEval) -> float | None:
    stats = logged.header.stats
    try:
        started = datetime.fromisoformat(stats.started_at)
        completed = datetime.fromisoformat(stats.completed_at)
        return (completed - started).total_seconds()
    except (ValueError, TypeError):  # not written, or one time with a zone and one without
        return None


def _pairing_frame(frame: pl.DataFrame, where: str, column: str = "score") -> pl.DataFrame:
    """id, epoch, input (as text), score (from `column`: a scorer's own, `score_<name>`,
    when the run has several), answer (the primary scorer's) and the score as a number
    (none for a custom grade scheme, whose strings may include a "C" that means
    something else)."""
    import polars as pl

    if column not in frame.columns:
        raise TaskStateError(f"{where} has no scores: compare() needs scored runs.")
    inputs = [v if isinstance(v, str) or v is None else str(v) for v in frame["input"].to_list()]
    answers = pl.lit(None, dtype=pl.String)
    if "answer" in frame.columns and column == "score":
        answers = frame["answer"]
    epochs = frame["epoch"] if "epoch" in frame.columns else pl.lit(1, dtype=pl.Int64)
    scores = frame[column]
    values = [None] * frame.height
    if scores.dtype != pl.String:
        values = [numeric_value(v) for v in scores.to_list()]
    return frame.select(
        "id",
        epochs.alias("epoch"),
        pl.Series("input", inputs, dtype=pl.String),
        scores.alias("score"),
        answers.alias("answer"),
        pl.Series("value", values, dtype=pl.Float64),
        pl.lit(None, dtype=pl.String).alias("cluster"),
    )


def _with_clusters(a: _Run, b: _Run, column: str) -> tuple[_Run, _Run]:
    """The runs with each sample's cluster: its value in `column` (as text), which one
    run may lack (a pair takes A's value, else B's)."""
    frames = [run.frame if run.frame is not None else run.samples for run in (a, b)]
    if all(column not in frame.columns for frame in frames):
        known = ", ".join(c for c in frames[0].columns if c not in ("solver_chat", "scorer_chat"))
        raise ConfigError(
            f"compare(cluster={column!r}): neither {a.name} nor {b.name} has a column "
            f"{column!r} to cluster by (A's columns: {known})."
        )
    return _clustered(a, frames[0], column), _clustered(b, frames[1], column)


def _clustered(run: _Run, frame: pl.DataFrame, column: str) -> _Run:
    import polars as pl

    if column not in frame.columns:
        return dataclasses.replace(run, cluster=column)
    values = [None if v is None else str(v) for v in frame[column].to_list()]
    samples = run.samples.with_columns(pl.Series("cluster", values, dtype=pl.String))
    return dataclasses.replace(run, samples=samples, cluster=column)


def _cluster_column(a: _Run, b: _Run, asked: str | None) -> str | None:
    """The column to cluster by: the one asked for, else the one the runs' metrics were
    clustered by (None: by sample)."""
    if asked is not None:
        if not isinstance(asked, str) or not asked:
            raise ConfigError(
                f"`cluster` must name a column of the runs' samples, not {asked!r}. "
                "Example: compare(a, b, cluster='topic')."
            )
        return None if asked == "id" else asked
    if a.cluster is not None and b.cluster is not None and a.cluster != b.cluster:
        raise ConfigError(
            f"{a.name} clustered its metrics by {a.cluster!r} and {b.name} by {b.cluster!r}: "
            f"say which to compare them by, compare(a, b, cluster={a.cluster!r}) (or "
            "cluster='id' for by sample)."
        )
    return a.cluster or b.cluster


def _task_run(task: Task) -> _Run:
    if not task.solved:
        raise TaskStateError(f"Task {task.name} has not run yet: run task.eval() first.")
    if not task.scored:
        raise TaskStateError(f"Task {task.name} has not been scored: run task.score() first.")
    frame = task.get_samples()
    return _Run(
        task=task.name,
        model=_task_model(task, frame),
        samples=_pairing_frame(frame, f"Task {task.name}"),
        metrics=dict(task.metrics or {}),
        cost=task.get_cost(),
        seconds=task.elapsed,
        cluster=task.cluster,
        frame=frame,
        by_scorer={name: dict(m) for name, m in (task.metrics_by_scorer or {}).items()},
    )


def _logged_run(logged: LoggedEval) -> _Run:
    frame = logged.get_samples()
    return _Run(
        task=logged.task,
        model=logged.model,
        samples=_pairing_frame(frame, f"The log {logged.path}"),
        metrics=dict(logged.metrics or {}),
        cost=logged.get_cost(),
        seconds=_log_seconds(logged),
        cluster=logged.cluster,
        frame=frame,
        by_scorer=logged.metrics_by_scorer or {},
    )


def _scorer_run(run: _Run, name: str) -> _Run:
    """The run as scorer `name` scored it: its scores and metrics."""
    if name not in run.by_scorer:
        known = ", ".join(map(repr, run.by_scorer)) or "none named"
        raise ConfigError(f"{run.name} has no scorer {name!r} (its scorers: {known}).")
    if name == next(iter(run.by_scorer)):
        return run
    frame = run.frame if run.frame is not None else run.samples
    samples = _pairing_frame(frame, run.name, f"score_{name}")
    return dataclasses.replace(run, samples=samples, metrics=dict(run.by_scorer[name]))


def _shared_scorers(a: _Run, b: _Run) -> list[str]:
    """The scorers both runs have, when either has several (A's order)."""
    if len(a.by_scorer) < 2 and len(b.by_scorer) < 2:
        return []
    return [name for name in a.by_scorer if name in b.by_scorer]


def _load(value: Any, which: str) -> _Run:
    if isinstance(value, str | Path):
        value = read_log(value)
    if isinstance(value, Task):
        return _task_run(value)
    if isinstance(value, LoggedEval):
        return _logged_run(value)
    raise ConfigError(
        f"compare() takes Tasks that ran, logs read with read_log(), paths to logs, or an "
        f"eval set; `{which}` is a {type(value).__name__}."
    )


# -- pairing --------------------------------------------------------------------------------


def _pair(a: _Run, b: _Run) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The pairs (A's order) with each side's columns suffixed `_a` / `_b`, and the
    (id, epoch) of the samples only A and only B ran."""
    import polars as pl

    left, right = a.samples, b.samples
    if left["id"].dtype != right["id"].dtype:  # ints in one run, strings in the other
        left = left.with_columns(pl.col("id").cast(pl.String))
        right = right.with_columns(pl.col("id").cast(pl.String))
    if left["score"].dtype != right["score"].dtype and pl.Null not in (
        left["score"].dtype,
        right["score"].dtype,
    ):
        left = left.with_columns(pl.col("score").cast(pl.String))
        right = right.with_columns(pl.col("score").cast(pl.String))
    left = left.rename({c: f"{c}_a" for c in _SIDE_COLUMNS})
    right = right.rename({c: f"{c}_b" for c in _SIDE_COLUMNS})
    pairs = left.join(right, on=_KEY, how="inner", maintain_order="left")
    only_a = left.join(right, on=_KEY, how="anti").select(_KEY)
    only_b = right.join(left, on=_KEY, how="anti").select(_KEY)
    return pairs, only_a, only_b


def _some(values: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in values[:3])
    return shown + (" ..." if len(values) > 3 else "")


def _check_same_task(a: _Run, b: _Run, pairs: pl.DataFrame) -> int:
    """Raise ConfigError for runs of different tasks; else how many pairs' inputs differ."""
    import polars as pl

    if pairs.height == 0:
        ids_a, ids_b = (r.samples["id"].unique(maintain_order=True).to_list() for r in (a, b))
        raise ConfigError(
            f"{a.name} and {b.name} have no sample in common (by id and epoch): they look "
            f"like runs of different tasks. Ids in A: {_some(ids_a)}; in B: {_some(ids_b)}."
        )
    differ = pairs.filter(pl.col("input_a").ne_missing(pl.col("input_b")))
    if differ.height == pairs.height:
        first = differ.row(0, named=True)
        raise ConfigError(
            f"No sample has the same input in {a.name} and {b.name}: they look like runs of "
            f"different tasks (sample {first['id']!r}: {first['input_a']!r:.60} in A, "
            f"{first['input_b']!r:.60} in B)."
        )
    return differ.height


# -- the comparison -----------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Two runs of one task compared sample by sample (B - A).

    Attributes:
        name_a, name_b: the runs as "task (provider/model)".
        metrics: one row per metric: metric, a, b, difference, low, high (the 95%
            interval), p_value, test ("McNemar"; "McNemar (clustered)", by sample, when
            a sample has several epochs paired; or "paired bootstrap"; null for a custom
            metric, shown untested), n_pairs.
        changed: the paired samples whose score differs: id, epoch, input, score_a,
            score_b, answer_a, answer_b.
        cost: one row per run (run "A" and "B"): name, requests, input_tokens,
            cached_input_tokens, cache_write_tokens, output_tokens, tokens, cost (None when a
            price is unknown).
        time: each run's wall time in seconds (None when unknown).
        only_a, only_b: (id, epoch) of the samples one run has and the other lacks.
        unscored: pairs left out of the tests because a run did not score them.
        inputs_differ: pairs whose input differs between the runs (an edited dataset).
        graded: whether the scores are grades (C/P/I, booleans, custom), not numbers.
        epochs: the highest epoch paired.
        mcnemar, bootstrap: the test behind the accuracy row, the other one None
            (`mcnemar.method` says "exact" or "clustered").
        cluster: the metadata column the pairs were clustered by (None: by sample).

    Example:
        >>> print(compare(task_a, task_b))
        >>> compare(task_a, task_b).metrics.row(0, named=True)["p_value"]
        0.0703125
    """

    name_a: str
    name_b: str
    metrics: pl.DataFrame
    changed: pl.DataFrame
    cost: pl.DataFrame
    time: tuple[float | None, float | None]
    only_a: list[tuple[int | str, int]]
    only_b: list[tuple[int | str, int]]
    unscored: int
    inputs_differ: int
    graded: bool
    epochs: int
    mcnemar: McNemar | None = None
    bootstrap: Bootstrap | None = None
    cluster: str | None = None
    #: The scorer compared (None: the runs' only one).
    scorer: str | None = None
    #: With several scorers in both runs: each shared scorer's comparison by its name.
    by_scorer: dict[str, Comparison] = field(default_factory=dict)

    def __str__(self) -> str:
        return comparison_text(self)


def _cluster_keys(pairs: pl.DataFrame, column: str | None) -> list[Any]:
    """Each pair's cluster: its sample, or its value in `column` (A's, else B's; a pair
    with neither is a cluster of its own sample)."""
    ids = pairs["id"].to_list()
    if column is None:
        return ids
    values = zip(pairs["cluster_a"].to_list(), pairs["cluster_b"].to_list(), ids, strict=True)
    return [(0, x) if x is not None else (0, y) if y is not None else (1, i) for x, y, i in values]


def _metric_rows(
    a: _Run, b: _Run, pairs: pl.DataFrame, column: str | None
) -> tuple[list[dict[str, Any]], int, McNemar | None, Bootstrap | None]:
    import polars as pl

    scored = pairs.filter(pl.col("value_a").is_not_null() & pl.col("value_b").is_not_null())
    rows: list[dict[str, Any]] = []
    test: McNemar | None = None
    boot: Bootstrap | None = None
    if scored.height:
        xs, ys = scored["value_a"].to_list(), scored["value_b"].to_list()
        ids = _cluster_keys(scored, column)
        row = {
            "metric": "accuracy",
            "a": math.fsum(xs) / len(xs),
            "b": math.fsum(ys) / len(ys),
            "n_pairs": scored.height,
        }
        if all(v in (0.0, 1.0) for v in (*xs, *ys)):
            # the same clusters as the interval's: exact while each sample has one pair
            test = mcnemar_clustered(xs, ys, ids)
            diff = paired_difference(xs, ys, ids, bounds=(-1.0, 1.0))
            row |= {
                "difference": diff.difference,
                "low": diff.low,
                "high": diff.high,
                "p_value": test.p_value,
                "test": "McNemar" + _clustered_by(column)
                if column is not None and test.method == "clustered"
                else test.name,
            }
        else:
            boot = paired_bootstrap(xs, ys, ids)
            row |= {
                "difference": boot.difference,
                "low": boot.low,
                "high": boot.high,
                "p_value": boot.p_value,
                "test": "paired bootstrap" + _clustered_by(column),
            }
        rows.append(row)
    for name in dict.fromkeys([*a.metrics, *b.metrics]):
        if rows and name == "accuracy":
            continue  # the paired one stands for it
        x, y = a.metrics.get(name), b.metrics.get(name)
        difference = y - x if x is not None and y is not None else None
        rows.append({"metric": name, "a": x, "b": y, "difference": difference})
    unscored = pairs.filter(pl.col("score_a").is_null() | pl.col("score_b").is_null()).height
    return rows, unscored, test, boot


def _clustered_by(column: str | None) -> str:
    """What a test's name says of its clusters when they are a column's (" (clustered by
    topic)"); nothing when they are the samples."""
    return f" (clustered by {column})" if column is not None else ""


def _metrics_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    import polars as pl

    schema = {
        "metric": pl.String,
        "a": pl.Float64,
        "b": pl.Float64,
        "difference": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
        "p_value": pl.Float64,
        "test": pl.String,
        "n_pairs": pl.Int64,
    }
    return pl.DataFrame(
        {c: [r.get(c) for r in rows] for c in schema},
        schema=schema,
    )


def _changed(pairs: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    both = pl.col("value_a").is_not_null() & pl.col("value_b").is_not_null()
    differs = (
        pl.when(both)
        .then(pl.col("value_a") != pl.col("value_b"))
        .otherwise(pl.col("score_a").cast(pl.String).ne_missing(pl.col("score_b").cast(pl.String)))
    )
    return pairs.filter(differs).select(
        "id",
        "epoch",
        pl.col("input_a").alias("input"),
        "score_a",
        "score_b",
        "answer_a",
        "answer_b",
    )


def _cost_frame(a: _Run, b: _Run) -> pl.DataFrame:
    import polars as pl

    def total(frame: pl.DataFrame, column: str) -> int | float | None:
        values = frame[column].to_list()
        if any(v is None for v in values):
            return None  # one unknown makes the total unknown, never a partial sum
        return sum(values)

    rows = []
    for label, run in (("A", a), ("B", b)):
        frame = run.cost
        columns = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
        tokens = [total(frame, c) for c in columns]
        rows.append(
            {
                "run": label,
                "name": run.name,
                "requests": total(frame, "requests"),
                "input_tokens": tokens[0],
                "cached_input_tokens": tokens[1],
                "cache_write_tokens": tokens[2],
                "output_tokens": tokens[3],
                "tokens": None if None in tokens else sum(t or 0 for t in tokens),
                "cost": total(frame, "cost"),
            }
        )
    schema = {
        "run": pl.String,
        "name": pl.String,
        "requests": pl.Int64,
        "input_tokens": pl.Int64,
        "cached_input_tokens": pl.Int64,
        "cache_write_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "tokens": pl.Int64,
        "cost": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _compare_runs(
    a: _Run, b: _Run, cluster: str | None = None, scorer: str | None = None
) -> Comparison:
    """The comparison by `scorer` (None: the primary), with each other scorer both
    runs have compared too."""
    shared = _shared_scorers(a, b)
    if scorer is None and not shared:
        return _compare_scores(a, b, cluster)
    chosen = scorer or shared[0]
    main = _compare_scores(_scorer_run(a, chosen), _scorer_run(b, chosen), cluster)
    others = {
        name: dataclasses.replace(
            _compare_scores(_scorer_run(a, name), _scorer_run(b, name), cluster), scorer=name
        )
        for name in shared
        if name != chosen
    }
    return dataclasses.replace(main, scorer=chosen, by_scorer=others)


def _compare_scores(a: _Run, b: _Run, cluster: str | None = None) -> Comparison:
    import polars as pl

    column = _cluster_column(a, b, cluster)
    if column is not None:
        a, b = _with_clusters(a, b, column)
    pairs, only_a, only_b = _pair(a, b)
    inputs_differ = _check_same_task(a, b, pairs)
    rows, unscored, test, boot = _metric_rows(a, b, pairs, column)
    dtypes = {a.samples["score"].dtype, b.samples["score"].dtype} - {pl.Null}
    return Comparison(
        name_a=a.name,
        name_b=b.name,
        metrics=_metrics_frame(rows),
        changed=_changed(pairs),
        cost=_cost_frame(a, b),
        time=(a.seconds, b.seconds),
        only_a=list(only_a.iter_rows()),
        only_b=list(only_b.iter_rows()),
        unscored=unscored,
        inputs_differ=inputs_differ,
        graded=not any(d.is_numeric() for d in dtypes),
        epochs=max(pairs["epoch"].to_list()),
        mcnemar=test,
        bootstrap=boot,
        cluster=column,
    )


# -- eval sets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonSet:
    """Every task of an eval set: each model's run against the baseline model's.

    `metrics` and `changed` stack the comparisons' frames, with `task`, `model_a`
    (the baseline) and `model_b` in front. `skipped` names the runs left out because
    they have no scores (a run of the set that failed before it was scored).

    Example:
        >>> print(compare_models(eval_set))
        >>> compare_models(eval_set, baseline="openai/gpt-4.1").metrics
    """

    comparisons: list[Comparison]
    tasks: list[str]
    models: list[tuple[str | None, str | None]]
    skipped: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Comparison]:
        return iter(self.comparisons)

    def __len__(self) -> int:
        return len(self.comparisons)

    def __getitem__(self, index: int) -> Comparison:
        return self.comparisons[index]

    def _stacked(self, attribute: str) -> pl.DataFrame:
        import polars as pl

        frames = [
            getattr(c, attribute).select(
                pl.lit(task, dtype=pl.String).alias("task"),
                pl.lit(model_a, dtype=pl.String).alias("model_a"),
                pl.lit(model_b, dtype=pl.String).alias("model_b"),
                pl.all(),
            )
            for c, task, (model_a, model_b) in zip(
                self.comparisons, self.tasks, self.models, strict=True
            )
        ]
        return pl.concat(frames, how="diagonal_relaxed")

    @property
    def metrics(self) -> pl.DataFrame:
        return self._stacked("metrics")

    @property
    def changed(self) -> pl.DataFrame:
        return self._stacked("changed")

    def __str__(self) -> str:
        return comparison_set_text(self)


def _model_id(model: Any) -> str | None:
    """An eval set's model as `provider/model` (a Chat, a model id, or a name)."""
    provider = getattr(model, "provider", None)
    if provider is not None and hasattr(provider, "model_id"):
        return str(provider.model_id)
    if isinstance(model, str):
        return model
    named = getattr(model, "model_id", None)
    return str(named) if named is not None else None


def _same_model(found: str | None, wanted: str) -> bool:
    """Whether a run's `provider/model` is `wanted` (which may leave out the provider)."""
    if found is None:
        return False
    return found == wanted or ("/" not in wanted and found.split("/", 1)[-1] == wanted)


def compare_models(
    eval_set: EvalSet, *, baseline: str | None = None, cluster: str | None = None
) -> ComparisonSet:
    """Compare every model of an eval set with a baseline model, task by task.

    `eval_set` is what `eval_set()` returns (anything with `.tasks`, and `.models`, whose
    first is the baseline unless `baseline=` names a model id, "provider/model" or the
    model alone). Each task's run on every other model is compared with its run on the
    baseline as `compare(a, b)` compares two runs (runs group by task name; a task that
    did not run on the baseline model is compared with its first run, unless `baseline=`
    names it: then that is a `ConfigError`). A run without scores (it failed before it
    was scored) is left out and named in `skipped`. `cluster` is as for `compare()`.

    Example:
        >>> runs = eval_set([adding, judged], models=["openai/gpt-4.1-mini", "openai/gpt-4.1"])
        >>> print(compare_models(runs))
        >>> compare_models(runs, baseline="openai/gpt-4.1").metrics
    """
    runs, skipped = _scored_runs(eval_set.tasks)
    models = list(getattr(eval_set, "models", None) or [])
    wanted = baseline if baseline is not None else (_model_id(models[0]) if models else None)
    groups: dict[str, list[_Run]] = {}
    for run in runs:
        groups.setdefault(run.task, []).append(run)
    comparisons, tasks, pairs = [], [], []
    for task, group in groups.items():
        base = _baseline_run(task, group, wanted, baseline)
        for run in group:
            if run is not base:
                comparisons.append(_compare_runs(base, run, cluster))
                tasks.append(task)
                pairs.append((base.model, run.model))
    if not comparisons:
        raise ConfigError(
            "Nothing to compare: each task of the eval set ran on a single model. "
            "compare_models(eval_set) compares each model's run of a task with the baseline's."
        )
    return ComparisonSet(comparisons, tasks, pairs, skipped)


def _scored_runs(tasks: Sequence[Any]) -> tuple[list[_Run], list[str]]:
    """An eval set's runs that have scores, and the names of those that have none."""
    runs, skipped = [], []
    for i, task in enumerate(tasks):
        try:
            runs.append(_load(task, f"tasks[{i}]"))
        except TaskStateError:
            skipped.append(getattr(task, "name", f"tasks[{i}]"))
    return runs, skipped


def _baseline_run(task: str, group: list[_Run], wanted: str | None, asked: str | None) -> _Run:
    """The run of `task` on the baseline model `wanted` (`asked`: the one `baseline=`
    named, which must be there), else the task's first run."""
    base = next((r for r in group if wanted is not None and _same_model(r.model, wanted)), None)
    if base is None and asked is not None:
        ran = ", ".join(str(r.model) for r in group)
        raise ConfigError(
            f"Task {task} has no run on the baseline model {asked!r}; it ran on {ran}."
        )
    return base or group[0]


@overload
def compare(
    a: Run, b: Run, *, cluster: str | None = None, scorer: str | None = None
) -> Comparison: ...


@overload
@deprecated("compare(eval_set) is compare_models(eval_set) now")
def compare(
    a: EvalSet, b: None = None, *, baseline: str | None = None, cluster: str | None = None
) -> ComparisonSet: ...


def compare(
    a: Any,
    b: Run | None = None,
    *,
    baseline: str | None = None,
    cluster: str | None = None,
    scorer: str | None = None,
) -> Comparison | ComparisonSet:
    """Compare two runs of one task sample by sample.

    `a` and `b` are Tasks that ran, logs read with `read_log()`, or paths to logs, in
    any mix. Samples pair by (id, epoch); the result holds the difference B - A in each
    metric with its 95% interval and a paired test (McNemar's for pass/fail grades,
    clustered by sample when samples ran several epochs; a paired bootstrap otherwise),
    the samples that changed grade, and each run's cost and time. Runs of different
    tasks (no sample in common) are a `ConfigError`.

    `cluster` names a column of the samples (a metadata column of the dataset) whose
    values cluster the pairs, for the test, the interval and the bootstrap's draws:
    pairs sharing a value are not independent (questions on one document, say). By
    default it is the column the runs' metrics were clustered by (`Task(cluster=)`,
    recorded in their logs), else each sample is a cluster with its epochs;
    `cluster="id"` asks for that whatever the runs used.

    Runs of several scorers are compared by the primary (first) scorer, or by the one
    `scorer` names; every other scorer both have is compared on its own, in
    `comparison.by_scorer` (and the printed text).

    The models of an eval set are compared by `compare_models(eval_set)`;
    `compare(eval_set)` still does it for this release, with a DeprecationWarning.

    Example:
        >>> comparison = compare(old_task, "logs/new-run.json")
        >>> print(comparison)
        accuracy 0.60 → 0.90 (+0.30, 95% CI +0.03\u2013+0.57), McNemar p = 0.070, 20 pairs
        ...
        >>> comparison.changed.select("id", "score_a", "score_b").rows()
        [(1, 'I', 'C'), ...]
    """
    if b is None and hasattr(a, "tasks") and not isinstance(a, Task | LoggedEval | str | Path):
        warnings.warn(
            "ve.compare(eval_set) is deprecated and goes in the next release: use "
            "ve.compare_models(eval_set), which returns the same ComparisonSet.",
            DeprecationWarning,
            stacklevel=2,
        )
        return compare_models(a, baseline=baseline, cluster=cluster)
    if baseline is not None:
        raise ConfigError(
            "`baseline=` is for compare_models(eval_set); compare(a, b) takes A as it."
        )
    if b is None:
        raise ConfigError(
            "compare() needs two runs, compare(a, b); the models of an eval set are "
            "compare_models(eval_set)."
        )
    return _compare_runs(_load(a, "a"), _load(b, "b"), cluster, scorer)
