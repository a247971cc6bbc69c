"""Logs this engine writes open in Inspect's reader with what the task holds."""

from __future__ import annotations

import json

import pytest

import vitals_engine as ve
from tests.inspect_check import Mismatch, assert_inspect_reads, check_log

pytestmark = pytest.mark.anyio


async def test_inputs_targets_and_metadata_of_every_kind(tmp_path):
    """List targets, dict inputs and arbitrary metadata survive into a readable log."""

    async def solver(input, sample):
        text = input["question"] if isinstance(input, dict) else input
        return ve.Solution(text, metadata={"obj": object(), "n": [1, 2]})

    task = ve.Task(
        [
            {"input": "red or blue?", "target": ["red", "blue"], "tags": ["a", "b"]},
            {"input": {"question": "green?"}, "target": "green", "tags": ["c"]},
        ],
        solver=solver,
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    full = assert_inspect_reads(task.log_path, task)
    first, second = sorted(full.samples, key=lambda s: s.id)
    assert first.target == ["red", "blue"]
    assert first.metadata["tags"] == ["a", "b"]
    assert first.metadata["solver_metadata"]["n"] == [1, 2]
    assert first.metadata["solver_metadata"]["obj"].startswith("<object object")
    assert second.input == '{"question":"green?"}'


async def test_system_prompt_messages_and_usage(tmp_path):
    """The solver chat's system prompt, turns, model and token usage are in the log."""
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(ve.chat_mock(system_prompt="Be terse.")),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    full = assert_inspect_reads(task.log_path, task)
    (sample,) = full.samples
    assert [m.role for m in sample.messages] == ["system", "user", "assistant"]
    assert sample.messages[0].content == "Be terse."
    assert sample.output.model == "mock/mock-model"
    assert sample.output.choices[0].stop_reason == "stop"
    usage = sample.model_usage["mock/mock-model"]
    assert (usage.input_tokens, usage.output_tokens) == (4, 5)
    assert full.stats.model_usage["mock/mock-model"].total_tokens == 9
    assert full.stats.role_usage["solver"].total_tokens == 9
    assert full.eval.scorers[0].name == "detect_includes(case_sensitive=False)"


async def test_judge_conversation_is_kept_with_the_score(tmp_path):
    """A scorer's chat is written under the score's metadata as the grading messages."""
    judge = ve.chat_mock()

    async def judged(sample):
        chat = judge.clone()
        reply = await chat.chat_async(
            f"[Submission]: {sample.result}\n***\n[Criterion]: {sample.target}\n***\nGRADE?"
        )
        return ve.Score(reply[-1], explanation=reply, chat=chat)

    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=judged,
        dir=tmp_path,
    )
    await task.eval_async()
    full = assert_inspect_reads(task.log_path, task)
    score = full.samples[0].scores["judged"]
    assert score.value == "C"
    grading = score.metadata["grading"]
    assert [m["role"] for m in grading] == ["user", "assistant"]
    assert grading[1]["content"][0]["text"].endswith("GRADE: C")
    assert full.stats.role_usage["scorer"].total_tokens > 0


async def test_string_ids_and_epochs(tmp_path):
    """String ids and several epochs read back as Inspect sample ids and epochs."""
    task = ve.Task(
        [
            {"id": "a", "input": "What's 1+1?", "target": "2"},
            {"id": "b", "input": "x", "target": "y"},
        ],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        epochs=2,
        dir=tmp_path,
    )
    await task.eval_async()
    full = assert_inspect_reads(task.log_path, task)
    assert sorted((s.id, s.epoch) for s in full.samples) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert full.eval.config.epochs == 2
    assert full.eval.dataset.sample_ids == ["a", "b"]


@pytest.mark.no_inspect_check  # it damages a log on purpose
async def test_the_check_names_each_field_inspect_reads_differently(tmp_path):
    """The check every log of the suite goes through names the file and the field of each
    difference: a key Inspect's model lacks (it would drop it), a value it coerces, a time
    without an offset."""
    task = ve.Task(
        [{"input": "What's 1+1?", "target": "2"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    check_log(task.log_path)
    data = json.loads(task.log_path.read_bytes())
    (score,) = data["samples"][0]["scores"].values()
    score["explanaton"] = "a misspelt key"
    data["results"]["total_samples"] = "1"
    data["stats"]["started_at"] = "2026-01-01T00:00:00"
    bad = task.log_path.with_name(task.log_path.name.replace(".json", "X.json"))
    bad.write_text(json.dumps(data))
    with pytest.raises(Mismatch) as caught:
        check_log(bad)
    lines = str(caught.value).splitlines()[1:]
    scorer = "detect_includes(case_sensitive=False)"
    assert [line.strip() for line in lines] == [
        f"{bad.name}.results.total_samples: we wrote '1', Inspect read 1",
        f"{bad.name}.stats.started_at: a time without an offset: wrote "
        "'2026-01-01T00:00:00', read '2026-01-01T00:00:00+00:00'",
        f"{bad.name} (header-only).results.total_samples: we wrote '1', Inspect read 1",
        f"{bad.name} (header-only).stats.started_at: a time without an offset: wrote "
        "'2026-01-01T00:00:00', read '2026-01-01T00:00:00+00:00'",
        f"{bad.name}.samples[id=1, epoch=1].scores.{scorer}.explanaton: "
        "Inspect's Score has no field 'explanaton': it drops it",
    ]
