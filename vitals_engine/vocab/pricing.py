"""Prices per million tokens, from `data/prices.json` plus what the user sets.

A call's cost is its tokens times the model's prices. When a model has no
price the cost is `None` (unknown), never 0. A call sent in a provider's batch
costs its provider's batch share of those prices (`batch.share` in the file: a half
for OpenAI, Anthropic and Google); a provider with no batch share has no known
batch price.
"""

from __future__ import annotations

import importlib.resources
import threading
from functools import cache

import msgspec

from .turns import TokenUsage

__all__ = ["Price", "batch_share", "cost_of", "find_price", "set_price"]


class Price(msgspec.Struct, frozen=True):
    """USD per million tokens."""

    provider: str
    model: str
    input: float
    output: float
    cached_input: float | None = None


class _BatchPrices(msgspec.Struct):
    share: dict[str, float]
    taken: str = ""
    source: str = ""


class _PriceFile(msgspec.Struct):
    schema_version: int
    prices: list[Price]
    taken: str = ""
    batch: _BatchPrices | None = None


_user_prices: dict[tuple[str, str], Price] = {}
_lock = threading.Lock()


@cache
def _table() -> _PriceFile:
    raw = importlib.resources.files("vitals_engine").joinpath("data/prices.json").read_bytes()
    return msgspec.json.decode(raw, type=_PriceFile)


@cache
def _builtin() -> dict[tuple[str, str], Price]:
    return {(p.provider.lower(), p.model): p for p in _table().prices}


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
) -> None:
    """Add or override the price of a model, in USD per million tokens.

    Example:
        >>> set_price("OpenAI", "my-fine-tune", input=3.0, output=12.0)
    """
    with _lock:
        _user_prices[(provider.lower(), model)] = Price(
            provider, model, input, output, cached_input
        )
        _found.clear()


_found: dict[tuple[str, str], Price | None] = {}


def find_price(provider: str, model: str) -> Price | None:
    """The price of `model`, trying the exact name, then its longest known prefix
    (so dated snapshots such as `gpt-4.1-2025-04-14` find `gpt-4.1`), then `*`.
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
            if prov == key and name != "*" and model.startswith(name + "-") and longer:
                best = price
        if best is not None:
            return best
    return _user_prices.get((key, "*")) or _builtin().get((key, "*"))


def cost_of(provider: str, model: str, tokens: TokenUsage, *, batch: bool = False) -> float | None:
    """USD cost of `tokens` on `model` (sent in a batch, if `batch`), or None when its
    price is unknown."""
    price = find_price(provider, model)
    if price is None:
        return None
    share = 1.0
    if batch:
        found = batch_share(provider)
        if found is None:
            return None
        share = found
    cached = price.cached_input if price.cached_input is not None else price.input
    return (
        share
        * (tokens.input * price.input + tokens.cached_input * cached + tokens.output * price.output)
        / 1_000_000
    )
