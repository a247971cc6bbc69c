"""`eval(backend=ve.Ray(...))`: a task's samples run on Ray workers, with the same samples,
scores, metrics, token totals and log as a run in this process.

One local Ray (two CPUs) is started for the whole session; it takes a few seconds.
"""

import os
import threading
import time

import anyio
import pytest

ray = pytest.importorskip("ray")

import vitals_engine as ve  # noqa: E402
from tests.helpers import sums, until  # noqa: E402
from tests.inspect_check import assert_inspect_reads  # noqa: E402
from vitals_engine.log.live import read_live  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("local_ray")]


def outcome(task):
    """What a run produced, sample by sample, without its timings (what a spilled run
    keeps on disk read back, as the user gets it)."""
    columns = ["id", "epoch", "result", "score", "answer", "explanation"]
    return task.get_samples().select(columns).rows()


def test_a_ray_run_gives_what_a_local_run_gives(tmp_path):
    """Same samples, scores, metrics and token totals as in process; the log reads back
    (and Inspect reads it: the conftest checks every log a test leaves)."""
    ray_dir, local_dir = tmp_path / "ray", tmp_path / "local"

    def task(directory):
        return ve.Task(
            sums(30),
            solver=ve.generate(ve.chat_mock()),
            scorer=ve.detect_includes(),
            dir=directory,
        )

    on_ray = task(ray_dir).eval(epochs=2, backend=ve.Ray(workers=2))
    # the workers composed the journal's lines; the driver keeps scores, the log the rest
    assert all(record.spilled for record in on_ray._state.records)
    local = task(local_dir).eval(epochs=2)
    assert outcome(on_ray) == outcome(local)
    assert on_ray.metrics == local.metrics == {"accuracy": 1.0}
    assert on_ray.get_cost().equals(local.get_cost())
    assert on_ray.get_cost()["requests"].to_list() == [60]
    logged = ve.read_log(on_ray.log_path)
    assert logged.status == "success"
    assert logged.metrics == {"accuracy": 1.0}
    assert [(r.sample.id, r.sample.epoch, r.result) for r in logged.records()] == [
        (r.sample.id, r.sample.epoch, r.result) for r in local._state.records
    ]
    assert logged.get_cost()["input_tokens"].to_list() == local.get_cost()["input_tokens"].to_list()
    chats = on_ray.get_samples()["solver_chat"].to_list()
    assert [chat.last_turn().text for chat in chats] == [
        chat.last_turn().text for chat in local.get_samples()["solver_chat"].to_list()
    ]
    local_log = ve.read_log(local.log_path)
    assert [(s.input, [m.content for m in s.messages]) for s in logged.samples] == [
        (s.input, [m.content for m in s.messages]) for s in local_log.samples
    ]


@ve.vectorized_solver
async def answer_all(inputs, solver_chat):
    """A vectorized solver with model calls of its own: one per input, on the driver."""
    results, chats = [], []
    for text in inputs:
        chat = solver_chat.clone()
        results.append(await chat.chat_async(text))
        chats.append(chat)
    return {"result": results, "solver_chat": chats}


@ve.vectorized_scorer
def includes_all(samples):
    """A vectorized scorer: every solved sample at once."""
    rows = zip(samples["result"], samples["target"], strict=True)
    return {"score": ["C" if target in result else "I" for result, target in rows]}


@pytest.mark.parametrize(
    ("solver", "scorer"),
    [
        (answer_all, ve.model_graded_qa()),
        (ve.generate(), includes_all),
        (answer_all, includes_all),
    ],
    ids=["vectorized solver", "vectorized scorer", "both"],
)
def test_a_whole_dataset_stage_runs_on_the_driver_and_the_other_on_workers(
    tmp_path, solver, scorer
):
    """A vectorized solver or scorer gets every sample at once, on the driver; the per-sample
    stage runs on the workers. Samples, scores, the cost table (each call counted once)
    and the logged chats are those of a local run."""

    def task(directory):
        return ve.Task(sums(12), solver=solver, scorer=scorer, dir=directory)

    kwargs = {"solver_chat": ve.chat_mock()}
    if scorer is not includes_all:
        kwargs["scorer_chat"] = ve.chat_mock()
    on_ray = task(tmp_path / "ray").eval(backend=ve.Ray(workers=2), **kwargs)
    # records scored on workers come back with their journal lines, spilled
    scored_on_workers = all(r.spilled for r in on_ray._state.records)
    assert scored_on_workers == (solver is answer_all and scorer is not includes_all)
    local = task(tmp_path / "local").eval(**kwargs)
    assert outcome(on_ray) == outcome(local)
    assert on_ray.metrics == local.metrics == {"accuracy": 1.0}
    assert on_ray.get_cost().equals(local.get_cost())
    logged, local_log = ve.read_log(on_ray.log_path), ve.read_log(local.log_path)
    assert [[m.content for m in s.messages] for s in logged.samples] == [
        [m.content for m in s.messages] for s in local_log.samples
    ]


async def test_a_ray_run_calls_a_model_server_over_http(server, tmp_path):
    """Workers send real HTTP requests to the mock server; every sample is journaled and
    logged by the driver, and its tokens are counted once."""
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(sums(12), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    seen = []
    async with task.stream_async(backend=ve.Ray(workers=2, max_concurrency=4)) as samples:
        async for record in samples:
            seen.append(record.key)
            # streamed records come back whole, with their chats
            assert record.solver_chat is not None
            assert record.solver_chat.last_turn().text == record.result
    assert len(set(seen)) == 12
    assert server.requests == 12
    cost = task.get_cost()
    assert cost["requests"].to_list() == [12]
    assert task.metrics == {"accuracy": 1.0}
    assert len(ve.read_log(task.log_path).records()) == 12


async def test_ray_workers_answer_from_the_runs_cache_and_fill_it(server, tmp_path):
    """A run's cache reaches its workers: a second run on Ray sends nothing, and its
    calls are counted as cached at cost 0."""
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="sk-test")
    cache = ve.Cache(dir=tmp_path / "cache")
    for _ in range(2):
        task = ve.Task(sums(8), ve.generate(chat), ve.detect_includes(), dir=tmp_path)
        await task.eval_async(backend=ve.Ray(workers=2, max_concurrency=4), cache=cache)
    assert server.requests == 8
    cost = task.get_cost()
    assert cost.select("cached", "requests", "cost").rows() == [(True, 8, 0.0)]
    assert task.metrics == {"accuracy": 1.0}


def test_an_unpicklable_solver_is_a_config_error_before_any_request(server, tmp_path):
    """A solver closing over a lock cannot be sent to workers: a ConfigError naming it,
    before any model request and before any log is written."""
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    lock = threading.Lock()

    async def locked_solver(input):
        with lock:
            return await chat.chat_async(input)

    task = ve.Task(sums(3), solver=locked_solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match=r"locked_solver.*lock.*picklable"):
        task.eval(backend=ve.Ray(workers=1))
    assert server.requests == 0
    assert not list(tmp_path.rglob("*.json"))


def test_a_solver_that_breaks_its_contract_on_a_worker_stops_the_run_as_itself(tmp_path):
    """A SolverError raised on a worker (a solver returning a list) reaches the caller
    as itself; the log says the run failed and keeps what finished before."""

    def answer(input):
        i = int(input.split()[1].split("+")[0])
        return [2 * i] if i == 20 else str(2 * i)

    task = ve.Task(sums(30), solver=answer, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.SolverError, match="returned"):
        task.eval(backend=ve.Ray(workers=2, max_concurrency=2))
    logged = ve.read_log(task.log_path)
    assert logged.status == "error"
    kept = logged.records()
    assert 21 not in {r.sample.id for r in kept}  # sample ids count from 1
    assert kept
    assert all(r.result == str(2 * (r.sample.id - 1)) for r in kept)


def test_a_solver_that_exits_on_a_worker_exits_the_callers_run_as_itself(tmp_path):
    """SystemExit raised by a solver on a worker is raised by `eval()` as itself (as it
    would be in process); the log is written."""

    def answer(input):
        if input.startswith("What's 5+"):
            raise SystemExit(3)
        return input

    task = ve.Task(sums(12), solver=answer, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(SystemExit) as exited:
        task.eval(backend=ve.Ray(workers=2, max_concurrency=2))
    assert exited.value.code == 3
    assert ve.read_log(task.log_path).status in ("cancelled", "error")


def test_the_command_line_runs_a_task_file_on_ray(tmp_path, capsys):
    """`vitals eval FILE --ray --workers 2`: the file's task runs on Ray workers, and its log
    holds every sample."""
    from pathlib import Path

    from vitals_engine.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "cli_task.py"
    code = main(
        [
            "eval",
            str(example),
            "--log-dir",
            str(tmp_path),
            "--no-progress",
            "--ray",
            "--workers",
            "2",
        ]
    )
    assert code == 0, capsys.readouterr().err
    [log] = [p for p in tmp_path.glob("*.json") if p.name != "listing.json"]
    logged = ve.read_log(log)
    assert logged.status == "success"
    assert sorted(s.id for s in logged.samples) == [1, 2, 3, 4]


def test_a_worker_that_dies_loses_no_sample(tmp_path):
    """A sample whose solver kills its worker's process (the first time only): the
    parcel it was in goes to the other worker, the run succeeds, and the log holds every
    sample once, that one solved."""
    marker = str(tmp_path / "killed")

    def answer(input):  # a plain function: the engine runs it in a thread
        i = int(input.split()[1].split("+")[0])
        if i == 7 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return str(2 * i)

    task = ve.Task(sums(40), solver=answer, scorer=ve.detect_includes(), dir=tmp_path)
    task.eval(backend=ve.Ray(workers=2))
    assert os.path.exists(marker)
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    records = logged.records()
    assert sorted(r.sample.id for r in records) == list(range(1, 41))
    assert all(r.error is None for r in records)
    assert task.metrics == {"accuracy": 1.0}
    [seven] = [r for r in records if r.result == "14"]
    assert seven.solved


def test_a_run_whose_workers_all_die_is_a_worker_lost_error(tmp_path):
    """A sample that kills every worker it reaches: once none is left, WorkerLostError
    saying how many samples were left and that resume=True continues."""

    def deadly(input):
        if input.startswith("What's 3+"):
            os._exit(1)
        return input

    task = ve.Task(sums(10), solver=deadly, scorer=ve.detect_includes(), dir=tmp_path)
    left = r"(sample was|samples were) left.*resume=True"
    with pytest.raises(ve.WorkerLostError, match=left) as info:
        task.eval(backend=ve.Ray(workers=2))
    assert 0 < info.value.left <= 10


def test_the_tokens_a_dead_worker_spent_on_unfinished_samples_are_counted(tmp_path):
    """One worker, four samples, one model call each. Sample 1 makes its call, then its
    worker dies once the three others (which finish only after that call) are in the
    journal. The run is a WorkerLostError, and its cost table counts four requests: the
    dead sample's call too, reported by the worker with the others."""
    called = tmp_path / "called"

    async def until(condition):  # met in another process: there is no event to await
        with anyio.fail_after(60):
            while not condition():  # noqa: ASYNC110
                await anyio.sleep(0.05)

    def finished_in_journal():  # sample records (each reply has a record of its own too)
        return sum(p.read_bytes().count(b'{"kind":"sample"') for p in tmp_path.glob("*.journal"))

    async def call_then_die(input):
        chat = ve.chat_mock()
        reply = await chat.chat_async(input)
        if input.startswith("What's 0+"):
            called.touch()
            await until(lambda: finished_in_journal() >= 3)
            os._exit(1)
        await until(called.exists)
        return ve.Solution(reply, chat=chat)

    task = ve.Task(sums(4), solver=call_then_die, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.WorkerLostError, match="1 sample was left unfinished"):
        task.eval(backend=ve.Ray(workers=1, max_concurrency=4))
    assert task.get_cost()["requests"].to_list() == [4]
    assert len(ve.read_log(task.log_path).samples) == 3


def limited_chat(server, limits):
    return ve.chat_openai(
        "gpt-test", base_url=server.base_url(), api_key="sk-test", rate_limits=limits
    )


def test_an_endpoints_max_concurrency_holds_across_workers(server, tmp_path):
    """RateLimits(max_concurrency=3) on the model, two workers with room for 8 samples each:
    the server never has more than 3 requests in flight at once, over both workers."""
    server.latency = 0.05
    chat = limited_chat(server, ve.RateLimits(max_concurrency=3))
    task = ve.Task(sums(40), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    task.eval(backend=ve.Ray(workers=2, max_concurrency=16))
    assert task.metrics == {"accuracy": 1.0}
    assert server.requests == 40
    assert server.peak_in_flight <= 3


def test_an_endpoints_rpm_holds_across_workers(server, tmp_path):
    """RateLimits(rpm=600) over two workers: the server's count of requests in each second of
    the run is never above the rate (10 a second) plus a one-second burst, so 40 samples
    take at least 3 seconds; two unshared buckets would send them all in about one."""
    chat = limited_chat(server, ve.RateLimits(rpm=600))
    task = ve.Task(sums(40), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    task.eval(backend=ve.Ray(workers=2, max_concurrency=16))
    assert task.metrics == {"accuracy": 1.0}
    counts = server.per_second()
    assert sum(counts) == 40
    assert max(counts) <= 20, counts
    assert len(counts) >= 3, counts


def test_a_rate_limit_on_one_worker_pauses_the_endpoint_on_every_worker(server, tmp_path):
    """The run's first request (on one worker) is answered 429 with Retry-After 3 s: no
    request from any worker reaches the server until those 3 s have passed (after a
    second's grace for the news to spread), the run then goes on, and the log records the
    endpoint's halved concurrency."""
    server.latency = 0.02
    server.fail("429", times=1, retry_after=3)
    chat = limited_chat(server, ve.RateLimits(rpm=6000))  # a set rate: one 429 means "too fast"
    task = ve.Task(sums(200), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    task.eval(backend=ve.Ray(workers=2, max_concurrency=8))
    assert task.metrics == {"accuracy": 1.0}
    [limited] = [r for r in server.log if r.outcome == "429"]
    paused = (limited.answered + 1.0, limited.answered + 3.0)
    assert [r.at for r in server.log if paused[0] < r.at < paused[1]] == []
    assert any(r.at >= paused[1] for r in server.log)
    full = assert_inspect_reads(task.log_path, task)
    changes = [(c.old_limit, c.new_limit, c.reason) for c in full.stats.connection_limit_history]
    assert (8, 4, "rate_limit") in changes


async def test_a_worker_hands_back_each_sample_as_it_finishes(server, tmp_path):
    """One request hangs: the samples that ran beside it on the same worker, in the same
    parcel, still reach the driver (journaled, streamed) while it hangs; once it is
    answered, the run finishes with every sample."""
    server.fail("hang", times=1)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")
    task = ve.Task(sums(8), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    seen = []
    with anyio.fail_after(120):
        async with task.stream_async(backend=ve.Ray(workers=1, max_concurrency=8)) as samples:
            async for record in samples:
                seen.append(record.key)
                if len(seen) == 7:  # all but the hanging one, from both parcels of 4
                    server.reset()  # the hung request is answered 503, then retried
    assert len(set(seen)) == 8
    assert task.metrics == {"accuracy": 1.0}


async def test_the_live_viewer_shows_the_text_streamed_on_workers(server, tmp_path):
    """Replies streamed on workers and held after their first words: the run's `.live`
    sidecar beside the driver's journal lists every sample with its text; it goes once
    the run ends."""
    hold = server.hold_stream(timeout=120)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test", stream=True)
    task = ve.Task(sums(4), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)

    def listed():
        path = next((p for p in tmp_path.glob("*.live") if not p.name.startswith(".")), None)
        document = read_live(path) if path is not None else None
        if document is None or len(document.samples) < 4:
            return None
        return document if all(s.text for s in document.samples) else None

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: task.eval_async(backend=ve.Ray(workers=2, max_concurrency=4)))
            # checked between scheduler turns, as the sidecar is rewritten
            document = await until(listed, "the four samples' live text", limit=120)
            hold.release()
    assert sorted((s.id, s.role, s.input) for s in document.samples) == [
        (i + 1, "solver", f"What's {i}+{i}?") for i in range(4)
    ]
    assert not list(tmp_path.glob("*.live"))
    assert task.metrics == {"accuracy": 1.0}


# -- workers kept between runs ----------------------------------------------------------


def meeting(directory, fail_on=None):
    """A solver that answers with its worker's process id, each sample once workers of two
    ids have started one (so a run of two workers with one slot each uses both); the
    sample `fail_on` then breaks the solver contract (the run fails). Made here: the
    workers cannot import this module."""
    directory.mkdir()

    async def solve(input):
        (directory / str(os.getpid())).touch()
        with anyio.fail_after(60):  # met in other processes: there is no event to await
            while len(list(directory.iterdir())) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        if input == fail_on:
            return [input]
        return str(os.getpid())

    return solve


def run_on_two_workers(directory, **options):
    """The two workers' process ids, from a run that used both."""
    logs = directory.with_name(directory.name + "-logs")
    task = ve.Task(sums(6), solver=meeting(directory), scorer=ve.detect_includes(), dir=logs)
    task.eval(backend=ve.Ray(workers=2, max_concurrency=2, **options))
    pids = {int(r) for r in task.get_samples()["result"]}
    assert len(pids) == 2
    return pids


def test_a_run_after_one_that_ended_well_starts_on_its_workers(tmp_path):
    first = run_on_two_workers(tmp_path / "first")
    assert run_on_two_workers(tmp_path / "second") == first


def test_with_keep_alive_0_each_run_has_workers_of_its_own(tmp_path):
    first = run_on_two_workers(tmp_path / "first", keep_alive=0)
    assert run_on_two_workers(tmp_path / "second").isdisjoint(first)


def test_the_workers_of_a_run_that_failed_are_not_kept(tmp_path):
    met = tmp_path / "failed"
    solver = meeting(met, fail_on="What's 4+4?")
    task = ve.Task(sums(6), solver=solver, scorer=ve.detect_includes(), dir=tmp_path / "logs")
    with pytest.raises(ve.SolverError):
        task.eval(backend=ve.Ray(workers=2, max_concurrency=2))
    first = {int(path.name) for path in met.iterdir()}
    assert run_on_two_workers(tmp_path / "second").isdisjoint(first)


def test_kept_workers_that_died_while_idle_are_replaced(tmp_path):
    from vitals_engine.distributed.pool import POOL

    first = run_on_two_workers(tmp_path / "first")
    for worker in POOL.idle():
        ray.kill(worker)
        wait_until_dead(worker)
    assert run_on_two_workers(tmp_path / "second").isdisjoint(first)


def wait_until_dead(worker):
    """Until calls to `worker` fail (a kill takes effect soon; a hang guard of 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(worker.ready.remote(), timeout=60)
        except ray.exceptions.RayActorError:
            return
    pytest.fail("a killed worker still answered after 60 s")


def answer_here(input):
    """A solver the workers cannot load: they cannot import this module."""
    return input


def test_a_solver_the_workers_cannot_load_is_a_config_error_saying_why(tmp_path):
    task = ve.Task(sums(4), solver=answer_here, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match=r"No module named 'test_ray'.*runtime_env"):
        task.eval(backend=ve.Ray(workers=2))


def test_several_scorers_on_workers_give_what_they_give_in_process(tmp_path):
    """Each scorer's scores and metrics come back from the workers, and the log has them."""

    def task(directory):
        scorers = {"includes": ve.detect_includes(), "exact": ve.detect_exact()}
        return ve.Task(sums(12), ve.generate(ve.chat_mock()), scorers, dir=directory)

    on_ray = task(tmp_path / "ray").eval(backend=ve.Ray(workers=2))
    local = task(tmp_path / "local").eval()
    assert on_ray.metrics_by_scorer == local.metrics_by_scorer
    columns = ["id", "score_includes", "score_exact"]
    assert on_ray.get_samples().select(columns).rows() == local.get_samples().select(columns).rows()
    assert on_ray.log_path is not None
    assert ve.read_log(on_ray.log_path).metrics_by_scorer == local.metrics_by_scorer
