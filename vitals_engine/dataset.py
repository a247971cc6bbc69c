"""Normalise what a user calls a dataset into rows of (id, input, target, metadata).

Accepted: a list of dicts, a polars DataFrame, a pandas DataFrame (pandas is
not a dependency: it is recognised, not imported). A file is read into a list of
dicts first, its text as written (`dataset_files.file_rows`, as `Task(path)` does).
`input` and `target` are required; `id` is kept when present (it must be unique as
the log writes ids: `1` and `"1"` are one id), else ids are 1..n; every other column
is per-sample metadata.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ._errors import DatasetError
from .samples import Sample, id_text

__all__ = ["DatasetRow", "dataset_name", "load_dataset", "select_rows"]

_REQUIRED = ("input", "target")


#: A dataset row is its first epoch's sample: a run of one epoch holds one object per
#: row, not a row and its sample.
DatasetRow = Sample


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "to_dict")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _records(data: Any) -> Sequence[Mapping[str, Any]]:
    # A polars frame exists only once polars is imported: a list of dicts needs no polars.
    pl = sys.modules.get("polars")
    if isinstance(data, str | os.PathLike):
        raise DatasetError(
            f"'{data}' is a path: read a file with ve.read_dataset(path), or give it to Task."
        )
    if pl is not None and isinstance(data, pl.DataFrame):
        return data.to_dicts()
    if pl is not None and isinstance(data, pl.LazyFrame):
        return data.collect().to_dicts()
    if _is_pandas(data):
        return list(data.to_dict(orient="records"))
    if isinstance(data, Mapping):
        raise DatasetError(
            "A dataset must be a list of rows, not a single dict: "
            'e.g. [{"input": "What\'s 2+2?", "target": "4"}].'
        )
    if isinstance(data, Iterable) and not isinstance(data, str | bytes):
        return _check_rows(list(data), "Dataset")
    raise DatasetError(
        f"Cannot use a {type(data).__name__} as a dataset: pass a list of dicts, a polars or "
        "pandas DataFrame, or a path to a .csv/.tsv/.json/.jsonl/.parquet file."
    )


def _check_rows(rows: list[Any], where: str) -> list[Mapping[str, Any]]:
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DatasetError(
                f"{where}, row {i + 1}, is a {type(row).__name__}; each row must be an object "
                "with 'input' and 'target'."
            )
    return rows


def _target(value: Any, row: int) -> str | list[str]:
    if _is_missing(value):
        raise DatasetError(f"Dataset row {row} has no target.")
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return [str(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays from pandas/parquet list columns
    if callable(tolist):
        return [str(v) for v in cast(Iterable[Any], tolist())]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _input(value: Any, row: int) -> Any:
    if _is_missing(value):
        raise DatasetError(f"Dataset row {row} has no input.")
    if isinstance(value, str | dict | list):
        return value
    if isinstance(value, int | float):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _id(value: Any, row: int) -> int | str:
    if isinstance(value, bool) or _is_missing(value):
        raise DatasetError(f"Dataset row {row} has an empty or boolean id: {value!r}.")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int | str):
        return value
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return _id(item(), row)
    raise DatasetError(
        f"Dataset row {row} has an id of type {type(value).__name__}; use int or str."
    )


def _check_ids(rows: Sequence[DatasetRow]) -> None:
    """Each id unique as the log writes it (`1` and `"1"` are one id there)."""
    by_text: dict[str, list[int | str]] = {}
    for row in rows:
        by_text.setdefault(id_text(row.id), []).append(row.id)
    dupes = [ids for ids in by_text.values() if len(ids) > 1]
    if not dupes:
        return
    shown = ", ".join(" and ".join(repr(i) for i in dict.fromkeys(ids)) for ids in dupes[:5])
    alike = any(len(set(map(repr, ids))) > 1 for ids in dupes)
    note = ": ids are compared as the log writes them, as text" if alike else ""
    raise DatasetError(
        f"Duplicated values found in the id column ({shown}){note}. Each id must be unique."
    )


def load_dataset(data: Any) -> list[DatasetRow]:
    """Read `data` into dataset rows, checking columns and ids.

    Example:
        >>> rows = load_dataset([{"input": "What's 2+2?", "target": "4", "level": 1}])
        >>> rows[0].id, rows[0].metadata
        (1, {'level': 1})
    """
    records = _records(data)
    if not records:
        raise DatasetError("The dataset is empty: it needs at least one row.")
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        names = " and ".join(missing)
        plural = "column" if len(missing) == 1 else "columns"
        raise DatasetError(
            f"The dataset is missing required {plural} {names}. "
            f"Found columns: {', '.join(columns) or 'none'}. Columns of other names map with "
            "ve.read_dataset(data, input=..., target=...)."
        )
    has_id = "id" in columns
    rows: list[DatasetRow] = []
    for i, record in enumerate(records, 1):
        metadata = {k: v for k, v in record.items() if k not in ("id", "input", "target")}
        rows.append(
            Sample(
                id=_id(record.get("id"), i) if has_id else i,
                epoch=1,
                input=_input(record.get("input"), i),
                target=_target(record.get("target"), i),
                metadata=metadata,
            )
        )
    if has_id:
        _check_ids(rows)
    return rows


def dataset_name(data: Any) -> str | None:
    """A name for the dataset when it is a file: its stem."""
    if isinstance(data, str | os.PathLike):
        return Path(data).stem
    return None


def select_rows(
    rows: Sequence[DatasetRow],
    *,
    limit: int | None = None,
    sample_ids: Sequence[int | str] | None = None,
    shuffle: bool = False,
    seed: int | None = None,
) -> Sequence[DatasetRow]:
    """The rows a run takes: those of `sample_ids` (in the dataset's order), shuffled by
    `random.Random(seed)` (the same order for the same seed, in any process), then the
    first `limit`. An id given as text matches an int id of the same digits (`"3"`: 3).

    Example:
        >>> rows = load_dataset([{"input": str(i), "target": str(i)} for i in range(10)])
        >>> [row.id for row in select_rows(rows, limit=3, shuffle=True, seed=1)]
        [7, 9, 10]
    """
    picked: Sequence[DatasetRow] = rows
    if sample_ids is not None:
        picked = _by_ids(rows, sample_ids)
    if shuffle:
        picked = list(picked)
        random.Random(seed).shuffle(picked)
    if limit is not None:
        picked = picked[:limit]
    return picked


def _by_ids(rows: Sequence[DatasetRow], sample_ids: Sequence[int | str]) -> list[DatasetRow]:
    ids = {row.id for row in rows}
    as_text = {str(row.id): row.id for row in rows}
    wanted: set[int | str] = set()
    unknown: list[int | str] = []
    for given in sample_ids:
        found = given if given in ids else as_text.get(str(given))
        if found is None:
            unknown.append(given)
        else:
            wanted.add(found)
    if unknown:
        some = ", ".join(repr(row.id) for row in rows[:5])
        more = ", ..." if len(rows) > 5 else ""
        raise DatasetError(
            f"No sample of the dataset has the id {', '.join(repr(u) for u in unknown[:5])}; "
            f"its ids: {some}{more} ({len(rows)} in all)."
        )
    return [row for row in rows if row.id in wanted]


def expand_epochs(rows: Sequence[DatasetRow], epochs: int) -> Iterator[Sample]:
    """Samples in run order: id1/e1, id1/e2, ..., id2/e1, ..."""
    for row in rows:
        yield row
        for epoch in range(2, epochs + 1):
            yield dataclasses.replace(row, epoch=epoch)


def known_columns(rows: Sequence[DatasetRow]) -> str:
    """The metadata columns of `rows`, quoted, for an error message ("none" without).

    Example:
        >>> known_columns(load_dataset([{"input": "a", "target": "b", "topic": "x"}]))
        "'topic'"
    """
    columns = sorted({k for row in rows for k in row.metadata})
    return ", ".join(repr(c) for c in columns) or "none"
