"""Quickstart: evaluate a (mock) model on simple arithmetic, offline.

Run with `make demo`, or `python examples/quickstart.py`.
"""

import vitals_engine as ve

task = ve.Task(
    dataset=[
        {"input": "What's 2+2?", "target": "4"},
        {"input": "What's 2+3?", "target": "5"},
        {"input": "What's 7*6?", "target": "42"},
        {"input": "What's 10-3?", "target": "6"},  # the target is wrong on purpose
    ],
    solver=ve.generate(ve.chat_mock(system_prompt="Answer with the result.")),
    scorer=ve.detect_includes(),
    name="simple-addition",
    epochs=2,
)

task.eval()

print(task.get_samples().select("id", "epoch", "input", "target", "result", "score"))
print(ve.summary(task))
