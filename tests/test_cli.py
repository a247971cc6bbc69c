"""The `vitals` command line: eval, ls, view, bundle, help and exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

import vitals_engine as ve
from vitals_engine.cli import main
from vitals_engine.engine.option_table import fail_on_error_flag
from vitals_engine.log.journal_format import encode_sample, encode_start

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cli_task.py"
FIXTURES = ROOT / "tests" / "fixtures"

HEADER = "import vitals_engine as ve\n\n"
_SCRIPT = Path(sys.executable).with_name("vitals")
#: The installed `vitals` command (or the module, where the venv has no script).
VITALS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "vitals_engine"]

FLAKY_TASK = """
import os
from pathlib import Path

import vitals_engine as ve

FAIL = set(filter(None, os.environ.get("CLI_TEST_FAIL", "").split(",")))
CALLS = os.environ.get("CLI_TEST_CALLS")


def solver(input: str, sample: ve.Sample) -> str:
    if CALLS:
        with open(CALLS, "a") as fh:
            fh.write(f"{sample.id}\\n")
    if str(sample.id) in FAIL:
        raise RuntimeError(f"sample {sample.id} broke")
    return input.upper()


flaky = ve.Task(
    [{"id": f"s{i}", "input": f"word{i}", "target": f"WORD{i}"} for i in range(1, 6)],
    solver=solver,
    scorer=ve.detect_includes(),
    name="flaky",
)
"""


def write_task(tmp_path: Path, body: str, name: str = "tasks.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def only_log(directory: Path) -> Path:
    logs = sorted(p for p in directory.glob("*.json") if p.name != "listing.json")
    assert len(logs) == 1, logs
    return logs[0]


def run_flaky(tmp_path, monkeypatch, *extra: str, fail: str = "", calls: Path | None = None):
    monkeypatch.setenv("CLI_TEST_FAIL", fail)
    if calls is not None:
        monkeypatch.setenv("CLI_TEST_CALLS", str(calls))
    task_file = tmp_path / "flaky_task.py"
    task_file.write_text(FLAKY_TASK)
    return main(["eval", str(task_file), "--log-dir", str(tmp_path / "logs"), *extra])


# -- vitals eval ---------------------------------------------------------------------------------


def test_eval_subprocess_runs_the_example(tmp_path):
    """`python -m vitals_engine eval examples/cli_task.py` exits 0, prints the summary and logs."""
    done = subprocess.run(
        [sys.executable, "-m", "vitals_engine", "eval", str(EXAMPLE), "--log-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "Task cli-arithmetic: 4 samples, 0 failed" in done.stdout
    assert "Metrics: accuracy = 1" in done.stdout
    log = only_log(tmp_path)
    assert f"Log: {log}" in done.stdout
    assert ve.read_log(log).status == "success"


def test_eval_in_process_prints_summary_with_cost(tmp_path, capsys):
    """An in-process run returns 0 and prints metrics, the cost table and the log path."""
    assert main(["eval", str(EXAMPLE), "--log-dir", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Metrics: accuracy = 1" in out
    assert "solver  Mock/mock-model" in out
    assert str(only_log(tmp_path)) in out


def test_eval_epochs_doubles_rows(tmp_path):
    """`--epochs 2` runs every sample twice."""
    assert main(["eval", str(EXAMPLE), "--log-dir", str(tmp_path), "--epochs", "2"]) == 0
    logged = ve.read_log(only_log(tmp_path))
    assert logged.get_samples().height == 8
    assert sorted({s.epoch for s in logged.samples}) == [1, 2]


def test_eval_model_swaps_the_solver_model(tmp_path):
    """`--model mock/other-model` runs the solver on that model and keeps its system prompt."""
    code = main(["eval", str(EXAMPLE), "--log-dir", str(tmp_path), "--model", "mock/other-model"])
    assert code == 0
    logged = ve.read_log(only_log(tmp_path))
    assert logged.model == "mock/other-model"
    chat = logged.records()[0].solver_chat
    assert chat is not None
    assert chat.system_prompt == "Answer with the result."


def test_eval_model_needs_a_solver_chat_parameter(tmp_path, capsys):
    """`--model` on a solver without `solver_chat` is a usage error naming the task."""
    path = write_task(
        tmp_path,
        """
        shout = ve.Task([{"input": "a", "target": "A"}], solver=str.upper,
                        scorer=ve.detect_includes(), name="shouting")
        """,
    )
    assert main(["eval", str(path), "--model", "mock/x", "--log-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "task 'shouting'" in err
    assert "solver_chat" in err
    assert not list(tmp_path.glob("*.json"))


OPENAI_TASK = """
judged = ve.Task(
    [{"input": "What's 2+2?", "target": "4"}],
    solver=ve.generate(ve.chat_openai(system_prompt="Answer with the result.")),
    scorer=ve.detect_includes(),
    name="judged",
)
"""


def test_eval_model_swaps_a_chat_that_has_no_key(tmp_path, monkeypatch):
    """A task file whose solver uses chat_openai() imports without OPENAI_API_KEY, and
    `--model mock/mock-model` runs it on the mock model."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = write_task(tmp_path, OPENAI_TASK)
    logs = tmp_path / "logs"
    assert main(["eval", str(path), "--model", "mock/mock-model", "--log-dir", str(logs)]) == 0
    logged = ve.read_log(only_log(logs))
    assert logged.model == "mock/mock-model"
    assert logged.metrics == {"accuracy": 1.0}


def test_eval_without_the_key_fails_before_any_sample_naming_the_variable(
    tmp_path, monkeypatch, capsys
):
    """Without --model, the missing OPENAI_API_KEY stops `vitals eval` before the run starts:
    the message names the variable, and no journal or log is written."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = write_task(tmp_path, OPENAI_TASK)
    logs = tmp_path / "logs"
    assert main(["eval", str(path), "--log-dir", str(logs)]) == 1
    err = capsys.readouterr().err
    assert "task 'judged'" in err
    assert "OPENAI_API_KEY" in err
    assert not logs.exists() or not any(logs.iterdir())


def test_eval_bad_model_string_is_a_usage_error(tmp_path, capsys):
    """A `--model` that is not provider/model exits 2 with ve.chat()'s message."""
    assert main(["eval", str(EXAMPLE), "--model", "nonsense", "--log-dir", str(tmp_path)]) == 2
    assert "is not 'provider/model'" in capsys.readouterr().err


def test_eval_fail_on_error_zero_exits_1_and_writes_the_log(tmp_path, monkeypatch, capsys):
    """Failed samples beyond `--fail-on-error 0` exit 1 after writing the log."""
    assert run_flaky(tmp_path, monkeypatch, "--fail-on-error", "0", fail="s2") == 1
    captured = capsys.readouterr()
    assert "1 of 5 samples failed" in captured.err
    assert "Task flaky: 5 samples, 1 failed" in captured.out
    logged = ve.read_log(only_log(tmp_path / "logs"))
    assert logged.status == "error"
    assert len(logged.samples) == 5


def test_eval_fail_on_error_allowance_passes(tmp_path, monkeypatch):
    """A count or a fraction in `--fail-on-error` tolerates that many failures."""
    assert run_flaky(tmp_path, monkeypatch, "--fail-on-error", "2", fail="s1,s2") == 0
    assert run_flaky(tmp_path, monkeypatch, "--fail-on-error", "0.2", fail="s1,s2") == 1
    assert run_flaky(tmp_path, monkeypatch, "--fail-on-error", "false", fail="s1,s2,s3") == 0


def test_fail_on_error_parsing():
    """`--fail-on-error` reads counts, fractions and booleans and refuses anything else."""
    assert fail_on_error_flag("5") == 5
    assert fail_on_error_flag("0.1") == 0.1
    assert fail_on_error_flag("true") is True
    assert fail_on_error_flag("False") is False
    with pytest.raises(argparse.ArgumentTypeError, match="fraction below 1"):
        fail_on_error_flag("1.5")
    with pytest.raises(argparse.ArgumentTypeError, match="not 'lots'"):
        fail_on_error_flag("lots")


def test_eval_missing_file_exits_2(tmp_path, capsys):
    """A task file that does not exist is a one-line usage error."""
    assert main(["eval", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"vitals eval: error: File not found: {tmp_path / 'nope.py'}"


def test_eval_file_without_task_exits_2(tmp_path, capsys):
    """A file with no Task says how to define one."""
    path = write_task(tmp_path, "x = 1\n\ndef helper(a):\n    return a\n")
    assert main(["eval", str(path)]) == 2
    assert "No Task in" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--rpm", "-5", "argument --rpm: must be a positive number, not '-5'"),
        ("--rpm", "lots", "argument --rpm: must be a positive number, not 'lots'"),
        ("--epochs", "0", "argument --epochs: must be a whole number of at least 1"),
        ("--log-format", "xml", "argument --log-format: invalid choice"),
    ],
    ids=["negative-rpm", "text-rpm", "zero-epochs", "bad-format"],
)
def test_eval_bad_arguments_exit_2(tmp_path, capsys, option, value, message):
    """A bad option value is one line on stderr and exit code 2, before anything runs."""
    assert main(["eval", str(EXAMPLE), option, value, "--log-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.json"))


def test_eval_dataset_error_while_building_exits_2(tmp_path, capsys):
    """A DatasetError raised while the file builds its Task is a usage error."""
    path = write_task(
        tmp_path,
        'broken = ve.Task([{"input": "a"}], solver=str.upper, scorer=ve.detect_includes())\n',
    )
    assert main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert "target" in err
    assert "Traceback" not in err


def test_eval_import_error_exits_1_and_debug_shows_traceback(tmp_path, capsys):
    """A bug in the task file is exit 1 with its line; `--debug` adds the traceback."""
    path = write_task(tmp_path, "value = undefined_name\n")
    assert main(["eval", str(path)]) == 1
    err = capsys.readouterr().err
    assert "importing 'tasks.py' failed (line 3): NameError" in err
    assert "Traceback" not in err
    assert main(["eval", str(path), "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_eval_finds_task_functions_and_picks_by_name(tmp_path, capsys):
    """Module-level tasks and task functions all run in order; `FILE:name` runs one."""
    path = write_task(
        tmp_path,
        """
        DATA = [{"input": "What's 1+1?", "target": "2"}]


        def first() -> ve.Task:
            return ve.Task(DATA, solver=ve.generate(ve.chat_mock()),
                           scorer=ve.detect_includes(), name="first")


        second = ve.Task(DATA, solver=ve.generate(ve.chat_mock()),
                         scorer=ve.detect_includes(), name="second")


        def third():
            return ve.Task(DATA, solver=ve.generate(ve.chat_mock()),
                           scorer=ve.detect_includes(), name="third")


        def not_a_task(n):
            return ve.Task(DATA, solver=str.upper, scorer=ve.detect_includes())
        """,
    )
    logs = tmp_path / "logs"
    assert main(["eval", str(path), "--log-dir", str(logs)]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("Task ")] == [
        "Task first",
        "Task second",
        "Task third",
    ]
    assert len(list(logs.glob("*_*.json"))) == 3

    assert main(["eval", f"{path}:third", "--log-dir", str(tmp_path / "one")]) == 0
    assert ve.read_log(only_log(tmp_path / "one")).task == "third"

    assert main(["eval", f"{path}:missing"]) == 2
    assert "No 'missing' in tasks.py. Tasks there: first, second, third." in (
        capsys.readouterr().err
    )
    assert main(["eval", f"{path}:not_a_task"]) == 2
    assert "takes required argument(s) n" in capsys.readouterr().err


def test_eval_resume_log_reruns_only_failed_samples(tmp_path, monkeypatch):
    """`--resume LOG` continues an errored run: only the failed samples run again."""
    calls = tmp_path / "calls.txt"
    assert run_flaky(tmp_path, monkeypatch, fail="s2,s4", calls=calls) == 1
    log = only_log(tmp_path / "logs")
    assert ve.read_log(log).status == "error"
    calls.unlink()

    assert run_flaky(tmp_path, monkeypatch, "--resume", str(log), calls=calls) == 0
    assert sorted(calls.read_text().split()) == ["s2", "s4"]
    final = ve.read_log(only_log(tmp_path / "logs"))
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == ["s1", "s2", "s3", "s4", "s5"]
    assert all(s.error is None for s in final.samples)


def killed_run(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """What a flaky run killed after s1 and s2 leaves: its journal (start record and the two
    finished samples) and no final log. Returns (journal, the log's path to be)."""
    assert run_flaky(tmp_path, monkeypatch, fail="s3,s4,s5") == 1
    log = only_log(tmp_path / "logs")
    finished = ve.read_log(log)
    started = msgspec.structs.replace(finished.header, status="started")
    journal = log.with_suffix(".journal")
    journal.write_bytes(
        encode_start(started, log.name)
        + b"".join(encode_sample(s) for s in finished.samples if s.error is None)
    )
    log.unlink()
    return journal, log


def test_eval_resume_alone_continues_a_journal(tmp_path, monkeypatch):
    """`--resume` without a path finds the task's journal and finishes its run."""
    journal, log = killed_run(tmp_path, monkeypatch)
    logs = log.parent
    calls = tmp_path / "calls.txt"

    assert run_flaky(tmp_path, monkeypatch, "--resume", calls=calls) == 0
    assert sorted(calls.read_text().split()) == ["s3", "s4", "s5"]
    final = ve.read_log(only_log(logs))
    assert final.path.name == log.name
    assert final.status == "success"
    assert len(final.samples) == 5
    assert not journal.exists()


def test_eval_resume_as_a_command(tmp_path, monkeypatch):
    """The `vitals` command itself: `vitals eval FILE --resume` finishes a killed run from
    its journal (only the unfinished samples run; the log, under the journal's name, holds
    each sample once), exits 0 and says so; with nothing left to resume it exits 2."""
    journal, log = killed_run(tmp_path, monkeypatch)
    calls = tmp_path / "calls.txt"
    command = [*VITALS, "eval", str(tmp_path / "flaky_task.py"), "--log-dir", str(log.parent)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CLI_TEST_FAIL": "", "CLI_TEST_CALLS": str(calls)}

    done = subprocess.run(
        [*command, "--resume", "--no-progress"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(calls.read_text().split()) == ["s3", "s4", "s5"]
    assert "Task flaky: 5 samples, 0 failed" in done.stdout
    assert f"Log: {log}" in done.stdout
    final = ve.read_log(log)
    assert final.status == "success"
    assert sorted(s.id for s in final.samples) == ["s1", "s2", "s3", "s4", "s5"]
    assert not journal.exists()

    again = subprocess.run(
        [*command, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 2
    assert "Nothing to resume" in again.stderr


def test_eval_resume_without_journal_exits_2(tmp_path, monkeypatch, capsys):
    """`--resume` with nothing to resume is a usage error."""
    assert run_flaky(tmp_path, monkeypatch, "--resume") == 2
    assert "Nothing to resume" in capsys.readouterr().err


def test_eval_resume_path_needs_one_task(tmp_path, capsys):
    """`--resume LOG` on a file with several tasks asks for FILE:name."""
    path = write_task(
        tmp_path,
        """
        a = ve.Task([{"input": "x", "target": "x"}], solver=str.upper,
                    scorer=ve.detect_includes(), name="a")
        b = ve.Task([{"input": "y", "target": "y"}], solver=str.upper,
                    scorer=ve.detect_includes(), name="b")
        """,
    )
    assert main(["eval", str(path), "--resume", "some.journal"]) == 2
    assert "pick one with" in capsys.readouterr().err


# -- vitals ls -----------------------------------------------------------------------------------


def test_ls_lists_fixture_logs_newest_first(tmp_path, capsys):
    """`ls` lists vitals' and Inspect's logs (not manifests or schemas), newest first."""
    for source in ("vitals", "inspect"):
        for file in (FIXTURES / source).iterdir():
            shutil.copy(file, tmp_path / file.name)
    assert main(["ls", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["date", "task", "model", "status", "samples", "metric", "file"]
    names = [line.split()[-1] for line in lines[1:]]
    expected = {
        p.name
        for p in tmp_path.iterdir()
        if p.suffix in (".json", ".eval")
        and p.name not in ("listing.json", "logs.json", "eval-log-schema.json")
    }
    assert set(names) == expected
    dates = [line[:16] for line in lines[1:]]
    assert dates == sorted(dates, reverse=True)
    running = next(line for line in lines if "partial_running.eval" in line)
    assert " started " in running
    r_eval = next(line for line in lines if "An-R-Eval" in line)
    assert "anthropic/claude-3-7-sonnet-latest" in r_eval
    assert "accuracy 59.62" in r_eval


def _with_closed_stdout(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `vitals args` with stdout a pipe whose reader is already gone (`| head -0`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*VITALS, *args],
            cwd=cwd,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write)


def test_a_closed_stdout_ends_commands_quietly(tmp_path):
    """`vitals ls | head -1` and the like: when the reader goes, the command ends quietly with
    141 (128 + SIGPIPE, as a shell reports other commands), not a BrokenPipeError."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for file in (FIXTURES / "vitals").iterdir():
        shutil.copy(file, logs / file.name)
    listed = _with_closed_stdout(["ls", str(logs)], tmp_path)
    assert (listed.returncode, listed.stderr) == (141, "")
    evaluated = _with_closed_stdout(["eval", str(EXAMPLE), "--log-dir", str(logs)], tmp_path)
    assert evaluated.returncode == 141
    assert "BrokenPipe" not in evaluated.stderr
    assert "Exception ignored" not in evaluated.stderr
    out = tmp_path / "site"
    bundled = _with_closed_stdout(["bundle", str(logs), "--output-dir", str(out)], tmp_path)
    assert (bundled.returncode, bundled.stderr) == (141, "")
    assert (out / "index.html").exists()


def test_ls_shows_journals_of_running_evals(tmp_path, monkeypatch, capsys):
    """A journal without a final log is listed as running; one with a final log is not."""
    assert run_flaky(tmp_path, monkeypatch, "--fail-on-error", "false", fail="s1") == 0
    logs = tmp_path / "logs"
    log = only_log(logs)
    logged = ve.read_log(log)
    started = msgspec.structs.replace(logged.header, status="started")
    later = msgspec.structs.replace(started.eval, created="2030-01-01T00:00:00+00:00")
    orphan = logs / "2030-01-01T00-00-00+00-00_flaky_abc.journal"
    orphan.write_bytes(
        encode_start(msgspec.structs.replace(started, eval=later), orphan.with_suffix(".json").name)
    )
    log.with_suffix(".journal").write_bytes(encode_start(started, log.name))
    capsys.readouterr()
    assert main(["ls", str(logs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert "started (running)" in lines[1]
    assert lines[1].endswith(orphan.name)
    assert lines[2].endswith(log.name)
    assert "4/5" in lines[2]


def test_ls_uses_vitals_log_dir_and_reports_missing_dirs(tmp_path, monkeypatch, capsys):
    """Without DIR, `ls` reads VITALS_LOG_DIR; a missing directory exits 2."""
    monkeypatch.setenv("VITALS_LOG_DIR", str(tmp_path))
    assert main(["ls"]) == 0
    assert f"No logs in {tmp_path}." in capsys.readouterr().out
    assert main(["ls", str(tmp_path / "absent")]) == 2
    assert "Log directory" in capsys.readouterr().err


# -- vitals view / bundle ------------------------------------------------------------------------


@pytest.fixture
def viewer(monkeypatch):
    """The viewer's `view` and `bundle` replaced by recorders."""
    launch = importlib.import_module("vitals_engine.viewer.launch")
    bundles = importlib.import_module("vitals_engine.viewer.bundle")
    calls: list[tuple[str, tuple, dict]] = []

    def fake_view(*args, **kwargs):
        calls.append(("view", args, kwargs))

    def fake_bundle(*args, **kwargs):
        calls.append(("bundle", args, kwargs))
        return args[1]

    monkeypatch.setattr(launch, "view", fake_view)
    monkeypatch.setattr(bundles, "bundle", fake_bundle)
    return calls


def test_view_passes_its_arguments(tmp_path, viewer):
    """`vitals view DIR --host --port` calls view() blocking, with those arguments."""
    assert main(["view", str(tmp_path), "--host", "0.0.0.0", "--port", "8080"]) == 0
    assert viewer == [("view", (str(tmp_path),), {"host": "0.0.0.0", "port": 8080, "block": True})]


def test_view_defaults_to_vitals_log_dir(tmp_path, monkeypatch, viewer):
    """Without DIR, `view` serves VITALS_LOG_DIR on localhost and a free port."""
    monkeypatch.setenv("VITALS_LOG_DIR", str(tmp_path))
    assert main(["view"]) == 0
    assert viewer == [
        ("view", (str(tmp_path),), {"host": "127.0.0.1", "port": None, "block": True})
    ]


def test_view_on_all_interfaces_warns_that_the_logs_are_open(tmp_path, monkeypatch, capsys):
    """`vitals view --host 0.0.0.0` serves (here stopped at once instead of blocking) and says
    on stderr that the viewer is reachable from the network, without its Host-header check."""
    server = importlib.import_module("vitals_engine.viewer.server")
    monkeypatch.setattr(server.ViewServer, "wait", server.ViewServer.stop)
    assert main(["view", str(tmp_path), "--host", "0.0.0.0"]) == 0
    captured = capsys.readouterr()
    assert "Viewer running at http://0.0.0.0:" in captured.out
    assert "0.0.0.0" in captured.err
    assert "network" in captured.err
    assert "Host-header check" in captured.err


def test_view_missing_dir_exits_2(tmp_path, viewer, capsys):
    """`view` on a directory that does not exist exits 2 without starting a server."""
    assert main(["view", str(tmp_path / "absent")]) == 2
    assert "not found" in capsys.readouterr().err
    assert viewer == []


def test_bundle_passes_its_arguments(tmp_path, viewer, capsys):
    """`vitals bundle LOG_DIR --output-dir --overwrite` calls bundle(log_dir, output_dir, True)."""
    assert main(["bundle", str(tmp_path), "--output-dir", "site", "--overwrite"]) == 0
    assert viewer == [("bundle", (str(tmp_path), "site", True), {})]
    assert "Bundle 'site' created." in capsys.readouterr().out


def test_bundle_without_output_dir_writes_beside_the_user(tmp_path, monkeypatch, capsys):
    """`vitals bundle runs` writes `./runs-bundle` (not a temporary folder) and names it."""
    logs = tmp_path / "runs"
    logs.mkdir()
    for file in (FIXTURES / "vitals").iterdir():
        shutil.copy(file, logs / file.name)
    monkeypatch.chdir(tmp_path)
    assert main(["bundle", "runs"]) == 0
    assert capsys.readouterr().out.strip() == "Bundle 'runs-bundle' created."
    assert (tmp_path / "runs-bundle" / "index.html").is_file()


def test_bundle_errors_from_the_viewer_exit_2(tmp_path, monkeypatch, viewer, capsys):
    """A ConfigError from bundle() (e.g. the output exists) is one line and exit 2."""

    def refuse(*args, **kwargs):
        raise ve.ConfigError("'site' already exists. Use --overwrite.")

    monkeypatch.setattr(sys.modules["vitals_engine.viewer.bundle"], "bundle", refuse)
    assert main(["bundle", str(tmp_path), "--output-dir", "site"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vitals bundle: error: 'site' already exists. Use --overwrite."
    )


# -- help ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["eval"], ["ls"], ["view"], ["bundle"]])
def test_help_shows_examples(command, capsys):
    """`vitals --help` and each subcommand's help end with examples."""
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Examples:" in out
    assert "vitals " in out.split("Examples:")[1]


def test_no_command_prints_help_and_exits_2(capsys):
    """`vitals` alone shows the help on stderr."""
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_unknown_command_exits_2(capsys):
    """An unknown subcommand is a one-line usage error."""
    assert main(["evaluate"]) == 2
    assert "invalid choice: 'evaluate'" in capsys.readouterr().err
