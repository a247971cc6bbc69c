"""The key of a model call in the cache: a digest of everything that decides its reply.

That is the provider, its base URL and model, the model's own parameters, and the
whole request (system prompt, each turn's role and contents, tools, output schema,
parameters), with the sample's epoch and the call's place among the identical calls
of its sample stage, so epochs and repeated calls stay independent draws. What a
turn records about its own call (tokens, cost, timing) is left out: a conversation
replayed from the cache has the same key as the one first sent. Headers and API keys
are never part of it. A lone surrogate in the request (`vocab/text.py`) counts as its
escape, the form a log or journal holds it in.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ..vocab.model_calls import ChatRequest
from ..vocab.text import writable

__all__ = ["KEY_VERSION", "repeated", "reply_key"]

#: Changes when what goes into a key does: an older store's entries are then missed.
KEY_VERSION = 1

_encode = msgspec.msgpack.Encoder(order="deterministic").encode


def reply_key(
    provider: str,
    base_url: str,
    model: str,
    request: ChatRequest,
    *,
    model_params: dict[str, Any] | None = None,
    epoch: int = 1,
) -> str:
    """The cache key of one call (hex); see `repeated` for a call made again.

    Example:
        >>> reply_key("OpenAI", "https://api.openai.com/v1", "gpt-4.1", request, epoch=2)
        '5c0f...'
    """
    parts = (
        KEY_VERSION,
        provider,
        base_url.rstrip("/"),
        model,
        model_params or {},
        request.system_prompt,
        [(turn.role, turn.contents) for turn in request.turns],
        request.tools,
        request.output_schema,
        request.params,
        epoch,
    )
    try:
        data = _encode(parts)
    except UnicodeEncodeError:  # a lone surrogate: keyed as its escape
        data = _encode(writable(parts))
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def repeated(key: str, nth: int) -> str:
    """The key of the `nth` call (from 0) with key `key` in one sample stage: a solver
    that asks the same thing three times gets three replies, as it would live.

    Example:
        >>> repeated(key, 0) == key
        True
    """
    if nth == 0:
        return key
    return hashlib.blake2b(f"{key}#{nth}".encode(), digest_size=20).hexdigest()
