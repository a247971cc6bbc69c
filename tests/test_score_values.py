"""A score that is no number (NaN, infinite) fails its own sample, never the metric or the
log: Inspect's reader rejects a log holding one."""

from __future__ import annotations

import math

import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads

pytestmark = pytest.mark.anyio

SUMS = [{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in (1, 2, 3)]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_score_is_its_sample_s_error(tmp_path, bad):
    def scorer(solved):
        return bad if "2+2" in solved.input else 1.0

    task = ve.Task(SUMS, ve.generate(ve.chat_mock()), scorer, dir=tmp_path)
    await task.eval_async(fail_on_error=False)
    assert task.metrics == {"accuracy": 1.0}  # over the two samples with a score
    errors = task.get_samples()["error"].to_list()
    assert errors[0] is None
    assert errors[2] is None
    assert errors[1].startswith("InvalidScore while scoring")
    assert f"scored this sample {bad}" in errors[1]
    log = assert_inspect_reads(task.log_path)
    assert log.results.scores[0].metrics["accuracy"].value == 1.0


async def test_a_batch_scorer_s_non_finite_score_fails_only_its_sample(tmp_path):
    @ve.vectorized_scorer
    def scorer(frame):
        return [math.nan if "2+2" in text else 1.0 for text in frame["input"]]

    task = ve.Task(SUMS, ve.generate(ve.chat_mock()), scorer, dir=tmp_path)
    await task.eval_async(fail_on_error=False)
    assert task.get_samples()["error"].null_count() == 2
    assert task.metrics == {"accuracy": 1.0}


async def test_a_metric_that_is_no_number_is_said_and_not_written(tmp_path):
    def empty_mean(scores):
        return math.nan

    task = ve.Task(
        SUMS,
        ve.generate(ve.chat_mock()),
        ve.detect_includes(),
        dir=tmp_path,
        metrics={"empty": empty_mean},
    )
    with pytest.raises(ve.MetricError, match="'empty' returned nan"):
        await task.eval_async()
