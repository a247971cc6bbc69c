"""`eval_set`: every task on every model at once in one event loop, one log per
(task, model), a combined summary, frames that span every run, shared endpoint limits,
`max_tasks`, failures that stop no other run, and resuming an interrupted set."""

from __future__ import annotations

import collections
import functools
from pathlib import Path

import anyio
import pytest

import vitals_engine as ve
from tests import helpers
from tests.helpers import openai
from vitals_engine.task.eval_set import EvalSetFailedError

pytestmark = pytest.mark.anyio

MODELS = ("gpt-a", "gpt-b", "gpt-c")

#: The rows of this module's tasks are numbered from 1, each with its number as id.
sums = functools.partial(helpers.sums, start=1, ids=True)


def logs_in(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.iterdir()
        if p.suffix in (".json", ".eval") and p.name != "listing.json"
    )


def two_tasks(server, tmp_path, n=4, scorer=None):
    chat = openai(server, "gpt-own", system_prompt="Answer with the result.")
    adding = ve.Task(
        sums(n, "A: "),
        ve.generate(chat),
        scorer or ve.detect_includes(),
        name="adding",
        dir=tmp_path,
    )
    judged = ve.Task(
        sums(n, "B: "), ve.generate(chat), ve.model_graded_qa(), name="judged", dir=tmp_path
    )
    return adding, judged


def peak_per_model(server) -> dict[str, int]:
    """The most requests of each model the server was answering at once, from when each
    arrived and was answered."""
    events = collections.defaultdict(list)
    for r in server.log:
        events[r.model] += [(r.at, 1), (r.answered, -1)]
    peaks = {}
    for model, marks in events.items():
        now = peak = 0
        for _, step in sorted(marks, key=lambda m: (m[0], m[1])):
            now += step
            peak = max(peak, now)
        peaks[model] = peak
    return peaks


# -- every task on every model -------------------------------------------------------------


async def test_two_tasks_on_three_models_make_six_logs(server, tmp_path):
    """2 tasks x 3 models: six runs, task-major, each a clone on its model; six logs with
    distinct names, each naming its task and model; the tasks given are left untouched."""
    adding, judged = two_tasks(server, tmp_path)
    models = [openai(server, m) for m in MODELS]
    runs = await ve.eval_set_async([adding, judged], models=models)

    assert isinstance(runs, ve.EvalSet)
    assert runs.models == [f"openai/{m}" for m in MODELS]
    assert [
        (t.name, ve.read_log(p).model) for t, p in zip(runs.tasks, runs.log_paths, strict=True)
    ] == [(name, f"openai/{m}") for name in ("adding", "judged") for m in MODELS]
    assert all(isinstance(t, ve.Task) and t.metrics == {"accuracy": 1.0} for t in runs.tasks)
    paths = logs_in(tmp_path)
    assert len(paths) == 6
    assert sorted(runs.log_paths) == paths
    headers = [ve.read_log(p, header_only=True) for p in paths]
    assert sorted((h.task, h.model, h.status) for h in headers) == sorted(
        (name, f"openai/{m}", "success") for name in ("adding", "judged") for m in MODELS
    )
    assert not adding.solved
    assert not judged.solved
    assert adding.log_path is None
    # the judged task's judge is a fresh chat on each run's solver model: 4 + 4 calls
    assert server.requests_by_model == {"gpt-a": 12, "gpt-b": 12, "gpt-c": 12}


def test_model_ids_keep_the_solvers_system_prompt(server, tmp_path, monkeypatch):
    """Models given as "provider/model" ids (made with ve.chat(), here pointed at the mock
    server through OPENAI_BASE_URL) keep the system prompt of the solver's own chat, as
    `vitals eval --model` does; the sync eval_set() returns the same set."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    adding, judged = two_tasks(server, tmp_path, n=2)
    runs = ve.eval_set([adding, judged], models=["openai/gpt-x", "openai/gpt-y"])
    assert runs.models == ["openai/gpt-x", "openai/gpt-y"]
    systems = {r.request.system for r in server.log if r.request.prompt.startswith("A: ")}
    assert systems == {"Answer with the result."}
    assert server.requests_by_model == {"gpt-x": 6, "gpt-y": 6}


async def test_the_summary_has_one_line_per_task_and_model(server, tmp_path):
    """The combined table: task, model, status, samples, the metric, cost, time and log of
    each run, in order; str() of the set is its summary."""
    adding, judged = two_tasks(server, tmp_path, n=3)
    runs = await ve.eval_set_async([adding, judged], models=[openai(server, m) for m in MODELS])
    text = runs.summary()
    assert str(runs) == text
    lines = text.splitlines()
    assert lines[0] == "Eval set: 6 runs, 0 failed"
    header = lines[2].split()
    assert header == ["task", "model", "status", "samples", "accuracy", "cost", "time", "log"]
    rows = [line.split() for line in lines[4:10]]
    assert [row[:5] for row in rows] == [
        [name, f"openai/{m}", "success", "3", "1"] for name in ("adding", "judged") for m in MODELS
    ]
    assert [row[-1] for row in rows] == [p.name for p in runs.log_paths]
    assert lines[-1] == f"Logs in {tmp_path}"


async def test_samples_and_cost_span_every_run(server, tmp_path):
    """get_samples() and get_cost() stack every run's frame with `task` and `model` first;
    the cost's own model (the judge's, here the run's) is `call_model`."""
    adding, judged = two_tasks(server, tmp_path, n=3)
    runs = await ve.eval_set_async([adding, judged], models=[openai(server, m) for m in MODELS])
    samples = runs.get_samples()
    assert samples.columns[:4] == ["task", "model", "id", "epoch"]
    assert samples.height == 18
    counts = samples.group_by("task", "model").len().sort("task", "model").rows()
    assert counts == [(n, f"openai/{m}", 3) for n in ("adding", "judged") for m in MODELS]
    cost = runs.get_cost()
    assert cost.columns[:3] == ["task", "model", "role"]
    assert "call_model" in cost.columns
    rows = cost.select("task", "model", "role", "call_model", "requests").rows()
    assert sorted(rows) == sorted(
        [("adding", f"openai/{m}", "solver", m, 3) for m in MODELS]
        + [("judged", f"openai/{m}", role, m, 3) for m in MODELS for role in ("solver", "scorer")]
    )


async def test_scores_of_different_kinds_stack_as_text(server, tmp_path):
    """A run scored with grades and one scored with numbers stack into one frame."""
    chat = openai(server, "gpt-a")
    graded = ve.Task(sums(2), ve.generate(chat), ve.detect_includes(), name="g", dir=tmp_path)
    numbered = ve.Task(sums(2), ve.generate(chat), lambda s: 0.5, name="n", dir=tmp_path)
    runs = await ve.eval_set_async([graded, numbered])
    samples = runs.get_samples()
    assert samples.select("task", "score").rows() == [
        ("g", "C"),
        ("g", "C"),
        ("n", "0.5"),
        ("n", "0.5"),
    ]
    assert runs.models == ["openai/gpt-a"]


# -- limits and concurrency ---------------------------------------------------------------


async def test_runs_of_a_set_share_each_endpoints_limits(server, tmp_path):
    """Two tasks on each of three models with RateLimits(max_concurrency=2) and 10 samples at
    work per run: the server never answers more than 2 requests of one model at once
    (per run, it could be 4)."""
    server.latency = 0.02
    adding, judged = two_tasks(server, tmp_path, n=10, scorer=ve.detect_includes())
    judged.set_scorer(ve.detect_includes())
    runs = await ve.eval_set_async(
        [adding, judged],
        models=[openai(server, m) for m in MODELS],
        max_concurrency=10,
        rate_limits=ve.RateLimits(max_concurrency=2),
    )
    assert all(t.metrics == {"accuracy": 1.0} for t in runs.tasks)
    peaks = peak_per_model(server)
    assert set(peaks) == set(MODELS)
    assert max(peaks.values()) <= 2


async def test_runs_of_a_set_reuse_each_others_connections(server, tmp_path):
    """Three runs on one endpoint that serves 2 requests at once: the set opens 2
    connections to it, not 2 for each run (one pool of connections for the set)."""
    server.latency = 0.01
    chat = openai(server, "gpt-a")
    tasks = [
        ve.Task(sums(8, f"{n}: "), ve.generate(chat), ve.detect_includes(), name=n, dir=tmp_path)
        for n in ("one", "two", "three")
    ]
    runs = await ve.eval_set_async(
        tasks, max_concurrency=8, rate_limits=ve.RateLimits(max_concurrency=2)
    )
    assert all(t.metrics == {"accuracy": 1.0} for t in runs.tasks)
    assert server.requests == 24
    assert len(server.connections) <= 2


async def test_max_tasks_bounds_the_runs_at_once(server, tmp_path):
    """With max_tasks=2, no more than two runs are open at once (a run is open from its
    first sample's start until its last sample is solved); every run still runs."""
    server.latency = 0.01
    n = 3
    open_runs: set[tuple[str, str]] = set()
    peak = [0]
    solved: collections.Counter[tuple[str, str]] = collections.Counter()

    def solver_of(name):
        async def solver(input: str, solver_chat: ve.Chat) -> str:
            key = (name, solver_chat.provider.model)
            open_runs.add(key)
            peak[0] = max(peak[0], len(open_runs))
            reply = await solver_chat.clone().chat_async(input)
            solved[key] += 1
            if solved[key] == n:
                open_runs.discard(key)
            return reply

        return solver

    tasks = [
        ve.Task(sums(n), solver_of(name), ve.detect_includes(), name=name, dir=tmp_path)
        for name in ("one", "two")
    ]
    runs = await ve.eval_set_async(tasks, [openai(server, m) for m in MODELS], max_tasks=2)
    assert peak[0] <= 2
    assert len(solved) == 6
    assert set(solved.values()) == {n}
    assert len(runs.log_paths) == 6


# -- failures -----------------------------------------------------------------------------


async def test_a_failed_run_stops_no_other_and_the_set_names_it(server, tmp_path):
    """Every request to gpt-b fails (500, one attempt): both runs on gpt-b fail, the four
    others finish; the set raises one EvalSetFailedError (an EvalFailedError) naming both
    failed runs, with every log written and the set attached."""
    server.fail("500", times=None, model="gpt-b")
    adding, judged = two_tasks(server, tmp_path, n=2)
    with pytest.raises(ve.EvalFailedError) as caught:
        await ve.eval_set_async(
            [adding, judged],
            models=[openai(server, m) for m in MODELS],
            retry=ve.Retry(max_attempts=1),
        )
    error = caught.value
    assert isinstance(error, EvalSetFailedError)
    assert (error.failed, error.total) == (2, 6)
    assert sorted(error.errors) == ["adding on openai/gpt-b", "judged on openai/gpt-b"]
    assert "adding on openai/gpt-b" in str(error)
    assert "judged on openai/gpt-b" in str(error)
    runs = error.eval_set
    statuses = [ve.read_log(p, header_only=True).status for p in runs.log_paths]
    assert statuses == ["success", "error", "success"] * 2
    assert len(logs_in(tmp_path)) == 6
    text = runs.summary()
    assert "Eval set: 6 runs, 2 failed" in text
    assert "adding on openai/gpt-b: EvalFailedError" in text


def test_a_set_is_checked_before_anything_runs(server, tmp_path):
    """Mistakes in the set are ConfigErrors before any request: a solver that cannot take
    another model, two tasks of one name, a model twice, a bad max_tasks, solver_chat
    given beside models, a bad model id."""
    chat = openai(server, "gpt-a")
    plain = ve.Task(sums(1), str.upper, ve.detect_includes(), name="plain", dir=tmp_path)
    good = ve.Task(sums(1), ve.generate(chat), ve.detect_includes(), name="good", dir=tmp_path)
    twin = ve.Task(sums(1), ve.generate(chat), ve.detect_includes(), name="good", dir=tmp_path)
    with pytest.raises(ve.ConfigError, match=r"task 'plain'.*solver_chat"):
        ve.eval_set([good, plain], models=[chat])
    with pytest.raises(ve.ConfigError, match="named 'good'"):
        ve.eval_set([good, twin])
    with pytest.raises(ve.ConfigError, match="openai/gpt-a twice"):
        ve.eval_set([good], models=[chat, openai(server, "gpt-a")])
    with pytest.raises(ve.ConfigError, match="max_tasks"):
        ve.eval_set([good], max_tasks=0)
    with pytest.raises(ve.ConfigError, match="solver_chat"):
        ve.eval_set([good], models=[chat], solver_chat=chat)
    with pytest.raises(ve.ConfigError, match="provider/model"):
        ve.eval_set([good], models=["nonsense"])
    assert server.requests == 0
    assert logs_in(tmp_path) == []


# -- interrupted sets -----------------------------------------------------------------------


class Interrupting:
    """A task's solver: answers with its model; raises KeyboardInterrupt once, at sample
    `stop_at` of the run on model `stop_on`; counts the samples each run solved."""

    def __init__(self, name: str, stop_on: str | None = None, stop_at: int = 0) -> None:
        self.name, self.stop_on, self.stop_at = name, stop_on, stop_at
        self.asked: collections.Counter[str] = collections.Counter()

    async def __call__(self, input: str, sample: ve.Sample, solver_chat: ve.Chat) -> str:
        model = solver_chat.provider.model
        if model == self.stop_on and sample.id == self.stop_at:
            self.stop_on = None
            raise KeyboardInterrupt
        self.asked[model] += 1
        return await solver_chat.clone().chat_async(input)


def interrupting_tasks(tmp_path, stop_on=None, stop_at=0):
    solvers = [Interrupting("adding"), Interrupting("judged", stop_on, stop_at)]
    tasks = [
        ve.Task(sums(4, f"{s.name}: "), s, ve.detect_includes(), name=s.name, dir=tmp_path)
        for s in solvers
    ]
    return tasks, solvers


async def test_an_interrupted_set_resumes_only_what_did_not_finish(server, tmp_path):
    """One run at a time (max_tasks=1), task-major: Ctrl-C (a KeyboardInterrupt from the
    solver) at sample 3 of "judged" on gpt-b. The four runs before it finished; it logged
    samples 1-2 (status cancelled); "judged" on gpt-c never started. resume=True keeps
    the finished logs (their LoggedEval stands in the set), runs samples 3-4 of the
    cancelled run into its log, and runs "judged" on gpt-c afresh."""
    models = [openai(server, m) for m in MODELS]
    tasks, _ = interrupting_tasks(tmp_path, stop_on="gpt-b", stop_at=3)
    with pytest.raises(KeyboardInterrupt):
        await ve.eval_set_async(tasks, models, max_tasks=1, max_concurrency=1)
    first = {p: ve.read_log(p, header_only=True) for p in logs_in(tmp_path)}
    assert sorted((h.task, h.model, h.status) for h in first.values()) == sorted(
        [("adding", f"openai/{m}", "success") for m in MODELS]
        + [("judged", "openai/gpt-a", "success"), ("judged", "openai/gpt-b", "cancelled")]
    )
    [cancelled] = [p for p, h in first.items() if h.status == "cancelled"]
    assert sorted(int(s.id) for s in ve.read_log(cancelled).samples) == [1, 2]
    assert not list(tmp_path.glob("*.journal"))

    tasks, solvers = interrupting_tasks(tmp_path)
    runs = await ve.eval_set_async(tasks, models, resume=True, max_concurrency=1)
    assert solvers[0].asked == {}
    assert solvers[1].asked == {"gpt-b": 2, "gpt-c": 4}
    kept = [isinstance(t, ve.LoggedEval) for t in runs.tasks]
    assert kept == [True, True, True, True, False, False]
    assert runs.log_paths[4] == cancelled
    finals = [ve.read_log(p) for p in runs.log_paths]
    assert all(f.status == "success" and len(f.samples) == 4 for f in finals)
    assert len(logs_in(tmp_path)) == 6
    assert runs.get_samples().height == 24


async def test_ctrl_c_cancels_every_run_and_each_logs_what_it_finished(server, tmp_path):
    """All six runs at once; every run but one is stuck at its sample 2 when the last
    run's solver raises KeyboardInterrupt. Every run is cancelled and logs the samples it
    finished (no journal is left); resume=True runs every other sample, once."""
    stuck = anyio.Event()
    at_two: set[tuple[str, str]] = set()
    first_pass = [True]
    asked: collections.Counter[tuple[str, str, int]] = collections.Counter()

    def solver_of(name):
        async def solver(input: str, sample: ve.Sample, solver_chat: ve.Chat) -> str:
            key = (name, solver_chat.provider.model)
            if first_pass[0]:
                if key == ("judged", "gpt-c"):
                    await stuck.wait()
                    raise KeyboardInterrupt
                if sample.id == 2:
                    at_two.add(key)
                    if len(at_two) == 5:
                        stuck.set()
                    await anyio.sleep_forever()
            asked[(*key, int(sample.id))] += 1
            return await solver_chat.clone().chat_async(input)

        return solver

    def tasks():
        return [
            ve.Task(sums(3), solver_of(name), ve.detect_includes(), name=name, dir=tmp_path)
            for name in ("adding", "judged")
        ]

    models = [openai(server, m) for m in MODELS]
    with anyio.fail_after(60), pytest.raises(KeyboardInterrupt):  # a guard, not a timing
        await ve.eval_set_async(tasks(), models, max_concurrency=1)
    assert not list(tmp_path.glob("*.journal"))
    stopped = {
        ve.read_log(p).model + " " + ve.read_log(p).task: ve.read_log(p) for p in logs_in(tmp_path)
    }
    assert all(log.status == "cancelled" for log in stopped.values())
    done = {
        (log.task, log.model.split("/")[1], int(s.id))
        for log in stopped.values()
        for s in log.samples
    }
    assert {key[2] for key in done} <= {1}

    first_pass[0] = False
    asked.clear()
    runs = await ve.eval_set_async(tasks(), models, resume=True, max_concurrency=1)
    assert all(ve.read_log(p).status == "success" for p in runs.log_paths)
    everything = {(n, m, i) for n in ("adding", "judged") for m in MODELS for i in (1, 2, 3)}
    assert set(asked) == everything - done
    assert set(asked.values()) == {1}


# -- vitals eval --model A --model B -------------------------------------------------------

TASK_FILE = """
import vitals_engine as ve

chat = ve.chat_openai("gpt-own", system_prompt="Answer with the result.")
adding = ve.Task([{"input": f"A: What's {i}+{i}?", "target": str(2 * i)} for i in (1, 2)],
                 ve.generate(chat), ve.detect_includes(), name="adding")
doubling = ve.Task([{"input": f"B: What's {i}+{i}?", "target": str(2 * i)} for i in (3, 4)],
                   ve.generate(chat), ve.detect_includes(), name="doubling")
"""


def vitals_eval(server, tmp_path, monkeypatch, *args: str, task: str = "") -> int:
    from vitals_engine.cli import main

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    path = tmp_path / "evals.py"
    path.write_text(TASK_FILE)
    target = f"{path}:{task}" if task else str(path)
    return main(["eval", target, "--log-dir", str(tmp_path / "logs"), "--no-progress", *args])


def test_cli_runs_every_task_on_every_model(server, tmp_path, monkeypatch, capsys):
    """Two --model: both tasks of the file on both models, one log each, the combined
    summary on stdout, exit 0."""
    code = vitals_eval(
        server, tmp_path, monkeypatch, "--model", "openai/gpt-a", "--model", "openai/gpt-b"
    )
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("Eval set: 4 runs, 0 failed")
    for name in ("adding", "doubling"):
        for model in ("openai/gpt-a", "openai/gpt-b"):
            assert any(line.split()[:3] == [name, model, "success"] for line in out.splitlines())
    headers = [ve.read_log(p, header_only=True) for p in logs_in(tmp_path / "logs")]
    assert sorted((h.task, h.model) for h in headers) == [
        ("adding", "openai/gpt-a"),
        ("adding", "openai/gpt-b"),
        ("doubling", "openai/gpt-a"),
        ("doubling", "openai/gpt-b"),
    ]
    assert server.requests_by_model == {"gpt-a": 4, "gpt-b": 4}


def test_cli_set_exits_1_naming_the_failed_run_and_resume_reruns_only_it(
    server, tmp_path, monkeypatch, capsys
):
    """gpt-b refuses the first two requests (400, not retried): "adding" on gpt-b fails,
    the other runs finish; exit 1, the failed run named on stderr. `--resume` runs only
    that run's failed samples; the finished runs are kept (no request)."""
    server.fail("400", times=2, model="gpt-b")
    models = ("--model", "openai/gpt-a", "--model", "openai/gpt-b", "--max-tasks", "1")
    assert vitals_eval(server, tmp_path, monkeypatch, *models) == 1
    captured = capsys.readouterr()
    assert "Eval set: 4 runs, 1 failed" in captured.out
    assert "vitals eval: adding on openai/gpt-b: 2 of 2 samples failed" in captured.err
    before = dict(server.requests_by_model)

    assert vitals_eval(server, tmp_path, monkeypatch, *models, "--resume") == 0
    assert "Eval set: 4 runs, 0 failed" in capsys.readouterr().out
    assert server.requests_by_model["gpt-a"] == before["gpt-a"]
    assert server.requests_by_model["gpt-b"] == before["gpt-b"] + 2
    statuses = [ve.read_log(p, header_only=True).status for p in logs_in(tmp_path / "logs")]
    assert statuses == ["success"] * 4


def test_cli_set_usage_errors(server, tmp_path, monkeypatch, capsys):
    """--resume LOG names one run: with several --model it is a usage error (exit 2)."""
    code = vitals_eval(
        server,
        tmp_path,
        monkeypatch,
        "--model",
        "openai/gpt-a",
        "--model",
        "openai/gpt-b",
        "--resume",
        str(tmp_path / "x.json"),
        task="adding",
    )
    assert code == 2
    assert "--resume alone" in capsys.readouterr().err
    assert server.requests == 0


def test_cli_estimates_each_task_on_each_model(server, tmp_path, monkeypatch, capsys):
    """--estimate with several --model: one estimate per task and model, each named."""
    code = vitals_eval(
        server,
        tmp_path,
        monkeypatch,
        "--estimate",
        "--estimate-local",
        "--model",
        "openai/gpt-a",
        "--model",
        "openai/gpt-b",
    )
    assert code == 0
    out = capsys.readouterr().out
    for name in ("adding", "doubling"):
        for model in ("openai/gpt-a", "openai/gpt-b"):
            assert f"Task {name} on {model}: the estimated cost of its eval" in out
    assert server.requests == 0
