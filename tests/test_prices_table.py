"""The built-in price table itself: its documented shape, where each section's figures come
from, and that its figures are consistent with each other and with the providers' rules."""

from __future__ import annotations

import datetime
import importlib.resources

import msgspec
import pytest


class _LongContext(msgspec.Struct, forbid_unknown_fields=True):
    above: int
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None


class _Tier(msgspec.Struct, forbid_unknown_fields=True):
    input: float
    output: float
    cached_input: float | None = None


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None
    long_context: _LongContext | None = None
    web_search: float | None = None
    tiers: dict[str, _Tier] | None = None


class _Section(msgspec.Struct, forbid_unknown_fields=True):
    taken: str
    source: str
    prices: list[_Entry]


class _Batch(msgspec.Struct, forbid_unknown_fields=True):
    taken: str
    source: str
    share: dict[str, float]


class _Table(msgspec.Struct, forbid_unknown_fields=True):
    schema_version: int
    currency: str
    unit: str
    taken: str
    source: str
    batch: _Batch
    providers: dict[str, _Section]


def _table() -> _Table:
    raw = importlib.resources.files("vitals_engine").joinpath("data/prices.json").read_bytes()
    return msgspec.json.decode(raw, type=_Table)


def _entries(provider: str | None = None) -> list[tuple[str, _Entry]]:
    return [
        (name, entry)
        for name, section in _table().providers.items()
        if provider is None or name == provider
        for entry in section.prices
    ]


LITELLM_COMMIT = "00035b69f416be24e2e323c13198d9b7d2d1bdf9"


def test_price_file_parses_into_schema():
    """prices.json (schema 2) decodes with exactly the documented fields, in USD per million
    tokens (web search per 1,000 requests), with a date and a source for every section."""
    table = _table()
    assert table.schema_version == 2
    assert table.currency == "USD"
    assert "per million tokens" in table.unit
    assert "web_search" in table.unit
    assert "1,000" in table.unit
    assert datetime.date.fromisoformat(table.taken)
    assert LITELLM_COMMIT in table.source
    assert {"Mock", "OpenAI", "Anthropic", "Google", "Azure OpenAI", "Vertex AI", "Bedrock"} == set(
        table.providers
    )
    for name, section in table.providers.items():
        assert datetime.date.fromisoformat(section.taken), name
        assert section.source, name
        assert section.prices, name
    for name in ("OpenAI", "Anthropic", "Google", "Bedrock"):
        assert LITELLM_COMMIT in table.providers[name].source, name
    assert datetime.date.fromisoformat(table.batch.taken)
    assert table.batch.source
    assert set(table.batch.share) == {"OpenAI", "Anthropic", "Google"}
    assert all(0 < share <= 1 for share in table.batch.share.values())


def test_every_entry_is_sane():
    """Prices are non-negative; a cache read costs no more than input and a cache write no
    less; a 1-hour write no less than a 5-minute one; long context and priority cost more,
    flex less; and no model is priced twice."""
    seen: set[tuple[str, str]] = set()
    for provider, e in _entries():
        key = (provider.lower(), e.model)
        assert key not in seen, f"duplicate price for {key}"
        seen.add(key)
        assert e.input >= 0, key
        assert e.output >= 0, key
        if e.cached_input is not None:
            assert 0 <= e.cached_input <= e.input, key
        if e.cache_write is not None:
            assert e.cache_write >= e.input, key
        if e.cache_write_1h is not None:
            assert e.cache_write is not None, key
            assert e.cache_write_1h >= e.cache_write, key
        if e.web_search is not None:
            assert e.web_search >= 0, key
        if e.long_context is not None:
            long = e.long_context
            assert long.above > 0, key
            assert long.input > e.input, key
            assert long.output > e.output, key
            if long.cached_input is not None:
                assert long.cached_input <= long.input, key
        for name, tier in (e.tiers or {}).items():
            assert name == name.lower(), key
            assert name not in {"default", "standard", "auto", "batch"}, key
            if tier.cached_input is not None:
                assert tier.cached_input <= tier.input, (key, name)
            if name == "flex":
                assert tier.input < e.input, (key, name)
                assert tier.output < e.output, (key, name)
            if name == "priority":
                assert tier.input > e.input, (key, name)
                assert tier.output > e.output, (key, name)


def test_every_cache_write_price_has_its_one_hour_price():
    """Every model with a 5-minute cache-write price has a 1-hour one too: Anthropic publishes
    both for every model (5-minute writes 1.25x input except Claude 3 Haiku's $0.30, 1-hour
    writes 2x input), and OpenAI and Gemini publish neither. (Bedrock keeps a prompt for an
    hour only for Claude 4.5 and later: its older Claude models have 5-minute writes alone.)"""
    for provider, e in _entries():
        if e.cache_write is not None and provider != "Bedrock":
            assert e.cache_write_1h is not None, (provider, e.model)
    anthropic = _entries("Anthropic")
    assert anthropic
    for _, e in anthropic:
        assert e.cache_write is not None, e.model
        assert e.cache_write_1h == pytest.approx(2 * e.input), e.model
        if e.model != "claude-3-haiku":
            assert e.cache_write == pytest.approx(1.25 * e.input), e.model
    for provider in ("OpenAI", "Google"):
        for _, e in _entries(provider):
            assert e.cache_write is None, (provider, e.model)
            assert e.cache_write_1h is None, (provider, e.model)


def test_long_context_prices_are_the_published_ones():
    """Sonnet 4 and 4.5 (1M context) and Gemini 2.5 / 3 Pro double input above 200k prompt
    tokens; GPT-5.4 and 5.5 above 272k; nothing else in the table has a long-context price."""
    longs = {(p, e.model): e.long_context for p, e in _entries() if e.long_context is not None}
    # Bedrock: Sonnet 4 and 4.5 by their ids, and their cross-region profiles ("us." ...).
    on_bedrock = {model for provider, model in longs if provider == "Bedrock"}
    assert on_bedrock >= {
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic.claude-sonnet-4-20250514-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    }
    assert all(
        model.endswith(
            ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-20250514-v1:0")
        )
        for model in on_bedrock
    ), on_bedrock
    geographic = longs[("Bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")]
    assert (geographic.above, geographic.input, geographic.output) == (200_000, 6.6, 24.75)
    assert set(longs) - {("Bedrock", model) for model in on_bedrock} == {
        ("Anthropic", "claude-sonnet-4-5"),
        ("Anthropic", "claude-sonnet-4"),
        ("Google", "gemini-2.5-pro"),
        ("Google", "gemini-3-pro-preview"),
        ("Google", "gemini-3.1-pro-preview"),
        ("Vertex AI", "claude-sonnet-4-5"),
        ("Vertex AI", "regional/claude-sonnet-4-5"),
        ("Vertex AI", "gemini-2.5-pro"),
        ("Vertex AI", "gemini-3-pro-preview"),
        ("Vertex AI", "gemini-3.1-pro-preview"),
        ("OpenAI", "gpt-5.5"),
        ("OpenAI", "gpt-5.5-pro"),
        ("OpenAI", "gpt-5.4"),
        ("OpenAI", "gpt-5.4-pro"),
        ("Azure OpenAI", "gpt-5.4"),
    }
    sonnet = longs[("Anthropic", "claude-sonnet-4-5")]
    assert (sonnet.above, sonnet.input, sonnet.output) == (200_000, 6.0, 22.5)
    assert (sonnet.cached_input, sonnet.cache_write, sonnet.cache_write_1h) == (0.6, 7.5, 12.0)
    gemini = longs[("Google", "gemini-2.5-pro")]
    assert (gemini.above, gemini.input, gemini.output, gemini.cached_input) == (
        200_000, 2.5, 15.0, 0.25,
    )  # fmt: skip
    assert longs[("OpenAI", "gpt-5.4")].above == 272_000
    assert longs[("Vertex AI", "claude-sonnet-4-5")] == sonnet
    regional = longs[("Vertex AI", "regional/claude-sonnet-4-5")]  # 10% above global
    assert (regional.above, regional.input, regional.output) == (200_000, 6.6, 24.75)
    assert longs[("Vertex AI", "gemini-2.5-pro")] == gemini


def test_web_search_fees_are_per_provider_and_generation():
    """Web search costs $10 per 1,000 on Anthropic and OpenAI, and Google grounding $35 per
    1,000 prompts on Gemini 2.x and $14 per 1,000 queries on Gemini 3."""
    for provider, e in _entries():
        if e.web_search is None or provider == "Mock":
            continue
        if e.model.startswith("gemini"):  # Grounding with Google Search, on Vertex too
            assert e.web_search == (14.0 if e.model.startswith("gemini-3") else 35.0), e.model
        else:
            assert e.web_search == 10.0, (provider, e.model)
    assert all(e.web_search is not None for _, e in _entries("Google"))


@pytest.mark.parametrize(
    ("model", "input", "output"),
    [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", 3.0, 15.0),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", 3.0, 15.0),
        # A geographic cross-region profile of Claude 4.5 and later costs 10% more.
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 3.3, 16.5),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", 1.1, 5.5),
        ("meta.llama3-3-70b-instruct-v1:0", 0.72, 0.72),
        ("us.meta.llama4-maverick-17b-instruct-v1:0", 0.24, 0.97),
        ("mistral.mistral-large-2407-v1:0", 2.0, 6.0),
        ("openai.gpt-oss-120b-1:0", 0.15, 0.6),
    ],
)
def test_bedrock_prices_its_model_ids_and_cross_region_profiles(model, input, output):
    from vitals_engine.pricing.table import find_price

    price = find_price("Bedrock", model)
    assert price is not None, model
    assert (price.input, price.output) == (input, output)
