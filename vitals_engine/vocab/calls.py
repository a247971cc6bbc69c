"""The records of one model call: what was asked, and what happened to it.

- `ToolDef` and `ChatRequest` are what a chat hands a provider.
- `ModelCall` is what a sample's log keeps of each call: request, reply,
  timing, retries.
- `RetryNote` is one retried attempt of a call: when, why, how long it waited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from .turns import Turn

__all__ = ["ChatRequest", "ModelCall", "RetryNote", "ToolDef"]


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


@dataclass(frozen=True, slots=True)
class RetryNote:
    """One retried attempt: when, of which model, why, and how long we waited."""

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
