"""Epochs, and keyword arguments routed to the solver or scorer by name.

`eval(epochs=N)` runs every sample N times (one row per sample and epoch).
Other keyword arguments of `eval()` go to whichever of solver and scorer
declares them, so `task.eval(solver_chat=other_chat)` re-runs the same task
on another model.
"""

import vitals_engine as ve

task = ve.Task(
    dataset=[{"input": "What's 2+2?", "target": "4"}, {"input": "What's 9+1?", "target": "10"}],
    solver=ve.generate(ve.chat_mock(model="mock-a")),
    scorer=ve.detect_match(location="end"),
    epochs=3,
    name="epochs-demo",
)

task.eval()
print(task.get_samples().select("id", "epoch", "result", "score"))

# The same task on another "model": generate()'s solver declares `solver_chat`.
stubborn = ve.chat_mock(replies=lambda prompt: "I'd rather not say.", model="mock-b")
task.eval(solver_chat=stubborn, epochs=1)
print(task.metrics, task.get_cost()["model"].to_list())
