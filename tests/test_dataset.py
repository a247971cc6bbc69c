"""Loading datasets from lists, DataFrames and files, alone and through a Task."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine.dataset import load_dataset

ROWS = [
    {"input": "What's 2+2?", "target": "4", "level": "easy"},
    {"input": "What's 3+5?", "target": "8", "level": "hard"},
]


def echo(input):
    return str(input)


def from_file(path):
    """The rows `Task(path)` makes of a file."""
    return ve.Task(path, solver=echo, scorer=ve.detect_includes())._setup.rows


def as_tuples(rows):
    return [(r.id, r.input, r.target, r.metadata) for r in rows]


EXPECTED = [
    (1, "What's 2+2?", "4", {"level": "easy"}),
    (2, "What's 3+5?", "8", {"level": "hard"}),
]


# -- accepted sources ------------------------------------------------------------------


def test_list_of_dicts():
    """A list of dicts gives one row each, ids 1..n and the extra column as metadata."""
    assert as_tuples(load_dataset(ROWS)) == EXPECTED


def test_polars_dataframe():
    """A polars DataFrame is read row by row like a list of dicts."""
    assert as_tuples(load_dataset(pl.DataFrame(ROWS))) == EXPECTED


def test_pandas_dataframe():
    """A pandas DataFrame is recognised and read like a list of dicts."""
    pd = pytest.importorskip("pandas")  # a dev dependency (`make setup`)

    assert as_tuples(load_dataset(pd.DataFrame(ROWS))) == EXPECTED


def test_jsonl_file(tmp_path):
    """A .jsonl file is read one JSON object per line, skipping blank lines."""
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    assert as_tuples(from_file(path)) == EXPECTED


def test_json_file(tmp_path):
    """A .json file holding a list of objects is read."""
    path = tmp_path / "data.json"
    path.write_text(json.dumps(ROWS))
    assert as_tuples(from_file(path)) == EXPECTED


def test_csv_file(tmp_path):
    """A .csv file is read as the text written: a target 4 is "4"."""
    path = tmp_path / "data.csv"
    pl.DataFrame({"input": ["What's 2+2?", "What's 3+5?"], "target": [4, 8]}).write_csv(path)
    rows = from_file(path)
    assert [(r.input, r.target) for r in rows] == [("What's 2+2?", "4"), ("What's 3+5?", "8")]


def test_parquet_file(tmp_path):
    """A .parquet file is read."""
    path = tmp_path / "data.parquet"
    pl.DataFrame(ROWS).write_parquet(path)
    assert as_tuples(from_file(path)) == EXPECTED


def test_path_given_as_string(tmp_path):
    """A file path can be given as a plain string."""
    path = tmp_path / "data.json"
    path.write_text(json.dumps(ROWS))
    assert as_tuples(from_file(str(path))) == EXPECTED


def test_task_named_after_dataset_file(tmp_path):
    """A Task on a dataset file takes the file's stem as its name."""
    path = tmp_path / "arithmetic.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    task = ve.Task(path, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
    assert task.name == "arithmetic"
    assert task.get_samples().height == 2


def test_list_target_kept_as_list():
    """A list target is kept as a list of strings."""
    rows = load_dataset([{"input": "q", "target": ["4", "four"]}])
    assert rows[0].target == ["4", "four"]


# -- required columns ------------------------------------------------------------------


def test_missing_target_column():
    """A dataset without target names the missing column."""
    with pytest.raises(ve.DatasetError, match=r"missing required column target\."):
        load_dataset([{"input": "q"}])


def test_missing_input_column():
    """A dataset without input names the missing column."""
    with pytest.raises(ve.DatasetError, match=r"missing required column input\."):
        load_dataset([{"target": "4"}])


def test_missing_both_columns():
    """A dataset without input and target names both and lists the columns found."""
    with pytest.raises(
        ve.DatasetError, match=r"columns input and target\. Found columns: question, answer"
    ):
        load_dataset([{"question": "q", "answer": "a"}])


def test_missing_target_through_task(tmp_path):
    """Task() raises the DatasetError itself, before anything runs."""
    with pytest.raises(ve.DatasetError, match=r"missing required column target"):
        ve.Task([{"input": "q"}], solver=echo, scorer=ve.detect_includes(), dir=tmp_path)


def test_row_without_target_value():
    """A row whose target is missing names the row."""
    with pytest.raises(ve.DatasetError, match=r"row 2 has no target"):
        load_dataset([{"input": "a", "target": "b"}, {"input": "c"}])


# -- ids -------------------------------------------------------------------------------


def test_duplicated_ids():
    """Duplicated ids are a DatasetError naming the duplicated value."""
    with pytest.raises(ve.DatasetError, match=r"Duplicated values found in the id column \(1\)"):
        load_dataset(
            [{"id": 1, "input": "a", "target": "b"}, {"id": 1, "input": "c", "target": "d"}]
        )


def test_existing_ids_kept(tmp_path):
    """Ids in the dataset are kept rather than renumbered."""
    data = [{"id": 10, "input": "a", "target": "b"}, {"id": 20, "input": "c", "target": "d"}]
    task = ve.Task(data, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
    assert task.get_samples()["id"].to_list() == [10, 20]


@pytest.mark.anyio
async def test_existing_ids_kept_after_eval(tmp_path):
    """Dataset ids are also the ids of the evaluated samples."""
    data = [{"id": 10, "input": "a", "target": "a"}, {"id": 20, "input": "c", "target": "d"}]
    task = ve.Task(data, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    samples = task.get_samples()
    assert samples["id"].to_list() == [10, 20]
    assert samples["score"].to_list() == ["C", "I"]


def test_ids_default_to_one_to_n(tmp_path):
    """Without an id column the samples are numbered 1..n."""
    task = ve.Task(ROWS * 2, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
    assert task.get_samples()["id"].to_list() == [1, 2, 3, 4]


# -- metadata and inputs ---------------------------------------------------------------


@pytest.mark.anyio
async def test_extra_columns_are_metadata_columns(tmp_path):
    """Extra dataset columns appear as columns in get_samples() before and after eval."""
    task = ve.Task(ROWS, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
    assert task.get_samples()["level"].to_list() == ["easy", "hard"]
    await task.eval_async()
    assert task.get_samples()["level"].to_list() == ["easy", "hard"]


@pytest.mark.anyio
async def test_dict_input_passed_to_solver(tmp_path):
    """A dict input reaches a custom solver as a dict."""
    received = []

    async def solver(input):
        received.append(input)
        return str(input["a"] + input["b"])

    data = [{"input": {"a": 2, "b": 2}, "target": "4"}]
    task = ve.Task(data, solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    assert received == [{"a": 2, "b": 2}]
    assert task.metrics == {"accuracy": 1.0}


@pytest.mark.anyio
async def test_solver_with_sample_parameter_gets_metadata(tmp_path):
    """A solver declaring `sample` receives the Sample with the extra columns as metadata."""
    received: list[ve.Sample] = []

    async def solver(input, sample):
        received.append(sample)
        return f"{sample.metadata['level']}: {input}"

    task = ve.Task(ROWS, solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    by_id = {s.id: s for s in received}
    assert all(isinstance(s, ve.Sample) for s in received)
    assert by_id[1].metadata == {"level": "easy"}
    assert by_id[2].metadata == {"level": "hard"}
    assert (by_id[1].input, by_id[1].target, by_id[1].epoch) == ("What's 2+2?", "4", 1)
    assert task.get_samples()["result"].to_list() == ["easy: What's 2+2?", "hard: What's 3+5?"]


# -- unusable datasets -----------------------------------------------------------------


def test_empty_dataset():
    """An empty list is a DatasetError saying the dataset is empty."""
    with pytest.raises(ve.DatasetError, match=r"dataset is empty"):
        load_dataset([])


def test_empty_jsonl_file(tmp_path):
    """An empty .jsonl file is a DatasetError saying the dataset is empty."""
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(ve.DatasetError, match=r"dataset is empty"):
        from_file(path)


def test_single_dict():
    """A single dict is a DatasetError showing the list-of-rows form."""
    with pytest.raises(ve.DatasetError, match=r"must be a list of rows, not a single dict"):
        load_dataset({"input": "What's 2+2?", "target": "4"})


def test_list_of_strings():
    """A list of strings is a DatasetError saying each row must be a dict."""
    with pytest.raises(ve.DatasetError, match=r"row 1,? is a str; each row must be"):
        load_dataset(["What's 2+2?", "What's 3+5?"])


def test_unsupported_object():
    """Something that is not a dataset at all names its type and the accepted forms."""
    with pytest.raises(ve.DatasetError, match=r"Cannot use a int as a dataset"):
        load_dataset(42)


def test_unknown_file_extension(tmp_path):
    """A file with an unknown extension names it and lists the supported ones."""
    path = tmp_path / "data.txt"
    path.write_text("input,target\nq,a\n")
    with pytest.raises(
        ve.DatasetError,
        match=r"unknown extension '\.txt'; use \.csv, \.tsv, \.json, \.jsonl or \.parquet",
    ):
        from_file(path)


def test_nonexistent_path(tmp_path):
    """A path to no file is a DatasetError naming the path."""
    path = tmp_path / "missing.jsonl"
    with pytest.raises(ve.DatasetError, match=r"missing\.jsonl' does not exist"):
        from_file(path)


def test_malformed_jsonl_line_names_line_number(tmp_path):
    """A .jsonl line that is not JSON is reported with its line number."""
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json}\n")
    with pytest.raises(ve.DatasetError, match=r"line 2: not valid JSON"):
        from_file(path)


def test_json_file_not_a_list(tmp_path):
    """A .json file holding one object rather than a list is a DatasetError."""
    path = tmp_path / "data.json"
    path.write_text(json.dumps(ROWS[0]))
    with pytest.raises(ve.DatasetError, match=r"must hold a JSON list of objects"):
        from_file(path)


def test_json_file_list_of_non_objects(tmp_path):
    """A .json list whose items are not objects is a DatasetError, like a list of strings."""
    path = tmp_path / "data.json"
    path.write_text("[1, 2]")
    with pytest.raises(ve.DatasetError, match=r"row 1"):
        from_file(path)


def test_jsonl_line_not_an_object(tmp_path):
    """A .jsonl line holding valid JSON that is not an object is a DatasetError."""
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + '\n["What\'s 3+5?", "8"]\n')
    with pytest.raises(ve.DatasetError, match=r"line 2|row 2"):
        from_file(path)


def test_a_missing_column_error_says_how_to_map_other_names(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,answer\nWhat's 2+2?,4\n")
    with pytest.raises(ve.DatasetError, match=r"Found columns: question, answer\. .*read_dataset"):
        ve.Task(str(path), lambda x: x, ve.detect_includes())
    rows = ve.read_dataset(path, input="question", target="answer")
    assert ve.Task(rows, lambda x: x, ve.detect_includes(), dir=tmp_path).eval().metrics


@pytest.mark.parametrize(
    ("first", "second"), [(1, "1"), ("bad\udcff", "bad\\udcff")], ids=["int-and-text", "escaped"]
)
def test_ids_the_log_writes_alike_are_duplicates(tmp_path, first, second):
    """Two ids the log and its frames cannot tell apart (1 and "1"; a lone surrogate and
    its escape, as the log writes it) are one id twice: the Task refuses them."""
    data = [{"id": first, "input": "a", "target": "b"}, {"id": second, "input": "c", "target": "d"}]
    with pytest.raises(
        ve.DatasetError,
        match=rf"Duplicated values found in the id column \({re.escape(repr(first))} and "
        rf"{re.escape(repr(second))}\).*as the log writes them",
    ):
        ve.Task(data, solver=echo, scorer=ve.detect_includes(), dir=tmp_path)
