"""A chat read back from a log, whose conversation is rebuilt the first time it is used.

Reading a big log into a DataFrame makes one chat per sample; most are never
looked at. A `LoggedChat` knows its provider at once and converts the logged
messages into turns only when its turns or system prompt are first read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..chats.chat import Chat
from ..providers.base import Provider
from ..vocab.turns import Turn

__all__ = ["LoggedChat"]

#: (what was logged, the chat's model id) -> (system prompt, turns)
Transcript = Callable[[Any, str], tuple[str | None, list[Turn]]]


class LoggedChat(Chat):
    """A `Chat` whose system prompt and turns come from `transcript(logged, model_id)` on
    first use. (A module-level function and its argument, not a closure: a big log makes
    one per sample, and a closure is three more objects for the garbage collector.)

    Example:
        >>> chat = LoggedChat(provider, lambda logged, model: (None, logged), [Turn.user("Hi")])
        >>> chat.turns          # converted now
        [Turn(role='user', ...)]
    """

    _transcript: Transcript | None = None  # while Chat.__init__ runs: its setters just store

    def __init__(self, provider: Provider, transcript: Transcript, logged: Any) -> None:
        super().__init__(provider)
        self._logged = logged
        self._transcript = transcript

    def _build(self) -> None:
        transcript, self._transcript = self._transcript, None
        if transcript is not None:
            self._stored_system, self._stored_turns = transcript(
                self._logged, self._provider.model_id
            )
            self._logged = None

    @property
    def _turns(self) -> list[Turn]:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self._transcript is not None:
            self._build()
        return self._stored_turns

    @_turns.setter
    def _turns(self, value: list[Turn]) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self._transcript is not None:
            self._build()
        self._stored_turns = value

    @property
    def _system_prompt(self) -> str | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self._transcript is not None:
            self._build()
        return self._stored_system

    @_system_prompt.setter
    def _system_prompt(self, value: str | None) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self._transcript is not None:
            self._build()
        self._stored_system = value
