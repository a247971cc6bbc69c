"""A file (CSV, TSV, JSON, JSONL, Parquet), local or in an object store, or a Hugging
Face `datasets.Dataset` read into the rows `Task(dataset=...)` takes, its columns mapped
to `input`, `target` and `id`.

`read_dataset()` returns a list of dicts: `id` (when mapped), `input`, `target`, the
metadata columns, and `human` (when `human=` names a column): the human grade of the
row, `None` where none was given. `Task` keeps every key but the first three as the
sample's metadata, so the human grade is `sample.metadata["human"]`.

Text is read as written. A CSV or TSV cell is the text in the file (`02139`, `1.50`,
`true` stay so): no type is guessed, since a guess changes targets (a ZIP code `02139`
read as 2139 grades the answer "2139" correct) and ids (`001` and `1` collide). An
empty cell is None; a cell written `""` is empty text. `types=` asks for a column as
int, float or bool. A JSON, JSONL or Parquet value has the type the file gives it; a
number in the input or target becomes text. `Task(path)` reads a file the same way
(`file_rows`). Files are decoded as UTF-8, after a UTF-8 byte-order mark if there is
one, or as UTF-16 or UTF-32 when their byte-order mark says so; anything else is an
error naming the line.

A URL (`s3://bucket/qa.csv`: any fsspec store but `file://`) is read through the
storage the logs use (`vitals_engine.storage`; `pip install "vitals-engine[s3]"`).
A Hugging Face dataset is read by iterating it: `datasets` is never imported here.

Every error is a `DatasetError` naming the file, the row as the user sees it (a CSV's
or JSONL's line, else the 1-based row) and the column.
"""

from __future__ import annotations

import codecs
import csv
import functools
import io
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from ._errors import ConfigError, DatasetError, VitalsError
from .samples import id_text
from .storage import Store, is_url

__all__ = ["file_rows", "read_dataset"]

_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".parquet")
_RESERVED = ("id", "input", "target", "human")

#: Byte-order marks, UTF-32's before UTF-16's (FF FE 00 00 starts with FF FE).
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32", "utf-32"),
    (codecs.BOM_UTF8, "UTF-8", "utf-8"),
    (codecs.BOM_UTF16_LE, "UTF-16", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16", "utf-16"),
)


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


def _decoded(data: bytes, name: str) -> str:
    """The text of a file: UTF-8 (after its byte-order mark, if any), or UTF-16 or UTF-32
    when a byte-order mark says so; anything else is an error saying what to do."""
    for bom, label, codec in _BOMS:
        if data.startswith(bom) and codec == "utf-8":
            data = data[len(bom) :]  # then read as any UTF-8 file, its lines counted
            break
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    f"{name} starts with the byte-order mark of {label} but is not {label} "
                    f"(at byte {exc.start}): save it as UTF-8."
                ) from None
    head = data[:4096]
    if head.count(0) * 4 >= len(head) > 0:  # text holds no NUL; UTF-16's ASCII is half NULs
        raise DatasetError(
            f"{name} looks like UTF-16 without a byte-order mark: save it as UTF-8 "
            "(or as UTF-16 with its mark, as Excel's 'Unicode text' does)."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise DatasetError(
            f"{name}, line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at column "
            f"{column}): save the file as UTF-8 (it may be Latin-1 or Windows-1252, as older "
            "spreadsheets export)."
        ) from None


def _read_jsonl(data: bytes, name: str) -> _Source:
    rows: list[Mapping[str, Any]] = []
    lines: list[int] = []
    for line_no, line in enumerate(_decoded(data, name).split("\n"), 1):
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


def _read_json(data: bytes, name: str) -> _Source:
    try:
        rows = msgspec.json.decode(_decoded(data, name))
    except msgspec.DecodeError as exc:
        raise DatasetError(f"{name} is not valid JSON ({exc}).") from exc
    if not isinstance(rows, list):
        raise DatasetError(f"{name} must hold a JSON list of objects, not a {type(rows).__name__}.")
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise DatasetError(f"{name}, row {i}: a {type(row).__name__}, not a JSON object.")
    return _Source(rows, _columns(rows), name, lambda i: f"row {i + 1}")


def _read_csv(data: bytes, name: str, separator: str) -> _Source:
    """Every cell as the text written (no type guessed): an empty cell is None, `""`
    empty text. The header is line 1: data row i is line i + 2."""
    import polars as pl

    text = _decoded(data, name)
    if not text.strip():
        return _Source([], [], name, lambda i: f"line {i + 2}")
    _check_header(next(csv.reader(io.StringIO(text), delimiter=separator)), name)
    frame = pl.read_csv(text.encode("utf-8"), separator=separator, infer_schema=False)
    return _Source(frame.to_dicts(), frame.columns, name, lambda i: f"line {i + 2}")


def _check_header(header: list[str], name: str) -> None:
    """A column named twice is refused: which one would be the target?"""
    seen: dict[str, int] = {}
    for place, column in enumerate(header, 1):
        if column in seen:
            raise DatasetError(
                f"{name}, line 1: the header names column {column!r} twice (columns "
                f"{seen[column]} and {place}); rename one of them."
            )
        seen[column] = place


def _read_parquet(data: bytes, name: str) -> _Source:
    import polars as pl

    frame = pl.read_parquet(io.BytesIO(data))
    return _Source(frame.to_dicts(), frame.columns, name, lambda i: f"row {i + 1}")


_READERS: dict[str, Callable[[bytes, str], _Source]] = {
    ".csv": functools.partial(_read_csv, separator=","),
    ".tsv": functools.partial(_read_csv, separator="\t"),
    ".json": _read_json,
    ".jsonl": _read_jsonl,
    ".parquet": _read_parquet,
}


def _stored(url: str, name: str) -> bytes:
    """The bytes of an object in a store, through the storage the logs use."""
    scheme, _, rest = url.partition("://")
    folder, _, key = rest.rpartition("/")
    if not folder or not key:
        raise DatasetError(f"{name}: name a file in a bucket, e.g. s3://bucket/data/qa.csv.")
    try:
        return Store(f"{scheme}://{folder}").get(key)
    except FileNotFoundError:
        raise DatasetError(f"{name} does not exist.") from None


def _read_file(data: str | os.PathLike[str]) -> _Source:
    url = is_url(data)
    location = str(data) if url else str(Path(data))
    name = f"Dataset file '{location}'"
    suffix = Path(location).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise DatasetError(
            f"{name} has an unknown extension '{suffix}'; "
            "use .csv, .tsv, .json, .jsonl or .parquet."
        )
    if not url and not Path(location).exists():
        raise DatasetError(f"{name} does not exist.")
    try:
        raw = _stored(location, name) if url else Path(location).read_bytes()
        return _READERS[suffix](raw, name)
    except VitalsError:  # ours say what to do: a store's error names its kind
        raise
    except Exception as exc:  # polars' and the OS's errors, many kinds
        raise DatasetError(f"Cannot read {name[0].lower()}{name[1:]}: {exc}") from exc


def file_rows(data: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a dataset file (a path or a URL) as written, as `Task(path)` takes
    them: every column kept under its own name.

    Example:
        >>> file_rows("zips.csv")
        [{'input': 'ZIP code of Cambridge MA?', 'target': '02139'}]
    """
    return [dict(row) for row in _read_file(data).rows]


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
        f"Cannot read a {kind.__name__} as a dataset: pass a path (or URL) to a .csv, .tsv, "
        ".json, .jsonl or .parquet file, a Hugging Face Dataset, a polars DataFrame or a "
        "list of dicts."
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
    types: dict[str, type] = field(default_factory=dict)


def _mapping(
    source: _Source,
    input: str | None,
    target: str | None,
    id: str | None,
    metadata: Sequence[str] | None,
    human: str | None,
    types: Mapping[str, type] | None,
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
    mapping = _Mapping(given_input, given_target, id_column, kept, human_column)
    return replace(mapping, types=_checked_types(source, mapping, types or {}))


#: What `types=` may ask a column to be, and how a value that is not one is named.
_KINDS: dict[type, str] = {int: "an int", float: "a float", bool: "a boolean", str: "text"}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def _checked_types(
    source: _Source, mapping: _Mapping, types: Mapping[str, type]
) -> dict[str, type]:
    """`types=`: int, float, bool or str for columns there are; the input and target stay
    text, an id is int or str."""
    for column, kind in types.items():
        _column(source, column, "types")
        for role in ("input", "target"):
            if column == getattr(mapping, role):
                raise ConfigError(
                    f"types=: the {role} (column {column!r}) is text as written; types= "
                    "is for the id, the metadata and the human grades."
                )
        if kind not in _KINDS:
            raise ConfigError(
                f"types=: column {column!r} may be int, float, bool or str, not {kind!r}."
            )
        if column == mapping.id and kind not in (int, str):
            raise ConfigError(f"types=: an id is int or str, not {kind.__name__}.")
    return dict(types)


def _typed(value: Any, kind: type) -> Any:
    """`value` as `kind` (ValueError when it is not one); None (and blank text, but as
    str) stays None."""
    if value is None or (kind is not str and isinstance(value, str) and not value.strip()):
        return None
    if kind is str:
        return value if isinstance(value, str) else str(_text(value))
    if isinstance(value, str):
        return _typed_text(value.strip(), kind)
    return _typed_value(value, kind)


def _typed_text(text: str, kind: type) -> Any:
    """A cell's text as `kind` (int, float or bool)."""
    if kind is bool and text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    if kind is int and _INTEGER.fullmatch(text):
        return int(text)
    if kind is float and "_" not in text:
        return float(text)  # ValueError for what is not a number
    raise ValueError(text)


def _typed_value(value: Any, kind: type) -> Any:
    """A value a typed format gave (a JSON number or bool) as `kind`."""
    if isinstance(value, bool) or kind is bool:
        if isinstance(value, bool) and kind is bool:
            return value
        raise ValueError(value)
    if kind is float and isinstance(value, int | float):
        return float(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    raise ValueError(value)


def _cell(record: Mapping[str, Any], column: str, mapping: _Mapping, where: str) -> Any:
    """A cell's value, as `types=` asks for it."""
    value = record.get(column)
    kind = mapping.types.get(column)
    if kind is None:
        return value
    try:
        return _typed(value, kind)
    except ValueError:
        raise DatasetError(
            f"{where}: column '{column}' holds {value!r}, not {_KINDS[kind]} (types=)."
        ) from None


def _is_empty(value: Any) -> bool:
    return _is_missing(value) or (isinstance(value, str) and not value.strip())


def _text(value: Any) -> Any:
    """A number as text (a JSON target `4` is `"4"`; a target is text); the rest as is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _row(source: _Source, i: int, record: Mapping[str, Any], mapping: _Mapping) -> dict[str, Any]:
    where = f"{source.name}, {source.where(i)}"
    row: dict[str, Any] = {}
    if mapping.id is not None:
        value = _cell(record, mapping.id, mapping, where)
        if _is_empty(value):
            raise DatasetError(f"{where}: column '{mapping.id}' (the id) is empty.")
        row["id"] = value
    for key, column in (("input", mapping.input), ("target", mapping.target)):
        value = record.get(column)
        if _is_empty(value):
            raise DatasetError(f"{where}: column '{column}' (the {key}) is empty.")
        row[key] = _text(value)
    for column in mapping.metadata:
        row[column] = _cell(record, column, mapping, where)
    if mapping.human is not None:
        grade = _cell(record, mapping.human, mapping, where)
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
    types: Mapping[str, type] | None = None,
) -> list[dict[str, Any]]:
    """Read a dataset from a .csv, .tsv, .json (a list of objects), .jsonl or .parquet
    file (a path, or a URL such as `s3://bucket/qa.csv`), or from a Hugging Face
    `datasets.Dataset` (or a polars DataFrame, a list of dicts), naming which columns
    are what. A CSV or TSV cell is the text written in it (`02139` stays `"02139"`):
    no type is guessed; `types=` asks for one.

    Args:
        data: the path or URL, or the object.
        input: the column of inputs (default: `input`).
        target: the column of targets (default: `target`).
        id: the column of ids, each unique (default: `id` when there is one, else 1..n).
        metadata: the columns kept as each sample's metadata (default: every column not
            mapped to something else).
        human: the column of human grades, kept as `metadata["human"]` (an empty cell is
            `None`: not graded).
        types: columns to read as `int`, `float` or `bool` (or `str`) instead of as
            written, e.g. `{"level": int}`; an empty cell stays `None`, a cell that is
            not of its type is an error. The input and target are always text.

    Returns:
        The rows, as dicts `Task(dataset=...)` takes.

    Raises:
        DatasetError: naming the file, the row and the column: a missing column (and
            the columns there are), an empty input, target or id, duplicate ids, a cell
            not of its type, a header naming a column twice, a file that is not UTF-8
            (or UTF-16 or UTF-32 with a byte-order mark), cannot be read or has an
            unknown extension.
        ConfigError: `types=` asking for a type of the input or target, or for a type
            other than int, float, bool or str.
        StoreError: a URL whose store cannot be read (no bucket, access denied ...).

    Example:
        >>> rows = ve.read_dataset("qa.csv", input="question", target="answer", id="qid",
        ...                        metadata=["topic"], human="grade")
        >>> rows[0]
        {'id': 'q-1', 'input': "What's 2+2?", 'target': '4', 'topic': 'sums', 'human': 'C'}
        >>> task = ve.Task(rows, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_match())
    """
    if isinstance(data, str | os.PathLike):
        source = _read_file(data)
    else:
        source = _read_object(data)
    if not source.rows:
        raise DatasetError(f"{source.name} is empty: a dataset needs at least one row.")
    mapping = _mapping(source, input, target, id, metadata, human, types)
    rows = [_row(source, i, record, mapping) for i, record in enumerate(source.rows)]
    if mapping.id is not None:
        _check_ids(source, rows, mapping.id)
    return rows
