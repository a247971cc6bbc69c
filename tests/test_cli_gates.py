"""`vitals eval --fail-under METRIC=VALUE --junit FILE`: a run as a CI gate and its report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vitals_engine.cli import main
from vitals_engine.cli.shared import EXIT_BELOW_THRESHOLD, EXIT_FAILED, EXIT_OK, EXIT_USAGE

#: Two tasks: `sums` right on 4 of 5 samples (accuracy 0.8), one of them failing with an
#: error when CLI_GATES_FAIL says so; `words` right on all 2.
TASKS = """
import os

import vitals_engine as ve


def solver(input: str, sample: ve.Sample) -> str:
    if os.environ.get("CLI_GATES_FAIL") == str(sample.id):
        raise RuntimeError(f"sample {sample.id} broke")
    if os.environ.get("CLI_GATES_FAIL") == "colours" and sample.id == 4:
        raise RuntimeError("\\x1b[31mred\\x00 alert")
    return "wrong" if sample.id == 5 else input


sums = ve.Task(
    [{"id": i, "input": f"{i}+{i}={2 * i}", "target": str(2 * i)} for i in range(1, 6)],
    solver=solver,
    scorer=ve.detect_includes(),
    name="sums",
)

words = ve.Task(
    [{"input": "hello", "target": "hello"}, {"input": "world", "target": "world"}],
    solver=lambda input: input,
    scorer=ve.detect_includes(),
    name="words",
)
"""

#: What every run of a test says, beside its own options.
COMMON = ["--no-progress"]


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "evals.py"
    path.write_text(TASKS)
    return path


def run(tmp_path: Path, target: str | Path, *options: str) -> int:
    return main(["eval", str(target), "--log-dir", str(tmp_path / "logs"), *COMMON, *options])


def test_a_metric_below_its_threshold_exits_3_with_one_line(tmp_path, tasks_file, capsys):
    """accuracy 0.8 against 0.9: exit 3 and `FAIL sums: accuracy 0.80 < 0.90`."""
    code = run(tmp_path, f"{tasks_file}:sums", "--fail-under", "accuracy=0.9")
    assert code == EXIT_BELOW_THRESHOLD == 3
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == "FAIL sums: accuracy 0.80 < 0.90"


def test_thresholds_that_hold_exit_0_with_one_line(tmp_path, tasks_file, capsys):
    """Thresholds met (per scorer or plainly, for every task of the file): exit 0, one OK line."""
    code = run(
        tmp_path,
        tasks_file,
        "--fail-under",
        "accuracy=0.8",
        "--fail-under",
        "detect_includes/accuracy=0.5",
    )
    assert code == EXIT_OK
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert out.rstrip().splitlines()[-1] == "Thresholds: all 4 met."


def test_an_unknown_metric_is_a_usage_error_naming_the_metrics(tmp_path, tasks_file, capsys):
    """A name no metric has exits 2 before anything runs, and lists what could be gated."""
    code = run(tmp_path, f"{tasks_file}:words", "--fail-under", "acc=0.5")
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--fail-under acc=0.5: no task has a metric 'acc' (these could be gated: " in err
    assert "accuracy, detect_includes(case_sensitive=False)/accuracy, " in err
    assert not (tmp_path / "logs").exists()


def test_a_misspelt_scorer_is_found_before_the_run(tmp_path, tasks_file, capsys):
    code = run(tmp_path, tasks_file, "--fail-under", "detect_include/accuracy=0.5")
    assert code == EXIT_USAGE
    assert "no task has a metric 'detect_include/accuracy'" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("value", ["accuracy", "accuracy=most"])
def test_a_malformed_threshold_is_a_usage_error(tmp_path, tasks_file, capsys, value):
    """`--fail-under` without `=NUMBER` exits 2 before anything runs."""
    assert run(tmp_path, tasks_file, "--fail-under", value) == EXIT_USAGE
    assert "A threshold is METRIC=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()


def test_a_failed_run_keeps_its_exit_code_and_fails_its_thresholds(
    tmp_path, tasks_file, capsys, monkeypatch
):
    """A run that failed (a sample error, none allowed) exits 1, not 3, and its threshold
    is not met even when its metric is above it."""
    monkeypatch.setenv("CLI_GATES_FAIL", "1")
    code = run(tmp_path, f"{tasks_file}:sums", "--fail-under", "accuracy=0.5")
    assert code == EXIT_FAILED
    out = capsys.readouterr().out
    assert "FAIL sums: accuracy 0.75 >= 0.50, but the run ended with status error" in out


def test_estimate_does_not_go_with_gates(tmp_path, tasks_file, capsys):
    """`--estimate` runs no eval to gate: with `--fail-under` it is a usage error."""
    code = run(tmp_path, tasks_file, "--estimate", "--fail-under", "accuracy=0.5")
    assert code == EXIT_USAGE
    assert "leave out --estimate" in capsys.readouterr().err


# -- --junit -----------------------------------------------------------------------------------


def parsed(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    return root


def check_counts(element: ET.Element) -> None:
    """A testsuite's (or the whole's) counts are those of its test cases, and its time a
    number of seconds, as JUnit readers expect."""
    cases = list(element.iter("testcase"))
    assert element.get("tests") == str(len(cases))
    assert element.get("failures") == str(sum(c.find("failure") is not None for c in cases))
    assert element.get("errors") == str(sum(c.find("error") is not None for c in cases))
    assert element.get("skipped") == "0"
    assert float(element.get("time", "x")) >= 0
    for case in cases:
        assert case.get("name")
        assert case.get("classname")
        assert float(case.get("time", "x")) >= 0


def test_junit_report_of_a_failed_threshold_and_a_failed_sample(
    tmp_path, tasks_file, capsys, monkeypatch
):
    """A suite per task; in it the run, each threshold (a failure below it) and each sample
    that failed with an error (its message and traceback); counts and times on each."""
    monkeypatch.setenv("CLI_GATES_FAIL", "2")
    report = tmp_path / "out" / "report.xml"
    code = run(
        tmp_path,
        tasks_file,
        "--fail-on-error",
        "false",
        "--fail-under",
        "accuracy=0.9",
        "--junit",
        str(report),
    )
    assert code == EXIT_BELOW_THRESHOLD
    assert f"JUnit report: {report}" in capsys.readouterr().out
    root = parsed(report)
    check_counts(root)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "1", "1")
    sums, words = root.findall("testsuite")
    assert (sums.get("name"), words.get("name")) == ("sums", "words")
    for suite in (sums, words):
        check_counts(suite)
        assert suite.get("timestamp")
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["status"] == "success"
        assert Path(props["log"] or "").is_file()
    names = [case.get("name") for case in sums.findall("testcase")]
    assert names == ["run", "accuracy >= 0.9", "sample 2 (epoch 1)"]
    run_case, threshold, sample = sums.findall("testcase")
    assert list(run_case) == []
    failure = threshold.find("failure")
    assert failure is not None
    assert failure.get("message") == "FAIL sums: accuracy 0.75 < 0.90"
    error = sample.find("error")
    assert error is not None
    assert error.get("type") == "RuntimeError"
    assert error.get("message") == "RuntimeError while solving: sample 2 broke"
    assert "Traceback" in (error.text or "")
    assert sample.get("classname") == "sums.samples"
    assert [c.get("name") for c in words.findall("testcase")] == ["run", "accuracy >= 0.9"]
    assert words.find("testcase/failure") is None


def test_junit_report_of_a_failed_run(tmp_path, tasks_file, monkeypatch):
    """A run that failed is an error in its `run` test case, with the run's error."""
    monkeypatch.setenv("CLI_GATES_FAIL", "3")
    report = tmp_path / "report.xml"
    code = run(tmp_path, f"{tasks_file}:sums", "--junit", str(report))
    assert code == EXIT_FAILED
    root = parsed(report)
    check_counts(root)
    [suite] = root.findall("testsuite")
    run_error = suite.find("testcase[@name='run']/error")
    assert run_error is not None
    assert run_error.get("message") == "the run ended with status error: 1 of 5 samples failed"
    assert suite.find("testcase[@name='sample 3 (epoch 1)']/error") is not None


def test_junit_alone_passes_without_thresholds(tmp_path, tasks_file):
    """`--junit` without thresholds: a passing `run` case per task, exit 0."""
    report = tmp_path / "report.xml"
    assert run(tmp_path, f"{tasks_file}:words", "--junit", str(report)) == EXIT_OK
    root = parsed(report)
    check_counts(root)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "0")


def test_an_eval_set_is_gated_run_by_run(tmp_path, capsys):
    """With several --model, each task on each model is checked and is a suite of its own."""
    path = tmp_path / "chat_task.py"
    path.write_text(
        "import vitals_engine as ve\n"
        "adding = ve.Task([{'input': \"What's 2+2?\", 'target': '4'}],\n"
        "                 ve.generate(ve.chat_mock()), ve.detect_includes(), name='adding')\n"
    )
    report = tmp_path / "report.xml"
    code = run(
        tmp_path,
        path,
        "--model",
        "mock/one",
        "--model",
        "mock/two",
        "--fail-under",
        "accuracy=1",
        "--junit",
        str(report),
    )
    assert code == EXIT_OK, capsys.readouterr()
    assert "Thresholds: all 2 met." in capsys.readouterr().out
    suites = parsed(report).findall("testsuite")
    assert [s.get("name") for s in suites] == ["adding on mock/one", "adding on mock/two"]


def test_junit_report_holds_what_xml_cannot(tmp_path, tasks_file, monkeypatch):
    """An error with ANSI colours and a NUL still makes a report that parses, the
    characters XML cannot hold replaced."""
    monkeypatch.setenv("CLI_GATES_FAIL", "colours")
    report = tmp_path / "report.xml"
    run(tmp_path, f"{tasks_file}:sums", "--fail-on-error", "false", "--junit", str(report))
    error = parsed(report).find("testsuite/testcase[@name='sample 4 (epoch 1)']/error")
    assert error is not None
    assert error.get("message") == "RuntimeError while solving: \ufffd[31mred\ufffd alert"


def test_a_junit_path_that_is_a_folder_is_a_usage_error_before_the_run(
    tmp_path, tasks_file, capsys
):
    """`--junit` naming a folder exits 2 before any run (no log written), saying to name
    a file, rather than failing once the whole run is paid for."""
    folder = tmp_path / "reports"
    folder.mkdir()
    code = run(tmp_path, tasks_file, "--fail-under", "accuracy=0.5", "--junit", str(folder))
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--junit {folder}: that is a folder; name the report's file" in err
    assert f"{folder / 'report.xml'}" in err
    assert not (tmp_path / "logs").exists()


def test_a_junit_path_under_a_file_is_a_usage_error_before_the_run(tmp_path, tasks_file, capsys):
    """`--junit` whose folder would have to be made where a file is exits 2 before any run."""
    (tmp_path / "notes.txt").write_text("not a folder")
    report = tmp_path / "notes.txt" / "report.xml"
    code = run(tmp_path, tasks_file, "--junit", str(report))
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--junit {report}: cannot make its folder: {tmp_path / 'notes.txt'} is a file" in err
    assert not (tmp_path / "logs").exists()


def test_a_junit_report_in_a_folder_not_yet_made_is_written(tmp_path, tasks_file):
    """`--junit` into folders that do not exist yet makes them and writes the report."""
    report = tmp_path / "ci" / "reports" / "report.xml"
    assert run(tmp_path, f"{tasks_file}:words", "--junit", str(report)) == EXIT_OK
    check_counts(parsed(report))
