"""Run the steps one at a time: solve once, then score, re-score and log.

`eval()` is `solve()` -> `score()` -> `measure()` -> `log()`. Running them
separately lets you try scorers without paying for the solver again.
"""

import vitals_engine as ve

task = ve.Task(
    dataset=[{"input": "What's 6*7?", "target": "42"}, {"input": "What's 1+1?", "target": "3"}],
    solver=ve.generate(ve.chat_mock()),
    scorer=ve.detect_includes(),
    name="stepwise",
)
task.solve()
task.score()
print("includes:", task.measure())

task.set_scorer(ve.detect_match(location="end"))  # keeps results, clears scores
task.score()
print("match:", task.measure())
print("log written to", task.log())
