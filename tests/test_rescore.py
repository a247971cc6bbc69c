"""Re-scoring a saved log: its logged answers graded again by another scorer into a new log,
with no solver call; ours (.json, .eval, journals of killed runs), Inspect's and vitals'."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import msgspec
import pytest

import vitals_engine as ve
from tests import helpers
from tests.helpers import openai
from tests.inspect_check import assert_inspect_reads
from vitals_engine.cli.parser import main
from vitals_engine.log.reader import read_log as plain_read_log
from vitals_engine.testing import reply

pytestmark = pytest.mark.anyio

FIXTURES = Path("/work/shared/fixtures")
if not FIXTURES.is_dir():  # the same logs, kept with the tests
    FIXTURES = Path(__file__).parent / "fixtures"

SUMS = [
    {"input": "What's 2+2?", "target": "4", "topic": "sums"},
    {"input": "What's 2+3?", "target": "6", "topic": "sums"},
    {"input": "What's 3+4?", "target": "7", "topic": "sums"},
]
#: The solver's answer to each question.
ANSWERS = {"2+2": "It is 4.", "2+3": "It is 5.", "3+4": "It is 7."}
#: The strict judge's grade of each question.
STRICT = {"2+2": "C", "2+3": "I", "3+4": "I"}


def script(request):
    """The solver ("solver") answers; a judge grades by question, as STRICT says."""
    prompt = request.prompt
    question = next(q for q in ANSWERS if q in prompt)
    if "[Submission]" not in prompt:
        return reply(ANSWERS[question], input_tokens=10, output_tokens=3)
    return reply(f"Strictly so.\nGRADE: {STRICT[question]}", input_tokens=100, output_tokens=5)


async def solved(server, tmp_path, log_format="json", **options):
    """A finished run of SUMS on the mock server, scored by detect_includes."""
    server.script(script)
    task = ve.Task(
        SUMS,
        ve.generate(openai(server, "solver")),
        ve.detect_includes(),
        name="sums",
        dir=tmp_path,
        log_format=log_format,
    )
    await task.eval_async(progress=False, **options)
    return task


def copied(tmp_path: Path, *names: str) -> Path:
    """The shared fixture logs `names` (under fixtures/) copied into tmp_path/logs."""
    target = tmp_path / "logs"
    target.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(FIXTURES / name, target / Path(name).name)
        (target / Path(name).name).chmod(0o644)
    return target / Path(names[0]).name


def rescored_from(path: Path) -> dict:
    metadata = ve.read_log(path, header_only=True).header.eval.metadata or {}
    return metadata["rescored_from"]


# -- our own logs ---------------------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_a_judge_rescores_our_log_without_solving(server, tmp_path, log_format):
    """A judge on the mock grades the logged answers: only the judge's requests reach the
    server; the original log is unchanged; the new one, beside it in the same format,
    says where it came from and has the judge's metrics, the solver's usage as logged
    and the judge's."""
    task = await solved(server, tmp_path, log_format)
    original = task.log_path
    before = original.read_bytes()
    sent = len(server.log)
    assert server.requests_by_model["solver"] == 3

    judge = ve.model_graded_qa(instructions="Be strict.", scorer_chat=openai(server, "judge"))
    logged = ve.read_log(original)
    assert isinstance(logged, ve.RescorableLog)
    assert isinstance(logged, ve.LoggedEval)
    new = await logged.rescore_async(judge, progress=False)

    assert [r.model for r in server.log[sent:]] == ["judge"] * 3
    assert server.requests_by_model["solver"] == 3
    assert original.read_bytes() == before
    assert new.log_path is not None
    assert new.log_path != original
    assert new.log_path.parent == original.parent
    assert new.log_path.suffix == original.suffix
    assert new.name == "sums"
    assert new.metrics == {"accuracy": pytest.approx(1 / 3)}
    assert new.metric_stats is not None
    assert new.metric_stats["accuracy"].n == 3
    frame = new.get_samples()
    assert frame["score"].to_list() == ["C", "I", "I"]
    assert frame["result"].to_list() == ["It is 4.", "It is 5.", "It is 7."]
    assert frame["topic"].to_list() == ["sums"] * 3
    assert all(chat is not None for chat in frame["scorer_chat"])
    cost = new.get_cost().select("role", "model", "requests", "input_tokens", "output_tokens")
    assert cost.rows() == [("solver", "solver", 3, 30, 9), ("scorer", "judge", 3, 300, 15)]

    assert rescored_from(new.log_path) == {
        "log": str(original),
        "eval_id": logged.header.eval.eval_id,
        "scorer": "detect_includes(case_sensitive=False)",
    }
    header = ve.read_log(new.log_path, header_only=True).header
    assert header.eval.solver == logged.header.eval.solver
    assert header.eval.model == logged.header.eval.model
    assert header.eval.eval_id != logged.header.eval.eval_id
    again = ve.read_log(new.log_path)
    assert again.metrics == new.metrics
    assert again.get_cost().select("role", "requests").rows() == [("solver", 3), ("scorer", 3)]
    assert_inspect_reads(new.log_path, new)


async def test_a_scorer_without_model_calls_sends_nothing(server, tmp_path):
    """Re-scoring with detect_exact sends no request at all, and gives its own grades."""
    task = await solved(server, tmp_path)
    sent = server.requests
    new = await ve.read_log(task.log_path).rescore_async(ve.detect_exact(), progress=False)
    assert server.requests == sent
    assert new.metrics == {"accuracy": 0.0}
    assert new.get_samples()["scorer"].to_list() == ["detect_exact(case_sensitive=False)"] * 3
    assert new.get_cost()["role"].to_list() == ["solver"]
    assert_inspect_reads(new.log_path, new)


def test_rescore_log_from_sync_code_into_another_dir(server, tmp_path):
    """`ve.rescore_log(path, scorer, dir=...)`, from sync code, takes a path (or a log read
    before) and writes where `dir` says; other keywords go where task.score() sends them
    (the judge's chat to the scorer, max_concurrency to the run)."""
    import anyio

    task = anyio.run(solved, server, tmp_path / "a")
    elsewhere = tmp_path / "b"
    new = ve.rescore_log(
        task.log_path,
        ve.model_graded_qa(),
        dir=elsewhere,
        scorer_chat=openai(server, "judge"),
        max_concurrency=2,
        progress=False,
    )
    assert new.log_path is not None
    assert new.log_path.parent == elsewhere
    assert new.get_samples()["score"].to_list() == ["C", "I", "I"]
    from_read = ve.rescore_log(plain_read_log(task.log_path), ve.detect_includes(), progress=False)
    assert from_read.log_path is not None
    assert from_read.log_path.parent == task.log_path.parent
    assert from_read.metrics == task.metrics
    assert sorted(p.name for p in (tmp_path / "a").glob("*.json") if p.name != "listing.json") == (
        sorted([task.log_path.name, from_read.log_path.name])
    )


async def test_the_rebuilt_task_cannot_solve(server, tmp_path):
    """The task a re-scoring returns has a placeholder solver, named as the logged one,
    which raises TaskStateError when anything asks it to solve; the task itself refuses
    to run its solver before any run starts."""
    task = await solved(server, tmp_path)
    new = await ve.read_log(task.log_path).rescore_async(ve.detect_exact(), progress=False)
    with pytest.raises(ve.TaskStateError, match=r"rebuilt from the log .* it cannot solve"):
        new.solver("What's 2+2?")
    assert new.solved
    assert new.scored
    # eval(), solve() and a stream are refused before anything runs or is logged
    logs = sorted(tmp_path.rglob("*"))
    metrics = new.metrics
    for attempt in (new.eval_async, new.solve_async):
        with pytest.raises(ve.TaskStateError, match=r"Score it again with task\.score\(\)"):
            await attempt()
    with pytest.raises(ve.TaskStateError, match="cannot solve"):
        new.stream_async()
    assert sorted(tmp_path.rglob("*")) == logs
    assert new.metrics == metrics
    await new.score_async(progress=False)  # scoring again is what it can do
    assert new.scored


async def test_samples_that_failed_while_scoring_are_scored_again(server, tmp_path):
    """A sample whose scorer failed has a result: it is re-scored, its error gone."""

    def flaky(sample):
        if "2+3" in sample.input:
            raise ValueError("the scorer broke")
        return "C"

    server.script(script)
    task = ve.Task(SUMS, ve.generate(openai(server, "solver")), flaky, dir=tmp_path)
    await task.eval_async(progress=False, fail_on_error=False)
    assert task.get_samples()["error"].is_not_null().sum() == 1
    new = await ve.read_log(task.log_path).rescore_async(ve.detect_includes(), progress=False)
    frame = new.get_samples()
    assert "error" not in frame.columns
    assert frame["score"].to_list() == ["C", "I", "C"]
    assert ve.read_log(new.log_path).status == "success"


async def test_samples_that_failed_while_solving_are_left_out(server, tmp_path, caplog):
    """A sample whose solver failed has no result to score: it is left out, with a
    warning that counts it."""
    server.script(script)
    server.fail("400", times=1, model="solver")
    task = ve.Task(SUMS, ve.generate(openai(server, "solver")), ve.detect_includes(), dir=tmp_path)
    await task.eval_async(progress=False, fail_on_error=False)
    assert task.get_samples()["error"].is_not_null().sum() == 1
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    new = await ve.read_log(task.log_path).rescore_async(ve.detect_includes(), progress=False)
    assert new.get_samples().height == 2
    (warning,) = [r for r in caplog.records if "left out" in r.getMessage()]
    assert "left_out=1" in warning.getMessage()
    assert "rescored=2" in warning.getMessage()


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_a_killed_runs_journal_is_rescored(server, tmp_path, caplog, log_format):
    """The journal of a run killed after 2 of 3 samples: those 2 are scored, the one in
    flight is counted as left out, the journal is left as it was, and the new log has
    the format the run's final log would have had."""
    task = await solved(server, tmp_path, log_format)
    journal = await helpers.killed_journal(task, keep=2)
    before = journal.read_bytes()
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    sent = server.requests
    new = await ve.read_log(journal).rescore_async(
        ve.model_graded_qa(scorer_chat=openai(server, "judge")), progress=False
    )
    assert server.requests - sent == 2
    assert journal.read_bytes() == before
    assert new.log_path is not None
    assert new.log_path.suffix == f".{log_format}"
    assert sorted(new.get_samples()["id"].to_list()) == [1, 2]
    assert new.metrics == {"accuracy": 0.5}
    assert rescored_from(new.log_path)["log"] == str(journal)
    assert rescored_from(new.log_path)["scorer"] == "detect_includes(case_sensitive=False)"
    (warning,) = [r for r in caplog.records if "left out" in r.getMessage()]
    assert "left_out=1" in warning.getMessage()
    assert_inspect_reads(new.log_path, new)


async def test_epochs_reducer_and_clusters_are_kept(server, tmp_path):
    """A run of 2 epochs, reduced by the mean and clustered by a column, re-scores as such."""
    server.script(script)
    task = ve.Task(
        SUMS,
        ve.generate(openai(server, "solver")),
        ve.detect_includes(),
        dir=tmp_path,
        reducer="mean",
        cluster="topic",
    )
    await task.eval_async(progress=False, epochs=2)
    new = await ve.read_log(task.log_path).rescore_async(ve.detect_includes(), progress=False)
    assert new.get_samples().select("id", "epoch").rows() == [
        (1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2),
    ]  # fmt: skip
    assert new.metric_stats == task.metric_stats
    header = ve.read_log(new.log_path, header_only=True).header
    assert header.eval.config.epochs == 2
    assert header.eval.config.epochs_reducer == ["mean"]
    assert ve.read_log(new.log_path).cluster == "topic"


# -- logs written elsewhere -----------------------------------------------------------------

INSPECT_LOGS = [
    # (file, samples re-scored, includes' accuracy)
    ("inspect/2026-11-22T01-34-10-00-00_tiny_Qm9omgo5Hto8Xb3xpTfaBV.json", 6, 2 / 3),
    ("inspect/2026-11-22T01-34-07-00-00_tiny_PtBns7u5sgd4CDAiTHbmg8.eval", 6, 2 / 3),
    ("inspect/openai_compat_fake_server.eval", 3, 1.0),
    ("inspect/partial_running.eval", 4, 1.0),  # a run still going: 4 of 8 logged
]


@pytest.mark.parametrize(
    ("name", "count", "accuracy"), INSPECT_LOGS, ids=[Path(n).stem[-12:] for n, *_ in INSPECT_LOGS]
)
async def test_inspects_logs_are_rescored(tmp_path, name, count, accuracy):
    """Inspect's .json and .eval logs (one of a run still going): their samples re-scored
    with detect_includes, as Inspect's `includes` scored them, epochs and all."""
    path = copied(tmp_path, name)
    before = path.read_bytes()
    logged = ve.read_log(path)
    new = await logged.rescore_async(ve.detect_includes(), progress=False)
    assert path.read_bytes() == before
    assert new.get_samples().height == count
    assert new.metrics == {"accuracy": pytest.approx(accuracy)}
    assert new.name == logged.task
    header = ve.read_log(new.log_path, header_only=True).header
    assert header.eval.config.epochs == (logged.header.eval.config.epochs or 1)
    assert header.eval.solver == "generate"  # the plan's step, as Inspect names its solver
    assert rescored_from(new.log_path) == {
        "log": str(path),
        "eval_id": logged.header.eval.eval_id,
        "scorer": logged.scorer,
    }
    logged_scores = {  # ids as a frame holds them: all text when some are
        (str(s.id), s.epoch): next(iter(s.scores.values())).value
        for s in logged.samples
        if s.scores
    }
    frame = new.get_samples()
    ours = {(str(r["id"]), r["epoch"]): r["score"] for r in frame.iter_rows(named=True)}
    assert ours == {key: logged_scores[key] for key in ours}
    assert_inspect_reads(new.log_path)  # (the frame's ids are text where some are)


async def test_an_inspect_log_with_failed_samples_leaves_them_out(tmp_path, caplog):
    """Inspect's log of a run with errored samples: the others are re-scored."""
    path = copied(tmp_path, "inspect/retry_original.eval")
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    new = await ve.read_log(path).rescore_async(ve.detect_includes(), progress=False)
    assert new.get_samples().height == 2
    assert any("left_out=2" in r.getMessage() for r in caplog.records)


VITALS_LOGS = [
    "vitals/2025-04-15T01-13-00+00-00_simpleaddition_4be39e48547460f824ccd8.json",
    "vitals/2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json",
]


@pytest.mark.parametrize("name", VITALS_LOGS, ids=lambda v: v[7:32])
async def test_vitals_logs_are_rescored_by_a_judge(server, tmp_path, name):
    """Logs of the R package vitals: a judge on the mock grades their answers (the solver's
    chat and usage kept as logged: Anthropic's model, not called)."""

    def judge(request):
        return reply("Fine.\nGRADE: C", input_tokens=50, output_tokens=4)

    server.script(judge)
    path = copied(tmp_path, name)
    before = path.read_bytes()
    logged = ve.read_log(path)
    new = await logged.rescore_async(
        ve.model_graded_qa(scorer_chat=openai(server, "judge")), progress=False
    )
    assert path.read_bytes() == before
    assert {r.model for r in server.log} == {"judge"}
    assert server.requests == 2
    assert new.metrics == {"accuracy": 1.0}
    frame = new.get_samples()
    assert frame["result"].to_list() == logged.get_samples()["result"].to_list()
    assert all(chat is not None for chat in frame["solver_chat"])
    cost = new.get_cost()
    assert cost["role"].to_list() == ["solver", "scorer"]
    assert cost["provider"].to_list() == ["Anthropic", "OpenAI"]
    assert cost["requests"].to_list() == [2, 2]
    assert rescored_from(new.log_path)["scorer"] == logged.scorer
    assert_inspect_reads(new.log_path, new)


async def test_an_input_of_messages_is_rescored(server, tmp_path):
    """An Inspect sample whose input is a list of messages (a system and a user message)
    goes to the judge and into the new log."""
    path = copied(tmp_path, "inspect/2026-11-22T01-34-10-00-00_tiny_Qm9omgo5Hto8Xb3xpTfaBV.json")
    log = msgspec.json.decode(path.read_bytes())
    for sample in log["samples"]:
        question = sample["input"]
        sample["input"] = [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": question},
        ]
    path.write_bytes(msgspec.json.encode(log))
    prompts = []

    def judge(request):
        prompts.append(request.prompt)
        return reply("GRADE: C")

    server.script(judge)
    new = await ve.read_log(path).rescore_async(
        ve.model_graded_qa(scorer_chat=openai(server, "judge")), progress=False
    )
    assert new.get_samples().height == 6
    assert new.metrics == {"accuracy": 1.0}
    assert all("Answer in one word." in p for p in prompts)
    samples = ve.read_log(new.log_path).samples
    assert {tuple(type(m).__name__ for m in s.input) for s in samples} == {
        ("ChatMessageSystem", "ChatMessageUser")
    }
    assert {s.input[0].content for s in samples} == {"Answer in one word."}


# -- errors ---------------------------------------------------------------------------------


def test_a_missing_log_is_a_log_format_error(tmp_path):
    with pytest.raises(ve.LogFormatError, match="does not exist"):
        ve.rescore_log(tmp_path / "gone.json", ve.detect_includes())


@pytest.mark.no_inspect_check
def test_a_corrupt_log_is_a_log_format_error(tmp_path):
    path = tmp_path / "2026-01-01T00-00-00+00-00_x_abc.json"
    path.write_text('{"version": 2, "status": "success", "eval": {')
    with pytest.raises(ve.LogFormatError, match=re.escape(path.name)):
        ve.rescore_log(path, ve.detect_includes())


def test_a_log_without_finished_samples_has_nothing_to_rescore(tmp_path):
    """A log whose only sample has no result: a ConfigError, and no new log."""
    path = copied(tmp_path, "inspect/2025-01-01T00-00-00+00-00_mytask_B1.json")
    with pytest.raises(ve.ConfigError, match="Nothing to re-score"):
        ve.read_log(path).rescore(ve.detect_includes())
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_header_only_read_cannot_be_rescored(tmp_path):
    path = copied(tmp_path, "inspect/openai_compat_fake_server.eval")
    with pytest.raises(ve.TaskStateError, match="header_only=True"):
        ve.read_log(path, header_only=True).rescore(ve.detect_includes())


@pytest.mark.parametrize(
    ("scorer", "says"),
    [
        (None, "needs a scorer"),
        ("includes", "must be a function"),
        (ve.chat_mock(), "is a Chat"),
        (ve.detect_includes, "call it"),
        (lambda: "C", "takes no positional argument"),
        (ve.model_graded_qa(), "a log cannot call the model"),
    ],
    ids=["none", "string", "chat", "factory", "no-argument", "judge-without-chat"],
)
def test_what_is_not_a_scorer_is_a_config_error(tmp_path, scorer, says):
    """Checked before the log is read (this one does not exist)."""
    with pytest.raises(ve.ConfigError, match=says):
        ve.rescore_log(tmp_path / "gone.json", scorer)


async def test_an_unknown_argument_is_a_config_error(server, tmp_path):
    task = await solved(server, tmp_path)
    with pytest.raises(ve.ConfigError, match="max_concurency"):
        await ve.read_log(task.log_path).rescore_async(ve.detect_includes(), max_concurency=2)


# -- the command line -----------------------------------------------------------------------


def scorers_file(tmp_path: Path, server) -> Path:
    path = tmp_path / "evals.py"
    path.write_text(
        "import vitals_engine as ve\n\n"
        f"judge_chat = ve.chat_openai('judge', base_url={server.base_url()!r}, api_key='sk-t')\n"
        "strict_judge = ve.model_graded_qa(instructions='Be strict.', scorer_chat=judge_chat)\n"
        "number = 3\n\n\n"
        "def make_exact():\n"
        "    return ve.detect_exact()\n\n\n"
        "def failing(sample):\n"
        "    raise ValueError('no')\n"
    )
    return path


def test_vitals_score_end_to_end(server, tmp_path, capsys):
    """`vitals score LOG --scorer FILE:NAME`: a new log, the summary and its path printed,
    no solver request; NAME may also be a function making the scorer; --dir elsewhere."""
    import anyio

    task = anyio.run(solved, server, tmp_path / "logs")
    evals = scorers_file(tmp_path, server)
    before = task.log_path.read_bytes()
    sent = len(server.log)
    code = main(["score", str(task.log_path), "--scorer", f"{evals}:strict_judge", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert [r.model for r in server.log[sent:]] == ["judge"] * 3
    assert task.log_path.read_bytes() == before
    assert "Re-scored 3 of the samples of" in out
    assert "Metrics: accuracy = 0.33" in out
    (new,) = [p for p in task.log_path.parent.glob("*_sums_*.json") if p != task.log_path]
    assert f"Log: {new}" in out
    assert rescored_from(new)["log"] == str(task.log_path)

    code = main(
        ["score", str(task.log_path), "--scorer", f"{evals}:make_exact", "--dir",
         str(tmp_path / "exact"), "--max-concurrency", "2", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    (exact,) = (tmp_path / "exact").glob("*_sums_*.json")
    assert ve.read_log(exact).metrics == {"accuracy": 0.0}


def test_vitals_score_exit_codes(server, tmp_path, capsys):
    """Usage errors exit 2 with one line: no --scorer, a missing log, a missing NAME (the
    file's scorers listed), a NAME that is not a scorer; failed samples exit 1."""
    import anyio

    task = anyio.run(solved, server, tmp_path / "logs")
    evals = scorers_file(tmp_path, server)
    log = str(task.log_path)

    assert main(["score", log]) == 2
    assert "--scorer FILE.py:NAME" in capsys.readouterr().err

    assert main(["score", str(tmp_path / "gone.json"), "--scorer", f"{evals}:make_exact"]) == 2
    assert "Log not found" in capsys.readouterr().err

    assert main(["score", log, "--scorer", f"{evals}:strictest"]) == 2
    err = capsys.readouterr().err
    assert "No 'strictest' in evals.py. Scorers there: strict_judge, make_exact, failing." in err

    assert main(["score", log, "--scorer", f"{evals}:number"]) == 2
    assert "is a int, not a scorer" in capsys.readouterr().err

    assert main(["score", log, "--scorer", str(evals)]) == 2
    assert "FILE.py:NAME" in capsys.readouterr().err

    assert main(["score", log, "--scorer", f"{evals}:failing", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "3 of 3 samples failed while scoring" in captured.err
    assert "Log: " in captured.out

    nothing = copied(tmp_path, "inspect/2025-01-01T00-00-00+00-00_mytask_B1.json")
    assert main(["score", str(nothing), "--scorer", f"{evals}:make_exact"]) == 2
    assert "Nothing to re-score" in capsys.readouterr().err


def test_vitals_score_help_has_examples(capsys):
    assert main(["score", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Examples:" in out
    assert "vitals score" in out.split("Examples:")[1]


# -- object storage -------------------------------------------------------------------------


async def test_a_log_in_object_storage_is_rescored_into_the_store(s3):
    """A log read from an s3:// URL is re-scored into the same store (not this disk), and
    its `rescored_from` names the URL."""
    task = ve.Task(SUMS, ve.generate(ve.chat_mock()), ve.detect_includes(), name="qa", dir=s3.url)
    await task.eval_async(progress=False)
    (key,) = [k for k in s3.listed("qa/") if k.endswith(".json") and "listing" not in k]
    url = f"{s3.url}/{key.rsplit('/', 1)[1]}"
    new = await ve.read_log(url).rescore_async(ve.detect_exact(), progress=False)
    assert new.dir == s3.url
    finals = [k for k in s3.listed("qa/") if k.endswith(".json") and "listing" not in k]
    assert len(finals) == 2
    (other,) = [k for k in finals if k != key]
    assert new.log_path is not None
    assert other.endswith(new.log_path.name)
    assert rescored_from(new.log_path)["log"] == url


# -- re-scores and resume -------------------------------------------------------------------


@pytest.mark.parametrize("rescore_fails", [False, True])
async def test_a_resume_continues_the_tasks_own_run_not_a_rescore(server, tmp_path, rescore_fails):
    """A run killed after 1 of 3 samples, then its journal re-scored (finished, or with a
    failed grading): resume=True continues the killed run's journal, the re-score's log
    newer beside it notwithstanding; only the 2 unanswered samples are solved again."""
    task = await solved(server, tmp_path)
    original = task.log_path
    journal = await helpers.killed_journal(task, keep=1)
    if rescore_fails:
        server.fail("400", model="judge")
    rescored = await ve.read_log(journal).rescore_async(
        ve.model_graded_qa(scorer_chat=openai(server, "judge")), progress=False
    )
    assert rescored.log_path is not None
    assert rescored.log_path.parent == journal.parent
    solver_before = server.requests_by_model["solver"]

    again = ve.Task(
        SUMS,
        ve.generate(openai(server, "solver")),
        ve.detect_includes(),
        name="sums",
        dir=tmp_path,
    )
    await again.eval_async(progress=False, resume=True)

    assert server.requests_by_model["solver"] - solver_before == 2
    assert again.log_path is not None
    assert again.log_path == original
    assert not journal.exists()
    assert again.get_samples().height == 3
    assert rescored_from(rescored.log_path)["log"] == str(journal)


async def test_a_rescore_is_not_resumed_by_its_path(server, tmp_path):
    """resume= naming a re-score's log is refused before anything is sent: the error says
    it is a re-score and which log it came from, and suggests nothing that solves again."""
    task = await solved(server, tmp_path)
    server.fail("400", model="judge")
    rescored = await ve.read_log(task.log_path).rescore_async(
        ve.model_graded_qa(scorer_chat=openai(server, "judge")), progress=False
    )
    sent = server.requests
    again = ve.Task(
        SUMS,
        ve.generate(openai(server, "solver")),
        ve.detect_includes(),
        name="sums",
        dir=tmp_path,
    )
    with pytest.raises(ve.ConfigError, match="re-score") as raised:
        await again.eval_async(progress=False, resume=rescored.log_path)
    assert str(task.log_path) in str(raised.value)
    assert "resume_anyway" not in str(raised.value)
    assert server.requests == sent
