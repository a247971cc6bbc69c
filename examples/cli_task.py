"""A task file for the `vitals` command line: a module-level `Task`, found and run by

    vitals eval examples/cli_task.py
    vitals eval examples/cli_task.py --epochs 3 --log-dir /tmp/logs
    vitals eval examples/cli_task.py --model openai/gpt-4.1-mini   # a real model, not the mock

`vitals eval` imports this file, finds the Task, runs it with a progress bar
and prints a summary table (metrics, samples, failures, cost, time, log path).
A file may also hold several tasks, or functions returning one
(`def arithmetic() -> ve.Task: ...`); `vitals eval FILE.py:name` picks one.

Running the file directly (`python examples/cli_task.py`) evaluates it too.
"""

import vitals_engine as ve

arithmetic = ve.Task(
    dataset=[
        {"input": "What's 2+2?", "target": "4"},
        {"input": "What's 12+30?", "target": "42"},
        {"input": "What's 9*9?", "target": "81"},
        {"input": "What's 100-58?", "target": "42"},
    ],
    solver=ve.generate(ve.chat_mock(system_prompt="Answer with the result.")),
    scorer=ve.detect_includes(),
    name="cli-arithmetic",
)

if __name__ == "__main__":
    arithmetic.eval()
    print(ve.summary(arithmetic))
