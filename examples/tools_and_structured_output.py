"""Tools and structured output: a chat that calls a Python function, and typed replies.

Runs against the local mock server, whose mock model calls a tool when the
prompt names it and answers structured-output requests with a value of the
requested shape.
"""

import msgspec

import vitals_engine as ve
from vitals_engine.testing import MockServer


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


class Verdict(msgspec.Struct):
    answer: int
    confident: bool


with MockServer() as server:
    chat = ve.chat_openai("gpt-demo", base_url=server.base_url(), api_key="demo")
    chat.register_tool(add)
    print(chat.chat("Use add to compute 19 and 23"))
    print([type(c).__name__ for t in chat.turns for c in t.contents])

    structured = ve.chat_openai("gpt-demo", base_url=server.base_url(), api_key="demo")
    print(structured.extract_data("What's 6*7?", type=Verdict))

    # The same as a solver: the result is JSON text, the value goes to solver_metadata.
    task = ve.Task(
        [{"input": "What's 6*7?", "target": "answer"}],
        solver=ve.generate_structured(structured, type=Verdict),
        scorer=ve.detect_includes(),
        name="structured-demo",
    )
    task.eval()
    print(task.get_samples().select("result", "solver_metadata", "score"))
