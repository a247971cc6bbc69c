"""`Task(human=)`: the human grades some samples carry correct each scorer's mean
(prediction-powered inference); the correction is in `task.corrected`, the summary, the
log (a metric beside the scorer's own, read back by `read_log`) and the viewer's data."""

from __future__ import annotations

import json

import pytest

import vitals_engine as ve
from tests.helpers import openai
from vitals_engine.statistics.corrected import corrected_mean
from vitals_engine.testing import reply

pytestmark = pytest.mark.anyio

#: A judge that passes 7 of 8; people graded the first 4 and passed 2.
JUDGE = ["C", "C", "I", "C", "C", "C", "C", "C"]
HUMAN = ["C", "I", "I", "I", None, None, None, None]
ROWS = [
    {"input": f"question {i}", "target": "x", "judge": j, "grade": h}
    for i, (j, h) in enumerate(zip(JUDGE, HUMAN, strict=True))
]


def by_the_judge(sample):
    return sample.metadata["judge"]


def task_of(tmp_path, rows=ROWS, scorer=by_the_judge, **options):
    return ve.Task(rows, lambda x: "x", scorer, dir=tmp_path, human="grade", **options)


def test_the_mean_is_corrected_by_the_human_grades(tmp_path):
    task = task_of(tmp_path).eval()
    expected = corrected_mean(JUDGE, HUMAN, bounds=(0.0, 1.0))
    assert task.metrics == {"accuracy": 0.875}  # the judge's, as it says
    assert task.corrected is not None
    (name,) = task.corrected
    result = task.corrected[name]
    # by hand: 0.875 + mean(human - judge) on the 4 graded = 0.875 + (0 - 1 + 0 - 1) / 4
    assert result.corrected.value == pytest.approx(0.375)
    assert result.corrected == expected.corrected
    assert result.judge_bias == pytest.approx(0.5)
    assert result.human.n == 4


def test_the_summary_says_judge_corrected_and_agreement(tmp_path):
    task = task_of(tmp_path).eval()
    note = ve.summary(task).split("\n\n")[1].splitlines()[1]
    assert task.corrected is not None
    stat = next(iter(task.corrected.values())).corrected
    assert note == (
        f"judge 0.88; corrected 0.38 (95% CI {stat.low:.2f}\u2013{stat.high:.2f}) from 4 "
        "human grades; judge and humans agree on 50% (kappa 0.20)"
    )


def test_the_log_holds_the_corrected_mean_beside_the_metric(tmp_path):
    task = task_of(tmp_path).eval()
    assert task.log_path is not None
    assert task.corrected is not None
    (name,) = task.corrected
    raw = json.loads(task.log_path.read_text())
    metric = raw["results"]["scores"][0]["metrics"]["accuracy_corrected"]
    assert metric["value"] == pytest.approx(0.375)
    meta = metric["metadata"]
    assert meta["corrected_of"] == "accuracy"
    assert meta["human_column"] == "grade"
    assert (meta["human_grades"], meta["n"], meta["clusters"]) == (4, 8, 4)
    assert meta["judge_mean"] == 0.875
    assert meta["judge_bias"] == pytest.approx(0.5)
    logged = ve.read_log(task.log_path)
    assert logged.metrics == {"accuracy": 0.875}  # ours, beside the metric, kept apart
    assert logged.corrected == {name: task.corrected[name].corrected}


def test_epochs_cluster_the_correction_by_sample(tmp_path):
    task = task_of(tmp_path, epochs=2).eval()
    assert task.corrected is not None
    result = next(iter(task.corrected.values()))
    assert result.corrected.n == 16  # every epoch's score
    assert result.corrected.clusters == 4  # the graded samples, each with its 2 epochs
    assert result.corrected.value == pytest.approx(0.375)


def test_with_a_reducer_each_samples_epochs_are_one_score(tmp_path):
    task = task_of(tmp_path, epochs=2, reducer="mean").eval()
    assert task.corrected is not None
    result = next(iter(task.corrected.values()))
    assert (result.corrected.n, result.human.n) == (8, 4)


def test_each_of_several_scorers_is_corrected(tmp_path):
    scorers = {"judge": by_the_judge, "lenient": lambda sample: "C"}
    task = task_of(tmp_path, scorer=scorers).eval()
    assert task.corrected is not None
    assert list(task.corrected) == ["judge", "lenient"]
    assert task.corrected["lenient"].corrected.value == pytest.approx(0.25)  # the humans' mean
    note = ve.summary(task)
    assert "\njudge: judge 0.88; corrected 0.38" in note
    assert "\nlenient: judge 1.00; corrected 0.25" in note
    assert task.log_path is not None
    assert set(ve.read_log(task.log_path).corrected) == {"judge", "lenient"}


def test_one_human_grade_is_too_few_and_the_summary_says_so(tmp_path):
    rows = [{**row, "grade": row["grade"] if i == 0 else None} for i, row in enumerate(ROWS)]
    task = task_of(tmp_path, rows=rows).eval()
    assert task.corrected == {}
    assert "Not corrected by human grades: 1 scored sample has one; correcting needs 2" in (
        ve.summary(task)
    )
    assert task.log_path is not None
    assert "accuracy_corrected" not in task.log_path.read_text()


def test_read_dataset_human_column_is_named_human(tmp_path):
    path = tmp_path / "qa.csv"
    lines = ["question,answer,grade,judge"] + [
        f"q{i},x,{h or ''},{j}" for i, (j, h) in enumerate(zip(JUDGE, HUMAN, strict=True))
    ]
    path.write_text("\n".join(lines) + "\n")
    data = ve.read_dataset(path, input="question", target="answer", human="grade")
    task = ve.Task(data, lambda x: "x", by_the_judge, dir=tmp_path, human="human").eval()
    assert task.corrected is not None
    assert next(iter(task.corrected.values())).corrected.value == pytest.approx(0.375)


@pytest.mark.parametrize(
    ("human", "rows", "message"),
    [
        ("grades", ROWS, "no row has a human grade in that column .*'grade', 'judge'"),
        ("grade", [{**ROWS[0], "grade": "good"}, *ROWS[1:]], "sample 1 has 'good'"),
        ("", ROWS, "must name the metadata column"),
    ],
    ids=["missing-column", "not-a-grade", "empty-name"],
)
def test_a_wrong_human_column_is_a_clear_error(tmp_path, human, rows, message):
    with pytest.raises(ve.ConfigError, match=message):
        ve.Task(rows, lambda x: "x", by_the_judge, dir=tmp_path, human=human)


#: The scripted judge passes every answer; people failed the even questions.
def biased_judge(request):
    if "[Submission]" not in request.prompt:
        return reply("The answer.", input_tokens=5, output_tokens=2)
    return reply("Looks right.\nGRADE: C", input_tokens=50, output_tokens=5)


async def test_a_model_judge_on_the_server_is_corrected(server, tmp_path):
    server.script(biased_judge)
    rows = [
        {"input": f"question {i}", "target": "x", "grade": ("I" if i % 2 == 0 else "C")}
        for i in range(10)
    ] + [{"input": f"question {i}", "target": "x"} for i in range(10, 30)]
    judge = ve.model_graded_qa(scorer_chat=openai(server, "judge"))
    task = ve.Task(rows, ve.generate(openai(server, "solver")), judge, dir=tmp_path, human="grade")
    await task.eval_async()
    assert task.metrics == {"accuracy": 1.0}
    assert task.corrected is not None
    result = next(iter(task.corrected.values()))
    assert result.corrected.value == pytest.approx(0.5)
    assert result.judge_bias == pytest.approx(0.5)
    assert result.corrected.low is not None
    assert result.corrected.low < 0.5


def test_a_rescored_log_is_corrected_by_its_samples_human_grades(tmp_path):
    """The human grades travel with the logged samples' metadata: re-scoring with
    `human=` corrects the new scorer's mean."""
    done = ve.Task(ROWS, lambda x: "x", ve.detect_includes(), dir=tmp_path).eval()
    assert done.log_path is not None
    again = ve.read_log(done.log_path).rescore(by_the_judge, human="grade")
    assert again.corrected is not None
    assert next(iter(again.corrected.values())).corrected.value == pytest.approx(0.375)
    assert again.log_path is not None
    assert ve.read_log(again.log_path).corrected


def test_vitals_score_human_corrects_the_new_scores(tmp_path, capsys):
    from vitals_engine.cli.parser import main

    done = ve.Task(ROWS, lambda x: "x", ve.detect_includes(), dir=tmp_path).eval()
    evals = tmp_path / "evals.py"
    evals.write_text("def by_the_judge(sample):\n    return sample.metadata['judge']\n")
    code = main(
        ["score", str(done.log_path), "--scorer", f"{evals}:by_the_judge", "--human", "grade"]
    )
    assert code == 0
    assert "judge 0.88; corrected 0.38" in capsys.readouterr().out
