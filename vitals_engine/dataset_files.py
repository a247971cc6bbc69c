"""A file (CSV, JSON, JSONL, Parquet) or a Hugging Face `datasets.Dataset` read into
the rows `Task(dataset=...)` takes, its columns mapped to `input`, `target` and `id`.

`read_dataset()` returns a list of dicts: `id` (when mapped), `input`, `target`, the
metadata columns, and `human` (when `human=` names a column): the human grade of the
row, `None` where none was given. `Task` keeps every key but the first three as the
sample's metadata, so the human grade is `sample.metadata["human"]`. Numbers in the
input and target columns become text (a CSV's `4` is read as a number; a target is text).
A Hugging Face dataset is read by iterating it: `datasets` is never imported here.

Every error is a `DatasetError` naming the file, the row as the user sees it (a CSV's
or JSONL's line, else the 1-based row) and the column.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ._errors import DatasetError
from .samples import id_text

__all__ = ["read_dataset"]

_EXTENSIONS = (".csv", ".json", ".jsonl", ".parquet")
_RESERVED = ("id", "input", "target", "human")


@dataclass(frozen=True, slots=True)
class _Source:
    """Rows as read, what they came from, and how a user finds row i (0-based) in it."""

    rows: Sequence[Mapping[str, Any]]
    columns: list[str]
    name: str
    where: Callable[[int], str]


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _read_jsonl(path: Path, name: str) -> _Source:
    rows: list[Mapping[str, Any]] = []
    lines: list[int] = []
    with path.open("rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                raise DatasetError(f"{name}, line {line_no}: not valid JSON ({exc}).") from exc
            if not isinstance(row, dict):
                raise DatasetError(
                    f"{name}, line {line_no}: a {type(row).__name__}, not a JSON object."
                )
            rows.append(row)
            lines.append(line_no)
    return _Source(rows, _columns(rows), name, lambda i: f"line {lines[i]}")


def _read_json(path: Path, name: str) -> _Source:
    try:
        data = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError as exc:
        raise DatasetError(f"{name} is not valid JSON ({exc}).") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{name} must hold a JSON list of objects, not a {type(data).__name__}.")
    for i, row in enumerate(data, 1):
        if not isinstance(row, dict):
            raise DatasetError(f"{name}, row {i}: a {type(row).__name__}, not a JSON object.")
    return _Source(data, _columns(data), name, lambda i: f"row {i + 1}")


def _read_frame(path: Path, name: str, suffix: str) -> _Source:
    import polars as pl

    if suffix == ".csv":  # the header is line 1: data row i is line i + 2
        frame = pl.read_csv(path, infer_schema_length=10_000)
        return _Source(frame.to_dicts(), frame.columns, name, lambda i: f"line {i + 2}")
    frame = pl.read_parquet(path)
    return _Source(frame.to_dicts(), frame.columns, name, lambda i: f"row {i + 1}")


def _read_file(path: Path) -> _Source:
    name = f"Dataset file '{path}'"
    suffix = path.suffix.lower()
    if suffix not in _EXTENSIONS:
        raise DatasetError(
            f"{name} has an unknown extension '{suffix}'; use .csv, .json, .jsonl or .parquet."
        )
    if not path.exists():
        raise DatasetError(f"{name} does not exist.")
    try:
        if suffix == ".jsonl":
            return _read_jsonl(path, name)
        if suffix == ".json":
            return _read_json(path, name)
        return _read_frame(path, name, suffix)
    except DatasetError:
        raise
    except Exception as exc:  # polars' and the OS's errors, many kinds
        raise DatasetError(f"Cannot read {name[0].lower()}{name[1:]}: {exc}") from exc


def _is_hf_dataset(data: Any) -> bool:
    """A Hugging Face `datasets.Dataset`, known without importing `datasets`."""
    kind = type(data)
    return kind.__module__.split(".")[0] == "datasets" and kind.__name__ == "Dataset"


def _read_object(data: Any) -> _Source:
    kind = type(data)
    if _is_hf_dataset(data):
        rows = [dict(row) for row in data]
        name = "Hugging Face dataset"
        return _Source(rows, list(data.column_names), name, lambda i: f"row {i + 1}")
    if kind.__module__.split(".")[0] == "datasets":
        how = "pass one split, e.g. ds['train']" if "Dict" in kind.__name__ else "pass a Dataset"
        raise DatasetError(f"Cannot read a datasets.{kind.__name__}: {how}.")
    if kind.__module__.split(".")[0] == "polars" and hasattr(data, "to_dicts"):
        return _Source(data.to_dicts(), list(data.columns), "Dataset", lambda i: f"row {i + 1}")
    if isinstance(data, Sequence) and all(isinstance(row, Mapping) for row in data):
        rows = list(data)
        return _Source(rows, _columns(rows), "Dataset", lambda i: f"row {i + 1}")
    raise DatasetError(
        f"Cannot read a {kind.__name__} as a dataset: pass a path to a .csv, .json, .jsonl "
        "or .parquet file, a Hugging Face Dataset, a polars DataFrame or a list of dicts."
    )


def _column(source: _Source, column: str, role: str) -> str:
    if column not in source.columns:
        raise DatasetError(
            f"{source.name} has no column '{column}' (for {role}=). "
            f"Its columns: {', '.join(source.columns) or 'none'}."
        )
    return column


@dataclass(frozen=True, slots=True)
class _Mapping:
    input: str
    target: str
    id: str | None
    metadata: list[str]
    human: str | None


def _mapping(
    source: _Source,
    input: str | None,
    target: str | None,
    id: str | None,
    metadata: Sequence[str] | None,
    human: str | None,
) -> _Mapping:
    given_input = _column(source, input or "input", "input")
    given_target = _column(source, target or "target", "target")
    id_column = _column(source, id, "id") if id else ("id" if "id" in source.columns else None)
    human_column = _column(source, human, "human") if human else None
    if isinstance(metadata, str):
        metadata = [metadata]
    if metadata is None:
        used = {given_input, given_target, id_column, human_column, *_RESERVED}
        kept = [c for c in source.columns if c not in used]
    else:
        kept = [c for c in metadata if _column(source, c, "metadata")]
        clash = [c for c in kept if c in _RESERVED]
        if clash:
            raise DatasetError(
                f"{source.name}: a metadata column may not be named {clash[0]!r}, a name "
                "the dataset's rows use for themselves; map it with input=, target=, id= "
                "or human= instead."
            )
    return _Mapping(given_input, given_target, id_column, kept, human_column)


def _is_empty(value: Any) -> bool:
    return _is_missing(value) or (isinstance(value, str) and not value.strip())


def _text(value: Any) -> Any:
    """A number as text (a CSV's "4" is read as 4; a target is text); the rest as is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _row(source: _Source, i: int, record: Mapping[str, Any], mapping: _Mapping) -> dict[str, Any]:
    where = f"{source.name}, {source.where(i)}"
    row: dict[str, Any] = {}
    if mapping.id is not None:
        value = record.get(mapping.id)
        if _is_empty(value):
            raise DatasetError(f"{where}: column '{mapping.id}' (the id) is empty.")
        row["id"] = value
    for key, column in (("input", mapping.input), ("target", mapping.target)):
        value = record.get(column)
        if _is_empty(value) if key == "input" else _is_missing(value):
            raise DatasetError(f"{where}: column '{column}' (the {key}) is empty.")
        row[key] = _text(value)
    for column in mapping.metadata:
        row[column] = record.get(column)
    if mapping.human is not None:
        grade = record.get(mapping.human)
        row["human"] = None if _is_missing(grade) else grade
    return row


def _check_ids(source: _Source, rows: list[dict[str, Any]], column: str) -> None:
    """Each id unique as the log writes it (`1` and `"1"` are one id there)."""
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        key = id_text(row["id"])
        if key in first:
            before, now = rows[first[key]]["id"], row["id"]
            alike = ""
            if repr(before) != repr(now):
                alike = f" (as {before!r} and {now!r}, one id as the log writes them)"
            raise DatasetError(
                f"{source.name}: the id {key!r} (column '{column}') is on "
                f"{source.where(first[key])} and on {source.where(i)}{alike}; "
                "each id must be unique."
            )
        first[key] = i


def read_dataset(
    data: str | os.PathLike[str] | Any,
    *,
    input: str | None = None,
    target: str | None = None,
    id: str | None = None,
    metadata: Sequence[str] | None = None,
    human: str | None = None,
) -> list[dict[str, Any]]:
    """Read a dataset from a .csv, .json (a list of objects), .jsonl or .parquet file,
    or from a Hugging Face `datasets.Dataset` (or a polars DataFrame, a list of dicts),
    naming which columns are what.

    Args:
        data: the path, or the object.
        input: the column of inputs (default: `input`).
        target: the column of targets (default: `target`).
        id: the column of ids, each unique (default: `id` when there is one, else 1..n).
        metadata: the columns kept as each sample's metadata (default: every column not
            mapped to something else).
        human: the column of human grades, kept as `metadata["human"]` (an empty cell is
            `None`: not graded).

    Returns:
        The rows, as dicts `Task(dataset=...)` takes.

    Raises:
        DatasetError: naming the file, the row and the column: a missing column (and
            the columns there are), an empty input, duplicate ids, a file that cannot
            be read or has an unknown extension.

    Example:
        >>> rows = ve.read_dataset("qa.csv", input="question", target="answer", id="qid",
        ...                        metadata=["topic"], human="grade")
        >>> rows[0]
        {'id': 'q-1', 'input': "What's 2+2?", 'target': '4', 'topic': 'sums', 'human': 'C'}
        >>> task = ve.Task(rows, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_match())
    """
    if isinstance(data, str | os.PathLike):
        source = _read_file(Path(data))
    else:
        source = _read_object(data)
    if not source.rows:
        raise DatasetError(f"{source.name} is empty: a dataset needs at least one row.")
    mapping = _mapping(source, input, target, id, metadata, human)
    rows = [_row(source, i, record, mapping) for i, record in enumerate(source.rows)]
    if mapping.id is not None:
        _check_ids(source, rows, mapping.id)
    return rows
