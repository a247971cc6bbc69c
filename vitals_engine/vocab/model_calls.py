"""The records of one model call: what was asked, and what happened to it.

- `ToolDef` and `ChatRequest` are what a chat hands a provider.
- `ModelCall` is what a sample's log keeps of each call: request, reply,
  timing, retries.
- `RetryNote` is one retried attempt of a call: when, why, how long it waited.
- `ReplyOrigin` is the call a cached reply first answered.
- `JournaledReply` is a reply as the run's journal keeps it the moment it arrives,
  keyed like the reply cache, so a resumed run answers that call again without
  sending it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from .turns import Turn

__all__ = ["ChatRequest", "JournaledReply", "ModelCall", "ReplyOrigin", "RetryNote", "ToolDef"]


class ToolDef(msgspec.Struct, frozen=True):
    """A tool the model may call: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


class ChatRequest(msgspec.Struct, frozen=True):
    """Everything one model call needs."""

    turns: list[Turn]
    system_prompt: str | None = None
    tools: list[ToolDef] = msgspec.field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class ReplyOrigin(msgspec.Struct, omit_defaults=True, frozen=True):
    """The call a cached reply first answered: its task, log, sample, epoch and role, and
    when."""

    task: str | None = None
    log: str | None = None
    sample: int | str | None = None
    epoch: int | None = None
    role: str | None = None
    at: float | None = None


class JournaledReply(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A reply as the run's journal keeps it, written the moment it arrives: which call
    it answered (the sample, its epoch, the role of the stage, the call's digest and its
    place among the stage's identical calls) and the reply.

    `call` is the reply cache's key of the request (`caching/keys.py`: provider, base
    URL, model, the model's parameters, the whole request and the epoch), so a prompt
    changed since is not answered from it; `nth` counts the identical calls before it
    in the same sample stage (0 for the first). `batch` is the provider batch that
    answered it (None: a live call), for its price.

    Example:
        >>> JournaledReply(sample=7, epoch=1, role="solver", call="5c0f...", turn=turn)
    """

    sample: int | str
    epoch: int
    role: str
    call: str
    nth: int = 0
    turn: Turn
    batch: str | None = None

    @property
    def key(self) -> tuple[int | str, int, str, str, int]:
        """What finds it: (sample, epoch, role, call, nth)."""
        return (self.sample, self.epoch, self.role, self.call, self.nth)


@dataclass(frozen=True, slots=True)
class RetryNote:
    """One retried attempt: when, of which model, why, and how long we waited.

    A sample's notes are `SampleRecord.retry_notes`.

    Example:
        >>> import asyncio
        >>> from vitals_engine.testing import MockServer
        >>> async def retries(task):
        ...     async with task.stream_async(progress=False) as samples:
        ...         return [note async for record in samples for note in record.retry_notes]
        >>> with MockServer() as server:
        ...     server.fail("429", retry_after=0.1)  # the first request
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     task = ve.Task([{"input": "What's 2+2?", "target": "4"}], ve.generate(chat),
        ...                    ve.detect_includes())
        ...     notes = asyncio.run(retries(task))
        >>> [(note.model, note.attempt, note.reason[:8]) for note in notes]
        [('openai/gpt-4.1-mini', 1, 'HTTP 429')]
    """

    at: float
    model: str
    attempt: int
    reason: str
    wait: float


@dataclass(slots=True)
class ModelCall:
    """One model call made for a sample: what was asked, what came back, when, retries."""

    role: str
    model_id: str
    request: ChatRequest
    reply: Turn | None
    started: float
    completed: float
    retries: list[RetryNote] = field(default_factory=list)
    error: str | None = None
    #: The provider's id of the batch that answered it (None: a live call).
    batch: str | None = None
    #: "read": answered from the cache (`cached_from` says by which earlier call);
    #: "write": sent, and its reply stored in the cache; None: no cache.
    cache: str | None = None
    cached_from: ReplyOrigin | None = None
    #: The call's settings besides its request's parameters, as the log's generate config
    #: records them (reasoning, prompt caching); None for most calls.
    config: dict[str, Any] | None = None
