"""Judge scorers: templates, grade parsing, partial credit, custom schemes, the judge's chat."""

from __future__ import annotations

import msgspec
import polars as pl
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads

pytestmark = pytest.mark.anyio

DATA = [
    {"input": "What's 2+2?", "target": "4"},
    {"input": "What's 2+3?", "target": "6"},
]


def judged_task(tmp_path, scorer, solver_chat=None):
    return ve.Task(
        DATA, solver=ve.generate(solver_chat or ve.chat_mock()), scorer=scorer, dir=tmp_path
    )


async def test_qa_grades_with_the_solver_model_by_default(tmp_path):
    """model_graded_qa() asks a fresh chat on the solver's model and parses C/I grades."""
    task = judged_task(tmp_path, ve.model_graded_qa())
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == ["C", "I"]
    assert frame["score"].dtype == pl.Enum(["I", "P", "C"])
    judges = frame["scorer_chat"].to_list()
    assert [len(j.turns) for j in judges] == [2, 2]
    assert judges[0].model == frame["solver_chat"][0].model
    assert judges[0].system_prompt is None
    assert frame["explanation"][0].endswith("GRADE: C")
    assert task.metrics == {"accuracy": 0.5}
    cost = task.get_cost()
    assert cost["role"].to_list() == ["solver", "scorer"]
    assert cost["requests"].to_list() == [2, 2]
    full = assert_inspect_reads(task.log_path, task)
    first = next(s for s in full.samples if s.id == 1)
    (score,) = first.scores.values()
    grading = score.metadata["grading"]
    assert [m["role"] for m in grading] == ["user", "assistant"]


async def test_the_prompt_holds_input_answer_criterion_and_instructions(tmp_path):
    """The judge's prompt is the template filled with input, answer, target and instructions."""
    prompts = []

    def judge(prompt):
        prompts.append(prompt)
        return "Looks right.\nGRADE: C"

    scorer = ve.model_graded_qa(scorer_chat=ve.chat_mock(judge), partial_credit=True)
    await judged_task(tmp_path, scorer).eval_async()
    first = next(p for p in prompts if "2+2" in p)
    assert "[Task]: What's 2+2?" in first
    assert "[Submission]: 2 + 2 = 4" in first
    assert "[Criterion]: 4" in first
    assert "C, P, or I" in first


async def test_partial_credit_grades(tmp_path):
    """With partial credit, P is a grade worth half: P and I give accuracy 0.25."""
    grades = iter(["Partly.\nGRADE: P", "No.\nGRADE: I"])
    scorer = ve.model_graded_qa(
        scorer_chat=ve.chat_mock(lambda p: next(grades)), partial_credit=True
    )
    task = judged_task(tmp_path, scorer)
    await task.eval_async(max_concurrency=1)
    assert task.get_samples()["score"].to_list() == ["P", "I"]
    assert task.metrics == {"accuracy": 0.25}


async def test_custom_pattern_keeps_letters_as_strings(tmp_path):
    """A custom grade pattern (A/B) gives string scores and no accuracy."""
    scorer = ve.model_graded_qa(
        instructions="Answer GRADE: A for arithmetic, GRADE: B otherwise.",
        grade_pattern=r"(?i)GRADE\s*:\s*([AB])(.*)$",
        scorer_chat=ve.chat_mock(lambda p: "Arithmetic.\nGRADE: A"),
    )
    task = judged_task(tmp_path, scorer)
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == ["A", "A"]
    assert frame["score"].dtype == pl.String
    assert task.metrics == {}
    assert_inspect_reads(task.log_path, task)


async def test_a_reply_without_a_grade_is_kept_as_no_grade(tmp_path):
    """A judge reply with no GRADE line scores None, keeps the judge's text, and is not counted."""
    replies = iter(["I cannot decide.", "Fine.\nGRADE: C"])
    scorer = ve.model_graded_qa(scorer_chat=ve.chat_mock(lambda p: next(replies)))
    task = judged_task(tmp_path, scorer)
    await task.eval_async(max_concurrency=1)
    frame = task.get_samples()
    assert frame["score"].to_list() == [None, "C"]
    assert frame["explanation"][0] == "I cannot decide."
    assert frame["scorer_metadata"][0]["no_grade"] is True
    assert task.metrics == {"accuracy": 1.0}
    full = assert_inspect_reads(task.log_path)
    assert full.results.scores[0].unscored_samples == 1


async def test_grade_must_be_on_the_last_line(tmp_path):
    """The default pattern only reads a GRADE on the judge's last line."""
    scorer = ve.model_graded_qa(scorer_chat=ve.chat_mock(lambda p: "GRADE: C\nthen more text"))
    task = judged_task(tmp_path, scorer)
    await task.eval_async()
    assert task.get_samples()["score"].to_list() == [None, None]


async def test_fact_template_compares_with_the_expert_answer(tmp_path):
    """model_graded_fact() puts the target in as the expert answer."""
    prompts = []

    def judge(prompt):
        prompts.append(prompt)
        return "Same facts.\nGRADE: C"

    scorer = ve.model_graded_fact(scorer_chat=ve.chat_mock(judge))
    task = judged_task(tmp_path, scorer)
    await task.eval_async()
    assert "[Expert]: 4" in next(p for p in prompts if "2+2" in p)
    assert task.metrics == {"accuracy": 1.0}


async def test_scorer_chat_can_be_swapped_per_run(tmp_path):
    """eval(scorer_chat=...) routes a different judge to model_graded_qa."""
    task = judged_task(tmp_path, ve.model_graded_qa())
    strict = ve.chat_mock(lambda p: "No.\nGRADE: I", model="strict-judge")
    await task.eval_async(scorer_chat=strict)
    assert task.metrics == {"accuracy": 0.0}
    assert task.get_cost()["model"].to_list() == ["mock-model", "strict-judge"]


async def test_judge_needs_a_chat_when_the_solver_has_none(tmp_path):
    """Without a solver chat and without scorer_chat, the judge says what to pass."""

    async def solver(input):
        return "4"

    task = ve.Task(DATA, solver=solver, scorer=ve.model_graded_qa(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match="Pass scorer_chat="):
        await task.eval_async()


def test_bad_judge_arguments_are_config_errors():
    """A template without {answer}, or a pattern without a group, is refused at once."""
    with pytest.raises(ve.ConfigError, match=r"\{answer\}"):
        ve.model_graded_qa(template="Grade {input}")
    with pytest.raises(ve.ConfigError, match="capture group"):
        ve.model_graded_qa(grade_pattern="GRADE")


class Answer(msgspec.Struct):
    answer: int
    reasoning: str


async def test_generate_structured_keeps_json_and_the_value(tmp_path):
    """generate_structured(): the result is JSON text, the parsed value is solver_metadata."""
    chat = ve.chat_mock(lambda p: '{"answer": 4, "reasoning": "2 and 2"}')
    task = ve.Task(
        DATA[:1],
        solver=ve.generate_structured(chat, type=Answer),
        scorer=ve.model_graded_qa(scorer_chat=ve.chat_mock()),
        dir=tmp_path,
    )
    await task.eval_async()
    frame = task.get_samples()
    assert frame["result"][0] == '{"answer":4,"reasoning":"2 and 2"}'
    assert frame["solver_metadata"][0] == {"answer": 4, "reasoning": "2 and 2"}
    assert frame["score"].to_list() == ["C"]
    assert_inspect_reads(task.log_path, task)


async def test_generate_structured_bad_reply_fails_the_sample(tmp_path):
    """A reply that does not validate fails that sample with the raw reply in the error."""
    chat = ve.chat_mock(lambda p: '{"answer": "four"}')
    task = ve.Task(
        DATA[:1],
        solver=ve.generate_structured(chat, type=Answer),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async(fail_on_error=False)
    error = task.get_samples()["error"][0]
    assert error.startswith("ExtractionError while solving")
    assert "$.answer" in error


def test_generate_structured_needs_a_type():
    """generate_structured() without type= is a config error."""
    with pytest.raises(ve.ConfigError, match="needs type="):
        ve.generate_structured(ve.chat_mock())
