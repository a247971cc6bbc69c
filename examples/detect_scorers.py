"""The string-detection scorers side by side on the same results."""

import vitals_engine as ve

dataset = [
    {"input": "Pick a letter", "target": "C"},
    {"input": "Name the era", "target": "The Industrial Revolution"},
]
replies = {
    "Pick a letter": "ANSWER: C\nExplanation follows...",
    "Name the era": "The solution is:\nANSWER: The Industrial Revolution",
}
solver = ve.generate(ve.chat_mock(replies=lambda prompt: replies[prompt]))

scorers = {
    "includes": ve.detect_includes(),
    "match (any)": ve.detect_match(location="any"),
    "pattern": ve.detect_pattern(r"ANSWER:\s*(.+)"),
    "exact": ve.detect_exact(),
    "answer (line)": ve.detect_answer(format="line"),
    "answer (word)": ve.detect_answer(format="word"),
    "answer (letter)": ve.detect_answer(format="letter"),
}
task = ve.Task(dataset, solver=solver, scorer=ve.detect_includes(), name="detect-demo")
task.solve()
for label, scorer in scorers.items():
    task.set_scorer(scorer)
    task.score()
    print(f"{label:16} {task.get_samples()['score'].to_list()}  {task.measure()}")
print("log:", task.log())
