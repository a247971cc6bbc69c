"""A sample id beyond 64 bits (Inspect's logs allow any integer) is kept, as text in the
frames, wherever a frame is made: the run, read_log, read_logs of a folder, compare."""

from __future__ import annotations

import pytest

import vitals_engine as ve

BIG = 2**70
DATA = [
    {"id": BIG, "input": "What's 1+1?", "target": "2"},
    {"id": 5, "input": "What's 2+2?", "target": "4"},
]


@pytest.fixture
def runs(tmp_path):
    done = []
    for _ in range(2):
        task = ve.Task(DATA, ve.generate(ve.chat_mock()), ve.detect_includes(), dir=tmp_path)
        task.eval(progress=False)
        done.append(task)
    return done


def test_the_run_s_frames_keep_the_id_as_text(runs):
    task = runs[0]
    assert task.get_samples()["id"].to_list() == [str(BIG), "5"]


def test_a_log_with_such_an_id_reads_back(runs):
    log = ve.read_log(runs[0].log_path)
    assert log.get_samples()["id"].to_list() == [str(BIG), "5"]


def test_a_folder_holding_such_a_log_reads_whole(runs, tmp_path):
    frame = ve.read_logs(tmp_path)
    assert sorted(set(frame["id"].to_list())) == sorted({str(BIG), "5"})


def test_two_runs_with_such_ids_compare_sample_by_sample(runs):
    comparison = ve.compare(ve.read_log(runs[0].log_path), ve.read_log(runs[1].log_path))
    assert comparison.only_a == comparison.only_b == []
    assert comparison.metrics["n_pairs"].to_list() == [2]
