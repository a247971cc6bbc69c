"""Dataset files read as written: every cell of a CSV or TSV is the text in the file
(types only when asked for, with `types=`), JSON strings stay strings, the encodings a
file may come in are read or named, a header that names a column twice is refused, and
a URL is read from its object store (issue #48)."""

from __future__ import annotations

import json
import uuid

import polars as pl
import pytest

import vitals_engine as ve

#: A CSV whose cells a type-guessing reader would change: a ZIP code, a price with its
#: trailing zero, a number in exponent form, a word that reads as a boolean, ids with
#: leading zeros and a fraction.
AS_WRITTEN = (
    "id,input,target,flag\n"
    "001,ZIP code of Cambridge MA?,02139,true\n"
    "1,Price of a coffee?,1.50,false\n"
    "3.5,0.10 times 10000?,1e3,\n"
)


def zip_code_bot(input: str) -> str:
    return "It is 2139." if "ZIP" in input else "I do not know."


# -- text as written ---------------------------------------------------------------------


def test_csv_cells_are_the_text_in_the_file(tmp_path):
    """No cell of a CSV is turned into a number or a boolean: ids, inputs, targets and
    metadata are the text written (`02139`, `1.50`, `1e3`, `001`, `true`); an empty cell
    is None."""
    path = tmp_path / "as_written.csv"
    path.write_text(AS_WRITTEN)
    assert ve.read_dataset(path) == [
        {"id": "001", "input": "ZIP code of Cambridge MA?", "target": "02139", "flag": "true"},
        {"id": "1", "input": "Price of a coffee?", "target": "1.50", "flag": "false"},
        {"id": "3.5", "input": "0.10 times 10000?", "target": "1e3", "flag": None},
    ]


def test_a_wrong_zip_code_is_graded_wrong_from_a_csv(tmp_path):
    """The answer "It is 2139." to a question whose target is `02139` is incorrect, whether
    the CSV is read by `read_dataset` or given to `Task` as a path."""
    path = tmp_path / "zips.csv"
    path.write_text("input,target\nZIP code of Cambridge MA?,02139\n")
    for dataset in (ve.read_dataset(path), path, str(path)):
        task = ve.Task(dataset, zip_code_bot, ve.detect_includes(), dir=tmp_path / "logs")
        task.eval(progress=False)
        assert task.get_samples()["target"].to_list() == ["02139"]
        assert task.get_samples()["score"].to_list() == ["I"]


def test_a_task_on_a_csv_path_keeps_its_ids_and_metadata_as_text(tmp_path):
    """`Task("file.csv")` reads the file as `read_dataset` does: ids `001` and `1` are two
    samples, an id `3.5` is an id, metadata is the text written."""
    path = tmp_path / "as_written.csv"
    path.write_text(AS_WRITTEN)
    task = ve.Task(path, zip_code_bot, ve.detect_includes(), dir=tmp_path / "logs")
    frame = task.get_samples()
    assert frame["id"].to_list() == ["001", "1", "3.5"]
    assert frame["target"].to_list() == ["02139", "1.50", "1e3"]
    assert frame["flag"].to_list() == ["true", "false", None]


def test_a_tsv_file_is_read_as_text_too(tmp_path):
    """A `.tsv` file is read as a CSV separated by tabs, each cell as written."""
    path = tmp_path / "zips.tsv"
    path.write_text("id\tinput\ttarget\n007\tZIP code of Cambridge MA?\t02139\n")
    assert ve.read_dataset(path) == [
        {"id": "007", "input": "ZIP code of Cambridge MA?", "target": "02139"}
    ]


def test_an_empty_cell_is_none_and_a_quoted_empty_one_is_empty_text(tmp_path):
    """`a,,b` leaves the middle cell empty (None: missing), `a,"",b` writes it as empty
    text; an empty target is an error naming its line, as an empty input is."""
    path = tmp_path / "cells.csv"
    path.write_text('input,target,note,hint\nq,a,,""\n')
    assert ve.read_dataset(path) == [{"input": "q", "target": "a", "note": None, "hint": ""}]
    path.write_text('input,target\nq,a\nr,""\n')
    with pytest.raises(ve.DatasetError, match=r"cells\.csv', line 3: column 'target' \(the target"):
        ve.read_dataset(path)


def test_json_strings_and_parquet_text_stay_as_written(tmp_path):
    """A JSON, JSONL or Parquet string is kept as it is, `"02139"` and `"001"` included."""
    rows = [{"id": "001", "input": "ZIP code of Cambridge MA?", "target": "02139"}]
    (tmp_path / "z.json").write_text(json.dumps(rows))
    (tmp_path / "z.jsonl").write_text(json.dumps(rows[0]) + "\n")
    pl.DataFrame(rows).write_parquet(tmp_path / "z.parquet")
    for name in ("z.json", "z.jsonl", "z.parquet"):
        assert ve.read_dataset(tmp_path / name) == rows
        task = ve.Task(tmp_path / name, zip_code_bot, ve.detect_includes())
        assert task.get_samples()["target"].to_list() == ["02139"]


def test_a_human_grade_written_as_a_number_in_a_csv_is_a_grade(tmp_path):
    """Human grades written 1 and 0 in a CSV are grades of 1 and 0 (read as text, they
    are still numbers to the correction)."""
    lines = ["input,target,judge,grade"] + [
        f"q{i},x,{judge},{grade}"
        for i, (judge, grade) in enumerate([("C", 1), ("C", 0), ("I", 0), ("C", 1)])
    ]
    path = tmp_path / "graded.csv"
    path.write_text("\n".join(lines) + "\n")
    task = ve.Task(path, lambda x: "x", lambda sample: sample.metadata["judge"], human="grade")
    task.dir = tmp_path / "logs"
    task.eval(progress=False)
    assert task.corrected is not None
    assert next(iter(task.corrected.values())).human.n == 4


# -- types, when asked for ------------------------------------------------------------------


TYPED = "id,input,target,level,score,checked\n1,q1,a1,3,0.5,true\n2,q2,a2,,1e3,FALSE\n"


def test_types_names_the_columns_to_read_as_numbers_or_booleans(tmp_path):
    """`types={"level": int, ...}` reads those columns as int, float or bool (`true` and
    `false` in any case, `1` and `0`); the rest stay text; an empty cell stays None."""
    path = tmp_path / "typed.csv"
    path.write_text(TYPED)
    rows = ve.read_dataset(path, types={"id": int, "level": int, "score": float, "checked": bool})
    assert rows == [
        {"id": 1, "input": "q1", "target": "a1", "level": 3, "score": 0.5, "checked": True},
        {"id": 2, "input": "q2", "target": "a2", "level": None, "score": 1000.0, "checked": False},
    ]


def test_a_cell_that_is_not_of_its_type_names_its_line_and_column(tmp_path):
    """A cell `types=` cannot read as its type: the file, the line, the column, the text."""
    path = tmp_path / "typed.csv"
    path.write_text(TYPED.replace("1e3", "lots"))
    with pytest.raises(
        ve.DatasetError,
        match=r"typed\.csv', line 3: column 'score' holds 'lots', not a float \(types=\)",
    ):
        ve.read_dataset(path, types={"score": float})


def test_types_of_the_input_or_target_or_of_an_unknown_kind_are_refused(tmp_path):
    """The input and target stay text; `types=` takes int, float, bool or str, for columns
    the file has."""
    path = tmp_path / "typed.csv"
    path.write_text(TYPED)
    with pytest.raises(ve.ConfigError, match=r"types=: the target \(column 'target'\) is text"):
        ve.read_dataset(path, types={"target": int})
    with pytest.raises(ve.ConfigError, match=r"types=: column 'level' may be int, float, bool"):
        ve.read_dataset(path, types={"level": "int"})  # type: ignore[dict-item]
    with pytest.raises(ve.ConfigError, match=r"types=: an id is int or str, not float"):
        ve.read_dataset(path, types={"id": float})
    with pytest.raises(ve.DatasetError, match=r"no column 'levels' \(for types=\)"):
        ve.read_dataset(path, types={"levels": int})


# -- encodings -----------------------------------------------------------------------------


ROW = {"input": "Café?", "target": "crème"}


@pytest.mark.parametrize("suffix", [".csv", ".json", ".jsonl"])
def test_a_utf8_byte_order_mark_is_read(tmp_path, suffix):
    """A file saved as "UTF-8 with BOM" (as Windows tools save it) reads as plain UTF-8."""
    text = {
        ".csv": "input,target\nCafé?,crème\n",
        ".json": json.dumps([ROW], ensure_ascii=False),
        ".jsonl": json.dumps(ROW, ensure_ascii=False) + "\n",
    }[suffix]
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert ve.read_dataset(path) == [ROW]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_utf16_and_utf32_with_a_byte_order_mark_are_read(tmp_path, suffix, encoding):
    """A file in UTF-16 or UTF-32 with its byte-order mark (Excel's "Unicode text",
    PowerShell's default) is decoded: its columns are named as written."""
    text = "input,target\nCafé?,crème\n" if suffix == ".csv" else json.dumps(ROW) + "\n"
    bom = {"utf-16": b"", "utf-16-be": b"\xfe\xff", "utf-32": b""}[encoding]
    path = tmp_path / f"wide{suffix}"
    path.write_bytes(bom + text.encode(encoding))
    assert ve.read_dataset(path) == [ROW]


def test_utf16_without_a_byte_order_mark_is_named(tmp_path):
    """UTF-16 without its mark cannot be read as text safely: the error says what the file
    looks like and to save it as UTF-8."""
    path = tmp_path / "wide.csv"
    path.write_bytes("input,target\nq,a\n".encode("utf-16-le"))
    with pytest.raises(
        ve.DatasetError,
        match=r"wide\.csv' looks like UTF-16 without a byte-order mark: save it as UTF-8",
    ):
        ve.read_dataset(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".json"])
def test_bytes_that_are_not_utf8_name_their_line(tmp_path, suffix):
    """A file in another encoding (Latin-1 from an old export), with or without a UTF-8
    byte-order mark: the error names the line and the byte, and says to save it as
    UTF-8."""
    lines = {
        ".csv": ["input,target", "q,a", "Caf\xe9?,cr\xe8me"],
        ".jsonl": [
            json.dumps({"input": "q", "target": "a"}),
            "",
            '{"input": "Caf\xe9?", "target": "b"}',
        ],
        ".json": ["[", '{"input": "q", "target": "a"},', '{"input": "Caf\xe9?", "target": "b"}]'],
    }[suffix]
    path = tmp_path / f"latin{suffix}"
    for bom in (b"", b"\xef\xbb\xbf"):
        path.write_bytes(bom + "\n".join(lines).encode("latin-1") + b"\n")
        with pytest.raises(
            ve.DatasetError,
            match=rf"latin\{suffix}', line 3: not UTF-8 \(byte 0xe9 at column \d+\): "
            r"save the file as UTF-8",
        ):
            ve.read_dataset(path)


def test_a_task_on_a_path_reads_the_same_encodings(tmp_path):
    """`Task(path)` reads a file with a byte-order mark as `read_dataset` does."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n")
    task = ve.Task(path, lambda x: x, ve.detect_includes())
    assert task.get_samples()["input"].to_list() == ["Café?"]


# -- headers -------------------------------------------------------------------------------


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    """Two columns of one name: which one is the target? The error names the column and
    its places, instead of renaming the second one."""
    path = tmp_path / "twice.csv"
    path.write_text("input,target,target\nq,a,b\n")
    with pytest.raises(
        ve.DatasetError,
        match=r"twice\.csv', line 1: the header names column 'target' twice \(columns 2 and 3\)",
    ):
        ve.read_dataset(path)
    with pytest.raises(ve.DatasetError, match=r"names column 'target' twice"):
        ve.Task(path, lambda x: x, ve.detect_includes())


# -- URLs ----------------------------------------------------------------------------------


def test_a_dataset_in_an_object_store_is_read_from_it():
    """A URL (`s3://`, `gs://`, any fsspec store) is read through the same storage as logs,
    as a local file is; one that is not there is named whole."""
    fsspec = pytest.importorskip("fsspec")
    url = f"memory://datasets-{uuid.uuid4().hex[:8]}/zips.csv"
    with fsspec.open(url, "wb") as fh:
        fh.write(b"id,input,target\n001,ZIP code of Cambridge MA?,02139\n")
    assert ve.read_dataset(url) == [
        {"id": "001", "input": "ZIP code of Cambridge MA?", "target": "02139"}
    ]
    task = ve.Task(url, zip_code_bot, ve.detect_includes())
    assert (task.name, task.get_samples()["target"].to_list()) == ("zips", ["02139"])
    missing = url.replace("zips", "nope")
    with pytest.raises(ve.DatasetError, match=rf"Dataset file '{missing}' does not exist\."):
        ve.read_dataset(missing)


def test_a_dataset_in_s3_is_read(s3):
    """`read_dataset("s3://bucket/qa.csv")` reads the object; a missing one is named with
    its URL intact (`s3://`, not `s3:/`)."""
    s3.client.put_object(Bucket=s3.name, Key="data/qa.csv", Body=b"input,target\nq,02139\n")
    assert ve.read_dataset(f"s3://{s3.name}/data/qa.csv") == [{"input": "q", "target": "02139"}]
    with pytest.raises(
        ve.DatasetError, match=rf"Dataset file 's3://{s3.name}/data/x\.csv' does not exist\."
    ):
        ve.read_dataset(f"s3://{s3.name}/data/x.csv")
