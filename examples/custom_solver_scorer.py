"""Custom solvers, scorers and metrics: plain functions, sync or async.

A solver gets a sample's input (and the whole `Sample` if it declares a
`sample` parameter) and returns the result text, or a `Solution` with the
chat it used and metadata. A scorer gets a `SolvedSample` and returns a
grade ("C", "P", "I"), a number, a bool, or a `Score`.
"""

import polars as pl

import vitals_engine as ve

dataset = [
    {"input": "What's 2+2?", "target": "4", "difficulty": "easy"},
    {"input": "What's 12*12?", "target": "144", "difficulty": "medium"},
    {"input": "What's 3-5?", "target": "-2", "difficulty": "easy"},
]

model = ve.chat_mock(system_prompt="You are a calculator.")


async def calculator(input: str, sample: ve.Sample) -> ve.Solution:
    chat = model.clone()
    reply = await chat.chat_async(input)
    answer = reply.rsplit("=", 1)[-1].strip()
    return ve.Solution(answer, chat=chat, metadata={"difficulty": sample.metadata["difficulty"]})


def exact_number(sample: ve.SolvedSample) -> ve.Score:
    ok = sample.result == sample.target
    return ve.Score(
        "C" if ok else "I",
        answer=sample.result,
        explanation=f"expected {sample.target}, got {sample.result}",
    )


def share_correct(scores: pl.Series) -> float:
    return float((scores == "C").mean())


task = ve.Task(
    dataset,
    solver=calculator,
    scorer=exact_number,
    metrics={"share_correct": share_correct, "n": lambda scores: scores.len()},
    name="calculator",
)
task.eval()
print(task.metrics)
print(task.get_samples().select("id", "difficulty", "result", "score", "explanation"))
