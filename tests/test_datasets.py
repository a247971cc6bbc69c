"""The datasets that ship with vitals-engine: `ape()`, An Python Eval."""

from __future__ import annotations

import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine.datasets import ape

COLUMNS = ["id", "input", "target", "domain", "task", "source", "knowledge"]


@pytest.fixture(scope="module")
def questions() -> pl.DataFrame:
    return ape()


def test_ape_shape_and_types(questions):
    """ape() has at least 28 rows and the seven documented columns with their types."""
    assert questions.height >= 28
    assert questions.columns == COLUMNS
    assert questions.schema["knowledge"] == pl.List(pl.String)
    for column in ("id", "input", "target", "domain", "task", "source"):
        assert questions.schema[column] == pl.String


def test_ape_ids_are_unique_sorted_slugs(questions):
    """Every id is a unique lowercase slug, and rows are sorted by id."""
    ids = questions["id"].to_list()
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert questions["id"].str.contains(r"^[a-z0-9]+(-[a-z0-9]+)+$").all()


def test_ape_inputs_and_targets_are_substantial(questions):
    """Inputs and targets are non-empty; targets say what earns partial credit."""
    assert (questions["input"].str.strip_chars().str.len_chars() > 80).all()
    assert (questions["target"].str.strip_chars().str.len_chars() > 200).all()
    assert questions["target"].str.contains("(?i)partial credit").all()
    assert questions.select(pl.col("input") == pl.col("target")).to_series().not_().all()


def test_ape_categories_are_the_allowed_values(questions):
    """domain, task and source take the documented values; every row has knowledge tags."""
    assert set(questions["domain"]) == {"Programming", "Data analysis"}
    assert set(questions["task"]) == {"Debugging", "New code", "Translation"}
    assert questions["source"].is_null().all()
    assert (questions["knowledge"].list.len() >= 1).all()
    tags = set(questions["knowledge"].explode())
    assert {"asyncio", "pandas", "polars", "numpy", "typing", "stdlib", "testing"} <= tags
    assert {"packaging"} <= tags


def test_ape_returns_a_fresh_frame_each_call(questions):
    """Changing the returned frame does not change the next call's data."""
    changed = questions.with_columns(pl.lit("x").alias("input"))
    assert changed["input"][0] == "x"
    assert ape()["input"][0] != "x"


def test_ape_runs_through_a_task(tmp_path):
    """ape() is a Task dataset: ids kept, other columns as metadata, judged by model_graded_qa."""
    task = ve.Task(
        ape(),
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.model_graded_qa(partial_credit=True, scorer_chat=ve.chat_mock()),
        name="ape",
        dir=tmp_path,
    )
    task.eval(progress=False)
    samples = task.get_samples()
    assert samples.height == ape().height
    assert samples["id"].to_list() == ape()["id"].to_list()
    assert {"domain", "task", "knowledge"} <= set(samples.columns)
    assert set(samples["score"].drop_nulls().cast(pl.String)) <= {"C", "P", "I"}
    assert task.metrics is not None
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert logged.samples[0].metadata["domain"] in ("Programming", "Data analysis")


def test_ape_is_reachable_as_ve_datasets():
    """`ve.datasets.ape` is the same function once the subpackage is imported."""
    import vitals_engine.datasets

    assert vitals_engine.datasets.ape is ape
    assert ve.datasets.ape is ape
