"""The built-in price table, price lookup by model name, cost arithmetic and user prices."""

from __future__ import annotations

import datetime
import importlib.resources

import msgspec
import pytest

import vitals_engine as ve
from vitals_engine.vocab import pricing
from vitals_engine.vocab.pricing import Price, cost_of, find_price
from vitals_engine.vocab.turns import TokenUsage


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    provider: str
    model: str
    input: float
    output: float
    cached_input: float | None


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
    prices: list[_Entry]


def _table() -> _Table:
    raw = importlib.resources.files("vitals_engine").joinpath("data/prices.json").read_bytes()
    return msgspec.json.decode(raw, type=_Table)


@pytest.fixture(autouse=True)
def _no_user_prices(monkeypatch):
    """Each test starts without user-set prices or remembered lookups, and leaves none behind."""
    monkeypatch.setattr(pricing, "_user_prices", {})
    monkeypatch.setattr(pricing, "_found", {}, raising=False)


def test_price_file_parses_into_schema():
    """prices.json decodes with exactly the documented fields, in USD per million tokens."""
    table = _table()
    assert table.schema_version == 1
    assert table.currency == "USD"
    assert table.unit == "per million tokens"
    assert datetime.date.fromisoformat(table.taken)
    assert table.source
    providers = {entry.provider for entry in table.prices}
    assert {"Mock", "OpenAI", "Anthropic", "Google"} <= providers
    assert datetime.date.fromisoformat(table.batch.taken)
    assert table.batch.source
    assert set(table.batch.share) == {"OpenAI", "Anthropic", "Google"}
    assert all(0 < share <= 1 for share in table.batch.share.values())


def test_a_call_sent_in_a_batch_costs_its_providers_batch_share():
    tokens = TokenUsage(input=1_000_000, output=1_000_000, cached_input=0)
    live = cost_of("Anthropic", "claude-sonnet-4-5", tokens)
    assert live is not None
    assert cost_of("Anthropic", "claude-sonnet-4-5", tokens, batch=True) == pytest.approx(live / 2)
    assert cost_of("Mystery", "model", tokens, batch=True) is None  # no batch price known


def test_every_entry_is_sane():
    """Prices are non-negative, cached input never costs more than input, and no entry repeats."""
    seen: set[tuple[str, str]] = set()
    for entry in _table().prices:
        key = (entry.provider.lower(), entry.model)
        assert key not in seen, f"duplicate price for {key}"
        seen.add(key)
        assert entry.input >= 0, key
        assert entry.output >= 0, key
        if entry.cached_input is not None:
            assert 0 <= entry.cached_input <= entry.input, key


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("OpenAI", "gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("OpenAI", "gpt-4.1-2025-04-14", "gpt-4.1"),
        ("openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("OpenAI", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        ("OpenAI", "gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("OpenAI", "o4-mini-2025-04-16", "o4-mini"),
        ("Anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("Anthropic", "claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("ANTHROPIC", "claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("Anthropic", "claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("Anthropic", "claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("Google", "gemini-2.5-flash-lite-preview-09-2025", "gemini-2.5-flash-lite"),
        ("google", "gemini-2.5-pro", "gemini-2.5-pro"),
    ],
)
def test_lookup_finds_longest_known_name(provider, model, expected):
    """A dated snapshot or alias finds its own family's price, not a shorter model's."""
    price = find_price(provider, model)
    assert price is not None
    assert price.model == expected


def test_known_prices():
    """A few list prices come out as published, in USD per million tokens."""
    assert find_price("OpenAI", "gpt-4.1-mini") == Price("OpenAI", "gpt-4.1-mini", 0.4, 1.6, 0.1)
    assert find_price("Anthropic", "claude-sonnet-4-5-20250929") == Price(
        "Anthropic", "claude-sonnet-4-5", 3.0, 15.0, 0.3
    )
    assert find_price("Google", "gemini-2.5-flash") == Price(
        "Google", "gemini-2.5-flash", 0.3, 2.5, 0.03
    )


def test_cost_counts_cached_tokens_at_cached_price():
    """Cost is input, cached input and output tokens, each times its own price per million."""
    tokens = TokenUsage(input=1_000_000, output=500_000, cached_input=2_000_000, reasoning=100)
    # gpt-4.1: $2 input, $0.50 cached input, $8 output.
    assert cost_of("OpenAI", "gpt-4.1-2025-04-14", tokens) == pytest.approx(2.0 + 1.0 + 4.0)
    small = TokenUsage(input=1200, output=300, cached_input=800)
    expected = (1200 * 3.0 + 800 * 0.3 + 300 * 15.0) / 1_000_000
    assert cost_of("Anthropic", "claude-sonnet-4-5", small) == pytest.approx(expected)


def test_cached_tokens_without_cached_price_cost_the_input_price():
    """A model with no published cache-read price charges cached tokens at the input price."""
    tokens = TokenUsage(input=1_000_000, cached_input=1_000_000)
    assert find_price("OpenAI", "gpt-5-pro").cached_input is None
    assert cost_of("OpenAI", "gpt-5-pro", tokens) == pytest.approx(30.0)


def test_mock_models_are_free():
    """Every mock model costs 0 (known), not None (unknown)."""
    assert cost_of("Mock", "anything", TokenUsage(input=10, output=10)) == 0.0


def test_set_price_overrides_builtin_and_adds_models():
    """ve.set_price replaces a built-in price and prices a model the table lacks."""
    ve.set_price("OpenAI", "gpt-4.1", input=1.0, output=2.0, cached_input=0.25)
    price = find_price("OpenAI", "gpt-4.1-2025-04-14")
    assert price == Price("OpenAI", "gpt-4.1", 1.0, 2.0, 0.25)
    assert find_price("OpenAI", "gpt-4.1-mini").input == 0.4  # siblings keep theirs

    assert find_price("OpenAI", "my-fine-tune") is None
    ve.set_price("openai", "my-fine-tune", input=3.0, output=12.0)
    tokens = TokenUsage(input=1_000_000, output=1_000_000, cached_input=1_000_000)
    assert cost_of("OpenAI", "my-fine-tune-v2", tokens) == pytest.approx(3.0 + 12.0 + 3.0)


def test_unknown_models_and_providers_have_no_price():
    """An unknown model or provider has price None and cost None, never 0."""
    tokens = TokenUsage(input=100, output=100)
    assert find_price("OpenAI", "not-a-model") is None
    assert find_price("NoSuchProvider", "gpt-4.1") is None
    assert cost_of("OpenAI", "not-a-model", tokens) is None
    assert cost_of("Anthropic", "claude-unknown", tokens) is None
