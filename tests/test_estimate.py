"""`task.estimate_cost()` and `vitals eval --estimate`: the cost of a run before the run,
against the local mock model server over real HTTP."""

from __future__ import annotations

import dataclasses
import tempfile
import textwrap
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.cli import main
from vitals_engine.task import estimate as estimating

MODEL = "gpt-4.1-mini"  # OpenAI's price: $0.40 in, $1.60 out per million tokens


@pytest.fixture(autouse=True)
def own_tmp(tmp_path, monkeypatch) -> Path:
    """Temporary directories (the sample's log) go under this test's tmp_path."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def chat(server, model: str = MODEL, **options) -> ve.Chat:
    return ve.chat_openai(model, base_url=server.base_url(), api_key="k", **options)


def sums(n: int) -> list[dict]:
    """`n` rows alike in size (the mock counts whitespace words): What's A+B?"""
    return [{"input": f"What's {i}+{2 * i}?", "target": str(3 * i)} for i in range(1, n + 1)]


def uneven(n: int) -> list[dict]:
    """`n` rows of uneven length: up to 40 extra words each."""
    return [
        {"input": f"What's {i}+{i}? " + "please " * ((i * 37) % 41), "target": str(2 * i)}
        for i in range(1, n + 1)
    ]


def files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []


def within(estimate_low: float, value: float, estimate_high: float) -> bool:
    """`value` in the range, give or take float rounding (a range of width 0 is exact)."""
    slack = 1e-9 * max(abs(value), 1e-12)
    return estimate_low - slack <= value <= estimate_high + slack


def real_cost(task: ve.Task) -> dict[str, float]:
    frame = task.get_cost()
    return {
        role: float(frame.filter(frame["role"] == role)["cost"].sum())
        for role in frame["role"].unique()
    }


# -- from a sample -----------------------------------------------------------------------------


def test_a_sample_of_10_brackets_the_cost_of_all_100(server, tmp_path):
    """Solver and judge: the estimate from 10 of 100 rows has the real cost of running all
    100 in its range, per role and in total; the sample sent 10 calls of each role."""
    solver, judge = chat(server), chat(server)
    task = ve.Task(
        sums(100),
        ve.generate(solver),
        ve.model_graded_qa(scorer_chat=judge),
        dir=tmp_path / "logs",
    )
    estimate = task.estimate_cost(sample=10)
    assert server.requests == 20
    assert (estimate.samples_run, estimate.dataset_size, estimate.epochs) == (10, 100, 1)
    assert estimate.rows["role"].to_list() == ["solver", "scorer"]
    assert estimate.rows["requests"].to_list() == [100, 100]

    task.eval()
    spent = real_cost(task)
    for row in estimate.rows.iter_rows(named=True):
        assert within(row["cost_low"], spent[row["role"]], row["cost_high"]), row
    assert estimate.total_low is not None
    assert estimate.total_high is not None
    assert within(estimate.total_low, sum(spent.values()), estimate.total_high)
    assert server.requests == 20 + 200


def test_over_many_seeds_the_range_holds_the_real_cost_about_95_in_100(server, tmp_path):
    """Rows of uneven length: each range has width and starts no lower than what its
    sample spent; over 40 seeded samples of 10 rows, the cost of the full run is in at
    least 36 of the ranges (they are about 95% intervals)."""
    task = ve.Task(uneven(100), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path)
    estimates = [task.estimate_cost(sample=10, seed=seed) for seed in range(40)]
    task.eval()
    spent = real_cost(task)["solver"]
    held = 0
    for estimate in estimates:
        low, cost, high = estimate.total_low, estimate.total_cost, estimate.total_high
        assert low is not None
        assert cost is not None
        assert high is not None
        assert low < cost < high
        assert low >= 10 * cost / 100  # what the 10 rows cost, as estimated per row
        held += low <= spent <= high
    assert held >= 36, held


def test_the_sample_sends_only_its_rows_and_leaves_the_task_alone(server, tmp_path, own_tmp):
    """`sample` requests, none more; the task is not solved, its chat has no turns, its log
    directory stays empty, and the sample's temporary log is gone."""
    solver = chat(server)
    task = ve.Task(sums(50), ve.generate(solver), ve.detect_includes(), dir=tmp_path / "logs")
    estimate = task.estimate_cost(sample=7)
    assert server.requests == 7
    assert estimate.samples_run == 7
    assert not task.solved
    assert task.log_path is None
    assert task.get_cost().height == 0
    assert solver.turns == []
    assert files(tmp_path / "logs") == []
    assert files(own_tmp) == []


def test_the_seed_picks_the_same_rows_each_time(server, tmp_path):
    """The same seed asks the same questions; another seed other ones."""
    task = ve.Task(sums(100), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path)

    def asked(seed: int) -> list[str]:
        server.reset()
        task.estimate_cost(sample=5, seed=seed)
        return sorted(entry.request.prompt for entry in server.log)

    first = asked(0)
    assert len(first) == 5
    assert asked(0) == first
    assert asked(1) != first


def test_every_row_sampled_is_exact(server, tmp_path):
    """A sample as large as the dataset runs every row once: the range closes on the
    estimate, which is what the eval then costs."""
    task = ve.Task(uneven(12), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path)
    estimate = task.estimate_cost(sample=20)
    assert server.requests == 12
    assert estimate.samples_run == 12
    assert estimate.total_low == estimate.total_cost == estimate.total_high
    assert "from all 12 run" in str(estimate)
    task.eval()
    assert estimate.total_cost == pytest.approx(real_cost(task)["solver"], rel=1e-12)


def test_epochs_multiply_the_estimate_not_the_sample(server, tmp_path):
    """epochs=3 triples requests, tokens and cost; the sample still runs each row once.
    Task(epochs=) is the default."""
    task = ve.Task(sums(40), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path)
    once = task.estimate_cost(sample=4)
    thrice = task.estimate_cost(sample=4, epochs=3)
    assert server.requests == 8
    assert thrice.epochs == 3
    for column in ("requests", "input_tokens", "output_tokens"):
        assert thrice.rows[column].to_list() == [3 * v for v in once.rows[column]]
    assert once.total_cost is not None
    assert thrice.total_cost == pytest.approx(3 * once.total_cost)
    assert "40 samples \u00d7 3 epochs, from 4 run" in str(thrice)

    task.eval(epochs=3)
    assert thrice.total_low is not None
    assert thrice.total_high is not None
    assert within(thrice.total_low, real_cost(task)["solver"], thrice.total_high)

    by_default = ve.Task(sums(40), ve.generate(chat(server)), ve.detect_includes(), epochs=2)
    assert by_default.estimate_cost(sample=4).epochs == 2


def test_an_unknown_price_is_none_never_zero(server, tmp_path):
    """A model with no price: its cost and the totals are None, the table says unknown."""
    task = ve.Task(
        sums(30), ve.generate(chat(server, "no-such-model")), ve.detect_includes(), dir=tmp_path
    )
    estimate = task.estimate_cost(sample=5)
    assert estimate.rows["cost"].to_list() == [None]
    assert estimate.rows["input_tokens"].to_list()[0] > 0
    assert (estimate.total_cost, estimate.total_low, estimate.total_high) == (None, None, None)
    assert "unknown" in str(estimate)
    assert any("OpenAI/no-such-model" in note for note in estimate.notes)
    assert task.estimate_cost(local=True).total_cost is None


def test_a_cached_call_is_priced_as_if_sent(server, tmp_path):
    """Calls the cache answers cost nothing in the run, but a fresh run would send them:
    the estimate from a cached sample is the estimate from a sent one, with a note."""
    cached = chat(server, cache=ve.Cache(dir=tmp_path / "cache"))
    task = ve.Task(sums(30), ve.generate(cached), ve.detect_includes(), dir=tmp_path)
    sent = task.estimate_cost(sample=6)
    assert server.requests == 6
    again = task.estimate_cost(sample=6)
    assert server.requests == 6  # every call answered from the cache
    assert sent.total_cost is not None
    assert sent.total_cost > 0
    assert again.total_cost == pytest.approx(sent.total_cost)
    assert again.rows["cost"].to_list() == pytest.approx(sent.rows["cost"].to_list())
    assert any("cache answered 6 calls" in note for note in again.notes)


def test_routed_arguments_reach_the_sample(server, tmp_path):
    """solver_chat= is routed as eval() routes it: the sample runs on that model."""
    task = ve.Task(sums(20), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path / "logs")
    estimate = task.estimate_cost(sample=3, solver_chat=chat(server, "gpt-4.1-nano"))
    assert estimate.rows["model"].to_list() == ["gpt-4.1-nano"]
    assert server.requests_by_model == {"gpt-4.1-nano": 3}


def test_failed_samples_keep_the_log_the_error_names(server, tmp_path, own_tmp):
    """A sample that fails fails the estimate (as it would the eval); the error names the
    sample's log, which is kept."""

    def broken(input: str) -> str:
        raise RuntimeError("no")

    task = ve.Task(sums(10), broken, ve.detect_includes(), dir=tmp_path / "logs")
    with pytest.raises(ve.EvalFailedError) as caught:
        task.estimate_cost(sample=2)
    assert caught.value.log_path is not None
    assert Path(caught.value.log_path).exists()
    assert Path(caught.value.log_path).is_relative_to(own_tmp)
    assert files(tmp_path / "logs") == []


@pytest.mark.anyio
async def test_estimate_cost_async(server, tmp_path, anyio_backend):
    """The async form, on asyncio and trio."""
    task = ve.Task(sums(20), ve.generate(chat(server)), ve.detect_includes(), dir=tmp_path)
    estimate = await task.estimate_cost_async(sample=4, epochs=2)
    assert server.requests == 4
    assert estimate.rows["requests"].to_list() == [40]
    assert not task.solved


# -- counted locally -------------------------------------------------------------------------


def test_local_sends_nothing_and_counts_every_row_and_epoch(server, tmp_path):
    """local=True: no request; each row's input (and the system prompt) at about 4
    characters a token, over every row x epoch, at the model's input price; output
    tokens and the judge stay unknown, and a note says so."""
    solver = chat(server, system_prompt="Answer with the sum only.")
    rows = uneven(30)
    task = ve.Task(rows, ve.generate(solver), ve.model_graded_qa(scorer_chat=chat(server)))
    estimate = task.estimate_cost(local=True, epochs=2)
    assert server.requests == 0
    assert not task.solved
    per_row = [(len("Answer with the sum only.") + len(r["input"])) // 4 for r in rows]
    tokens = 2 * sum(per_row)
    row = estimate.rows.row(0, named=True)
    assert (row["role"], row["provider"], row["model"]) == ("solver", "OpenAI", MODEL)
    assert row["requests"] == 60
    assert row["input_tokens"] == tokens
    assert row["output_tokens"] is None
    assert row["cost"] == pytest.approx(tokens * 0.4 / 1_000_000)
    assert estimate.rows.height == 1  # the judge is not counted
    assert (estimate.local, estimate.samples_run, estimate.total_low) == (True, 0, None)
    assert any("cannot be known without calling" in note for note in estimate.notes)
    assert "counted locally" in str(estimate)


def test_local_counts_for_the_routed_model(server):
    """solver_chat= given to the estimate is the model counted for."""
    task = ve.Task(sums(5), ve.generate(chat(server)), ve.detect_includes())
    estimate = task.estimate_cost(local=True, solver_chat=ve.chat_mock())
    assert estimate.rows["model"].to_list() == ["mock-model"]
    assert estimate.total_cost == 0.0


def test_local_needs_a_model_to_count_for(server):
    """A solver that holds no chat: a ConfigError saying what to do."""
    task = ve.Task(sums(5), lambda input: input, ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="holds no chat"):
        task.estimate_cost(local=True)


# -- wrong arguments -----------------------------------------------------------------------


@pytest.mark.parametrize("sample", [0, -3, 2.5, True, "20", None])
def test_sample_must_be_a_positive_whole_number(sample):
    task = ve.Task(sums(5), ve.generate(ve.chat_mock()), ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="`sample` must be a whole number"):
        task.estimate_cost(sample)


def test_wrong_options_are_config_errors(tmp_path):
    """An eval option that means nothing here, an unknown keyword, a bad epochs."""
    task = ve.Task(sums(5), ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match="does not take `resume`"):
        task.estimate_cost(3, resume=True)
    with pytest.raises(ve.ConfigError, match="temperature"):
        task.estimate_cost(3, temperature=0)
    with pytest.raises(ve.ConfigError, match="epochs"):
        task.estimate_cost(3, epochs=0)
    assert files(tmp_path) == []


def test_an_empty_dataset_has_nothing_to_estimate():
    """Task() refuses an empty dataset already; the estimate says so too if it gets one."""
    task = ve.Task(sums(1), ve.generate(ve.chat_mock()), ve.detect_includes())
    empty = dataclasses.replace(task._setup, rows=[])
    with pytest.raises(ve.ConfigError, match="empty"):
        anyio.run(estimating.estimate_cost, empty, task._clone_with)


# -- vitals eval --estimate ----------------------------------------------------------------------

TASK_FILE = """
import os

import vitals_engine as ve

model = ve.chat_openai("gpt-4.1-mini", base_url=os.environ["ESTIMATE_URL"], api_key="k")
sums = ve.Task(
    [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(1, 41)],
    solver=ve.generate(model),
    scorer=ve.detect_includes(),
    name="sums",
)
"""


def cli_task(tmp_path, monkeypatch, server) -> Path:
    monkeypatch.setenv("ESTIMATE_URL", server.base_url())
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "sums_task.py"
    path.write_text(textwrap.dedent(TASK_FILE))
    return path


def test_cli_estimate_prints_and_writes_no_log(server, tmp_path, monkeypatch, capsys, own_tmp):
    """`--estimate --estimate-samples 5 --epochs 2`: the table and totals, exit 0, 5 requests,
    no log in --log-dir, ./logs or the temporary directory."""
    path = cli_task(tmp_path, monkeypatch, server)
    logs = tmp_path / "logs"
    args = ["eval", str(path), "--estimate", "--estimate-samples", "5", "--epochs", "2"]
    assert main([*args, "--log-dir", str(logs)]) == 0
    out = capsys.readouterr().out
    assert "Task sums: the estimated cost of its eval" in out
    assert "solver  OpenAI/gpt-4.1-mini" in out
    assert "40 samples \u00d7 2 epochs, from 5 run" in out
    assert server.requests == 5
    assert files(logs) == []
    assert files(own_tmp) == []


def test_cli_estimate_local_sends_nothing(server, tmp_path, monkeypatch, capsys):
    path = cli_task(tmp_path, monkeypatch, server)
    assert main(["eval", str(path), "--estimate", "--estimate-local"]) == 0
    out = capsys.readouterr().out
    assert "counted locally" in out
    assert server.requests == 0
    assert files(tmp_path / "logs") == []


@pytest.mark.parametrize(
    "extra",
    [
        ["--estimate-samples", "5"],
        ["--estimate-local"],
        ["--estimate", "--resume"],
        ["--estimate", "--estimate-local", "--estimate-samples", "3"],
        ["--estimate", "--estimate-samples", "0"],
    ],
)
def test_cli_estimate_usage_errors(server, tmp_path, monkeypatch, capsys, extra):
    """Options that do not go together are usage errors (exit 2); nothing is sent."""
    path = cli_task(tmp_path, monkeypatch, server)
    assert main(["eval", str(path), *extra]) == 2
    assert "estimate" in capsys.readouterr().err
    assert server.requests == 0
