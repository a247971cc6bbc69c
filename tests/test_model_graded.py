"""Judge scorers: templates, grade parsing, partial credit, custom schemes, the judge's chat."""

from __future__ import annotations

import logging

import msgspec
import polars as pl
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads
from vitals_engine.testing import reply

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


async def test_user_text_is_never_read_as_a_placeholder(tmp_path):
    """An input or answer holding {criterion} or {instructions} reaches the judge as written."""
    prompts = []

    def judge(prompt):
        prompts.append(prompt)
        return "GRADE: C"

    data = [{"input": "Say {criterion} and {instructions}", "target": "SECRET"}]
    solver = ve.chat_mock(lambda p: "I say {criterion} {input}")
    scorer = ve.model_graded_qa(scorer_chat=ve.chat_mock(judge), instructions="INSTR")
    await ve.Task(data, ve.generate(solver), scorer, dir=tmp_path).eval_async()
    (prompt,) = prompts
    assert "[Task]: Say {criterion} and {instructions}" in prompt
    assert "[Submission]: I say {criterion} {input}" in prompt
    assert prompt.count("SECRET") == 1
    assert prompt.count("INSTR") == 1


async def test_other_braces_in_a_template_stay_literal(tmp_path):
    """A user template with a JSON example keeps its braces; only the four fields are filled."""
    prompts = []

    def judge(prompt):
        prompts.append(prompt)
        return "GRADE: C"

    template = 'Answer {answer}; criterion {criterion}; reply like {"grade": "C"} or {other}.'
    scorer = ve.model_graded_qa(template=template, scorer_chat=ve.chat_mock(judge))
    await judged_task(tmp_path, scorer).eval_async()
    assert 'Answer 2 + 2 = 4; criterion 4; reply like {"grade": "C"} or {other}.' in prompts


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


# -- over HTTP: the local mock server -------------------------------------------------------

SUMS = [
    {"input": "What's 2+2?", "target": "4"},
    {"input": "What's 2+3?", "target": "5"},
    {"input": "What's 2+4?", "target": "7"},
]


def http_chat(server, **kwargs):
    return ve.chat_openai("gpt-judged", base_url=server.base_url(), api_key="sk-test", **kwargs)


def is_judge(request) -> bool:
    return "[Submission]" in request.prompt


def judge_script(replies):
    """The solver gets 10 input / 2 output tokens; the judge the reply of its question,
    100 / 7 tokens."""

    def answer(request):
        if not is_judge(request):
            return reply("It is 4.", input_tokens=10, output_tokens=2)
        text = next(t for question, t in replies.items() if question in request.prompt)
        return reply(text, input_tokens=100, output_tokens=7)

    return answer


def text_of(message) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content)


def http_task(server, tmp_path, scorer, **kwargs):
    return ve.Task(
        SUMS, solver=ve.generate(http_chat(server, **kwargs)), scorer=scorer, dir=tmp_path
    )


async def test_http_partial_credit_grades_and_cost_by_role(server, tmp_path):
    """Over HTTP, the default judge grades C, P and I; its tokens are the scorer's, its
    conversation is kept per sample in the log."""
    replies = {"2+2": "Right.\nGRADE: C", "2+3": "Half right.\nGRADE: P", "2+4": "No.\nGRADE: I"}
    server.script(judge_script(replies))
    task = http_task(server, tmp_path, ve.model_graded_qa(partial_credit=True))
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == ["C", "P", "I"]
    assert frame["score"].dtype == pl.Enum(["I", "P", "C"])
    assert frame["explanation"].to_list() == list(replies.values())
    assert task.metrics == {"accuracy": 0.5}
    assert "C, P, or I" in next(r.request.prompt for r in server.log if is_judge(r.request))
    cost = task.get_cost()
    assert cost["role"].to_list() == ["solver", "scorer"]
    assert cost["model"].to_list() == ["gpt-judged", "gpt-judged"]
    assert cost["requests"].to_list() == [3, 3]
    assert cost["input_tokens"].to_list() == [30, 300]
    assert cost["output_tokens"].to_list() == [6, 21]
    full = assert_inspect_reads(task.log_path, task)
    for sample in full.samples:
        (score,) = sample.scores.values()
        grading = score.metadata["grading"]
        assert [m["role"] for m in grading] == ["user", "assistant"]
        assert "[Submission]: It is 4." in text_of(grading[0])
        assert text_of(grading[1]) == score.explanation


async def test_http_custom_pattern_letters_stay_strings(server, tmp_path):
    """A custom pattern's letters (A, B, X) are string grades, upper-cased, with no accuracy."""
    server.script(judge_script({"2+2": "GRADE: A", "2+3": "GRADE: B", "2+4": "grade: x"}))
    scorer = ve.model_graded_qa(
        instructions="Reply GRADE: A, B or X.", grade_pattern=r"(?i)GRADE\s*:\s*([ABX])(.*)$"
    )
    task = http_task(server, tmp_path, scorer)
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == ["A", "B", "X"]
    assert frame["score"].dtype == pl.String
    assert task.metrics == {}
    assert ve.summary(task).count("not graded") == 0
    assert_inspect_reads(task.log_path, task)


async def test_http_unparseable_reply_is_no_grade_warned_and_reported(server, tmp_path, caplog):
    """A judge reply with no grade scores None, keeps the judge's text, logs a warning and
    is counted in the run summary."""
    caplog.set_level(logging.WARNING, logger="vitals_engine")
    replies = {"2+2": "I cannot decide.", "2+3": "Maybe?", "2+4": "Fine.\nGRADE: C"}
    server.script(judge_script(replies))
    task = http_task(server, tmp_path, ve.model_graded_qa())
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == [None, None, "C"]
    assert frame["explanation"].to_list()[:2] == ["I cannot decide.", "Maybe?"]
    assert [m["no_grade"] for m in frame["scorer_metadata"].to_list()[:2]] == [True, True]
    assert "no_grade" not in frame["scorer_metadata"][2]
    assert task.metrics == {"accuracy": 1.0}
    warnings = [r for r in caplog.records if "judge gave no grade" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "I cannot decide." in " ".join(r.getMessage() for r in warnings)
    assert (
        "2 samples were not graded: the judge's reply had no grade; see the explanation column."
        in ve.summary(task)
    )
    full = assert_inspect_reads(task.log_path)
    assert full.results.scores[0].unscored_samples == 2
    logged = next(s for s in full.samples if s.id == 1)
    (score,) = logged.scores.values()
    assert score.explanation == "I cannot decide."
    assert text_of(score.metadata["grading"][-1]) == "I cannot decide."


async def test_summary_says_one_sample_was_not_graded(tmp_path):
    """One ungraded sample is reported in the singular; a fully graded run says nothing."""
    replies = iter(["No idea.", "Fine.\nGRADE: C"])
    scorer = ve.model_graded_qa(scorer_chat=ve.chat_mock(lambda p: next(replies)))
    task = judged_task(tmp_path, scorer)
    await task.eval_async(max_concurrency=1)
    assert "1 sample was not graded: the judge's reply had no grade" in ve.summary(task)
    graded = judged_task(tmp_path, ve.model_graded_qa())
    await graded.eval_async()
    assert "not graded" not in ve.summary(graded)


async def test_http_default_judge_is_a_fresh_chat_on_the_solver_model(server, tmp_path):
    """The default judge talks to the solver's endpoint with its key and limits, but gets
    no system prompt, tools, earlier turns or request parameters of the solver's."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    server.latency = 0.01
    server.script(judge_script({"2+": "GRADE: C"}))
    chat = http_chat(
        server,
        system_prompt="Use the tools.",
        params={"temperature": 0.3},
        rate_limits=ve.RateLimits(max_concurrency=1),
    )
    chat.register_tool(add)
    task = ve.Task(SUMS, solver=ve.generate(chat), scorer=ve.model_graded_qa(), dir=tmp_path)
    await task.eval_async(max_concurrency=3)
    solver = [r for r in server.log if not is_judge(r.request)]
    judge = [r for r in server.log if is_judge(r.request)]
    assert len(solver) == len(judge) == 3
    assert all(r.body["tools"] and r.body["temperature"] == 0.3 for r in solver)
    for recorded in judge:
        assert "tools" not in recorded.body
        assert "temperature" not in recorded.body
        assert recorded.request.system is None
        assert [m.role for m in recorded.request.messages] == ["user"]
        assert recorded.model == "gpt-judged"
        assert recorded.headers["Authorization"] == "Bearer sk-test"
    assert server.peak_in_flight == 1
    assert task.metrics == {"accuracy": 1.0}
    judges = task.get_samples()["scorer_chat"].to_list()
    assert all(j.tools == [] and j.system_prompt is None for j in judges)
    assert chat.provider.params == {"temperature": 0.3}


async def test_the_log_names_the_scorer_with_its_arguments(tmp_path):
    """`model_graded_qa(partial_credit=True, ...)` is logged with the arguments given (not as a
    bare `model_graded_qa`), and the judge's model, in the header and the samples' scores."""
    judge = ve.chat_mock(lambda p: "Fine.\nGRADE: P", model="judge-model")
    scorer = ve.model_graded_qa(partial_credit=True, instructions="Be kind.", scorer_chat=judge)
    task = await judged_task(tmp_path, scorer).eval_async()
    label = "model_graded_qa(instructions='Be kind.', partial_credit=True) (mock/judge-model)"
    log = ve.read_log(task.log_path)
    header = log.header
    assert [scorer.name for scorer in header.eval.scorers] == [label]
    assert [score.name for score in header.results.scores] == [label]
    assert log.scorer == label
    assert task.get_samples()["scorer"].to_list() == [label, label]
    plain = ve.model_graded_fact(scorer_chat=judge)
    assert plain.__vitals_label__ == "model_graded_fact() (mock/judge-model)"
