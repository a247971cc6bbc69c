"""`react()`: an agent that reasons and acts with tools until it submits an answer.

Each sample gets a chat of its own (a clone of the one given) with the tools and a
`submit(answer)` tool. The loop, one model call a step:

- a reply that calls tools: they run (side by side), their results go back;
- a call of `submit`: its answer is the sample's result. With `attempts=k` (k > 1),
  the task's scorer grades it: a wrong one is answered "incorrect" and the loop goes
  on, at most k submissions in all;
- a reply with no tool call: the model is asked to go on (`continue_message`), and
  after `max_steps` steps without a submission the last reply is the result.

The sample's limits (`eval(message_limit=, token_limit=, time_limit=, working_limit=,
cost_limit=)`) stop the loop wherever it is (the call or tool in flight too); the
sample is then scored on its last reply, and its conversation is logged as it was.
Works with every provider, streaming or not, and with the reply cache; batch mode is
refused (an agent's next step waits on its last reply: hours per step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import ConfigError, SolverError
from ..chats.chat import Chat
from ..chats.tools import Tool, tool_from_function
from ..pacing.scope import current_scope
from ..samples import Sample, Solution
from ..vocab.turns import ContentToolRequest, ContentToolResult, Turn

__all__ = ["React", "react"]

DEFAULT_PROMPT = """\
You are a helpful assistant attempting to complete a task. You have tools to act with: \
use them, one step at a time, and look at what each gives back before your next step. \
When you have the answer, call the `submit()` tool with it; only your submitted answer \
is graded."""

DEFAULT_CONTINUE = (
    "Please go on with the next step, using your best judgement. When you believe you have "
    "completed the task, call the `submit()` tool with your answer."
)

DEFAULT_INCORRECT = "Your submission was incorrect. Please go on and find the correct answer."


def _submit(answer: str) -> str:
    """Submit your final answer for grading. Call it once you are done.

    Args:
        answer: Your answer.
    """
    return answer


class React:
    """The solver `react()` returns (see the module docstring).

    Example:
        >>> solver = ve.react(ve.chat_mock(), tools=[ve.bash()])
        >>> solver
        <react(mock/mock-model, tools=bash)>
    """

    __name__ = "react"

    def __init__(
        self,
        chat: Chat,
        tools: Sequence[Tool],
        *,
        attempts: int,
        prompt: str | None,
        submit: str,
        continue_message: str,
        incorrect_message: str,
        max_steps: int,
    ) -> None:
        self.chat = chat
        self.tools = tuple(tools)
        self.attempts = attempts
        self.prompt = prompt
        self.submit = submit
        self.continue_message = continue_message
        self.incorrect_message = incorrect_message
        self.max_steps = max_steps

    @property
    def __vitals_label__(self) -> str:
        names = ",".join(tool.name for tool in self.tools)
        return f"react({self.chat.provider.model_id}, tools={names})"

    async def __call__(self, input: Any, *, sample: Sample | None = None) -> Solution:
        chat = self._agent_chat()
        scope = current_scope()
        _refuse_batch_mode(scope, chat)
        if scope is not None and scope.limits is not None:
            scope.limits.chat = chat  # the conversation a limit leaves, for the log
        grade = scope.grade if scope is not None and self.attempts > 1 else None
        answer = await self._loop(chat, input, grade)
        return Solution(answer, chat=chat)

    def _agent_chat(self) -> Chat:
        chat = self.chat.clone()
        if self.prompt is not None:
            chat.system_prompt = self.prompt
        for tool in self.tools:
            chat.add_tool(tool)
        chat.add_tool(tool_from_function(_submit, name=self.submit))
        return chat

    async def _loop(self, chat: Chat, input: Any, grade: Any) -> str:
        submissions = 0
        reply = await chat.step_async(*_prompt(input))
        for _ in range(self.max_steps):
            requests = reply.tool_requests
            if not requests:
                reply = await chat.step_async(self.continue_message)
                continue
            submitted = _submitted(requests, self.submit)
            results = await chat.run_tools_async(reply)
            if submitted is not None:
                submissions += 1
                if grade is None or submissions >= self.attempts or await grade(submitted):
                    return submitted
                _answer_incorrect(results, self.submit, self.incorrect_message)
            reply = await chat.step_async()
        return reply.text

    def __repr__(self) -> str:
        return f"<{self.__vitals_label__}>"


def _refuse_batch_mode(scope: Any, chat: Chat) -> None:
    stacks = scope.stacks if scope is not None else None
    batches = getattr(stacks, "batches", None)
    if batches is not None and batches.takes(chat.provider):
        raise ConfigError(
            "react() does not go with batch mode: each step waits on the last reply, and a "
            "batch answers within hours. Run the agent's task without batch=."
        )


def _prompt(input: Any) -> tuple[Any, ...]:
    if isinstance(input, str):
        return (input,)
    if isinstance(input, list):
        return tuple(input)
    raise SolverError(
        f"react() sends the input to the model as its task, so it must be a string or a "
        f"list of contents, not a {type(input).__name__}."
    )


def _submitted(requests: Sequence[ContentToolRequest], submit: str) -> str | None:
    """The answer of the first call of the submit tool among `requests` (None: none)."""
    for request in requests:
        if request.name == submit:
            answer = (request.arguments or {}).get("answer")
            return answer if isinstance(answer, str) else str(answer or "")
    return None


def _answer_incorrect(results: Turn, submit: str, message: str) -> None:
    """The submit tool's result says the answer was wrong (the model sees that)."""
    contents = results.contents
    for i, content in enumerate(contents):
        if isinstance(content, ContentToolResult) and content.name == submit:
            contents[i] = ContentToolResult(content.id, content.name, value=message)


def react(
    chat: Chat,
    *,
    tools: Sequence[Tool] = (),
    attempts: int = 1,
    prompt: str | None = DEFAULT_PROMPT,
    submit: str = "submit",
    continue_message: str = DEFAULT_CONTINUE,
    incorrect_message: str = DEFAULT_INCORRECT,
    max_steps: int = 100,
) -> React:
    """An agent solver: the model calls `tools` until it calls `submit(answer)`.

    Args:
        chat: the model (each sample talks to a clone of it).
        tools: what it can use: `ve.bash()`, `ve.python()`, `ve.text_editor()` (in the
            sample's sandbox, `Task(sandbox=)`), or tools of one's own (`Tool`s, e.g.
            `tool_from_function(f)`).
        attempts: how many answers it may submit: past a wrong one (as the task's
            scorer grades it) it is told so and goes on.
        prompt: its system prompt (None: the chat's own).
        submit: the name of the tool it answers with.
        continue_message: what it is told after a reply that calls no tool.
        incorrect_message: what it is told after a wrong answer.
        max_steps: model calls without a submission after which the last reply is the
            answer (the sample's limits usually stop it first).

    Example:
        >>> task = ve.Task(
        ...     [{"input": "What is in notes.txt?", "target": "flag{x}",
        ...       "files": {"notes.txt": "flag{x}"}}],
        ...     solver=ve.react(ve.chat_anthropic("claude-sonnet-4-5"), tools=[ve.bash()]),
        ...     scorer=ve.detect_includes(),
        ...     sandbox="bwrap",
        ... )
    """
    if not isinstance(chat, Chat):
        raise ConfigError(f"react() needs a Chat to act with, not {type(chat).__name__}.")
    if chat.provider.batch:
        raise ConfigError(
            "react() does not go with batch mode: each step waits on the last reply, and a "
            "batch answers within hours. Give the agent a live chat (batch=False)."
        )
    for tool in tools:
        if not isinstance(tool, Tool):
            raise ConfigError(
                f"react(tools=...) takes Tools (ve.bash(), ve.python(), "
                f"tool_from_function(f) ...), not {type(tool).__name__}."
            )
    _check_whole(attempts, "attempts")
    _check_whole(max_steps, "max_steps")
    return React(
        chat,
        tools,
        attempts=attempts,
        prompt=prompt,
        submit=submit,
        continue_message=continue_message,
        incorrect_message=incorrect_message,
        max_steps=max_steps,
    )


def _check_whole(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"react({name}=...) takes a whole number of at least 1, not {value!r}.")
