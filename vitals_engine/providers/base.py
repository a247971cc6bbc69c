"""What every provider implements: one model call, turns in, an assistant turn out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .reasoning import Reasoning, log_config

if TYPE_CHECKING:
    from ..caching.options import Cache
    from ..pacing.batch_mode import Batch
    from ..pacing.limits import RateLimits
    from ..pacing.retry import Retry

__all__ = ["Provider"]


class Provider(ABC):
    """A model behind one wire format.

    A provider is immutable configuration (model, base URL, key, parameters)
    shared by every clone of a chat; it holds no conversation state.

    Example:
        >>> chat = ve.chat_anthropic("claude-sonnet-4-5", api_key="x")
        >>> chat.provider.name, chat.provider.model_id
        ('Anthropic', 'anthropic/claude-sonnet-4-5')
        >>> chat.clone().provider is chat.provider
        True
    """

    #: Display name used in cost tables and price lookups ("OpenAI", "Anthropic" ...).
    name: str = "Provider"
    #: Prefix of `provider/model` ids in logs ("openai", "anthropic", "google" ...).
    id_prefix: str = ""
    #: Whether this provider's batch API is built (a cloud platform that speaks a vendor's
    #: wire format does not send batches through the vendor's batch API).
    sends_batches: bool = True

    def __init__(self, model: str, base_url: str = "", params: dict[str, Any] | None = None):
        self.model = model
        self.base_url = base_url
        self.params = dict(params or {})
        #: This model's own rate limits and retry policy (None: the run's).
        self.rate_limits: RateLimits | None = None
        self.retry: Retry | None = None
        #: The most this model may cost in one run, in dollars (None: the run's
        #: `model_cost_budget`, if any).
        self.cost_budget: float | None = None
        #: This model's calls in provider batches: `Batch` options, False for never
        #: (even in a run in batch mode), None as the run says.
        self.batch: Batch | bool | None = None
        #: This model's replies in the cache: `Cache` options, False for never (even in
        #: a run with a cache), None as the run says.
        self.cache: Cache | bool | None = None
        #: How hard the model thinks (`reasoning=`: an effort or a token budget; None:
        #: the provider's default), mapped by each wire format to its own fields.
        self.reasoning: Reasoning = None

    @property
    def endpoint(self) -> tuple[str, str, str]:
        """(provider, base URL, model): the unit that rate limits belong to."""
        return (self.name, self.base_url, self.model)

    @property
    def priced_model(self) -> str:
        """The model name prices are looked up by before a reply names its model (the
        budget's holds, a timed-out attempt, a run's first guess): the model, unless a
        platform serves it under a name of the user's (an Azure deployment)."""
        return self.model

    def price_model(self, replied: str | None = None) -> str:
        """The name a call's price is looked up by in the price table: the model the reply
        names (`replied`), else `priced_model`. A platform whose prices differ by where the
        model runs says so here (Vertex AI's regional Claude: `regional/<model>`)."""
        return replied or self.priced_model

    @property
    def model_id(self) -> str:
        """`provider/model` as Inspect's logs name models."""
        return f"{self.id_prefix or self.name.lower()}/{self.model}"

    @property
    def reply_params(self) -> dict[str, Any]:
        """What decides this model's replies beyond the request: its parameters and its
        reasoning setting (the reply cache keys on them)."""
        if self.reasoning is None:
            return self.params
        return {**self.params, "reasoning": self.reasoning}

    def call_config(self, request: ChatRequest) -> dict[str, Any]:
        """What the log's model event records of a call's settings besides the request's
        own parameters: the reasoning setting as Inspect names it (`reasoning_effort`,
        `reasoning_tokens`), and what a wire format adds (prompt caching)."""
        return log_config(self.reasoning)

    def check_key(self) -> None:
        """Raise `AuthenticationError` naming what to set when this model needs an API key
        and has none. Called at the first request and before a run starts; building a chat
        never needs the key (so a task file imports, and `--model` can swap it). Default:
        a provider that needs no key."""
        return

    @abstractmethod
    async def generate(self, request: ChatRequest) -> Turn:
        """Send one request and return the assistant's turn, with tokens filled in."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r}>"
