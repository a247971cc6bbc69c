"""Sample records -> polars DataFrames (what `Task.get_samples()` returns)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .dataset import DatasetRow
from .metrics import score_series
from .samples import SampleRecord
from .vocab.text import writable

if TYPE_CHECKING:
    import polars as pl

__all__ = ["dataset_frame", "records_frame"]


def _series(name: str, values: list[Any], **options: Any) -> pl.Series:
    """`pl.Series(name, values, ...)`; polars holds UTF-8 only, so text with a lone
    surrogate (a dataset read with `errors="surrogateescape"`) has it escaped, as the
    log has it (`vocab.text.writable`)."""
    import polars as pl

    try:
        return pl.Series(name, values, **options)
    except UnicodeEncodeError:
        return pl.Series(name, writable(values), **options)


_INT64 = range(-(2**63), 2**63)


def id_series(ids: Sequence[int | str | None]) -> pl.Series:
    """The `id` column: integers while every id is one that fits in 64 bits, else every
    id as text (an id beyond 64 bits, which polars cannot hold as a number, is kept, not
    refused).

    Example:
        >>> id_series([1, 2**70]).to_list()
        ['1', '1180591620717411303424']
    """
    import polars as pl

    if all(i is None or (isinstance(i, int) and i in _INT64) for i in ids):
        return pl.Series("id", ids, dtype=pl.Int64)
    return _series("id", [None if i is None else str(i) for i in ids], dtype=pl.String)


def _column(name: str, values: list[Any]) -> pl.Series:
    """A column typed by polars when it can be, kept as Python objects when not."""
    import polars as pl

    kinds = {type(v) for v in values if v is not None}
    if kinds <= {str}:
        return _series(name, values, dtype=pl.String)
    same_keys = kinds != {dict} or len({tuple(v) for v in values if v is not None}) == 1
    if (len(kinds) == 1 and same_keys) or kinds <= {int, float}:
        try:
            return _series(name, values, strict=len(kinds) == 1)
        except Exception:  # shapes polars cannot type (ragged structs ...): keep the objects
            pass
    return pl.Series(name, values, dtype=pl.Object)


def _target_series(targets: list[Any]) -> pl.Series:
    import polars as pl

    if all(isinstance(t, str) for t in targets):
        return _series("target", targets, dtype=pl.String)
    if all(isinstance(t, list) for t in targets):
        return _series("target", targets, dtype=pl.List(pl.String))
    return _series(
        "target", [t if isinstance(t, list) else [t] for t in targets], dtype=pl.List(pl.String)
    )


def _object_column(name: str, values: list[Any]) -> pl.Series | None:
    import polars as pl

    if all(v is None for v in values):
        return None
    return pl.Series(name, values, dtype=pl.Object)


def _metadata_columns(metadata: list[dict[str, Any]], taken: set[str]) -> list[pl.Series]:
    """One column per metadata key; a key that clashes with a built-in column gets a prefix."""
    keys: dict[str, None] = {}
    for meta in metadata:
        keys.update(dict.fromkeys(meta))
    return [
        _column(f"metadata_{k}" if k in taken else k, [m.get(k) for m in metadata]) for k in keys
    ]


def dataset_frame(rows: Sequence[DatasetRow]) -> pl.DataFrame:
    """The dataset as given: id, input, target and metadata columns."""
    import polars as pl

    columns = [
        id_series([r.id for r in rows]),
        _column("input", [r.input for r in rows]),
        _target_series([r.target for r in rows]),
    ]
    columns += _metadata_columns([r.metadata for r in rows], {"id", "input", "target"})
    return pl.DataFrame(columns)


_RESULT_COLUMNS = {
    "epoch",
    "result",
    "score",
    "scorer",
    "answer",
    "explanation",
    "error",
    "retries",
    "solver_metadata",
    "scorer_metadata",
    "solver_chat",
    "scorer_chat",
}


def records_frame(
    records: Sequence[SampleRecord], scorer: str | None, *, scored: bool
) -> pl.DataFrame:
    """One row per (sample, epoch), in run order, with results and scores."""
    import polars as pl

    columns = [
        *_sample_columns(records),
        _series("result", [r.result for r in records], dtype=pl.String),
        *(_score_columns(records, scorer) if scored else []),
        *(_per_scorer_columns(records) if scored else []),
        *_failure_columns(records),
        *_chat_columns(records, scored),
    ]
    return pl.DataFrame([c for c in columns if c is not None])


def _sample_columns(records: Sequence[SampleRecord]) -> list[pl.Series]:
    """What each sample was: id, epoch, input, target and its metadata columns."""
    import polars as pl

    samples = [r.sample for r in records]
    return [
        id_series([s.id for s in samples]),
        pl.Series("epoch", [s.epoch for s in samples], dtype=pl.Int64),
        _column("input", [s.input for s in samples]),
        _target_series([s.target for s in samples]),
        *_metadata_columns(
            [s.metadata for s in samples], {"id", "input", "target"} | _RESULT_COLUMNS
        ),
    ]


def _score_columns(records: Sequence[SampleRecord], scorer: str | None) -> list[pl.Series]:
    """The scores: value, scorer, answer and explanation (null where a sample has none)."""
    import polars as pl

    scores = [r.score for r in records]
    return [
        score_series([s.value if s else None for s in scores]),
        pl.Series("scorer", [scorer if s else None for s in scores], dtype=pl.String),
        pl.Series("answer", [s.answer if s else None for s in scores], dtype=pl.String),
        pl.Series("explanation", [s.explanation if s else None for s in scores], dtype=pl.String),
    ]


def _per_scorer_columns(records: Sequence[SampleRecord]) -> list[pl.Series]:
    """With several scorers, `score_<name>` for each (the primary's too), and
    `explanation_<name>` for each of the others that explained a score."""
    import polars as pl

    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record.scores or ()))
    columns = []
    for position, name in enumerate(names):
        scores = [(r.scores or {}).get(name) for r in records]
        columns.append(score_series([s.value if s else None for s in scores], f"score_{name}"))
        explanations = [s.explanation if s else None for s in scores]
        if position and any(explanations):
            columns.append(pl.Series(f"explanation_{name}", explanations, dtype=pl.String))
    return columns


def _failure_columns(records: Sequence[SampleRecord]) -> list[pl.Series]:
    """`error` and `retries`, each only when some sample has one."""
    import polars as pl

    columns = []
    errors = [str(r.error) if r.error else None for r in records]
    if any(errors):
        columns.append(_series("error", errors, dtype=pl.String))
    retries = [r.retries for r in records]
    if any(retries):
        columns.append(pl.Series("retries", retries, dtype=pl.Int64))
    return columns


def _chat_columns(records: Sequence[SampleRecord], scored: bool) -> list[pl.Series | None]:
    """The solver's metadata and chat, and the scorer's when scored (None: a column with
    no value at all, left out)."""
    columns = [
        _object_column("solver_metadata", [r.solver_metadata for r in records]),
        _object_column("solver_chat", [r.solver_chat for r in records]),
    ]
    if scored:
        scores = [r.score for r in records]
        columns += [
            _object_column("scorer_metadata", [s.metadata if s else None for s in scores]),
            _object_column("scorer_chat", [s.chat if s else None for s in scores]),
        ]
    return columns
