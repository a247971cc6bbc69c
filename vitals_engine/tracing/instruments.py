"""A run's metrics: the GenAI conventions' client histograms, and our counters.

- `gen_ai.client.token.usage` (histogram, `{token}`): each call's input and output
  tokens, told apart by `gen_ai.token.type`;
- `gen_ai.client.operation.duration` (histogram, seconds): each call, from the first
  attempt to the reply (or the error, with `error.type`), retries and waits included;
- `vitals.cost` (counter, USD): what the calls cost (those of unknown price add
  nothing);
- `vitals.retries` (counter): the retried attempts.

Each measurement carries the call's operation, provider, model(s) and role. The
buckets are the ones the conventions advise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..vocab.turns import TokenUsage
from .genai import ERROR_TYPE, OPERATION, PROVIDER, REQUEST_MODEL, RESPONSE_MODEL, ROLE
from .genai import prompt_tokens as whole_prompt

__all__ = ["Instruments"]

_TOKEN_BUCKETS: Sequence[float] = [4.0**k for k in range(14)]  # 1 .. 67,108,864
_SECOND_BUCKETS: Sequence[float] = [0.01 * 2**k for k in range(14)]  # 0.01 .. 81.92
_KEYS = (OPERATION, PROVIDER, REQUEST_MODEL, RESPONSE_MODEL, ROLE)


class Instruments:
    """The instruments of one run, made from its meter.

    Example:
        >>> instruments = Instruments(meter_provider.get_meter("vitals_engine"))
        >>> instruments.replied(attributes, TokenUsage(input=3, output=2), 0.4, 0.0001, 0)
    """

    __slots__ = ("cost", "duration", "retries", "tokens")

    def __init__(self, meter: Any) -> None:
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used by a model call, by type (input, output).",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="How long a model call took, retries and waits included.",
            explicit_bucket_boundaries_advisory=_SECOND_BUCKETS,
        )
        self.cost = meter.create_counter(
            "vitals.cost", unit="USD", description="What model calls cost, in US dollars."
        )
        self.retries = meter.create_counter(
            "vitals.retries", unit="{retry}", description="Retried model call attempts."
        )

    def replied(
        self,
        span_attributes: Mapping[str, Any],
        tokens: TokenUsage | None,
        seconds: float,
        cost: float | None,
        retries: int,
    ) -> None:
        """Record a call that got its reply."""
        attributes = {key: span_attributes[key] for key in _KEYS if key in span_attributes}
        self.duration.record(seconds, attributes)
        if tokens is not None:
            self.tokens.record(whole_prompt(tokens), {**attributes, "gen_ai.token.type": "input"})
            self.tokens.record(tokens.output, {**attributes, "gen_ai.token.type": "output"})
        if cost:
            self.cost.add(cost, attributes)
        if retries:
            self.retries.add(retries, attributes)

    def failed(
        self, span_attributes: Mapping[str, Any], error: str, seconds: float, retries: int
    ) -> None:
        """Record a call that ended in an error (of type `error`)."""
        attributes = {key: span_attributes[key] for key in _KEYS if key in span_attributes}
        attributes[ERROR_TYPE] = error
        self.duration.record(seconds, attributes)
        if retries:
            self.retries.add(retries, attributes)
