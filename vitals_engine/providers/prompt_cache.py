"""Anthropic's prompt caching: where a request marks the prefix to keep in the cache.

Anthropic caches a prompt's prefix up to a `cache_control` breakpoint, for 5 minutes
(refreshed by each read) or for an hour. Writing costs more than plain input (1.25x
for 5 minutes, 2x for an hour); reading costs a tenth. A prefix shorter than the
model's minimum (1,024 tokens for most models) is not cached at all.

The chat's `prompt_cache=` setting:

- "auto" (the default): a breakpoint at the end of the prefix the samples of a task
  share (the tools, then the system prompt) when it is long enough to be cached, and one
  at the end of the conversation so far when the request continues a conversation (a
  multi-turn solver, a tool loop) and it is long enough;
- "5m" / "1h": the same breakpoints, whatever the length, with that lifetime;
- None: no breakpoint.

A request whose system prompt or tools already carry `cache_control` (hand-written in
`params`) is left as it is. OpenAI and Gemini cache by themselves: their replies count
the cached tokens, which are priced as such.

Example:
    >>> plan = cache_plan(request, "auto", "claude-sonnet-4-5")
    >>> plan.shared, plan.conversation
    (True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from .._errors import ConfigError
from ..vocab.model_calls import ChatRequest

__all__ = ["PromptCache", "cache_plan", "mark", "min_cacheable", "prompt_cache_setting"]

PromptCache = Literal["auto", "5m", "1h"] | None
_SETTINGS = ("auto", "5m", "1h", None)
_CHARS_PER_TOKEN = 4
_LARGER_MINIMUM = re.compile(r"^claude-(opus-4-[5-9]|haiku-4-5|[a-z]+-[5-9])")
_SMALLER_HAIKU = re.compile(r"^claude-3(-5)?-haiku")


def prompt_cache_setting(value: Any) -> PromptCache:
    """`value` checked as a `prompt_cache=` setting."""
    if value not in _SETTINGS:
        raise ConfigError(
            f"prompt_cache={value!r}: one of 'auto' (cache the shared prefix when it is long "
            "enough), '5m', '1h' (always, with that lifetime) or None (never)."
        )
    return value


def min_cacheable(model: str) -> int:
    """The fewest tokens Anthropic caches a prefix of, for `model`."""
    if _LARGER_MINIMUM.match(model):
        return 4096
    if _SMALLER_HAIKU.match(model):
        return 2048
    return 1024


@dataclass(frozen=True, slots=True)
class CachePlan:
    """Where a request's breakpoints go: after the shared prefix (tools and system
    prompt), after the conversation so far; with which lifetime."""

    shared: bool
    conversation: bool
    ttl: str | None  # "1h", or None for the default 5 minutes

    @property
    def any(self) -> bool:
        return self.shared or self.conversation


_NONE = CachePlan(False, False, None)


def _chars(request: ChatRequest) -> tuple[int, int]:
    """(characters of the shared prefix, characters of the conversation)."""
    shared = len(request.system_prompt or "")
    if request.tools:
        shared += len(msgspec.json.encode([t.parameters for t in request.tools]))
        shared += sum(len(t.name) + len(t.description) for t in request.tools)
    return shared, sum(len(t.text) for t in request.turns)


def cache_plan(request: ChatRequest, setting: PromptCache, model: str) -> CachePlan:
    """Where `request`'s breakpoints go under `setting`, for `model`."""
    if setting is None:
        return _NONE
    has_prefix = bool(request.system_prompt or request.tools)
    continues = len(request.turns) > 1
    ttl = "1h" if setting == "1h" else None
    if setting != "auto":
        return CachePlan(has_prefix, continues, ttl)
    least = min_cacheable(model) * _CHARS_PER_TOKEN
    shared, conversation = _chars(request)
    return CachePlan(
        has_prefix and shared >= least, continues and shared + conversation >= least, ttl
    )


def _marked(blocks: Any) -> bool:
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and "cache_control" in b for b in blocks
    )


def mark(body: dict[str, Any], plan: CachePlan) -> None:
    """Put `plan`'s breakpoints into a Messages API request `body` (changed in place)."""
    if not plan.any or _marked(body.get("system")) or _marked(body.get("tools")):
        return
    control: dict[str, str] = {"type": "ephemeral"}
    if plan.ttl:
        control["ttl"] = plan.ttl
    if plan.shared:
        system = body.get("system")
        if isinstance(system, str) and system:
            body["system"] = [{"type": "text", "text": system, "cache_control": control}]
        elif body.get("tools"):
            body["tools"][-1] = {**body["tools"][-1], "cache_control": control}
    messages = body.get("messages")
    if plan.conversation and messages:
        last = messages[-1]
        content = last["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if content:
            content = [*content[:-1], {**content[-1], "cache_control": control}]
            messages[-1] = {**last, "content": content}
