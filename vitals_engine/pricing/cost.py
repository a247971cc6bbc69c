"""What a call costs, at the prices of the table (`table.py`).

A call's cost is what its provider bills for it:

    input x input price + cached_input x cached_input price + output x output price
    + 5-minute cache writes x cache_write + 1-hour cache writes x cache_write_1h
    (all of that times the provider's batch share for a batched call)
    + web_searches x web_search / 1000

Invariants:

- Unknown is `None`, never 0: a model with no price, a batched call on a provider with
  no batch share, a service tier the model has no price for, 1-hour cache writes on a
  model that prices 5-minute writes but not 1-hour ones, and web searches on a model
  with no search fee all make the cost `None`.
- A missing cache price is no guess either but the provider's rule: no cache-read price
  means cached input costs the input price, no cache-write price means writes cost the
  input price (OpenAI and Gemini cache without a write charge).
- Long context (`long_context`): once a call's prompt (`TokenUsage.prompt`: input +
  cached_input + cache_write) exceeds `above` tokens, the whole call is billed at the
  long-context prices; a long-context cache price the table leaves out is the standard
  one scaled like input.
- Service tiers (`tiers`): "default", "standard", "auto" and None are the standard
  prices; "batch" (Anthropic's word) is a batched call; any other tier is priced from the
  model's `tiers`, its missing cache prices scaled like its input, and a tier with long
  context scales each price by the model's long-context ratio. The batch share applies
  on top of everything but the per-request web search fee.
- `find_price` is memoised (one lookup per model call), and `cost_of` on a plain call (no
  cache writes, web searches or tier, prompt under any long-context threshold) takes a
  fast path: the schema-1 formula after four checks; the rest is in `_full_cost`.
"""

from __future__ import annotations

from typing import NamedTuple

from ..vocab.turns import TokenUsage
from .table import STANDARD_TIERS, LongContext, Price, batch_share, find_price

__all__ = ["cost_of"]


def cost_of(
    provider: str,
    model: str,
    tokens: TokenUsage,
    *,
    batch: bool = False,
    tier: str | None = None,
) -> float | None:
    """USD cost of `tokens` on `model`, sent in a batch if `batch`, served by service tier
    `tier` (as the provider's reply names it; None: the standard one), or None when a
    price it needs is unknown.

    Example:
        >>> cost_of("OpenAI", "gpt-5-mini", TokenUsage(input=1000, output=100), tier="flex")
        0.000225
    """
    price = find_price(provider, model)
    if price is None:
        return None
    long = price.long_context
    if (
        (tier is None or tier in STANDARD_TIERS)
        and not tokens.cache_write
        and not tokens.web_searches
        and (long is None or tokens.input + tokens.cached_input <= long.above)
    ):  # the plain call, the hot path: input, cached input and output at standard prices
        cached = price.cached_input if price.cached_input is not None else price.input
        dollars = (
            tokens.input * price.input + tokens.cached_input * cached + tokens.output * price.output
        ) / 1_000_000
        if not batch:
            return dollars
        share = batch_share(provider)
        return None if share is None else share * dollars
    return _full_cost(price, provider, tokens, batch, tier)


def _full_cost(
    price: Price, provider: str, tokens: TokenUsage, batch: bool, tier: str | None
) -> float | None:
    """`cost_of` a call with cache writes, long context, a service tier or web searches."""
    if tier is not None:
        tier = tier.lower()
        if tier == "batch":
            batch, tier = True, None
        elif tier in STANDARD_TIERS:
            tier = None
    share = 1.0
    if batch:
        found = batch_share(provider)
        if found is None:
            return None
        share = found
    long = price.long_context
    if long is not None and tokens.prompt <= long.above:
        long = None
    rates = _rates(price, tier, long)
    dollars = None if rates is None else _tokens_cost(rates, tokens)
    if dollars is None:
        return None
    dollars *= share
    if tokens.web_searches:
        if price.web_search is None:
            return None
        dollars += tokens.web_searches * price.web_search / 1000
    return dollars


class _Rates(NamedTuple):
    """USD per million tokens of each kind, every fallback resolved."""

    input: float
    output: float
    cached_input: float
    cache_write: float
    cache_write_1h: float | None  # None: unknown


def _tokens_cost(rates: _Rates, tokens: TokenUsage) -> float | None:
    """USD of `tokens` at `rates`, None if they hold 1-hour writes of unknown price."""
    hour = tokens.cache_write_1h
    dollars = tokens.input * rates.input + tokens.cached_input * rates.cached_input
    dollars += tokens.output * rates.output + (tokens.cache_write - hour) * rates.cache_write
    if hour:
        if rates.cache_write_1h is None:
            return None
        dollars += hour * rates.cache_write_1h
    return dollars / 1_000_000


def _standard(price: Price) -> _Rates:
    """The standard rates of `price`."""
    inp = price.input
    cached = price.cached_input if price.cached_input is not None else inp
    write = price.cache_write if price.cache_write is not None else inp
    write_1h = price.cache_write_1h
    if write_1h is None and price.cache_write is None:
        write_1h = inp  # no write charge at all (with 5-minute writes priced alone: unknown)
    return _Rates(inp, price.output, cached, write, write_1h)


def _rates(price: Price, tier: str | None, long: LongContext | None) -> _Rates | None:
    """The rates of a call on service tier `tier` (None: standard), with long context if
    `long`, or None when the tier has no price."""
    base = _standard(price)
    rates = base
    if tier is not None:
        tiered = price.tiers.get(tier) if price.tiers else None
        if tiered is None:
            return None
        rates = _like(base, tiered.input, tiered.output, tiered.cached_input)
    if long is not None:
        longs = _like(base, long.input, long.output, long.cached_input, long)
        if rates is base:
            return longs
        rates = _tier_at_length(rates, longs, base)
    return rates


def _like(
    base: _Rates,
    input: float,
    output: float,
    cached_input: float | None,
    own: LongContext | None = None,
) -> _Rates:
    """Rates with `input` and `output`, the prices not given scaled from `base` like input."""
    ratio = input / base.input if base.input else 1.0
    write = own.cache_write if own is not None else None
    write_1h = own.cache_write_1h if own is not None else None
    if write_1h is None and base.cache_write_1h is not None:
        write_1h = base.cache_write_1h * ratio
    return _Rates(
        input,
        output,
        cached_input if cached_input is not None else base.cached_input * ratio,
        write if write is not None else base.cache_write * ratio,
        write_1h,
    )


def _times(rate: float, longer: float, standard: float) -> float:
    """A tier's `rate` with long context: times the long-context price over the standard."""
    return rate * longer / standard if standard else longer


def _tier_at_length(tier: _Rates, longs: _Rates, base: _Rates) -> _Rates:
    """A tier's rates with long context, each scaled as the standard rate is."""
    hour = None
    if tier.cache_write_1h is not None and longs.cache_write_1h is not None:
        hour = base.cache_write_1h and _times(
            tier.cache_write_1h, longs.cache_write_1h, base.cache_write_1h
        )
    return _Rates(
        _times(tier.input, longs.input, base.input),
        _times(tier.output, longs.output, base.output),
        _times(tier.cached_input, longs.cached_input, base.cached_input),
        _times(tier.cache_write, longs.cache_write, base.cache_write),
        hour,
    )
