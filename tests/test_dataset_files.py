"""`read_dataset()`: CSV, JSON, JSONL, Parquet files and Hugging Face datasets read into
the rows a Task takes, columns mapped by name, every error naming the file, the row and
the column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import vitals_engine as ve

#: The rows every format below holds: a question bank with its own column names.
BANK = [
    {"qid": "q-1", "question": "What's 2+2?", "answer": "4", "topic": "sums", "grade": "C"},
    {"qid": "q-2", "question": "What's 3*3?", "answer": "9", "topic": "products", "grade": None},
    {"qid": "q-3", "question": "What's 5-1?", "answer": "4", "topic": "sums", "grade": "I"},
]

MAPPED = [
    {"id": "q-1", "input": "What's 2+2?", "target": "4", "topic": "sums", "human": "C"},
    {"id": "q-2", "input": "What's 3*3?", "target": "9", "topic": "products", "human": None},
    {"id": "q-3", "input": "What's 5-1?", "target": "4", "topic": "sums", "human": "I"},
]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    """`rows` written in the format `path`'s extension names."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix == ".csv":
        pl.DataFrame(rows).write_csv(path)
    else:
        pl.DataFrame(rows).write_parquet(path)
    return path


def bank_mapping() -> dict[str, Any]:
    return {
        "input": "question",
        "target": "answer",
        "id": "qid",
        "metadata": ["topic"],
        "human": "grade",
    }


@pytest.mark.parametrize("suffix", [".csv", ".json", ".jsonl", ".parquet"])
def test_each_format_reads_with_its_columns_mapped(tmp_path, suffix):
    """Every format gives the same rows: id, input, target, the metadata asked for, and
    the human grade under `human` (an empty one is None)."""
    path = write(tmp_path / f"bank{suffix}", BANK)
    assert ve.read_dataset(path, **bank_mapping()) == MAPPED
    assert ve.read_dataset(str(path), **bank_mapping()) == MAPPED


def test_the_rows_run_as_a_task_with_the_human_grade_in_metadata(tmp_path):
    """`Task` takes what `read_dataset` returns; the human grade is the sample's
    `metadata["human"]`, beside the metadata columns."""
    rows = ve.read_dataset(write(tmp_path / "bank.csv", BANK), **bank_mapping())
    task = ve.Task(rows, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_match(), dir=tmp_path)
    task.eval(progress=False)
    frame = task.get_samples().sort("id")
    assert frame.select("id", "topic", "human").rows() == [
        ("q-1", "sums", "C"),
        ("q-2", "products", None),
        ("q-3", "sums", "I"),
    ]


def test_columns_named_input_target_and_id_need_no_mapping(tmp_path):
    """Without a mapping: the columns input, target and id, and every other column as
    metadata; ids default to 1..n when there is no id column."""
    rows = [{"input": "a", "target": "b", "level": 1}, {"input": "c", "target": "d", "level": 2}]
    assert ve.read_dataset(write(tmp_path / "d.jsonl", rows)) == rows
    with_ids = [{"id": 7, **rows[0]}, {"id": 8, **rows[1]}]
    assert ve.read_dataset(write(tmp_path / "e.json", with_ids)) == with_ids


def test_metadata_defaults_to_every_column_not_mapped(tmp_path):
    """Without `metadata=`, the unmapped columns are all kept; with it, only those named."""
    path = write(tmp_path / "bank.parquet", BANK)
    rows = ve.read_dataset(path, input="question", target="answer", id="qid")
    assert rows[0] == {
        "id": "q-1",
        "input": "What's 2+2?",
        "target": "4",
        "topic": "sums",
        "grade": "C",
    }
    only = ve.read_dataset(path, input="question", target="answer", metadata=[])
    assert only[0] == {"input": "What's 2+2?", "target": "4"}


def test_a_polars_frame_and_a_list_of_dicts_are_mapped_too():
    """Objects already in memory take the same mapping."""
    assert ve.read_dataset(pl.DataFrame(BANK), **bank_mapping()) == MAPPED
    assert ve.read_dataset(BANK, **bank_mapping()) == MAPPED


def test_a_hugging_face_dataset_reads_without_a_file():
    """A `datasets.Dataset` (the `hf` extra) is read row by row with the same mapping."""
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_list(BANK)
    assert ve.read_dataset(hf, **bank_mapping()) == MAPPED


def test_a_hugging_face_dataset_dict_asks_for_a_split():
    """A DatasetDict is several splits: the error says to pick one."""
    datasets = pytest.importorskip("datasets")
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_list(BANK)})
    with pytest.raises(ve.DatasetError, match=r"DatasetDict: pass one split, e\.g\. ds\['train'\]"):
        ve.read_dataset(splits)


# -- errors --------------------------------------------------------------------------


def test_a_missing_column_lists_the_columns_there_are(tmp_path):
    """A mapped column that is not in the file: its name, the argument, the columns."""
    path = write(tmp_path / "bank.csv", BANK)
    with pytest.raises(
        ve.DatasetError,
        match=r"bank\.csv' has no column 'prompt' \(for input=\)\. "
        r"Its columns: qid, question, answer, topic, grade\.",
    ):
        ve.read_dataset(path, input="prompt", target="answer")
    with pytest.raises(ve.DatasetError, match=r"no column 'target' \(for target=\)"):
        ve.read_dataset(path, input="question")
    with pytest.raises(ve.DatasetError, match=r"no column 'level' \(for metadata=\)"):
        ve.read_dataset(path, input="question", target="answer", metadata=["level"])


def test_an_empty_input_names_the_line_and_the_column(tmp_path):
    """A CSV's row is named by its line in the file (the header is line 1)."""
    bank = [dict(row) for row in BANK]
    bank[1]["question"] = ""
    path = write(tmp_path / "bank.csv", bank)
    with pytest.raises(
        ve.DatasetError, match=r"bank\.csv', line 3: column 'question' \(the input\) is empty"
    ):
        ve.read_dataset(path, **bank_mapping())


def test_an_empty_input_in_jsonl_names_its_line_blank_lines_counted(tmp_path):
    """A JSONL row is named by its line, as an editor numbers it."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"input": "a", "target": "b"}\n\n{"input": "  ", "target": "c"}\n')
    with pytest.raises(ve.DatasetError, match=r"d\.jsonl', line 3: column 'input'"):
        ve.read_dataset(path)


def test_an_empty_target_or_id_is_named(tmp_path):
    """A row of a JSON list or a Parquet file is named by its 1-based place."""
    bank = [dict(row) for row in BANK]
    bank[2]["answer"] = None
    with pytest.raises(ve.DatasetError, match=r"b\.json', row 3: column 'answer' \(the target\)"):
        ve.read_dataset(write(tmp_path / "b.json", bank), **bank_mapping())
    bank = [dict(row) for row in BANK]
    bank[0]["qid"] = None
    with pytest.raises(ve.DatasetError, match=r"b\.parquet', row 1: column 'qid' \(the id\)"):
        ve.read_dataset(write(tmp_path / "b.parquet", bank), **bank_mapping())


def test_duplicate_ids_name_both_rows(tmp_path):
    """Two rows with one id: the id, its column, and where each is."""
    bank = [dict(row) for row in BANK]
    bank[2]["qid"] = "q-1"
    with pytest.raises(
        ve.DatasetError,
        match=r"bank\.csv': the id 'q-1' \(column 'qid'\) is on line 2 and on line 4; "
        r"each id must be unique",
    ):
        ve.read_dataset(write(tmp_path / "bank.csv", bank), **bank_mapping())


def test_an_unknown_extension_and_a_missing_file(tmp_path):
    """The extensions read are listed; a file that is not there says so."""
    (tmp_path / "bank.txt").write_text("question,answer\n")
    with pytest.raises(
        ve.DatasetError,
        match=r"unknown extension '\.txt'; use \.csv, \.tsv, \.json, \.jsonl or \.parquet",
    ):
        ve.read_dataset(tmp_path / "bank.txt")
    with pytest.raises(ve.DatasetError, match=r"nope\.csv' does not exist"):
        ve.read_dataset(tmp_path / "nope.csv")


def test_an_unreadable_file_names_it(tmp_path):
    """A file its format cannot read: the file, and the reader's reason."""
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ve.DatasetError, match=r"Cannot read dataset file '.*bad\.parquet'"):
        ve.read_dataset(tmp_path / "bad.parquet")
    (tmp_path / "bad.json").write_text('{"input": "a"')
    with pytest.raises(ve.DatasetError, match=r"bad\.json' is not valid JSON"):
        ve.read_dataset(tmp_path / "bad.json")
    (tmp_path / "obj.json").write_text('{"input": "a", "target": "b"}')
    with pytest.raises(ve.DatasetError, match=r"obj\.json' must hold a JSON list of objects"):
        ve.read_dataset(tmp_path / "obj.json")
    (tmp_path / "bad.jsonl").write_text('{"input": "a", "target": "b"}\n[1, 2]\n')
    with pytest.raises(ve.DatasetError, match=r"bad\.jsonl', line 2: a list, not a JSON object"):
        ve.read_dataset(tmp_path / "bad.jsonl")


def test_an_empty_file_and_a_metadata_column_with_a_reserved_name(tmp_path):
    """No rows is an error; a metadata column may not take a name the rows use."""
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ve.DatasetError, match=r"empty\.jsonl' is empty"):
        ve.read_dataset(tmp_path / "empty.jsonl")
    rows = [{"input": "a", "target": "b", "human": "C"}]
    with pytest.raises(ve.DatasetError, match=r"metadata column may not be named 'human'"):
        ve.read_dataset(rows, metadata=["human"])


def test_an_object_it_cannot_read():
    """Anything else is refused with what it takes."""
    with pytest.raises(ve.DatasetError, match=r"Cannot read a int as a dataset"):
        ve.read_dataset(42)


def test_ids_the_log_writes_alike_name_both_rows():
    """An int id and a text id of the same digits are one id in the log (`1`, `"1"`):
    `read_dataset` refuses them as duplicates, naming both rows."""
    rows = [{"id": 1, "input": "a", "target": "b"}, {"id": "1", "input": "c", "target": "d"}]
    with pytest.raises(
        ve.DatasetError,
        match=r"Dataset: the id '1' \(column 'id'\) is on row 1 and on row 2 \(as 1 and '1', "
        r"one id as the log writes them\); each id must be unique",
    ):
        ve.read_dataset(rows)
