"""Agent trajectories the mock model follows: tool calls in order, then a submission.

`trajectory(*steps, submit=...)` is a script (`MockServer.script()`, or `chat_mock`'s
through `MockReply`s) that answers an agent's n-th model call with its n-th step: a
tool call `(name, arguments)`, several at once (a list of them), or a text reply (a
str); after the last step it calls `submit` with the answer: a string, or a function
of the request (to submit what the last tool printed, say). Every provider's wire
format carries the calls: the same trajectory drives an agent over OpenAI's, Anthropic's
or Gemini's API.

Example:
    >>> from vitals_engine.testing import MockServer, trajectory
    >>> with MockServer() as server:
    ...     server.script(trajectory(("bash", {"cmd": "cat flag.txt"}), submit=last_tool_text))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from .brain import MockReply, MockRequest, MockToolCall

__all__ = ["Step", "last_tool_text", "trajectory"]

#: One step: a tool call (name, arguments), several at once, or a text reply.
Step = tuple[str, dict[str, Any]] | Sequence[tuple[str, dict[str, Any]]] | str


def last_tool_text(request: MockRequest) -> str:
    """What the last tool result of `request` says (its text): an answer to submit.

    Example:
        >>> trajectory(("bash", {"cmd": "cat flag.txt"}), submit=last_tool_text)
    """
    for message in reversed(request.messages):
        if message.role == "tool":
            return message.text.strip()
    return ""


def trajectory(
    *steps: Step,
    submit: str | Callable[[MockRequest], str] | None = None,
    tool: str = "submit",
    tokens: int = 20,
) -> Callable[[MockRequest], MockReply]:
    """A script answering an agent's model calls with `steps`, in order, then a call of the
    `tool` that submits (`submit`: the answer, or a function of the request giving it;
    None: a text reply "done" instead). Each reply reports `tokens` input and output
    tokens.

    Example:
        >>> script = trajectory(("bash", {"cmd": "ls"}), "Thinking.", submit="42")
    """

    def reply(request: MockRequest) -> MockReply:
        step = sum(1 for message in request.messages if message.role == "assistant")
        if step < len(steps):
            return _reply(steps[step], step, tokens)
        if submit is None:
            return MockReply(text="done", input_tokens=tokens, output_tokens=tokens)
        answer = submit(request) if callable(submit) else submit
        call = MockToolCall(f"call_{step}_{tool}", tool, {"answer": answer})
        return MockReply(
            tool_calls=[call], finish="tool_calls", input_tokens=tokens, output_tokens=tokens
        )

    return reply


def _reply(step: Step, n: int, tokens: int) -> MockReply:
    if isinstance(step, str):
        return MockReply(text=step, input_tokens=tokens, output_tokens=tokens)
    made = [
        MockToolCall(f"call_{n}_{i}_{name}", name, dict(arguments))
        for i, (name, arguments) in enumerate(_calls(step))
    ]
    return MockReply(
        tool_calls=made, finish="tool_calls", input_tokens=tokens, output_tokens=tokens
    )


def _calls(step: Step) -> list[tuple[str, dict[str, Any]]]:
    """A step's tool calls: one (name, arguments), or several."""
    if isinstance(step, tuple) and len(step) == 2 and isinstance(step[0], str):
        return [cast(tuple[str, dict[str, Any]], step)]
    return list(cast(Sequence[tuple[str, dict[str, Any]]], step))
