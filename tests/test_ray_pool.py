"""The actors a process keeps between Ray runs (`distributed/pool.py`), without Ray:
handles are plain objects, and `kill` records what it was asked to kill."""

import threading

from vitals_engine.distributed.pool import ActorPool

JOB = ("job-1", "SampleWorker")


def test_a_run_takes_back_the_hub_and_the_workers_on_its_nodes_of_its_job_and_class():
    pool = ActorPool()
    pool.give_back(JOB, "hub", [("n1", "w1"), ("n2", "w2")], keep_alive=60, kill=lambda actor: None)
    assert pool.take_worker(("job-2", "SampleWorker"), "n1") is None  # another Ray
    assert pool.take_worker(("job-1", "BenchWorker"), "n1") is None  # another class
    assert pool.take_worker(JOB, "n3") is None  # no worker on that node
    assert pool.take_worker(JOB, "n2") == "w2"
    assert pool.take_worker(JOB, "n2") is None  # taken: a worker serves one run
    assert pool.take_hub(JOB) == "hub"
    assert pool.take_hub(JOB) is None
    assert pool.idle() == ["w1"]


def test_with_no_keep_alive_a_runs_actors_are_killed_at_once():
    pool, killed = ActorPool(), []
    pool.give_back(JOB, "hub", [("n1", "w1")], keep_alive=0, kill=killed.append)
    assert killed == ["w1", "hub"]
    assert pool.take_worker(JOB, "n1") is None
    assert pool.take_hub(JOB) is None


def test_idle_actors_are_killed_once_kept_alive_long_enough():
    pool, killed, done = ActorPool(), [], threading.Event()

    def kill(actor):
        killed.append(actor)
        if len(killed) == 2:
            done.set()

    pool.give_back(JOB, "hub", [("n1", "w1")], keep_alive=0.01, kill=kill)
    assert done.wait(timeout=30)
    assert sorted(killed) == ["hub", "w1"]
    assert pool.take_worker(JOB, "n1") is None


def test_the_actors_of_a_ray_that_is_gone_are_forgotten_not_killed():
    pool, killed = ActorPool(), []
    pool.give_back(JOB, "hub", [("n1", "w1")], keep_alive=60, kill=killed.append)
    pool.forget(lambda key: key[0] == "job-2")
    assert pool.take_worker(JOB, "n1") is None
    assert pool.take_hub(JOB) is None
    assert killed == []


def test_worker_ids_are_never_given_twice():
    pool = ActorPool()
    ids = []
    threads = [threading.Thread(target=lambda: ids.append(pool.worker_id())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ids) == list(range(8))
