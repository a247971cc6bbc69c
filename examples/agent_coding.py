"""A coding agent, offline: fix a bug, and the scorer runs the tests in the sandbox.

Each sample lays out a small repository in its sandbox (`files`); the agent edits it
with the text editor tool, and the task's scorer runs the repository's tests in the same
sandbox before it is removed (`ve.sandbox()`). The model is the mock server's, scripted:
it opens the file, fixes the bug, runs the tests and submits.
"""

import vitals_engine as ve
from vitals_engine.testing import MockServer, trajectory

BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\nassert add(2, 3) == 5\nassert add(-1, 1) == 0\nprint('ok')\n"


async def tests_pass(solved: ve.SolvedSample) -> str:
    """C when the repository's tests pass in the sample's sandbox."""
    result = await ve.sandbox().exec(["python3", "test_calc.py"], timeout=60)
    return "C" if result.returncode == 0 else "I"


with MockServer(latency=0.02) as server:
    server.script(
        trajectory(
            ("text_editor", {"command": "view", "path": "calc.py"}),
            (
                "text_editor",
                {
                    "command": "str_replace",
                    "path": "calc.py",
                    "old_str": "a - b",
                    "new_str": "a + b",
                },
            ),
            ("bash", {"cmd": "python3 test_calc.py"}),
            submit="Fixed: add() subtracted.",
        )
    )
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="demo")
    task = ve.Task(
        [
            {
                "input": "The tests in test_calc.py fail. Fix calc.py so that they pass.",
                "target": "the tests pass",
                "files": {"calc.py": BUGGY, "test_calc.py": TESTS},
            }
        ],
        solver=ve.react(chat, tools=[ve.bash(), ve.text_editor()]),
        scorer=tests_pass,
        sandbox="bwrap",
        name="fix-the-bug",
    )
    task.eval(message_limit=30)
    print(ve.summary(task))
