"""Judge panels: several judges grade each sample at once; their grades are combined, kept
per judge, priced per model, and their agreement is reported with the metrics."""

from __future__ import annotations

import math

import pytest

import vitals_engine as ve
from tests.helpers import openai
from tests.inspect_check import assert_inspect_reads
from vitals_engine.scorers.panel import combine_grades, panel_alpha
from vitals_engine.testing import reply

pytestmark = pytest.mark.anyio

SUMS = [
    {"input": "What's 2+2?", "target": "4"},
    {"input": "What's 2+3?", "target": "5"},
    {"input": "What's 2+4?", "target": "7"},
]
#: Each judge's grade of each question.
GRADES = {
    "judge-a": {"2+2": "C", "2+3": "P", "2+4": "I"},
    "judge-b": {"2+2": "C", "2+3": "I", "2+4": "I"},
    "judge-c": {"2+2": "I", "2+3": "P", "2+4": "C"},
}
#: Hand-computed nominal alpha of GRADES: every sample has one dissenting judge (D_o =
#: 3 * 4 / 2 / 9 = 2/3); over all, C 3, P 2, I 4 of 9 (D_e = (81 - 29) / 72 = 13/18).
ALPHA = 1 - (2 / 3) / (13 / 18)


def script(request):
    if "[Submission]" not in request.prompt:
        return reply("It is 4.", input_tokens=10, output_tokens=2)
    question = next(q for q in GRADES[request.model] if q in request.prompt)
    grade = GRADES[request.model][question]
    return reply(f"{request.model} thinks so.\nGRADE: {grade}", input_tokens=100, output_tokens=7)


def panel(server):
    return [openai(server, model) for model in GRADES]


async def run(server, tmp_path, combine, make=ve.model_graded_qa, **options):
    server.script(script)
    scorer = make(judges=panel(server), combine=combine, partial_credit=True)
    task = ve.Task(SUMS, solver=ve.generate(openai(server, "solver")), scorer=scorer, dir=tmp_path)
    await task.eval_async(**options)
    return task


@pytest.mark.parametrize(
    ("combine", "scores"),
    [
        ("majority", ["C", "P", "I"]),
        ("min", ["I", "I", "I"]),
        ("max", ["C", "P", "C"]),
        (lambda grades: "".join(g or "-" for g in grades), ["CCI", "PIP", "IIC"]),
    ],
    ids=["majority", "min", "max", "function"],
)
async def test_the_panel_grades_are_combined(server, tmp_path, combine, scores):
    """Three scripted judges' grades make each sample's score by the combine rule."""
    task = await run(server, tmp_path, combine)
    assert task.get_samples()["score"].to_list() == scores


async def test_mean_keeps_the_number(server, tmp_path):
    """combine='mean' scores C = 1, P = 0.5, I = 0 averaged, kept as the number; accuracy
    averages those numbers."""
    task = await run(server, tmp_path, "mean", make=ve.model_graded_fact)
    assert task.get_samples()["score"].to_list() == pytest.approx([2 / 3, 1 / 3, 1 / 3])
    assert task.metrics is not None
    assert task.metrics["accuracy"] == pytest.approx(4 / 9)


async def test_each_judge_is_kept_and_priced_and_the_panel_agreement_reported(server, tmp_path):
    """Each judge's model, grade and reply are in the score's metadata and the log; each
    judge model has its own scorer row in the cost table; alpha is in the log's results
    and the summary."""
    task = await run(server, tmp_path, "majority")
    frame = task.get_samples()
    first = frame["scorer_metadata"][0]
    assert [(j["model"], j["grade"]) for j in first["judges"]] == [
        ("openai/judge-a", "C"),
        ("openai/judge-b", "C"),
        ("openai/judge-c", "I"),
    ]
    assert first["judges"][2]["explanation"] == "judge-c thinks so.\nGRADE: I"
    cost = task.get_cost()
    rows = sorted(zip(cost["role"], cost["model"], cost["requests"], strict=True))
    assert rows == [
        ("scorer", "judge-a", 3),
        ("scorer", "judge-b", 3),
        ("scorer", "judge-c", 3),
        ("solver", "solver", 3),
    ]
    assert task.log_path is not None
    log = assert_inspect_reads(task.log_path, task)
    (score,) = log.results.scores
    assert score.metadata["judges_alpha"] == pytest.approx(ALPHA)
    assert score.metadata["judges_alpha_samples"] == 3
    # pairwise, by hand from GRADES: a-b agree on 2+2 and 2+4, a-c on 2+3, b-c on none
    pairs = {tuple(p["raters"]): p for p in score.metadata["judges_pairs"]}
    assert list(pairs) == [
        ("openai/judge-a", "openai/judge-b"),
        ("openai/judge-a", "openai/judge-c"),
        ("openai/judge-b", "openai/judge-c"),
    ]
    agreement = [pairs[p]["agreement"] for p in pairs]
    assert agreement == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert all(p["samples"] == 3 for p in pairs.values())
    logged = next(s for s in log.samples if s.id == 1)
    (sample_score,) = logged.scores.values()
    assert [j["grade"] for j in sample_score.metadata["judges"]] == ["C", "C", "I"]
    assert "judges agree: alpha 0.08 (nominal, 3 samples graded by 3 judges)" in ve.summary(task)
    assert "(openai/judge-a, openai/judge-b, openai/judge-c)" in score.scorer


async def test_a_failing_judge_fails_the_sample(server, tmp_path):
    """A judge whose request is refused (HTTP 400) fails the sample, as a lone judge would."""
    server.fail("400", times=1, model="judge-b")
    task = await run(server, tmp_path, "majority", fail_on_error=False)
    errors = [e for e in task.get_samples()["error"].to_list() if e is not None]
    assert len(errors) == 1
    assert "ProviderError while scoring: OpenAI/judge-b" in str(errors[0])


def test_majority_ties_go_to_the_lower_grade():
    """A split panel never rounds up; judges without a grade are left out."""
    assert combine_grades(["C", "I"], "majority") == "I"
    assert combine_grades(["C", "P", None, None], "majority") == "P"
    assert combine_grades([None, None], "majority") is None
    assert combine_grades(["C", None], "mean") == 1.0


def test_panel_alpha_of_scores_without_a_panel_is_none():
    """Alpha is only reported when some sample was graded by a panel; agreement on a
    single value is undefined."""
    assert panel_alpha([None, {"grade_pattern": "x"}]) is None
    same = panel_alpha([{"judges": [{"grade": "C"}, {"grade": "C"}]}])
    assert same is not None
    assert math.isnan(same.value)


def test_bad_panel_arguments_are_config_errors(server):
    """Both a judge and a panel, an empty panel, a non-chat judge or an unknown rule are
    ConfigErrors at once."""
    judges = panel(server)
    with pytest.raises(ve.ConfigError, match=r"either scorer_chat= .* or judges="):
        ve.model_graded_qa(scorer_chat=judges[0], judges=judges)
    with pytest.raises(ve.ConfigError, match="judges is empty"):
        ve.model_graded_fact(judges=[])
    with pytest.raises(ve.ConfigError, match="every judge must be a Chat, not str"):
        ve.model_graded_qa(judges=["gpt-5.4"])  # pyright: ignore[reportArgumentType]
    with pytest.raises(ve.ConfigError, match="combine must be one of"):
        ve.model_graded_qa(judges=judges, combine="median")


async def test_a_logged_panel_prices_each_judge_model(server, tmp_path):
    """Read back from the log, the scorer's usage is split by judge model (the log's
    usage by model, the solver's model aside), as the run's own cost table has it; how
    many requests each judge made is not in the log."""
    task = await run(server, tmp_path, "majority")
    assert task.log_path is not None
    columns = ["role", "provider", "model", "input_tokens", "output_tokens", "cost"]
    logged = ve.read_log(task.log_path).get_cost()
    assert logged.select(columns).rows() == task.get_cost().select(columns).rows()
    assert logged.filter(logged["role"] == "scorer")["requests"].to_list() == [None] * 3
