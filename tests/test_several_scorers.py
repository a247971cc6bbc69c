"""Several scorers per task: each scores every sample, has its own metrics and statistics,
its own column, its own `results.scores` entry in the log (as Inspect reads them), its own
comparison; their agreement is reported; judges of different scorers run at once."""

from __future__ import annotations

import json
import math

import anyio
import pytest

import vitals_engine as ve
from tests.helpers import killed_journal, openai
from tests.inspect_check import assert_inspect_reads
from vitals_engine.statistics.agreement import krippendorff_alpha
from vitals_engine.testing import reply

pytestmark = pytest.mark.anyio

SUMS = [
    {"input": "What's 2+2?", "target": "4"},
    {"input": "What's 2+3?", "target": "5"},
    {"input": "What's 2+4?", "target": "7"},
    {"input": "Say 4", "target": "4"},
]
#: The mock answers "2 + 2 = 4" and so on: includes finds 4 and 5 and "4" twice, exact none.
BOTH = {"includes": ve.detect_includes(), "exact": ve.detect_exact()}


def mock_task(tmp_path, scorer=BOTH, **options):
    return ve.Task(SUMS, ve.generate(ve.chat_mock()), scorer, dir=tmp_path, **options)


def test_each_scorer_scores_every_sample_with_its_own_metrics(tmp_path):
    task = mock_task(tmp_path).eval()
    samples = task.get_samples()
    includes = samples["score_includes"].to_list()
    exact = samples["score_exact"].to_list()
    assert task.scorer_names == ["includes", "exact"]
    assert set(exact) == {"I"}
    assert len(includes) == 4
    accuracy = sum(g == "C" for g in includes) / 4
    assert task.metrics_by_scorer == {
        "includes": {"accuracy": pytest.approx(accuracy)},
        "exact": {"accuracy": 0.0},
    }
    assert task.metrics == {"accuracy": pytest.approx(accuracy)}  # the primary's
    assert samples["score"].to_list() == includes
    assert samples["scorer"].unique().to_list() == ["includes"]


@pytest.mark.parametrize("log_format", ["json", "eval"])
def test_the_log_has_a_results_score_per_scorer_as_inspect_reads_them(tmp_path, log_format):
    task = mock_task(tmp_path, log_format=log_format).eval()
    assert task.log_path is not None
    assert_inspect_reads(task.log_path, task)
    logged = ve.read_log(task.log_path)
    assert logged.scorer_names == ["includes", "exact"]
    assert logged.metrics_by_scorer == task.metrics_by_scorer
    assert logged.metric_stats_by_scorer is not None
    assert logged.metric_stats_by_scorer["exact"]["accuracy"].n == 4
    for sample in logged.samples:
        assert list(sample.scores or {}) == ["includes", "exact"]
    assert logged.get_samples()["score_exact"].to_list() == ["I"] * 4
    header = logged.header
    assert [s.name for s in header.eval.scorers or []] == ["includes", "exact"]
    assert [s.scored_samples for s in header.results.scores] == [4, 4]


def test_the_scorers_agreement_is_in_the_results_and_the_summary(tmp_path):
    task = mock_task(tmp_path).eval()
    samples = task.get_samples()
    ratings = {n: samples[f"score_{n}"].to_list() for n in ("includes", "exact")}
    expected = krippendorff_alpha(ratings).value
    assert task.log_path is not None
    meta = json.loads(task.log_path.read_text())["results"]["metadata"]
    if math.isnan(expected):
        assert meta["scorers_alpha"] is None
    else:
        assert meta["scorers_alpha"] == pytest.approx(expected)
    (pair,) = meta["scorers_pairs"]
    assert pair["raters"] == ["includes", "exact"]
    agree = sum(a == b for a, b in zip(*ratings.values(), strict=True)) / 4
    assert pair["agreement"] == pytest.approx(agree)
    text = ve.summary(task)
    assert "Metrics by scorer:\n  includes: accuracy = " in text
    assert "\n  exact: accuracy = 0 " in text
    assert "scorers agree: alpha" in text


def test_a_list_names_scorers_by_their_labels_numbering_a_repeated_one(tmp_path):
    scorers = [ve.detect_includes(), ve.detect_includes(), ve.detect_exact()]
    task = mock_task(tmp_path, scorers).eval()
    first = task.scorer_names[0]
    assert task.scorer_names == [first, f"{first}_2", task.scorer_names[2]]
    assert task.scorer_names[2].startswith("detect_exact")
    assert task.metrics_by_scorer is not None
    assert task.metrics_by_scorer[first] == task.metrics_by_scorer[f"{first}_2"]


def test_a_list_of_one_is_that_scorer(tmp_path):
    task = mock_task(tmp_path, [ve.detect_includes()]).eval()
    assert "score_" not in " ".join(task.get_samples().columns)
    assert task.log_path is not None
    assert "metadata" not in json.loads(task.log_path.read_text())["results"]


def test_keywords_reach_the_scorers_that_take_them(tmp_path):
    seen: dict[str, object] = {}

    def strict(sample, threshold=0.5):
        seen["strict"] = threshold
        return "C"

    def lenient(sample, **options):
        seen["lenient"] = options
        return "I"

    task = mock_task(tmp_path, {"strict": strict, "lenient": lenient})
    task.eval(threshold=0.9)
    assert seen == {"strict": 0.9, "lenient": {"threshold": 0.9}}
    assert task.takes("threshold")


def test_an_unknown_keyword_names_every_scorer(tmp_path):
    def strict(sample, threshold=0.5):
        return "C"

    task = mock_task(tmp_path, {"strict": strict, "exact": ve.detect_exact()})
    with pytest.raises(ve.ConfigError, match="threshhold"):
        task.eval(threshhold=0.9)


def test_a_failing_scorer_fails_the_sample_with_its_own_error(tmp_path):
    def broken(sample):
        raise ValueError("no rubric for this one")

    task = mock_task(tmp_path, {"includes": ve.detect_includes(), "broken": broken})
    task.eval(fail_on_error=False)
    errors = task.get_samples()["error"].to_list()
    assert all(e is not None and "ValueError" in e and "no rubric" in e for e in errors)
    assert all("ExceptionGroup" not in e for e in errors)


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ([], "empty list"),
        ({}, "this one is empty"),
        ({"": ve.detect_includes()}, "non-empty strings"),
        ([ve.detect_includes(), "exact"], "Scorer 2 of the list: The scorer must be a function"),
        (
            [
                ve.detect_includes(),
                ve.vectorized_scorer(lambda frame: {"score": ["C"] * len(frame)}),
            ],
            "is a @vectorized_scorer",
        ),
    ],
    ids=["empty-list", "empty-dict", "bad-name", "not-a-function", "batch"],
)
def test_a_wrong_list_of_scorers_is_a_clear_error(tmp_path, scorer, message):
    with pytest.raises(ve.ConfigError, match=message):
        mock_task(tmp_path, scorer)


def test_set_scorer_takes_several_and_clears_the_scores(tmp_path):
    task = mock_task(tmp_path, ve.detect_includes()).eval()
    task.set_scorer(BOTH)
    assert task.metrics_by_scorer is None
    task.score()
    task.measure()
    assert task.metrics_by_scorer is not None
    assert list(task.metrics_by_scorer) == ["includes", "exact"]


def judges_script(request):
    if "[Submission]" not in request.prompt:
        return reply("It is 4.", input_tokens=10, output_tokens=2)
    grade = "C" if request.model == "judge-kind" else "I"
    return reply(f"GRADE: {grade}", input_tokens=100, output_tokens=3)


async def test_judges_of_different_scorers_grade_at_once_each_priced(server, tmp_path):
    server.script(judges_script)
    scorers = {
        "kind": ve.model_graded_qa(scorer_chat=openai(server, "judge-kind")),
        "harsh": ve.model_graded_qa(scorer_chat=openai(server, "judge-harsh")),
    }
    solver = ve.generate(openai(server, "solver"))
    task = ve.Task(SUMS, solver, scorers, dir=tmp_path)
    await task.eval_async()
    samples = task.get_samples()
    assert samples["score_kind"].to_list() == ["C"] * 4
    assert samples["score_harsh"].to_list() == ["I"] * 4
    assert samples["explanation_harsh"].to_list() == ["GRADE: I"] * 4
    cost = task.get_cost()
    scorer_rows = cost.filter(cost["role"] == "scorer")
    assert sorted(scorer_rows["model"].to_list()) == ["judge-harsh", "judge-kind"]
    assert scorer_rows["requests"].to_list() == [4, 4]
    assert task.log_path is not None
    assert_inspect_reads(task.log_path, task)
    logged = ve.read_log(task.log_path)
    judged = logged.records()[0]
    models = sorted(c.provider.model_id for c in judged.judge_chats)
    assert models == ["openai/judge-harsh", "openai/judge-kind"]
    # the log's usage is by role or by model: its judges' rows come from their chats
    logged_cost = logged.get_cost()
    logged_rows = logged_cost.filter(logged_cost["role"] == "scorer")
    columns = ["provider", "model", "requests", "input_tokens", "output_tokens", "cost"]
    assert logged_rows.select(columns).rows() == scorer_rows.select(columns).rows()


def test_compare_compares_each_scorer_both_runs_have(tmp_path):
    a = mock_task(tmp_path / "a").eval()
    b = mock_task(tmp_path / "b").eval()
    assert b.log_path is not None
    comparison = ve.compare(a, b.log_path)
    assert comparison.scorer == "includes"
    assert list(comparison.by_scorer) == ["exact"]
    assert comparison.by_scorer["exact"].metrics.row(0, named=True)["a"] == 0.0
    text = str(comparison)
    assert "Scorer includes:" in text
    assert "Scorer exact:" in text
    by_exact = ve.compare(a, b, scorer="exact")
    assert by_exact.scorer == "exact"
    assert list(by_exact.by_scorer) == ["includes"]
    with pytest.raises(ve.ConfigError, match="has no scorer 'judge'"):
        ve.compare(a, b, scorer="judge")


async def test_a_resumed_run_keeps_samples_scored_by_the_same_scorers(tmp_path):
    done = mock_task(tmp_path)
    await done.eval_async()
    journal = await killed_journal(done, keep=2)
    with pytest.raises(ve.ConfigError, match="the scorer 'exact', 'includes'"):
        await mock_task(tmp_path, ve.detect_includes()).eval_async(resume=journal)
    resumed = mock_task(tmp_path)
    await resumed.eval_async(resume=journal)
    assert resumed.get_samples()["score_exact"].to_list() == ["I"] * 4
    assert resumed.metrics_by_scorer is not None
    assert list(resumed.metrics_by_scorer) == ["includes", "exact"]


def test_the_scorers_of_a_set_borrow_the_runs_threads(tmp_path):
    """A set's sync members run on the run's threads (as many as `max_concurrency`), not
    on anyio's default 40: what the set reads while it is called."""
    from vitals_engine.engine.user_functions import run_threads

    seen = []

    async def looks(sample):
        seen.append(run_threads().total_tokens)
        return "C"

    scorers = {"looks": looks, "exact": ve.detect_exact()}
    mock_task(tmp_path, scorers).eval(max_concurrency=75)
    assert seen == [75] * len(SUMS)


async def test_scorers_that_wait_run_at_once_quick_ones_in_line(tmp_path):
    """Two scorers that each wait for the other finish only if they run at once (a
    handshake; run one after the other, the first would wait out its deadline); the
    quick built-in one beside them runs in line and is kept as well."""
    events: dict[tuple[int | str, str], anyio.Event] = {}

    def handshake(me: str, other: str):
        async def scorer(sample):
            events.setdefault((sample.id, me), anyio.Event()).set()
            with anyio.fail_after(10):
                await events.setdefault((sample.id, other), anyio.Event()).wait()
            return "C"

        return scorer

    scorers = {"a": handshake("a", "b"), "includes": ve.detect_includes(), "b": handshake("b", "a")}
    task = mock_task(tmp_path, scorers)
    await task.eval_async()
    samples = task.get_samples()
    assert "error" not in samples.columns
    assert samples["score_a"].to_list() == samples["score_b"].to_list() == ["C"] * 4
    assert task.scorer_names == ["a", "includes", "b"]
