"""Evals side by side: read_logs() over directories and bind() of tasks."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import msgspec
import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine._errors import ConfigError, LogFormatError
from vitals_engine.analysis import bind, read_logs
from vitals_engine.log.journal_format import encode_header, encode_sample, encode_start
from vitals_engine.log.reader import read_log

FIXTURES = Path(__file__).resolve().parent / "fixtures"

ROW_COLUMNS = [
    "log",
    "task",
    "model",
    "run_id",
    "status",
    "id",
    "epoch",
    "score",
    "scorer",
    "input",
    "target",
    "result",
    "error",
]

# log file -> rows: every fixture log; manifests and the JSON schema are skipped
FIXTURE_ROWS = {
    "2025-01-01T00-00-00+00-00_demo-task_T1.json": 2,
    "2025-01-01T00-00-00+00-00_mytask_B1.json": 1,
    "2026-11-22T01-34-07-00-00_tiny_PtBns7u5sgd4CDAiTHbmg8.eval": 6,
    "2026-11-22T01-34-10-00-00_tiny_Qm9omgo5Hto8Xb3xpTfaBV.json": 6,
    "openai_compat_fake_server.eval": 3,
    "partial_running.eval": 4,
    "retry_original.eval": 4,
    "2025-04-15T01-13-00+00-00_simpleaddition_4be39e48547460f824ccd8.json": 2,
    "2025-04-29T14-36-27-05-00_An-R-Eval_e4763d5da8fe03a6cf4a90.json": 26,
    "2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json": 2,
    "2026-12-06T12-48-31-00-00_agent_8zq9CJfoUz8BdmNooHpFZG.json": 2,
    "2026-12-06T12-48-32-00-00_agent_5WPnJRnR3sUdBbTNBk57nr.eval": 2,
}

ADDITION = [
    {"input": "What's 2+2?", "target": "4", "level": "easy"},
    {"input": "What's 2+3?", "target": "5", "level": "easy"},
    {"input": "What's 7+8?", "target": "16", "level": "hard"},
]


def make_task(tmp_path, **kw):
    kw.setdefault("solver", ve.generate(ve.chat_mock()))
    kw.setdefault("scorer", ve.detect_includes())
    return ve.Task(ADDITION, dir=tmp_path, **kw)


# -- read_logs --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_logs_over_two_runs(tmp_path):
    """Two runs in a directory give one row per sample of each, with their run ids."""
    first = await make_task(tmp_path, name="first").eval_async()
    second = await make_task(tmp_path / "nested", name="second").eval_async(epochs=2)
    frame = read_logs(tmp_path)
    assert frame.columns == ROW_COLUMNS
    assert frame.height == 3 + 6
    assert frame["run_id"].n_unique() == 2
    by_task = dict(frame.group_by("task").len().iter_rows())
    assert by_task == {"first": 3, "second": 6}
    assert set(frame["model"]) == {"mock/mock-model"}
    assert set(frame["status"]) == {"success"}
    assert frame["score"].cast(pl.String).to_list().count("I") == 3  # 7+8 is not 16
    assert {first.log_path.name, second.log_path.name} == set(frame["log"])
    full = read_logs(tmp_path, header_only_where_possible=False)
    assert full.equals(frame)


def test_read_logs_over_the_fixtures():
    """Every fixture log reads; manifests and non-log JSON are skipped."""
    frame = read_logs(FIXTURES)
    assert frame.columns == ROW_COLUMNS
    assert dict(frame.group_by("log").len().iter_rows()) == FIXTURE_ROWS
    assert frame["id"].dtype == pl.String  # int and string ids together
    partial = frame.filter(pl.col("log") == "partial_running.eval")
    assert set(partial["status"]) == {"started"}
    r_eval = frame.filter(pl.col("task") == "An-R-Eval")
    assert set(r_eval["score"].cast(pl.String)) == {"C", "P", "I"}
    assert set(r_eval["model"]) == {"anthropic/claude-3-7-sonnet-latest"}


def test_read_logs_full_reads_agree_with_light_ones():
    """Reading whole samples gives the same rows; only .eval results may differ (answers)."""
    light = read_logs(FIXTURES)
    full = read_logs(FIXTURES, header_only_where_possible=False)
    assert light.drop("result").equals(full.drop("result"))
    json_rows = pl.col("log").str.ends_with(".json")
    assert light.filter(json_rows)["result"].equals(full.filter(json_rows)["result"])


@pytest.mark.anyio
async def test_read_logs_reads_journals_of_unfinished_runs(tmp_path):
    """A journal is read when its run has no final log, and skipped when it has one."""
    task = await make_task(tmp_path).eval_async()
    final = read_log(task.log_path)
    started = msgspec.structs.replace(final.header, status="started")
    orphan = tmp_path / "2026-01-01T00-00-00+00-00_crashed_abc.journal"
    orphan.write_bytes(
        encode_start(started, "2026-01-01T00-00-00+00-00_crashed_abc.json")
        + encode_sample(final.samples[0])
        + encode_sample(final.samples[1])[:-20]
    )
    finished = task.log_path.with_suffix(".journal")
    finished.write_bytes(
        encode_start(started, task.log_path.name)
        + b"".join(encode_sample(x) for x in final.samples)
        + encode_header(final.header)
    )
    frame = read_logs(tmp_path)
    assert dict(frame.group_by("log").len().iter_rows()) == {
        task.log_path.name: 3,
        orphan.name: 1,
    }
    assert frame.filter(pl.col("log") == orphan.name)["status"].to_list() == ["started"]


def test_read_logs_skips_hidden_files_and_manifests(tmp_path):
    """Temp files of atomic writes and viewer manifests are not logs."""
    shutil.copy(FIXTURES / "vitals" / "listing.json", tmp_path / "listing.json")
    (tmp_path / ".tmp-123.json").write_text("{trunc")
    frame = read_logs(tmp_path)
    assert frame.height == 0
    assert frame.columns == ROW_COLUMNS


def test_read_logs_of_a_missing_directory(tmp_path):
    """A directory that does not exist is a LogFormatError."""
    with pytest.raises(LogFormatError, match="does not exist"):
        read_logs(tmp_path / "nowhere")
    log = tmp_path / "x.json"
    log.write_text("{}")
    with pytest.raises(LogFormatError, match="is a file, not a directory"):
        read_logs(log)


def test_read_logs_skips_a_corrupt_log_with_a_warning(tmp_path, caplog):
    """A truncated log is skipped, warned about and named in the `error` column."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    good = "2025-01-01T00-00-00+00-00_demo-task_T1.json"
    data = (FIXTURES / "inspect" / good).read_bytes()
    shutil.copy(FIXTURES / "inspect" / good, tmp_path / good)
    (tmp_path / "cut.json").write_bytes(data[:-40])
    for light in (True, False):
        frame = read_logs(tmp_path, header_only_where_possible=light)
        assert frame.columns == ROW_COLUMNS
        readable = frame.filter(pl.col("error").is_null())
        assert set(readable["log"]) == {good}
        assert readable.height == 2
        skipped = frame.filter(pl.col("error").is_not_null())
        assert skipped["log"].to_list() == ["cut.json"]
        assert skipped["error"].str.contains(r"cut\.json: cannot read the log").all()
        assert skipped.drop("log", "error").null_count().row(0) == (1,) * (len(ROW_COLUMNS) - 2)
        assert frame["target"].dtype == pl.String
    warnings = [r for r in caplog.records if "skipped a log" in r.getMessage()]
    assert len(warnings) == 2
    assert "cut.json" in warnings[0].getMessage()
    assert "cannot read the log" in warnings[0].getMessage()


def test_read_logs_skips_a_log_it_may_not_read(tmp_path, caplog, monkeypatch):
    """A log the OS refuses to read (permissions) is skipped, not an error, and named."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    locked = tmp_path / "locked.json"
    shutil.copy(FIXTURES / "inspect" / "2025-01-01T00-00-00+00-00_demo-task_T1.json", locked)
    read_bytes = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self.name == locked.name:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    frame = read_logs(tmp_path)
    assert frame["log"].to_list() == ["locked.json"]
    assert "Permission denied" in frame["error"][0]
    assert any("locked.json" in r.getMessage() for r in caplog.records)


# -- bind -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bind_two_tasks(tmp_path):
    """bind(a, b): task, id, epoch, score and a metadata struct; twice the rows."""
    a = await make_task(tmp_path).eval_async()
    b = await make_task(tmp_path, solver=ve.generate(ve.chat_mock(lambda p: "4"))).eval_async()
    both = bind(a, b)
    assert both.columns == ["task", "id", "epoch", "score", "metadata"]
    assert both.height == 2 * 3
    assert a.name == b.name == "task"  # the same name: numbered
    assert both["task"].to_list() == ["task_1"] * 3 + ["task_2"] * 3
    assert both["score"].dtype == a.get_samples()["score"].dtype
    fields = [f.name for f in both.schema["metadata"].fields]  # type: ignore[union-attr]
    assert fields[:3] == ["input", "target", "level"]
    assert "result" in fields
    assert "solver_chat" not in fields
    assert both["metadata"].struct.field("result").to_list()[3:] == ["4", "4", "4"]


@pytest.mark.anyio
async def test_bind_labels_tasks_by_their_names(tmp_path):
    """Positional tasks are labelled by their names (a log by its task's), numbered only where
    names clash, with each other or with a keyword."""
    plain = await make_task(tmp_path, name="addition").eval_async()
    hard = await make_task(tmp_path, name="addition-hard").eval_async()
    labels = bind(plain, hard)["task"].unique(maintain_order=True).to_list()
    assert labels == ["addition", "addition-hard"]
    logged = read_log(plain.log_path)
    labels = bind(plain, logged, hard)["task"].unique(maintain_order=True).to_list()
    assert labels == ["addition_1", "addition_2", "addition-hard"]
    labels = bind(hard, addition=plain)["task"].unique(maintain_order=True).to_list()
    assert labels == ["addition-hard", "addition"]
    labels = bind(plain, hard, addition=logged)["task"].unique(maintain_order=True).to_list()
    assert labels == ["addition_1", "addition-hard", "addition"]


@pytest.mark.anyio
async def test_bind_with_keywords_and_logs(tmp_path):
    """Keyword tasks are named by their keyword; a log read back binds like a task."""
    task = await make_task(tmp_path).eval_async()
    both = bind(live=task, logged=read_log(task.log_path))
    assert both["task"].unique(maintain_order=True).to_list() == ["live", "logged"]
    live, logged = both.partition_by("task")
    assert live.drop("task").equals(logged.drop("task"))


@pytest.mark.anyio
async def test_bind_casts_scores_of_different_types_to_strings(tmp_path):
    """Grades in one task and numbers in another make a String score column."""
    grades = await make_task(tmp_path).eval_async()

    def numeric(sample):
        """One point when the target is in the result."""
        return 1.0 if sample.target in sample.result else 0.0

    numbers = await make_task(tmp_path, scorer=numeric).eval_async()
    both = bind(grades, numbers)
    assert both["score"].dtype == pl.String
    assert both["score"].to_list() == ["C", "C", "I", "1.0", "1.0", "0.0"]


def test_bind_refuses_what_is_not_a_task():
    """A non-Task argument is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=r"`task_2` must be a Task"):
        bind(read_log(FIXTURES / "inspect" / "partial_running.eval"), "task")
    with pytest.raises(ConfigError, match=r"`other` must be a Task.*not int"):
        bind(other=3)
    with pytest.raises(ConfigError, match="needs tasks"):
        bind()


def test_bind_of_logs_with_different_ids_and_metadata():
    """Logs with string and int ids and different columns bind, ids as strings."""
    r_eval = read_log(
        FIXTURES / "vitals" / "2025-04-29T14-36-27-05-00_An-R-Eval_e4763d5da8fe03a6cf4a90.json"
    )
    demo = read_log(FIXTURES / "inspect" / "2025-01-01T00-00-00+00-00_demo-task_T1.json")
    both = bind(r=r_eval, demo=demo)
    assert both.height == 26 + 2
    assert both["id"].dtype == pl.String
    assert both.filter(pl.col("task") == "demo")["id"].to_list() == ["1", "2"]
