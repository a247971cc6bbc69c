"""`eval(backend=ve.Ray(...))` beyond one local Ray: a cluster of two nodes (one of them
lost mid-run), and a driver killed with SIGKILL whose run is then resumed.

Both drive a Ray from a child process: `ray.cluster_utils.Cluster` cannot share a
process with the session's `ray.init`, and a driver killed with SIGKILL must not be
pytest. The cluster's processes die with the child that started them (Ray ties them to
it); the child is also started in a session of its own, whose processes are killed when
the test ends, whatever happened. The child and the Ray workers import this checkout.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import vitals_engine as ve  # noqa: E402
from tests.helpers import sums, wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """The child imports this checkout (and so do the Ray workers it starts)."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "RAY_DEDUP_LOGS": "0",
    }


def end_session(proc: subprocess.Popen) -> None:
    """Kill the child and whatever of its session is left (its Ray processes, if any)."""
    with contextlib.suppress(ProcessLookupError):  # nothing of it is left
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


#: The longest a wait for the cluster takes (generous: under CPU load a Ray worker process
#: takes tens of seconds to start).
RAY_PATIENCE = 180.0


# -- a cluster of two nodes ----------------------------------------------------------

CLUSTER_RUN = textwrap.dedent(
    '''
    import json
    import os
    import sys
    import threading
    import time
    import traceback
    from pathlib import Path

    import ray
    from ray.cluster_utils import Cluster

    import vitals_engine as ve

    out = Path(sys.argv[1])
    blocked = out / "blocked"  # made by the sample that blocks on the second node


    def rows(n):
        return [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(n)]


    def where_solver(head, marker):
        """A solver that says which node it ran on; every third answer is wrong. With a
        marker, the first sample to reach a node other than `head` makes the marker
        (holding its id) and blocks there."""

        def where(input):
            i = int(input.split()[1].split("+")[0])
            node = ray.get_runtime_context().get_node_id()
            if marker is not None and node != head:
                try:
                    fd = os.open(marker + ".tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.write(fd, str(i + 1).encode())
                    os.close(fd)
                    os.rename(marker + ".tmp", marker)
                    time.sleep(600)  # the workload: a sample that never ends on this node
            return f"node {node}\\nANSWER: {2 * i + (i % 3 == 0)}"

        return where


    def task(name, solver):
        return ve.Task(rows(24), solver=solver, scorer=ve.detect_answer(), dir=out / name,
                       name=name)


    def outcome(path):
        logged = ve.read_log(path)
        return {
            "status": logged.status,
            "samples": [
                [r.sample.id, r.sample.epoch, r.result.split()[1], r.score.value, r.error]
                for r in logged.records()
            ],
        }


    report = {"problem": None}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        second = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        report.update(head=head, second=second.node_id)

        spread = task("spread", where_solver(head, None))
        spread.eval(backend=ve.Ray(workers=2, max_concurrency=4))
        report["spread"] = outcome(spread.log_path)
        local = task("local", where_solver(head, None))
        local.eval()
        report["local"] = outcome(local.log_path)

        lost = task("lost", where_solver(head, str(blocked)))
        report["failure"] = failure = []

        def run():
            try:
                lost.eval(backend=ve.Ray(workers=2, max_concurrency=4))
            except BaseException:
                failure.append(traceback.format_exc())

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        deadline = time.monotonic() + 90
        while not blocked.exists():
            if not runner.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("no sample blocked on the second node")
            time.sleep(0.05)
        report["blocked"] = int(blocked.read_text())
        cluster.remove_node(second)
        runner.join(120)
        if runner.is_alive():
            raise RuntimeError("the run did not end after its second node was removed")
        report["lost"] = outcome(lost.log_path) if not failure else None
    except BaseException:
        report["problem"] = traceback.format_exc()
    finally:
        print("REPORT " + json.dumps(report), flush=True)
        ray.shutdown()
        cluster.shutdown()
    '''
)


def test_a_run_spreads_over_two_nodes_and_survives_losing_one(tmp_path):
    """A cluster of two nodes (`ray.cluster_utils.Cluster`, in a child process): the run's
    two workers go one to each node and both run samples; the log holds every sample once,
    scored as a local run scores them. A second run, whose first sample on the second node
    blocks there, loses that node mid-run (`cluster.remove_node`): it still succeeds, each
    sample logged once, the blocked one solved again on the head node."""
    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER_RUN)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        end_session(proc)
    reports = [line for line in stdout.splitlines() if line.startswith("REPORT ")]
    failed = f"the child failed:\n{stdout}\n{stderr[-4000:]}"
    assert proc.returncode == 0, failed
    assert reports, failed
    report = json.loads(reports[-1].removeprefix("REPORT "))
    assert report["problem"] is None, f"{report['problem']}\n{report}"
    head, second = report["head"], report["second"]
    assert head != second

    spread, local = report["spread"], report["local"]
    assert spread["status"] == local["status"] == "success"
    ids = sorted(sample[0] for sample in spread["samples"])
    assert ids == list(range(1, 25))  # every sample once
    assert {sample[2] for sample in spread["samples"]} == {head, second}  # both nodes ran some
    assert {sample[2] for sample in local["samples"]} == {head}
    scores = sorted((i, epoch, score, error) for i, epoch, _, score, error in spread["samples"])
    assert scores == sorted(
        (i, epoch, score, error) for i, epoch, _, score, error in local["samples"]
    )
    assert {score for _, _, score, _ in scores} == {"C", "I"}

    assert report["failure"] == [], report["failure"][0]
    lost = report["lost"]
    assert lost["status"] == "success"
    assert sorted(sample[0] for sample in lost["samples"]) == list(range(1, 25))
    assert all(sample[4] is None for sample in lost["samples"])
    [blocked] = [sample for sample in lost["samples"] if sample[0] == report["blocked"]]
    assert blocked[2] == head
    lost_scores = sorted((i, epoch, score) for i, epoch, _, score, _ in lost["samples"])
    assert lost_scores == [(i, epoch, score) for i, epoch, score, _ in scores]


# -- a driver killed with SIGKILL, resumed ---------------------------------------------

SAMPLES = 40
ANSWERED = 15  # requests the server answers before it hangs every later one


def killed_task(base_url: str, log_dir: str, pids: str) -> ve.Task:
    """The task the child runs and the test resumes: each sample asks the mock server,
    and notes the pid of the process it ran in under `pids`."""
    chat = ve.chat_openai("gpt-test", base_url=base_url, api_key="sk-test")

    async def ask(input):
        os.close(os.open(os.path.join(pids, str(os.getpid())), os.O_CREAT | os.O_WRONLY))
        return await chat.chat_async(input)

    return ve.Task(
        sums(SAMPLES), solver=ask, scorer=ve.detect_includes(), dir=log_dir, name="killed"
    )


KILLED_RUN = textwrap.dedent(
    """
    import sys

    import ray

    import vitals_engine as ve
    from tests.test_ray_cluster import killed_task

    address, base_url, log_dir, pids = sys.argv[1:]
    ray.init(address=address, log_to_driver=False)
    # two workers with room for two samples each: parcels of one sample, so each sample
    # the server answered comes back to the driver (and its journal) on its own
    killed_task(base_url, log_dir, pids).eval(backend=ve.Ray(workers=2, max_concurrency=4))
    """
)


def journaled(logs: Path) -> int:
    """Samples in the run's journal now (0 before it exists)."""
    journals = list(logs.glob("*.journal"))
    if not journals:
        return 0
    try:
        return len(ve.read_log(journals[0]).records())
    except ve.LogFormatError:  # its start record not written yet
        return 0


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status  # a zombie is dead, only not yet reaped


@pytest.mark.usefixtures("local_ray")
def test_a_ray_driver_killed_with_sigkill_resumes_with_only_the_unjournaled_samples(
    server, tmp_path
):
    """A child process joins the session's Ray and runs 40 samples on two workers against
    the mock server, which answers 15 requests and hangs every later one. Once the 15 are
    in the journal the child is killed with SIGKILL: Ray ends its workers (their
    processes exit, and no request of theirs reaches the server afterwards); the run
    resumed here on Ray sends one request for each sample the journal lacks, and its log
    holds every sample once."""
    answered = itertools.count(1)

    def hang_after_the_last_answer(_request):
        if next(answered) == ANSWERED:
            server.fail("hang", times=None)

    server.script(hang_after_the_last_answer)
    logs, first_pids, resumed_pids = tmp_path / "logs", tmp_path / "pids1", tmp_path / "pids2"
    first_pids.mkdir()
    resumed_pids.mkdir()
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen(
        [sys.executable, str(script), address, server.base_url(), str(logs), str(first_pids)],
        cwd=ROOT,
        env=child_env(),
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: journaled(logs) >= ANSWERED or proc.poll() is not None,
            f"{ANSWERED} samples in the journal",
            RAY_PATIENCE,
        )
        assert proc.poll() is None, "the run ended though the server hangs"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        end_session(proc)
    (journal,) = logs.glob("*.journal")
    kept = len(ve.read_log(journal).records())
    assert kept == ANSWERED  # nothing more could finish: every later request hangs
    workers = [int(path.name) for path in first_pids.iterdir()]
    assert workers
    assert os.getpid() not in workers
    wait_until(
        lambda: not any(alive(pid) for pid in workers),
        "the dead driver's workers to end",
        RAY_PATIENCE,
    )

    server.reset()  # releases the hung requests (answered 503) and zeroes the counters
    task = killed_task(server.base_url(), str(logs), str(resumed_pids))
    task.eval(resume=True, backend=ve.Ray(workers=2))
    assert server.requests == SAMPLES - kept  # none again, none from the dead run's workers
    logged = ve.read_log(task.log_path)
    assert logged.status == "success"
    assert sorted(r.sample.id for r in logged.records()) == list(range(1, SAMPLES + 1))
    assert all(r.error is None for r in logged.records())
    assert task.metrics == {"accuracy": 1.0}
    assert not list(logs.glob("*.journal"))
