"""A chat read back from a log, whose conversation is rebuilt the first time it is used.

Reading a big log into a DataFrame makes one chat per sample; most are never
looked at. A `LoggedChat` knows its provider at once and converts the logged
messages into turns only when its turns or system prompt are first read.
"""

from __future__ import annotations

from collections.abc import Callable

from ..chat.chat import Chat
from ..chat.turns import Turn
from ..providers.base import Provider

__all__ = ["LoggedChat"]

Transcript = Callable[[], tuple[str | None, list[Turn]]]


class LoggedChat(Chat):
    """A `Chat` whose system prompt and turns come from `transcript()` on first use.

    Example:
        >>> chat = LoggedChat(provider, lambda: ("Be brief.", [Turn.user("Hi")]))
        >>> chat.turns          # converted now
        [Turn(role='user', ...)]
    """

    def __init__(self, provider: Provider, transcript: Transcript) -> None:
        super().__init__(provider)
        self._transcript: Transcript | None = transcript

    def _build(self) -> None:
        transcript, self._transcript = self._transcript, None
        if transcript is not None:
            self._stored_system, self._stored_turns = transcript()

    @property
    def _turns(self) -> list[Turn]:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self.__dict__.get("_transcript") is not None:
            self._build()
        return self._stored_turns

    @_turns.setter
    def _turns(self, value: list[Turn]) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self.__dict__.get("_transcript") is not None:
            self._build()
        self._stored_turns = value

    @property
    def _system_prompt(self) -> str | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self.__dict__.get("_transcript") is not None:
            self._build()
        return self._stored_system

    @_system_prompt.setter
    def _system_prompt(self, value: str | None) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        if self.__dict__.get("_transcript") is not None:
            self._build()
        self._stored_system = value
