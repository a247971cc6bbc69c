"""Vectorized solvers and scorers: functions that take every sample at once.

Declare them with `@ve.vectorized_solver` / `@ve.vectorized_scorer` (never guessed).
A vectorized solver gets the list of inputs and returns `{"result": [...]}` (and
optionally "solver_chat", "solver_metadata"); a vectorized scorer gets a polars
DataFrame of solved samples and returns `{"score": [...]}` (and optionally
"explanation", "answer", "scorer_metadata", "scorer_chat").
"""

import vitals_engine as ve


@ve.vectorized_solver
def shouting_bot(inputs: list[str]) -> dict:
    return {"result": [text.upper() for text in inputs]}


@ve.vectorized_scorer
def is_shouting(samples) -> dict:
    loud = [result.isupper() for result in samples["result"]]
    return {"score": ["C" if x else "I" for x in loud], "explanation": ["all caps"] * len(loud)}


task = ve.Task(
    [{"input": "hello", "target": "HELLO"}, {"input": "quiet please", "target": "QUIET PLEASE"}],
    solver=shouting_bot,
    scorer=is_shouting,
    name="batch-demo",
)
print(task.eval().metrics)
