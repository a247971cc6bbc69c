"""The price table: prices per million tokens, from `data/prices.json` plus what the
user sets (`set_price`), and each provider's batch share.

`find_price` tries a model's exact name, then its longest known prefix (a dated
snapshot finds its model), then the provider's `*`; it is memoised (one lookup per model
call) until `set_price` changes the table. What a call costs at these prices is
`cost.py`'s.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any

import msgspec

__all__ = [
    "STANDARD_TIERS",
    "LongContext",
    "Price",
    "TierPrice",
    "batch_share",
    "find_price",
    "set_price",
]

#: A price in USD (per million tokens, or per 1,000 requests for `web_search`).
_Usd = Annotated[float, msgspec.Meta(ge=0)]


class LongContext(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Prices (USD per million tokens) of a whole call whose prompt exceeds `above` tokens.

    Example:
        >>> LongContext(above=200_000, input=6.0, output=22.5, cached_input=0.6)
    """

    above: Annotated[int, msgspec.Meta(ge=0)]
    input: _Usd
    output: _Usd
    cached_input: _Usd | None = None
    cache_write: _Usd | None = None
    cache_write_1h: _Usd | None = None


class TierPrice(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Prices (USD per million tokens) of a service tier, such as OpenAI's "flex".

    Example:
        >>> TierPrice(input=0.625, output=5.0, cached_input=0.0625)
    """

    input: _Usd
    output: _Usd
    cached_input: _Usd | None = None


class Price(msgspec.Struct, frozen=True):
    """A model's prices: USD per million tokens, and `web_search` in USD per 1,000
    searches. None: not published (see the module docstring for what that costs)."""

    provider: str
    model: str
    input: _Usd
    output: _Usd
    cached_input: _Usd | None = None
    cache_write: _Usd | None = None
    cache_write_1h: _Usd | None = None
    long_context: LongContext | None = None
    web_search: _Usd | None = None
    tiers: dict[str, TierPrice] | None = None


class _Entry(msgspec.Struct, frozen=True):
    """A model's prices in the file, its provider being its section's."""

    model: str
    input: _Usd
    output: _Usd
    cached_input: _Usd | None = None
    cache_write: _Usd | None = None
    cache_write_1h: _Usd | None = None
    long_context: LongContext | None = None
    web_search: _Usd | None = None
    tiers: dict[str, TierPrice] | None = None


class _Section(msgspec.Struct):
    prices: list[_Entry]
    taken: str = ""
    source: str = ""


class _BatchPrices(msgspec.Struct):
    share: dict[str, Annotated[float, msgspec.Meta(gt=0, le=1)]]
    taken: str = ""
    source: str = ""


class _PriceFile(msgspec.Struct):
    """prices.json. Unknown fields are ignored, so a file may say more than we read."""

    schema_version: int
    providers: dict[str, _Section] = {}
    taken: str = ""
    batch: _BatchPrices | None = None


#: The service tiers that are the standard prices (None too).
STANDARD_TIERS = frozenset({"default", "standard", "auto", ""})

_user_prices: dict[tuple[str, str], Price] = {}
_lock = threading.Lock()


@cache
def _table() -> _PriceFile:
    raw = importlib.resources.files("vitals_engine").joinpath("data/prices.json").read_bytes()
    return msgspec.json.decode(raw, type=_PriceFile)


def _price(provider: str, entry: _Entry) -> Price:
    tiers = entry.tiers
    if tiers is not None:
        tiers = {name.lower(): tier for name, tier in tiers.items()}
    return Price(
        provider, entry.model, entry.input, entry.output, entry.cached_input,
        entry.cache_write, entry.cache_write_1h, entry.long_context, entry.web_search, tiers,
    )  # fmt: skip


@cache
def _builtin() -> dict[tuple[str, str], Price]:
    return {
        (provider.lower(), entry.model): _price(provider, entry)
        for provider, section in _table().providers.items()
        for entry in section.prices
    }


@cache
def batch_share(provider: str) -> float | None:
    """What a batched request costs on `provider`, as a share of its standard price
    (None: no known batch price).

    Example:
        >>> batch_share("Anthropic")
        0.5
    """
    batch = _table().batch
    if batch is None:
        return None
    shares = {name.lower(): share for name, share in batch.share.items()}
    return shares.get(provider.lower())


def set_price(
    provider: str,
    model: str,
    *,
    input: float,
    output: float,
    cached_input: float | None = None,
    cache_write: float | None = None,
    cache_write_1h: float | None = None,
    long_context: LongContext | Mapping[str, Any] | None = None,
    web_search: float | None = None,
    tiers: Mapping[str, TierPrice | Mapping[str, Any]] | None = None,
) -> None:
    """Add or override the price of a model, in USD per million tokens (`web_search`: USD
    per 1,000 searches). `long_context` and each of `tiers` may be given as dicts.

    Example:
        >>> set_price("OpenAI", "my-fine-tune", input=3.0, output=12.0)
        >>> set_price(
        ...     "Anthropic", "claude-house", input=3.0, output=15.0, cached_input=0.3,
        ...     cache_write=3.75, cache_write_1h=6.0, web_search=10.0,
        ...     long_context={"above": 200_000, "input": 6.0, "output": 22.5},
        ... )
    """
    fields = {
        "model": model, "input": input, "output": output, "cached_input": cached_input,
        "cache_write": cache_write, "cache_write_1h": cache_write_1h,
        "long_context": long_context, "web_search": web_search,
        "tiers": None if tiers is None else dict(tiers),
    }  # fmt: skip
    try:  # through builtins, so that Structs given whole are checked as a dict would be
        entry = msgspec.convert(msgspec.to_builtins(fields), _Entry)
    except msgspec.ValidationError as e:
        raise ValueError(f"set_price({provider!r}, {model!r}): {e}") from None
    with _lock:
        _user_prices[(provider.lower(), model)] = _price(provider, entry)
        _found.clear()


_found: dict[tuple[str, str], Price | None] = {}


def find_price(provider: str, model: str) -> Price | None:
    """The price of `model`, trying the exact name, then its longest known prefix
    (so dated snapshots such as `gpt-4.1-2025-04-14` find `gpt-4.1`, and Vertex's
    `claude-sonnet-4-5@20250929` finds `claude-sonnet-4-5`), then `*`.
    Answers are remembered until `set_price` changes the table."""
    try:
        return _found[(provider, model)]
    except KeyError:
        price = _found[(provider, model)] = _lookup(provider, model)
        return price


def _lookup(provider: str, model: str) -> Price | None:
    key = provider.lower()
    for table in (_user_prices, _builtin()):
        if (key, model) in table:
            return table[(key, model)]
    best: Price | None = None
    for table in (_user_prices, _builtin()):
        for (prov, name), price in table.items():
            longer = best is None or len(name) > len(best.model)
            dated = model.startswith((name + "-", name + "@"))  # Vertex: claude-x@20250929
            if prov == key and name != "*" and dated and longer:
                best = price
        if best is not None:
            return best
    return _user_prices.get((key, "*")) or _builtin().get((key, "*"))
