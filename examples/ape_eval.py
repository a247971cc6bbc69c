"""An Python Eval ("ape"): hard Python and data-science questions, graded by a judge.

`ve.datasets.ape()` holds 31 questions with grading guidance. Each answer is
graded by a judge model as correct, partially correct or incorrect
(`model_graded_qa(partial_credit=True)`), as vitals does with its `are`
dataset.

This offline version uses the mock model for both the solver and the judge:
the mock mostly echoes the question back, so expect a low score. For a real
run, swap in real models, e.g. `ve.chat("anthropic/claude-sonnet-4-5")` as the
solver and `ve.chat("openai/gpt-4.1")` as the judge, or run the CLI:
`vitals eval my_ape_task.py --model openai/gpt-4.1-mini`.
"""

import vitals_engine as ve

questions = ve.datasets.ape()
print(questions.group_by("domain", "task").len().sort("domain", "task"))

task = ve.Task(
    dataset=questions,
    solver=ve.generate(ve.chat_mock(system_prompt="You are an expert Python developer.")),
    scorer=ve.model_graded_qa(partial_credit=True, scorer_chat=ve.chat_mock()),
    name="An-Python-Eval",
)
task.eval()

samples = task.get_samples()
print(samples.select("id", "domain", "task", "score").head(10))
print(samples.group_by("domain", "score").len().sort("domain", "score"))
print(task.metrics)
print(ve.summary(task))
