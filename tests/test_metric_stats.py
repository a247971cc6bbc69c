"""Metrics with their standard errors and 95% intervals through real runs: `task.metric_stats`,
epochs clustered by sample, `Task(cluster=)`, `Task(reducer=)`, the log (Inspect's `stderr`
beside each metric, read by Inspect and by us), the summary and the viewer's API."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import httpx
import pytest
from inspect_check import assert_inspect_reads, read_eval_log, read_raw

import vitals_engine as ve
from vitals_engine.statistics.intervals import MetricStat
from vitals_engine.viewer.server import ViewServer

INSPECT = Path(__file__).resolve().parent / "fixtures" / "inspect"
TINY_EVAL = INSPECT / "2026-11-22T01-34-07-00-00_tiny_PtBns7u5sgd4CDAiTHbmg8.eval"

#: Which of the ten samples the mock answers correctly: C,C,I,C,I,C,C,C,I,C.
CORRECT = [True, True, False, True, False, True, True, True, False, True]
#: By hand: seven 1s and three 0s have sample variance 2.1/9; stderr = sqrt(that / 10).
TEN_STDERR = math.sqrt(2.1 / 9 / 10)
T_975 = {4: 2.776445, 9: 2.262157}  # from a t table

#: 5 samples x 2 epochs, graded by (id, epoch): (C,C) (C,I) (I,I) (C,C) (I,C).
EPOCH_GRADES = {
    (1, 1): "C", (1, 2): "C", (2, 1): "C", (2, 2): "I", (3, 1): "I",
    (3, 2): "I", (4, 1): "C", (4, 2): "C", (5, 1): "I", (5, 2): "C",
}  # fmt: skip
#: Mean 0.6; each sample's summed deviation 0.8, -0.2, -1.2, 0.8, -0.2 (squares: 2.8);
#: CR1 over G = 5 clusters of n = 10 scores: sqrt(5/4 · 2.8) / 10.
EPOCHS_STDERR = math.sqrt(5 / 4 * 2.8) / 10


def ten_rows(**metadata: list) -> list[dict]:
    """Ten sums; the wrong ones have a target 100 off, which the mock's answer misses."""
    rows = []
    for i, right in enumerate(CORRECT, start=1):
        row = {"id": i, "input": f"What's {i}+{i}?", "target": str(2 * i if right else 2 * i + 100)}
        row.update({column: values[i - 1] for column, values in metadata.items()})
        rows.append(row)
    return rows


def ten_task(tmp_path: Path, **kwargs) -> ve.Task:
    rows = kwargs.pop("rows", None) or ten_rows()
    return ve.Task(rows, ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path, **kwargs)


def by_epoch(sample: ve.SolvedSample) -> str:
    return EPOCH_GRADES[(sample.id, sample.epoch)]


def epoch_task(tmp_path: Path, **kwargs) -> ve.Task:
    rows = ten_rows()[:5]
    return ve.Task(rows, ve.generate(ve.chat_mock()), by_epoch, dir=tmp_path, epochs=2, **kwargs)


# -- task.metric_stats -------------------------------------------------------------------


def test_metric_stats_after_eval_match_the_hand_computed_values(tmp_path):
    """Ten samples, seven correct: 0.7 ± 0.1528, interval 0.7 ± t(0.975, 9)·se clipped to 1;
    `task.metrics` stays {name: value}."""
    task = ten_task(tmp_path).eval()
    assert task.metrics == {"accuracy": 0.7}
    stat = task.metric_stats["accuracy"]
    assert stat.value == 0.7
    assert stat.stderr == pytest.approx(TEN_STDERR, rel=1e-12)
    assert stat.low == pytest.approx(0.7 - T_975[9] * TEN_STDERR, abs=1e-5)
    assert stat.high == 1.0
    assert (stat.n, stat.clusters) == (10, 10)
    assert task.measure() == {"accuracy": 0.7}


def test_epochs_are_clustered_by_sample(tmp_path):
    """5 samples x 2 epochs: the cluster-robust stderr over 5 clusters, t with 4 df."""
    task = epoch_task(tmp_path).eval()
    assert task.get_samples().height == 10
    stat = task.metric_stats["accuracy"]
    assert stat.value == pytest.approx(0.6)
    assert stat.stderr == pytest.approx(EPOCHS_STDERR, rel=1e-12)
    assert stat.low == pytest.approx(0.6 - T_975[4] * EPOCHS_STDERR, abs=1e-5)
    assert (stat.n, stat.clusters) == (10, 5)


def test_cluster_by_a_metadata_column(tmp_path):
    """`cluster="topic"`: three clusters (samples 1-4, 5-7, 8-10), by the CR1 formula."""
    topics = ["a"] * 4 + ["b"] * 3 + ["c"] * 3
    task = ten_task(tmp_path, rows=ten_rows(topic=topics), cluster="topic").eval()
    x = [1.0 if right else 0.0 for right in CORRECT]
    mean = sum(x) / 10
    sums = [sum(v - mean for v, t in zip(x, topics, strict=True) if t == g) for g in "abc"]
    expected = math.sqrt(3 / 2 * sum(s * s for s in sums)) / 10
    stat = task.metric_stats["accuracy"]
    assert stat.stderr == pytest.approx(expected, rel=1e-12)
    assert (stat.n, stat.clusters) == (10, 3)
    assert stat.low == pytest.approx(max(0.0, 0.7 - 4.302653 * expected), abs=1e-5)  # t(.975, 2)
    # the log says what the clusters are of; its reader and the viewer's API give it back
    logged = ve.read_log(task.log_path)
    assert logged.cluster == "topic"
    assert logged.metric_stats == task.metric_stats
    with (
        ViewServer(tmp_path).start() as running,
        httpx.Client(base_url=running.url) as http,
    ):
        (entry,) = http.get("/api/logs.json").json()["logs"]
    assert entry["metric_stats"]["accuracy"]["cluster"] == "topic"
    assert entry["metric_stats"]["accuracy"]["clusters"] == 3


def test_cluster_needs_a_value_in_every_row(tmp_path):
    """A row without the column, or a cluster= that is not a column name: ConfigError."""
    topics = ["a"] * 9 + [None]
    with pytest.raises(ve.ConfigError, match=r"cluster='topic'.*sample 10 has no value"):
        ten_task(tmp_path, rows=ten_rows(topic=topics), cluster="topic")
    with pytest.raises(ve.ConfigError, match=r"sample 1 has no value in column 'level'"):
        ten_task(tmp_path, cluster="level")
    with pytest.raises(ve.ConfigError, match="must be the name of a metadata column"):
        ten_task(tmp_path, cluster=3)


# -- reducers ----------------------------------------------------------------------------

#: Each sample's epochs (C,C) (C,I) (I,I) (C,C) (I,C) reduced, and the accuracy over them.
REDUCED = {
    "mean": ([1.0, 0.5, 0.0, 1.0, 0.5], 0.6),
    "mode": (["C", "C", "I", "C", "I"], 0.6),  # ties go to the earlier epoch
    "max": (["C", "C", "I", "C", "C"], 0.8),
    "pass_at_2": ([1.0, 1.0, 0.0, 1.0, 1.0], 0.8),  # 1 - C(n-c, 2)/C(2, 2)
}


@pytest.mark.parametrize("reducer", list(REDUCED))
def test_a_reducer_reduces_each_samples_epochs_before_the_metrics(tmp_path, reducer):
    """One score per sample, each its own cluster; get_samples() keeps every epoch; the log
    names the reducer and Inspect reads it."""
    reduced, value = REDUCED[reducer]
    task = epoch_task(tmp_path, reducer=reducer).eval()
    assert task.get_samples().height == 10
    assert task.metrics == {"accuracy": pytest.approx(value)}
    numbers = [{"C": 1.0, "I": 0.0}.get(v, v) for v in reduced]
    mean = sum(numbers) / 5
    expected = math.sqrt(sum((v - mean) ** 2 for v in numbers) / 4 / 5)
    stat = task.metric_stats["accuracy"]
    assert stat.stderr == pytest.approx(expected, rel=1e-12)
    assert (stat.n, stat.clusters) == (5, 5)
    full = assert_inspect_reads(task.log_path, task)
    assert full.results.scores[0].reducer == reducer
    assert full.eval.config.epochs_reducer == [reducer]


def test_bad_reducers_are_config_errors(tmp_path):
    with pytest.raises(ve.ConfigError, match="'mean', 'mode', 'max' or 'pass_at_<k>'"):
        epoch_task(tmp_path, reducer="median")
    with pytest.raises(ve.ConfigError, match="needs at least 3 epochs per sample"):
        epoch_task(tmp_path, reducer="pass_at_3")


def test_a_reducer_with_a_cluster_column_clusters_the_reduced_samples(tmp_path):
    rows = [{**row, "level": "easy" if row["id"] <= 2 else "hard"} for row in ten_rows()[:5]]
    task = ve.Task(rows, ve.generate(ve.chat_mock()), by_epoch, dir=tmp_path, epochs=2,
                   reducer="mean", cluster="level").eval()  # fmt: skip
    assert (task.metric_stats["accuracy"].n, task.metric_stats["accuracy"].clusters) == (5, 2)


#: 5 samples x 3 epochs: (C,C,C) (C,I,I) (I,I,I) (I,C,I) (I,I,C).
THREE_EPOCH_GRADES = ["CCC", "CII", "III", "ICI", "IIC"]
#: Each sample's three epochs reduced, by hand: c correct of n = 3, pass_at_2 is
#: 1 - C(3 - c, 2) / C(3, 2): 1, 2/3 and 0 for c = 3, 1 and 0.
REDUCED_THREE = {
    "max": ["C", "C", "I", "C", "C"],
    "mode": ["C", "I", "I", "I", "I"],
    "mean": [1.0, 1 / 3, 0.0, 1 / 3, 1 / 3],
    "pass_at_2": [1.0, 2 / 3, 0.0, 2 / 3, 2 / 3],
    None: [1.0, 1 / 3, 0.0, 1 / 3, 1 / 3],  # no reducer: Inspect's mean
}


def three_epoch_grades(sample: ve.SolvedSample) -> str:
    return THREE_EPOCH_GRADES[int(sample.id) - 1][sample.epoch - 1]


def reductions(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("reductions.json"))


@pytest.mark.parametrize("reducer", list(REDUCED_THREE))
def test_an_eval_logs_reductions_use_the_runs_reducer(tmp_path, reducer):
    """epochs=3: reductions.json names the run's reducer as Inspect does (the config's
    `epochs_reducer`; none without one, the epochs then reduced by the mean) and holds
    each sample's epochs reduced by it; Inspect reads it back alike."""
    task = ve.Task(ten_rows()[:5], ve.generate(ve.chat_mock()), three_epoch_grades,
                   dir=tmp_path, epochs=3, reducer=reducer, log_format="eval").eval()  # fmt: skip
    expected = REDUCED_THREE[reducer]
    (written,) = reductions(task.log_path)
    assert (written["scorer"], written["reducer"]) == ("three_epoch_grades", reducer)
    assert [s["sample_id"] for s in written["samples"]] == [1, 2, 3, 4, 5]
    assert [s["value"] for s in written["samples"]] == pytest.approx(expected)
    full = assert_inspect_reads(task.log_path, task)
    (read,) = full.reductions
    assert (read.scorer, read.reducer) == ("three_epoch_grades", reducer)
    assert [s.value for s in read.samples] == pytest.approx(expected)
    if reducer is not None:  # the metrics were computed over the same reduced scores
        numbers = [{"C": 1.0, "I": 0.0}.get(v, v) for v in expected]
        assert task.metrics == {"accuracy": pytest.approx(sum(numbers) / 5)}


def test_reductions_keep_an_answer_only_when_every_epoch_gave_it(tmp_path):
    """A sample answered alike in each epoch keeps its answer; one answered differently
    has none (as Inspect's reducers keep a field only when every epoch agrees)."""

    def solver(input: str, sample: ve.Sample) -> str:
        return "4" if sample.id == 1 else f"{sample.epoch}"

    def grade(sample: ve.SolvedSample) -> ve.Score:
        return ve.Score("C" if sample.id == 1 else "I", answer=sample.result)

    task = ve.Task(ten_rows()[:2], solver, grade, dir=tmp_path, epochs=3, reducer="max",
                   log_format="eval").eval()  # fmt: skip
    (written,) = reductions(task.log_path)
    assert [(s["value"], s["answer"]) for s in written["samples"]] == [("C", "4"), ("I", None)]
    assert_inspect_reads(task.log_path, task)


def test_an_epoch_left_unscored_is_left_out_of_the_reduction(tmp_path):
    """A scorer giving no grade (logged as "N", grader_failed) in one epoch: max reduces
    the others, as the metrics did; pass_at_3 with two scored epochs of three has no
    value, logged as the same no-grade marker."""

    def grade(sample: ve.SolvedSample) -> ve.Score:
        if (sample.id, sample.epoch) == (2, 3):
            return ve.Score(None, explanation="the grader failed")
        return ve.Score("C" if (sample.id, sample.epoch) == (2, 2) else "I")

    cases = (("max", ["I", "C"], None), ("pass_at_3", [0.0, "N"], "grader_failed"))
    for reducer, values, reason in cases:
        task = ve.Task(ten_rows()[:2], ve.generate(ve.chat_mock()), grade, dir=tmp_path,
                       epochs=3, reducer=reducer, log_format="eval").eval()  # fmt: skip
        (written,) = reductions(task.log_path)
        assert [s["value"] for s in written["samples"]] == values
        assert written["samples"][1].get("reason") == reason
        assert_inspect_reads(task.log_path, task)


# -- the log -----------------------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "eval"])
def test_the_log_has_stderr_beside_accuracy_and_inspect_reads_it(tmp_path, log_format):
    """Inspect's metric shape: `accuracy` then `stderr`; the interval, n and clusters in the
    metric's metadata. Inspect's reader gets the same numbers."""
    task = ten_task(tmp_path, log_format=log_format).eval()
    stat = task.metric_stats["accuracy"]
    header, _, _ = read_raw(task.log_path)
    metrics = header["results"]["scores"][0]["metrics"]
    assert list(metrics) == ["accuracy", "stderr"]
    assert metrics["stderr"]["name"] == "stderr"
    assert metrics["stderr"]["value"] == stat.stderr
    assert metrics["accuracy"]["metadata"] == {
        "stderr": stat.stderr,
        "ci_low": stat.low,
        "ci_high": stat.high,
        "ci_level": 0.95,
        "n": 10,
        "clusters": 10,
    }
    full = assert_inspect_reads(task.log_path, task)
    inspect_metrics = full.results.scores[0].metrics
    assert inspect_metrics["accuracy"].value == 0.7
    assert inspect_metrics["stderr"].value == pytest.approx(TEN_STDERR, rel=1e-12)
    assert inspect_metrics["accuracy"].metadata["ci_low"] == stat.low
    header_only = read_eval_log(str(task.log_path), header_only=True)
    assert header_only.results.scores[0].metrics["stderr"].value == stat.stderr


@pytest.mark.parametrize("header_only", [False, True])
def test_read_log_gives_back_the_tasks_metrics_and_stats(tmp_path, header_only):
    task = epoch_task(tmp_path).eval()
    logged = ve.read_log(task.log_path, header_only=header_only)
    assert logged.metrics == task.metrics == {"accuracy": pytest.approx(0.6)}
    assert logged.metric_stats == task.metric_stats


def test_custom_metrics_get_a_bootstrap_stderr_each_and_read_back(tmp_path):
    """Two custom metrics: `stderr` for the first, `<name>_stderr` for the next; the reader
    leaves those out of `metrics`. The bootstrap is seeded: two runs agree."""
    metrics = {
        "share": lambda scores: (scores == "C").mean(),
        "n_wrong": lambda scores: (scores == "I").sum(),
    }
    task = ten_task(tmp_path, metrics=metrics).eval()
    twin = ten_task(tmp_path, metrics=metrics).eval()
    assert task.metrics == twin.metrics == {"share": 0.7, "n_wrong": 3.0}
    assert task.metric_stats == twin.metric_stats
    share = task.metric_stats["share"]
    assert share.stderr == pytest.approx(TEN_STDERR, rel=0.15)
    header, _, _ = read_raw(task.log_path)
    assert list(header["results"]["scores"][0]["metrics"]) == [
        "share",
        "stderr",
        "n_wrong",
        "n_wrong_stderr",
    ]
    logged = ve.read_log(task.log_path)
    assert logged.metrics == {"share": 0.7, "n_wrong": 3.0}
    assert logged.metric_stats == task.metric_stats
    assert_inspect_reads(task.log_path, task)


def test_a_single_sample_has_no_stderr_and_the_log_no_stderr_metric(tmp_path):
    task = ve.Task(ten_rows()[:1], ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    task.eval()
    assert task.metric_stats == {"accuracy": MetricStat(1.0, None, None, None, 1, 1)}
    header, _, _ = read_raw(task.log_path)
    assert list(header["results"]["scores"][0]["metrics"]) == ["accuracy"]
    assert ve.read_log(task.log_path).metric_stats == task.metric_stats


def test_an_inspect_log_keeps_its_stderr_metric_and_folds_it_into_the_stats():
    """Inspect's `accuracy` + `stderr`: `metrics` as logged, `metric_stats` with the stderr
    on accuracy (no interval: the log does not say how it was computed)."""
    logged = ve.read_log(TINY_EVAL)
    assert logged.metrics == pytest.approx({"accuracy": 2 / 3, "stderr": 1 / 3})
    stat = logged.metric_stats["accuracy"]
    assert list(logged.metric_stats) == ["accuracy"]
    assert stat.value == pytest.approx(2 / 3)
    assert stat.stderr == pytest.approx(1 / 3)
    assert (stat.low, stat.high, stat.clusters) == (None, None, None)
    assert stat.n == 3


@pytest.mark.anyio
async def test_a_stopped_runs_log_has_the_stats_of_what_finished(tmp_path):
    """Ctrl-C mid-run: the log (status cancelled) has the metrics and statistics of the
    samples scored before, and the summary shows them."""

    async def solver(input: str, sample: ve.Sample) -> str:
        if sample.id == 6:
            raise KeyboardInterrupt
        return str(2 * int(sample.id))

    task = ve.Task(ten_rows(), solver, ve.detect_includes(), dir=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        await task.eval_async(max_concurrency=1)
    logged = ve.read_log(task.log_path)
    assert logged.status == "cancelled"
    finished = len(logged.samples)
    correct = sum(CORRECT[int(s.id) - 1] for s in logged.samples)
    stat = logged.metric_stats["accuracy"]
    assert stat.value == pytest.approx(correct / finished)
    assert (stat.n, stat.clusters) == (finished, finished)
    assert f", {finished} samples) (of the samples scored before" in ve.summary(task)


# -- summary -----------------------------------------------------------------------------


def test_the_summary_shows_stderr_interval_and_counts(tmp_path):
    task = ten_task(tmp_path).eval()
    assert "Metrics: accuracy = 0.7 ± 0.15 (95% CI 0.354\u20131, 10 samples)" in ve.summary(task)
    epochs = epoch_task(tmp_path).eval()
    assert "accuracy = 0.6 ± 0.19 (95% CI 0.0806\u20131, 10 scores in 5 clusters)" in ve.summary(
        epochs
    )


# -- both backends, and a real HTTP server ------------------------------------------------


@pytest.mark.anyio
async def test_eval_async_measures_the_same_on_either_backend(tmp_path, anyio_backend):
    task = await epoch_task(tmp_path, reducer="mean").eval_async()
    assert task.metric_stats["accuracy"].value == pytest.approx(0.6)
    assert ve.read_log(task.log_path).metric_stats == task.metric_stats


@pytest.mark.anyio
async def test_epochs_over_http_count_each_sample_once(server, tmp_path):
    """The mock server answers each epoch alike: clustered by sample, the stderr is that of
    the 4 samples, not of 8 independent scores."""
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    rows = ten_rows()[:4]  # C, C, I, C
    task = ve.Task(rows, ve.generate(chat), ve.detect_includes(), dir=tmp_path, epochs=2)
    await task.eval_async()
    stat = task.metric_stats["accuracy"]
    per_sample = math.sqrt(0.75 * 0.25 * 4 / 3 / 4)  # sample variance of 1,1,0,1 over 4
    assert stat.stderr == pytest.approx(per_sample, rel=1e-12)
    assert (stat.n, stat.clusters) == (8, 4)
    assert_inspect_reads(task.log_path, task)


# -- the viewer's data API ---------------------------------------------------------------


def test_the_viewer_api_gives_each_metrics_stats(tmp_path):
    """`api/logs.json`: `metrics` without our stderr entries, `metric_stats` beside them, and
    per scorer under `scores[].stats`."""
    task = ten_task(tmp_path / "logs").eval()
    stat = task.metric_stats["accuracy"]
    (tmp_path / "logs" / TINY_EVAL.name).write_bytes(TINY_EVAL.read_bytes())
    with (
        ViewServer(tmp_path / "logs").start() as running,
        httpx.Client(base_url=running.url) as http,
    ):
        document = http.get("/api/logs.json").json()
    by_file = {entry["file"]: entry for entry in document["logs"]}
    ours = by_file[task.log_path.name]
    assert ours["metrics"] == {"accuracy": 0.7}
    expected = {"stderr": stat.stderr, "low": stat.low, "high": 1.0, "n": 10, "clusters": 10}
    assert ours["metric_stats"] == {"accuracy": expected}
    assert ours["scores"][0]["stats"] == {"accuracy": expected}
    inspects = by_file[TINY_EVAL.name]
    assert inspects["metrics"] == pytest.approx({"accuracy": 2 / 3, "stderr": 1 / 3})
    assert inspects["metric_stats"]["accuracy"]["stderr"] == pytest.approx(1 / 3)
    assert json.dumps(document)  # nothing that is not JSON (no NaN)
