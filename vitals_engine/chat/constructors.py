"""Named constructors: `chat_mock()` now, one per provider as they arrive."""

from __future__ import annotations

from ..providers.mock import MockProvider, ReplyScript
from .chat import Chat

__all__ = ["chat_mock"]


def chat_mock(
    replies: ReplyScript | None = None,
    *,
    model: str = "mock-model",
    system_prompt: str | None = None,
    latency: float = 0.0,
) -> Chat:
    """A deterministic offline chat: the embedded default for examples and tests.

    It answers "What's A+B?" with the sum, grades model-graded prompts, and
    echoes anything else. `replies` scripts it: a function of the prompt text
    returning the reply (a string or a `Turn`), or a list of replies taken in
    call order. `latency` (seconds) simulates a slow model.

    Example:
        >>> chat_mock().chat("What's 2+3?")
        '2 + 3 = 5'
        >>> chat_mock(lambda prompt: "42").chat("Anything")
        '42'
    """
    return Chat(
        MockProvider(model=model, replies=replies, latency=latency), system_prompt=system_prompt
    )
