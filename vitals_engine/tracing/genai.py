"""The attributes of a model call in OpenTelemetry's GenAI semantic conventions, and ours.

Names follow the conventions' current registry: the provider is `gen_ai.provider.name`
(which replaced `gen_ai.system`), token counts are `gen_ai.usage.*`, with
`gen_ai.usage.input_tokens` counting the whole prompt (cached tokens included, as the
conventions ask; our `TokenUsage.input` leaves them out). What the conventions do not
cover is ours, under `vitals.`: the call's cost in US dollars, its retries, the reply
cache, the wait for the endpoint's rate limits and for a provider batch, the role
(solver or scorer). No attribute ever holds a key, a header or a URL.

Example:
    >>> turn = Turn("assistant", [], tokens=TokenUsage(input=3, output=2), cost=0.001)
    >>> reply_attributes(turn)
    {'gen_ai.usage.input_tokens': 3, 'gen_ai.usage.output_tokens': 2, 'vitals.cost_usd': 0.001}
"""

from __future__ import annotations

from typing import Any

from ..vocab.turns import TokenUsage, Turn

__all__ = [
    "COST",
    "OPERATION",
    "PROVIDER",
    "REQUEST_MODEL",
    "RESPONSE_MODEL",
    "ROLE",
    "call_attributes",
    "provider_name",
    "reply_attributes",
]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
ERROR_TYPE = "error.type"
#: Ours: the call's cost in US dollars (left out when its price is unknown).
COST = "vitals.cost_usd"
#: Ours: the stage that made the call ("solver" or "scorer").
ROLE = "vitals.role"

#: Our providers' names as the conventions' well-known values (others: lower-cased).
_WELL_KNOWN = {"Google": "gcp.gemini", "Bedrock": "aws.bedrock", "Mock": "vitals.mock"}

#: Our finish reasons as the conventions' (and OpenAI's) words.
_FINISH = {"max_tokens": "length"}


def provider_name(name: str) -> str:
    """The `gen_ai.provider.name` of one of our providers (its `Provider.name`).

    Example:
        >>> provider_name("OpenAI"), provider_name("Google")
        ('openai', 'gcp.gemini')
    """
    return _WELL_KNOWN.get(name) or name.lower()


def call_attributes(provider: str, model: str, role: str | None) -> dict[str, Any]:
    """What is known of a call before it is made: the operation, provider, model, role.

    Example:
        >>> call_attributes("Anthropic", "claude-sonnet-4", "scorer")["gen_ai.provider.name"]
        'anthropic'
    """
    attributes: dict[str, Any] = {
        OPERATION: "chat",
        PROVIDER: provider_name(provider),
        REQUEST_MODEL: model,
    }
    if role is not None:
        attributes[ROLE] = role
    return attributes


def reply_attributes(turn: Turn) -> dict[str, Any]:
    """What a reply says of its call: the model that answered, its finish reason, its
    tokens and its cost."""
    attributes: dict[str, Any] = {}
    if turn.model:
        attributes[RESPONSE_MODEL] = turn.model
    if turn.finish_reason is not None:
        attributes[FINISH_REASONS] = (_FINISH.get(turn.finish_reason, turn.finish_reason),)
    tokens = turn.tokens
    if tokens is not None:
        attributes.update(token_attributes(tokens))
    if turn.cost is not None:
        attributes[COST] = turn.cost
    return attributes


def token_attributes(tokens: TokenUsage) -> dict[str, int]:
    """A call's tokens as the conventions count them (only the kinds it had, beyond input
    and output).

    Example:
        >>> token_attributes(TokenUsage(input=5, cached_input=10))["gen_ai.usage.input_tokens"]
        15
    """
    attributes = {
        INPUT_TOKENS: prompt_tokens(tokens),
        OUTPUT_TOKENS: tokens.output,
    }
    if tokens.cached_input:
        attributes[CACHE_READ_TOKENS] = tokens.cached_input
    if tokens.cache_write:
        attributes[CACHE_CREATION_TOKENS] = tokens.cache_write
    if tokens.reasoning:
        attributes[REASONING_TOKENS] = tokens.reasoning
    return attributes


def prompt_tokens(tokens: TokenUsage) -> int:
    """The whole prompt's tokens: those billed as input, read from and written to the
    provider's prompt cache."""
    return tokens.input + tokens.cached_input + tokens.cache_write
