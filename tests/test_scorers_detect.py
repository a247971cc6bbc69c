"""The string-detection scorers: grades, answers and explanations, alone and inside a Task."""

from __future__ import annotations

import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine.metrics import GRADE_DTYPE


def solved(result: str, target: str | list[str]) -> ve.SolvedSample:
    return ve.SolvedSample(id=1, epoch=1, input="q", target=target, metadata={}, result=result)


async def grades(scorer, results: list[str], targets: list[str]) -> list[str]:
    return [(await scorer(solved(r, t))).value for r, t in zip(results, targets, strict=True)]


LETTER_RESULTS = ["The answer is C", "The answer is D"]
LETTER_TARGETS = ["c", "d"]


# -- detect_includes -------------------------------------------------------------------


@pytest.mark.anyio
async def test_includes_parity_case_insensitive_by_default():
    """detect_includes ignores case by default, so 'c' is found in 'The answer is C'."""
    assert await grades(ve.detect_includes(), LETTER_RESULTS, LETTER_TARGETS) == ["C", "C"]


@pytest.mark.anyio
async def test_includes_parity_case_sensitive():
    """detect_includes(case_sensitive=True) does not find 'c' in 'The answer is C'."""
    scorer = ve.detect_includes(case_sensitive=True)
    assert await grades(scorer, LETTER_RESULTS, LETTER_TARGETS) == ["I", "I"]


@pytest.mark.anyio
async def test_includes_found_explanation_and_answer():
    """A found target is explained by name and the whole untrimmed result is the answer."""
    score = await ve.detect_includes()(solved("  2 + 2 = 4  ", "4"))
    assert score.value == "C"
    assert score.answer == "  2 + 2 = 4  "
    assert score.explanation == "Target '4' was found in the answer."


@pytest.mark.anyio
async def test_includes_not_found_explanation():
    """A missing target grades I and the explanation names the target."""
    score = await ve.detect_includes()(solved("2 + 2 = 5", "4"))
    assert score.value == "I"
    assert score.explanation == "Target '4' was not found in the answer."


@pytest.mark.anyio
async def test_includes_list_target_any_matches():
    """With a list of targets, one target found is enough and the explanation names it."""
    score = await ve.detect_includes()(solved("It is four", ["4", "four"]))
    assert score.value == "C"
    assert score.explanation == "Target 'four' was found in the answer."


@pytest.mark.anyio
async def test_includes_list_target_none_matches_names_all():
    """With a list of targets and none found, the explanation quotes every target."""
    score = await ve.detect_includes()(solved("It is five", ["4", "four"]))
    assert score.value == "I"
    assert score.explanation == "Target '4', 'four' was not found in the answer."


# -- detect_match ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_match_parity_default_end_case_insensitive():
    """detect_match defaults to location='end' and ignores case."""
    assert await grades(ve.detect_match(), LETTER_RESULTS, LETTER_TARGETS) == ["C", "C"]


@pytest.mark.anyio
async def test_match_parity_case_sensitive():
    """detect_match(case_sensitive=True) does not match 'c' at the end of '... C'."""
    scorer = ve.detect_match(case_sensitive=True)
    assert await grades(scorer, LETTER_RESULTS, LETTER_TARGETS) == ["I", "I"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("location", "result", "grade", "explanation"),
    [
        ("end", "  The answer is 4  ", "C", "Target '4' was found at the end of the answer."),
        ("end", "4 is the answer", "I", "Target '4' was not found at the end of the answer."),
        ("begin", "  4 is the answer", "C", "Target '4' was found at the beginning of the answer."),
        (
            "begin",
            "The answer is 4",
            "I",
            "Target '4' was not found at the beginning of the answer.",
        ),
        ("any", "I think 4 is it", "C", "Target '4' was found anywhere in the answer."),
        ("any", "I think five", "I", "Target '4' was not found anywhere in the answer."),
        ("exact", "  4\n", "C", "Target '4' was found exactly matching the answer."),
        ("exact", "4 apples", "I", "Target '4' was not found exactly matching the answer."),
    ],
)
async def test_match_locations_with_explanations(location, result, grade, explanation):
    """Each location grades the trimmed result and says where the target was looked for."""
    score = await ve.detect_match(location=location)(solved(result, "4"))
    assert score.value == grade
    assert score.explanation == explanation


@pytest.mark.anyio
async def test_match_trims_target_and_answer():
    """Both result and target are trimmed, and the trimmed result is the answer."""
    score = await ve.detect_match(location="exact")(solved("  Paris \n", " paris "))
    assert score.value == "C"
    assert score.answer == "Paris"


@pytest.mark.anyio
async def test_match_list_target_any_matches():
    """With a list of targets, detect_match is correct when any target is at the location."""
    scorer = ve.detect_match(location="begin")
    assert (await scorer(solved("Four, I think", ["4", "four"]))).value == "C"
    assert (await scorer(solved("I think four", ["4", "four"]))).value == "I"


def test_match_rejects_unknown_location():
    """An unknown location is a ConfigError listing the valid ones."""
    with pytest.raises(ve.ConfigError, match=r"location='middle'.*'end', 'begin', 'any', 'exact'"):
        ve.detect_match(location="middle")  # type: ignore[arg-type]


# -- detect_pattern --------------------------------------------------------------------

CONTAINS = r"contains\s+([A-Za-z])"
COLORS = r"colors\s+(\w+)\s+and\s+(\w+)"


@pytest.mark.anyio
async def test_pattern_parity_case_insensitive():
    """detect_pattern compares the captured group with the target ignoring case by default."""
    results = ["The answer contains C", "The answer contains D"]
    assert await grades(ve.detect_pattern(CONTAINS), results, LETTER_TARGETS) == ["C", "C"]


@pytest.mark.anyio
async def test_pattern_parity_case_sensitive():
    """detect_pattern(case_sensitive=True) does not equate the group 'C' with target 'c'."""
    results = ["The answer contains C", "The answer contains D"]
    scorer = ve.detect_pattern(CONTAINS, case_sensitive=True)
    assert await grades(scorer, results, LETTER_TARGETS) == ["I", "I"]


COLOR_RESULTS = ["Found colors red and blue", "Found colors green and yellow"]
COLOR_TARGETS = ["red", "green"]


@pytest.mark.anyio
async def test_pattern_parity_one_group_enough():
    """With all=False, one captured group among the targets is correct."""
    assert await grades(ve.detect_pattern(COLORS), COLOR_RESULTS, COLOR_TARGETS) == ["C", "C"]


@pytest.mark.anyio
async def test_pattern_parity_all_groups_required():
    """With all=True, every captured group must be among the targets."""
    scorer = ve.detect_pattern(COLORS, all=True)
    assert await grades(scorer, COLOR_RESULTS, COLOR_TARGETS) == ["I", "I"]


@pytest.mark.anyio
async def test_pattern_all_groups_among_list_target():
    """With all=True and a list target, all groups found in the set of targets is correct."""
    score = await ve.detect_pattern(COLORS, all=True)(solved(COLOR_RESULTS[0], ["blue", "red"]))
    assert score.value == "C"
    assert score.explanation == f"All matches from pattern '{COLORS}' matched the target."


@pytest.mark.anyio
async def test_pattern_answer_is_joined_groups_and_explanation():
    """The answer is the captured groups joined by ', ' and the explanation quotes the pattern."""
    score = await ve.detect_pattern(COLORS)(solved(COLOR_RESULTS[0], "red"))
    assert score.answer == "red, blue"
    assert score.explanation == f"At least one match from pattern '{COLORS}' matched the target."


@pytest.mark.anyio
async def test_pattern_groups_not_in_targets_explained():
    """Groups outside the targets grade I with a 'did not match' explanation."""
    score = await ve.detect_pattern(COLORS)(solved(COLOR_RESULTS[0], "purple"))
    assert score.value == "I"
    assert score.explanation == (
        f"At least one match from pattern '{COLORS}' did not match the target."
    )


@pytest.mark.anyio
async def test_pattern_without_groups_compares_whole_match():
    """A pattern without capture groups compares the whole match with the target."""
    score = await ve.detect_pattern(r"\d+")(solved("It is 42 exactly", "42"))
    assert score.value == "C"
    assert score.answer == "42"


@pytest.mark.anyio
async def test_pattern_no_match_is_incorrect_with_explanation():
    """A pattern that matches nothing grades I, has no answer and says so."""
    score = await ve.detect_pattern(r"ANSWER=(\d)")(solved("no digits here", "4"))
    assert score.value == "I"
    assert score.answer is None
    assert score.explanation == r"Pattern 'ANSWER=(\d)' did not match any text in the answer."


def test_pattern_rejects_invalid_regex():
    """An invalid regex is a ConfigError quoting the pattern, raised when the scorer is built."""
    with pytest.raises(ve.ConfigError, match=r"'\(' is not a valid regex"):
        ve.detect_pattern("(")


# -- detect_exact ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_exact_parity_case_insensitive():
    """detect_exact ignores case by default after removing punctuation."""
    scorer = ve.detect_exact()
    results, targets = ["ANSWER: C", "ANSWER: d"], ["ANSWER: c", "ANSWER: d"]
    assert await grades(scorer, results, targets) == ["C", "C"]


@pytest.mark.anyio
async def test_exact_parity_case_sensitive():
    """detect_exact(case_sensitive=True) tells 'ANSWER: C' from 'ANSWER: c'."""
    scorer = ve.detect_exact(case_sensitive=True)
    results, targets = ["ANSWER: C", "ANSWER: d"], ["ANSWER: c", "ANSWER: d"]
    assert await grades(scorer, results, targets) == ["I", "C"]


@pytest.mark.anyio
async def test_exact_non_matching_output():
    """An unrelated output grades I with the normalised answer and the target named."""
    score = await ve.detect_exact()(solved("non-matching output", "ANSWER: c"))
    assert score.value == "I"
    assert score.answer == "nonmatching output"
    assert score.explanation == "Normalized answer did not exactly match target 'ANSWER: c'."


@pytest.mark.anyio
async def test_exact_answer_is_normalised():
    """The answer is the result without punctuation, trimmed and lower-cased."""
    score = await ve.detect_exact()(solved("  Paris!  ", "paris"))
    assert score.value == "C"
    assert score.answer == "paris"
    assert score.explanation == "Normalized answer exactly matched target 'paris'."


@pytest.mark.anyio
async def test_exact_list_target_any_matches():
    """With a list of targets, detect_exact is correct when any target matches exactly."""
    scorer = ve.detect_exact()
    assert (await scorer(solved("Four.", ["4", "four"]))).value == "C"
    assert (await scorer(solved("Four or 4", ["4", "four"]))).value == "I"


# -- detect_answer ---------------------------------------------------------------------

ANSWER_RESULTS = [
    "The solution is:\nANSWER: The Industrial Revolution",
    "ANSWER: C\nExplanation follows...",
]
ANSWER_TARGETS = ["The Industrial Revolution", "C"]


@pytest.mark.anyio
@pytest.mark.parametrize("result", ["ANSWER: 4", "ANSWER:  4"])
async def test_answer_extracts_after_prefix(result):
    """The text after 'ANSWER:' (spaces trimmed) is the answer compared with the target."""
    score = await ve.detect_answer()(solved(result, "4"))
    assert score.value == "C"
    assert score.answer == "4"
    assert score.explanation == "Extracted answer '4' matched target '4'."


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fmt", "expected"),
    [("line", ["C", "I"]), ("word", ["I", "C"]), ("letter", ["I", "C"])],
)
async def test_answer_parity_formats(fmt, expected):
    """Each format extracts a line (last line only), a word or a letter, as in vitals."""
    scorer = ve.detect_answer(format=fmt)
    assert await grades(scorer, ANSWER_RESULTS, ANSWER_TARGETS) == expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fmt", "answer"),
    [("line", "The Industrial Revolution"), ("word", "The"), ("letter", "T")],
)
async def test_answer_is_the_extracted_part(fmt, answer):
    """Score.answer is what the format extracted after 'ANSWER:'."""
    score = await ve.detect_answer(format=fmt)(solved(ANSWER_RESULTS[0], ANSWER_TARGETS[0]))
    assert score.answer == answer


@pytest.mark.anyio
async def test_answer_mismatch_explanation():
    """A wrong extracted answer is explained with the answer and the target."""
    score = await ve.detect_answer(format="word")(solved(ANSWER_RESULTS[0], ANSWER_TARGETS[0]))
    assert score.value == "I"
    assert score.explanation == (
        "Extracted answer 'The' did not match target 'The Industrial Revolution'."
    )


@pytest.mark.anyio
async def test_answer_is_case_insensitive():
    """detect_answer compares the extracted answer ignoring case."""
    assert (await ve.detect_answer()(solved("ANSWER: paris", "Paris"))).value == "C"


@pytest.mark.anyio
async def test_answer_missing_prefix():
    """A result without 'ANSWER:' grades I, has no answer and says the prefix is missing."""
    score = await ve.detect_answer()(solved("The answer is 4", "4"))
    assert score.value == "I"
    assert score.answer is None
    assert score.explanation == "No 'ANSWER:' prefix found in the response."


@pytest.mark.anyio
async def test_answer_list_target_any_matches():
    """With a list of targets, detect_answer is correct when any target equals the answer."""
    scorer = ve.detect_answer()
    assert (await scorer(solved("ANSWER: four", ["4", "four"]))).value == "C"
    score = await scorer(solved("ANSWER: five", ["4", "four"]))
    assert score.value == "I"
    assert score.explanation == "Extracted answer 'five' did not match target '4', 'four'."


def test_answer_rejects_unknown_format():
    """An unknown format is a ConfigError listing the valid ones."""
    with pytest.raises(ve.ConfigError, match=r"format='sentence'.*'line', 'word', 'letter'"):
        ve.detect_answer(format="sentence")  # type: ignore[arg-type]


# -- through a Task --------------------------------------------------------------------


@pytest.mark.anyio
async def test_includes_through_task_with_mock_chat(tmp_path):
    """A whole eval with detect_includes gives an ordered grade column and explanations."""
    replies = {"q1": "The answer is C", "q2": "The answer is D"}
    task = ve.Task(
        dataset=[{"input": "q1", "target": "c"}, {"input": "q2", "target": "x"}],
        solver=ve.generate(ve.chat_mock(replies=lambda prompt: replies[prompt])),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    samples = task.get_samples()
    assert samples["score"].dtype == GRADE_DTYPE
    assert samples["score"].dtype == pl.Enum(["I", "P", "C"])
    assert samples["score"].to_list() == ["C", "I"]
    assert samples["score"].sort().to_list() == ["I", "C"]
    assert samples["explanation"].to_list() == [
        "Target 'c' was found in the answer.",
        "Target 'x' was not found in the answer.",
    ]
    assert samples["scorer"].to_list() == ["detect_includes(case_sensitive=False)"] * 2
    assert task.metrics == {"accuracy": 0.5}


@pytest.mark.anyio
async def test_answer_through_task_with_plain_solver(tmp_path):
    """A plain async solver scored by detect_answer fills score, answer and explanation."""

    async def solver(input):
        return {"a": "Thinking...\nANSWER: 4", "b": "I do not know"}[input]

    task = ve.Task(
        dataset=[{"input": "a", "target": "4"}, {"input": "b", "target": "4"}],
        solver=solver,
        scorer=ve.detect_answer(),
        dir=tmp_path,
    )
    await task.eval_async()
    samples = task.get_samples()
    assert samples["score"].dtype == GRADE_DTYPE
    assert samples["score"].to_list() == ["C", "I"]
    assert samples["answer"].to_list() == ["4", None]
    assert samples["explanation"].to_list() == [
        "Extracted answer '4' matched target '4'.",
        "No 'ANSWER:' prefix found in the response.",
    ]
    assert task.log_path is not None
    assert task.log_path.parent == tmp_path
