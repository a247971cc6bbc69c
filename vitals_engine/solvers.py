"""Built-in solvers: send each sample's input to a chat."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import msgspec

from ._errors import ConfigError, SolverError, factory
from .chats.chat import Chat
from .samples import Solution
from .structured.schemas import schema_for

__all__ = ["generate", "generate_structured"]

ChatSource = Chat | Callable[[], Chat]


def _fresh_chat(source: Any) -> Chat:
    """A chat of its own for one sample: a clone, or what the factory makes."""
    if isinstance(source, Chat):
        return source.clone()
    if callable(source):
        chat = source()
        if not isinstance(chat, Chat):
            raise SolverError(
                f"The solver_chat factory returned a {type(chat).__name__}; it must return a Chat."
            )
        return chat
    raise ConfigError(
        f"`solver_chat` must be a Chat or a function returning one, not "
        f"{'None' if source is None else type(source).__name__}. "
        "For an offline run use ve.generate(ve.chat_mock())."
    )


def _prompt_parts(input: Any) -> tuple[Any, ...]:
    if isinstance(input, str):
        return (input,)
    if isinstance(input, list):
        return tuple(input)
    raise SolverError(
        f"generate() sends the input to the model as a prompt, so it must be a string or a "
        f"list of contents, not a {type(input).__name__}. Write a custom solver for "
        "structured inputs."
    )


class Generate:
    """The solver `generate()` returns: one fresh chat per sample, one prompt each.

    Example:
        >>> import asyncio
        >>> solver = ve.generate(ve.chat_mock())
        >>> solver
        <generate(mock/mock-model)>
        >>> isinstance(solver, ve.Generate)
        True
        >>> asyncio.run(solver("What's 2+2?")).result  # as a run calls it, per sample
        '2 + 2 = 4'
    """

    __name__ = "generate"

    def __init__(self, solver_chat: ChatSource | None) -> None:
        self.solver_chat = solver_chat

    @property
    def __vitals_label__(self) -> str:
        chat = self.solver_chat
        return f"generate({chat.provider.model_id if isinstance(chat, Chat) else ''})"

    async def __call__(self, input: Any, *, solver_chat: ChatSource | None = None) -> Solution:
        chat = _fresh_chat(solver_chat if solver_chat is not None else self.solver_chat)
        await chat.chat_async(*_prompt_parts(input))
        return Solution(chat.last_turn().text if chat.last_turn() else "", chat=chat)  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"<{self.__vitals_label__}>"


@factory("solver", "ve.generate(ve.chat_mock()), or solver=ve.generate(chat)")
def generate(solver_chat: ChatSource | None = None) -> Generate:
    """A solver that sends each input to a fresh copy of `solver_chat`.

    `solver_chat` is a Chat (cloned per sample, keeping its system prompt and
    tools) or a function returning a new Chat (for per-sample tool state). It
    can be replaced per run: `task.eval(solver_chat=other_chat)`.

    Example:
        >>> task = Task(dataset, solver=generate(chat_mock()), scorer=detect_includes())
    """
    if solver_chat is not None and not (isinstance(solver_chat, Chat) or callable(solver_chat)):
        raise ConfigError(
            "generate() needs a Chat or a function returning one, "
            f"not {type(solver_chat).__name__}."
        )
    return Generate(solver_chat)


class GenerateStructured(Generate):
    """The solver `generate_structured()` returns: one structured reply per sample.

    Example:
        >>> import asyncio
        >>> import msgspec
        >>> class Answer(msgspec.Struct):
        ...     answer: int
        >>> solver = ve.generate_structured(ve.chat_mock(), type=Answer)
        >>> isinstance(solver, ve.GenerateStructured), solver.type is Answer
        (True, True)
        >>> solution = asyncio.run(solver("What's 6*7?"))  # the mock fills the shape
        >>> solution.result, solution.metadata
        ('{"answer":1}', {'answer': 1})
    """

    __name__ = "generate_structured"

    def __init__(self, solver_chat: ChatSource | None, type: Any) -> None:
        super().__init__(solver_chat)
        self.type = type

    @property
    def __vitals_label__(self) -> str:
        chat = self.solver_chat
        return f"generate_structured({chat.provider.model_id if isinstance(chat, Chat) else ''})"

    async def __call__(  # type: ignore[override]
        self, input: Any, *, solver_chat: ChatSource | None = None, type: Any = None
    ) -> Solution:
        kind = type if type is not None else self.type
        chat = _fresh_chat(solver_chat if solver_chat is not None else self.solver_chat)
        value = await chat.extract_data_async(*_prompt_parts(input), type=kind)
        text = msgspec.json.encode(value).decode()
        return Solution(text, chat=chat, metadata=msgspec.to_builtins(value))


@factory("solver", "ve.generate_structured(chat, type=Answer)")
def generate_structured(
    solver_chat: ChatSource | None = None, type: Any = None
) -> GenerateStructured:
    """A solver that asks each input for a reply of a given shape.

    `type` is a msgspec Struct (or another type msgspec knows) or a JSON
    schema dict (validated against in full: JSON Schema draft 2020-12). The
    result is the reply as JSON text (so string scorers work); the parsed
    value goes to `solver_metadata`. A reply that does not validate fails its
    sample with an `ExtractionError` naming where and what, holding the raw
    reply; a schema dict that is not valid JSON Schema is a `ConfigError` here.

    Example:
        >>> class Answer(msgspec.Struct):
        ...     answer: int
        ...     reasoning: str
        >>> Task(dataset, generate_structured(chat_mock(), type=Answer), detect_includes())
    """
    if type is None:
        raise ConfigError("generate_structured() needs type=: a msgspec Struct or a JSON schema.")
    schema_for(type)  # fail now, not once per sample, on a type with no schema
    if solver_chat is not None and not (isinstance(solver_chat, Chat) or callable(solver_chat)):
        raise ConfigError(
            "generate_structured() needs a Chat or a function returning one, "
            f"not {builtins.type(solver_chat).__name__}."
        )
    return GenerateStructured(solver_chat, type)
