"""What solvers and scorers may return, and the errors for what they may not."""

from __future__ import annotations

import pytest

import vitals_engine as ve

pytestmark = pytest.mark.anyio

DATA = [{"input": "What's 2+2?", "target": "4"}, {"input": "What's 2+3?", "target": "5"}]


def task_with(tmp_path, solver, scorer=None):
    return ve.Task(DATA, solver=solver, scorer=scorer or ve.detect_includes(), dir=tmp_path)


@pytest.mark.parametrize(
    "returned",
    [
        "4 or 5",
        ve.Solution("4 or 5"),
        {"result": "4 or 5", "solver_metadata": {"k": 1}},
    ],
    ids=["string", "Solution", "dict"],
)
async def test_solver_may_return_string_solution_or_dict(tmp_path, returned):
    """A solver returns a string, a Solution or a vitals-style dict."""

    async def solver(input):
        return returned

    task = task_with(tmp_path, solver)
    await task.eval_async()
    assert task.get_samples()["result"].to_list() == ["4 or 5", "4 or 5"]
    assert task.metrics == {"accuracy": 1.0}


async def test_numeric_result_becomes_text(tmp_path):
    """A number returned by a solver is kept as its text."""

    def solver(input):
        return 4

    task = task_with(tmp_path, solver)
    await task.eval_async()
    assert task.get_samples()["result"].to_list() == ["4", "4"]


async def test_sync_solver_and_scorer_run_in_threads(tmp_path):
    """Plain (sync) functions work as solver and scorer, and may use the sync chat API."""
    chat = ve.chat_mock()

    def solver(input):
        mine = chat.clone()
        return ve.Solution(mine.chat(input), chat=mine)

    def scorer(sample):
        return sample.result.endswith(sample.target)

    task = task_with(tmp_path, solver, scorer)
    await task.eval_async()
    assert task.get_samples()["score"].to_list() == [True, True]
    assert task.metrics == {"accuracy": 1.0}
    assert task.get_cost()["requests"].to_list() == [2]


async def test_solver_metadata_and_sample_are_available(tmp_path):
    """A solver that declares `sample` gets the Sample; its metadata lands in solver_metadata."""

    async def solver(input, sample):
        return ve.Solution(f"{sample.id}:{sample.epoch}", metadata={"seen": sample.metadata})

    task = ve.Task(
        [{"input": "a", "target": "1:1", "level": "easy"}],
        solver=solver,
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    frame = task.get_samples()
    assert frame["result"].to_list() == ["1:1"]
    assert frame["solver_metadata"].to_list() == [{"seen": {"level": "easy"}}]
    assert frame["level"].to_list() == ["easy"]


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (["4"], "solver solver returned a list; it must return a string .*, a Solution"),
        (None, "returned a NoneType"),
        ({"answer": "4"}, "a dict without 'result'"),
        (ve.Solution(["4"]), "result of type list"),
        (ve.Solution("4", chat="not a chat"), "solver_chat that is a str; it must be a Chat"),
    ],
)
async def test_wrong_solver_shape_is_a_clear_error(tmp_path, returned, message):
    """A solver returning the wrong shape stops the run with an error naming it."""

    async def solver(input):
        return returned

    with pytest.raises(ve.SolverError, match=message):
        await task_with(tmp_path, solver).eval_async()


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, "scorer scorer returned None"),
        ([1], "returned a list"),
        ({"value": "C"}, "a dict without 'score'"),
        (ve.Score(["C"]), "score value of type list"),
        (ve.Score("C", chat=42), "scorer_chat that is a int"),
    ],
)
async def test_wrong_scorer_shape_is_a_clear_error(tmp_path, returned, message):
    """A scorer returning the wrong shape stops the run with an error naming it."""

    async def scorer(sample):
        return returned

    with pytest.raises(ve.ScorerError, match=message):
        await task_with(tmp_path, ve.generate(ve.chat_mock()), scorer).eval_async()


async def test_scorer_may_return_value_score_or_dict(tmp_path):
    """Scorers return a bare value, a Score, or a dict with score/explanation/answer."""

    async def as_dict(sample):
        return {
            "score": "P",
            "explanation": "half",
            "answer": "four-ish",
            "scorer_metadata": {"x": 1},
        }

    task = task_with(tmp_path, ve.generate(ve.chat_mock()), as_dict)
    await task.eval_async()
    frame = task.get_samples()
    assert frame["score"].to_list() == ["P", "P"]
    assert frame["explanation"].to_list() == ["half", "half"]
    assert frame["answer"].to_list() == ["four-ish", "four-ish"]
    assert frame["scorer_metadata"].to_list() == [{"x": 1}, {"x": 1}]
    assert task.metrics == {"accuracy": 0.5}


async def test_numeric_and_custom_string_scores(tmp_path):
    """Numeric scores are averaged; custom grade letters stay strings with no accuracy."""

    async def numeric(sample):
        return 0.25 if sample.id == 1 else 0.75

    task = task_with(tmp_path, ve.generate(ve.chat_mock()), numeric)
    await task.eval_async()
    assert task.metrics == {"accuracy": 0.5}

    async def letters(sample):
        return "A"

    task.set_scorer(letters)
    await task.score_async()
    assert task.get_samples()["score"].dtype.is_(__import__("polars").String)
    assert task.measure() == {}


async def test_solver_must_be_callable_and_take_an_input(tmp_path):
    """Task() checks the solver is a function that takes the input."""
    with pytest.raises(ve.ConfigError, match="solver must be a function"):
        ve.Task(DATA, solver="generate", scorer=ve.detect_includes())

    async def no_args():
        return "x"

    with pytest.raises(ve.ConfigError, match="takes no positional argument"):
        ve.Task(DATA, solver=no_args, scorer=ve.detect_includes())


async def test_generate_without_a_chat_is_a_clear_error(tmp_path):
    """generate() with no chat fails the run at once, saying to pass a Chat."""
    task = task_with(tmp_path, ve.generate())
    with pytest.raises(ve.ConfigError, match="`solver_chat` must be a Chat"):
        await task.eval_async()


async def test_generate_with_a_factory_makes_a_chat_per_sample(tmp_path):
    """generate(factory) calls the factory once per sample for a fresh chat."""
    made = []

    def factory():
        chat = ve.chat_mock()
        made.append(chat)
        return chat

    task = task_with(tmp_path, ve.generate(factory))
    await task.eval_async(epochs=2)
    assert len(made) == 4
    assert all(len(c.turns) == 2 for c in made)


async def test_generate_clones_the_chat_for_each_sample(tmp_path):
    """generate(chat) leaves the given chat untouched and gives each sample 2 turns."""
    chat = ve.chat_mock(system_prompt="Be brief.")
    task = task_with(tmp_path, ve.generate(chat))
    await task.eval_async()
    assert chat.turns == []
    chats = task.get_samples()["solver_chat"].to_list()
    assert [len(c.turns) for c in chats] == [2, 2]
    assert chats[0] is not chats[1]
    assert chats[0].system_prompt == "Be brief."


async def test_generate_refuses_dict_inputs(tmp_path):
    """generate() cannot prompt with a dict input: the sample fails saying so."""
    task = ve.Task(
        [{"input": {"q": 1}, "target": "x"}],
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    with pytest.raises(ve.SolverError, match="must be a string or a list of contents"):
        await task.eval_async()


# -- vectorized functions -----------------------------------------------------------------------


async def test_batch_solver_gets_all_inputs_at_once(tmp_path):
    """A @vectorized_solver is called once with every input and returns results in order."""
    calls = []

    @ve.vectorized_solver
    def solver(inputs):
        calls.append(list(inputs))
        return {"result": [f"{i} -> 4" for i in inputs]}

    task = task_with(tmp_path, solver)
    await task.eval_async(epochs=2)
    assert calls == [["What's 2+2?"] * 2 + ["What's 2+3?"] * 2]
    assert task.get_samples()["result"].to_list()[0] == "What's 2+2? -> 4"


async def test_batch_scorer_gets_a_frame_of_solved_samples(tmp_path):
    """A @vectorized_scorer receives a DataFrame of solved samples and returns one score each."""

    @ve.vectorized_scorer
    async def scorer(samples, *, grade="C"):
        assert samples.columns[:4] == ["id", "epoch", "input", "target"]
        return {"score": [grade] * samples.height, "explanation": ["ok"] * samples.height}

    task = task_with(tmp_path, ve.generate(ve.chat_mock()), scorer)
    await task.eval_async(grade="I")
    assert task.get_samples()["score"].to_list() == ["I", "I"]
    assert task.get_samples()["explanation"].to_list() == ["ok", "ok"]


async def test_batch_output_of_the_wrong_length_is_an_error(tmp_path):
    """A vectorized solver returning fewer results than inputs is an error naming the counts."""

    @ve.vectorized_solver
    def solver(inputs):
        return {"result": ["only one"]}

    with pytest.raises(ve.SolverError, match="returned 1 value for 'result'; expected 2"):
        await task_with(tmp_path, solver).eval_async()


async def test_batch_role_mismatch_is_an_error(tmp_path):
    """A @vectorized_scorer given as solver is refused."""

    @ve.vectorized_scorer
    def scorer(samples):
        return ["C"] * samples.height

    with pytest.raises(ve.ConfigError, match="@vectorized_scorer was given as the solver"):
        ve.Task(DATA, solver=scorer, scorer=ve.detect_includes())


@pytest.mark.parametrize("log_format", ["json", "eval"])
@pytest.mark.parametrize(
    "returned",
    ["bad\udcff", ve.Solution("bad\udcff"), {"result": "bad\udcff"}],
    ids=["string", "Solution", "dict"],
)
async def test_a_lone_surrogate_in_a_result_is_written_escaped(tmp_path, returned, log_format):
    """Text decoded with errors="surrogateescape" holds lone surrogates, which UTF-8 cannot
    hold: the result is kept with the surrogate written as its escape, the log is written
    and reads back, and the run goes on."""

    async def solver(input):
        return returned

    async def scorer(sample):
        return ve.Score("I", answer="odd\udcfe", explanation="saw \udcfd")

    task = ve.Task(DATA, solver=solver, scorer=scorer, dir=tmp_path, log_format=log_format)
    await task.eval_async()
    frame = task.get_samples()
    assert frame["result"].to_list() == ["bad\\udcff", "bad\\udcff"]
    logged = ve.read_log(task.log_path).get_samples()
    assert logged["result"].to_list() == ["bad\\udcff", "bad\\udcff"]
    assert logged["answer"].to_list() == ["odd\\udcfe", "odd\\udcfe"]
