"""Price lookup by model name, cost arithmetic (cache reads and writes, long context, service
tiers, web search, batches) and user prices. Expected costs are worked out by hand from the
published prices per million tokens (web search: per 1,000 requests)."""

from __future__ import annotations

import pytest

import vitals_engine as ve
from vitals_engine.pricing import table as pricing
from vitals_engine.pricing.cost import cost_of
from vitals_engine.pricing.table import LongContext, Price, TierPrice, find_price
from vitals_engine.vocab.turns import TokenUsage

M = 1_000_000


@pytest.fixture(autouse=True)
def _no_user_prices(monkeypatch):
    """Each test starts without user-set prices or remembered lookups, and leaves none behind."""
    monkeypatch.setattr(pricing, "_user_prices", {})
    monkeypatch.setattr(pricing, "_found", {}, raising=False)


def test_a_call_sent_in_a_batch_costs_its_providers_batch_share():
    """A batched call costs the provider's batch share; a provider with none has no cost."""
    tokens = TokenUsage(input=1_000_000, output=1_000_000, cached_input=0)
    live = cost_of("Anthropic", "claude-sonnet-4-5", tokens)
    assert live is not None
    assert cost_of("Anthropic", "claude-sonnet-4-5", tokens, batch=True) == pytest.approx(live / 2)
    assert cost_of("Mystery", "model", tokens, batch=True) is None  # no batch price known


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
    assert find_price("OpenAI", "gpt-4.1-mini") == Price(
        "OpenAI", "gpt-4.1-mini", 0.4, 1.6, 0.1, web_search=10.0,
        tiers={"priority": TierPrice(0.7, 2.8, 0.175)},
    )  # fmt: skip
    assert find_price("Anthropic", "claude-sonnet-4-5-20250929") == Price(
        "Anthropic", "claude-sonnet-4-5", 3.0, 15.0, 0.3,
        cache_write=3.75, cache_write_1h=6.0, web_search=10.0,
        long_context=LongContext(200_000, 6.0, 22.5, 0.6, 7.5, 12.0),
    )  # fmt: skip
    assert find_price("Google", "gemini-2.5-flash") == Price(
        "Google", "gemini-2.5-flash", 0.3, 2.5, 0.03, web_search=35.0
    )


def test_cost_counts_cached_tokens_at_cached_price():
    """Cost is input, cached input and output tokens, each times its own price per million."""
    tokens = TokenUsage(input=1_000_000, output=500_000, cached_input=2_000_000, reasoning=100)
    # gpt-4.1: $2 input, $0.50 cached input, $8 output.
    assert cost_of("OpenAI", "gpt-4.1-2025-04-14", tokens) == pytest.approx(2.0 + 1.0 + 4.0)
    small = TokenUsage(input=1200, output=300, cached_input=800)
    expected = (1200 * 3.0 + 800 * 0.3 + 300 * 15.0) / M
    assert cost_of("Anthropic", "claude-sonnet-4-5", small) == pytest.approx(expected)


def test_cached_tokens_without_cached_price_cost_the_input_price():
    """A model with no published cache-read price charges cached tokens at the input price."""
    tokens = TokenUsage(input=1_000_000, cached_input=1_000_000)
    assert find_price("OpenAI", "gpt-5-pro").cached_input is None
    assert cost_of("OpenAI", "gpt-5-pro", tokens) == pytest.approx(30.0)


def test_anthropic_cache_writes_cost_by_lifetime_and_reads_cost_a_tenth():
    """An Anthropic call pays 5-minute writes at 1.25x input, 1-hour writes at 2x input and
    cache reads at 0.1x input, besides its uncached input and output."""
    tokens = TokenUsage(
        input=1_000, cached_input=100_000, cache_write=50_000, cache_write_1h=20_000, output=2_000
    )
    # claude-sonnet-4-5: input $3, 5-minute write $3.75, 1-hour write $6, read $0.30, output $15.
    # 1,000 x 3 + 100,000 x 0.30 + 30,000 x 3.75 + 20,000 x 6 + 2,000 x 15
    #   = 3,000 + 30,000 + 112,500 + 120,000 + 30,000 = 295,500 (per million) = $0.2955
    assert cost_of("Anthropic", "claude-sonnet-4-5-20250929", tokens) == pytest.approx(0.2955)
    # the same usage all written for 5 minutes: 50,000 x 3.75 = 187,500 -> $0.2505
    five = TokenUsage(input=1_000, cached_input=100_000, cache_write=50_000, output=2_000)
    assert cost_of("Anthropic", "claude-sonnet-4-5", five) == pytest.approx(0.2505)
    # claude-3-haiku publishes its own write prices: input $0.25, 5-minute $0.30, 1-hour $0.50
    haiku = TokenUsage(cache_write=1_000_000, cache_write_1h=400_000)
    assert cost_of("Anthropic", "claude-3-haiku", haiku) == pytest.approx(0.6 * 0.30 + 0.4 * 0.50)


def test_cache_writes_without_a_write_price_cost_the_input_price():
    """OpenAI and Gemini charge nothing extra to write the prompt cache: writes, of either
    lifetime, cost the input price."""
    tokens = TokenUsage(input=1_000, cache_write=10_000, cache_write_1h=4_000, output=100)
    # gpt-4.1: $2 input, $8 output: (1,000 + 10,000) x 2 + 100 x 8 = 22,800 -> $0.0228
    assert cost_of("OpenAI", "gpt-4.1", tokens) == pytest.approx(0.0228)
    # gemini-2.5-flash: $0.30 input, $2.50 output: 11,000 x 0.3 + 100 x 2.5 = 3,550
    assert cost_of("Google", "gemini-2.5-flash", tokens) == pytest.approx(0.00355)


def test_gemini_above_200k_prompt_tokens_bills_the_whole_call_at_long_context_prices():
    """A Gemini 2.5 Pro call whose prompt (uncached + cached) exceeds 200k tokens pays the
    long-context prices on all its tokens, output included; at exactly 200k it does not."""
    tokens = TokenUsage(input=180_000, cached_input=40_000, output=5_000)
    # prompt 220,000 > 200,000: input $2.50, cached $0.25, output $15 (standard: 1.25/0.125/10)
    # 180,000 x 2.5 + 40,000 x 0.25 + 5,000 x 15 = 450,000 + 10,000 + 75,000 -> $0.535
    assert cost_of("Google", "gemini-2.5-pro", tokens) == pytest.approx(0.535)
    at_limit = TokenUsage(input=160_000, cached_input=40_000, output=5_000)
    # 160,000 x 1.25 + 40,000 x 0.125 + 5,000 x 10 = 200,000 + 5,000 + 50,000 -> $0.255
    assert cost_of("Google", "gemini-2.5-pro", at_limit) == pytest.approx(0.255)


def test_anthropic_long_context_counts_cache_writes_in_the_prompt_and_prices_them_long():
    """Cache writes count towards Sonnet's 200k threshold, and above it every kind of token,
    writes of both lifetimes included, costs its long-context price."""
    tokens = TokenUsage(
        input=150_000, cached_input=40_000, cache_write=20_000, cache_write_1h=5_000, output=1_000
    )
    # prompt 150,000 + 40,000 + 20,000 = 210,000 > 200,000. claude-sonnet-4-5 above 200k:
    # input $6, read $0.60, 5-minute write $7.50, 1-hour write $12, output $22.50:
    # 900,000 + 24,000 + 15,000 x 7.5 + 5,000 x 12 + 22,500
    #   = 900,000 + 24,000 + 112,500 + 60,000 + 22,500 = 1,119,000 -> $1.119
    assert cost_of("Anthropic", "claude-sonnet-4-5", tokens) == pytest.approx(1.119)
    # claude-sonnet-4's table has no long 1-hour write price: its $6 scales like input (x2)
    assert cost_of("Anthropic", "claude-sonnet-4", tokens) == pytest.approx(1.119)
    # the same call without its writes is under the threshold: standard prices
    small = TokenUsage(input=150_000, cached_input=40_000, output=1_000)
    assert cost_of("Anthropic", "claude-sonnet-4", small) == pytest.approx(
        (150_000 * 3 + 40_000 * 0.3 + 1_000 * 15) / M
    )


def test_openai_flex_costs_half_and_priority_more():
    """An OpenAI call served by the flex tier costs the flex prices (half), one served by the
    priority tier the priority prices, and "default"/"standard"/"auto"/None the standard."""
    tokens = TokenUsage(input=10_000, cached_input=20_000, output=3_000)
    # gpt-5 flex: input $0.625, cached $0.0625, output $5:
    # 10,000 x 0.625 + 20,000 x 0.0625 + 3,000 x 5 = 6,250 + 1,250 + 15,000 -> $0.0225
    assert cost_of("OpenAI", "gpt-5-2025-08-07", tokens, tier="flex") == pytest.approx(0.0225)
    # gpt-4.1 priority: input $3.50, cached $0.875, output $14:
    # 35,000 + 17,500 + 42,000 = 94,500 -> $0.0945
    assert cost_of("OpenAI", "gpt-4.1", tokens, tier="priority") == pytest.approx(0.0945)
    # gpt-4.1 standard: 20,000 + 10,000 + 24,000 = 54,000 -> $0.054
    for standard in (None, "default", "standard", "auto", "Default"):
        assert cost_of("OpenAI", "gpt-4.1", tokens, tier=standard) == pytest.approx(0.054)


def test_a_tier_with_no_known_price_costs_unknown():
    """A service tier the model has no price for makes the cost None, never a guess."""
    tokens = TokenUsage(input=1_000, output=1_000)
    assert cost_of("OpenAI", "gpt-4.1", tokens, tier="flex") is None  # flex: not offered
    assert cost_of("OpenAI", "gpt-5", tokens, tier="scale") is None  # Scale Tier: contract
    assert cost_of("OpenAI", "gpt-5-nano", tokens, tier="priority") is None
    assert cost_of("Anthropic", "claude-sonnet-4-5", tokens, tier="priority") is None
    assert cost_of("Google", "gemini-2.5-pro", tokens, tier="flex") is None


def test_a_tier_missing_its_cache_price_scales_it_like_input():
    """A tier's cache-read price, when the table has none, is the standard one scaled like
    input (gpt-4o-2024-05-13 has no cached price: cached tokens cost the tier's input)."""
    tokens = TokenUsage(input=1_000, cached_input=1_000, output=1_000)
    # priority: input $8.75, output $26.25 -> 1,000 x 8.75 x 2 + 1,000 x 26.25 = 43,750
    assert cost_of("OpenAI", "gpt-4o-2024-05-13", tokens, tier="priority") == pytest.approx(0.04375)


def test_a_tier_above_the_long_context_threshold_pays_both_premiums():
    """Gemini 3 Pro priority above 200k: each priority price times its long-context ratio,
    which gives Google's published long-context priority prices ($7.20 / $0.72 / $32.40)."""
    tokens = TokenUsage(input=200_000, cached_input=50_000, output=10_000)
    # 200,000 x 7.2 + 50,000 x 0.72 + 10,000 x 32.4 = 1,440,000 + 36,000 + 324,000 -> $1.80
    cost = cost_of("Google", "gemini-3-pro-preview", tokens, tier="priority")
    assert cost == pytest.approx(1.80)


def test_web_searches_cost_their_fee_per_thousand():
    """Each server-side web search costs the model's fee per 1,000 requests on top of its
    tokens; searches on a model with no known fee make the cost unknown."""
    tokens = TokenUsage(input=10_000, output=1_000, web_searches=3)
    # claude-sonnet-4-5: 10,000 x 3 + 1,000 x 15 = 45,000 -> $0.045; 3 x $10 / 1,000 = $0.03
    assert cost_of("Anthropic", "claude-sonnet-4-5", tokens) == pytest.approx(0.045 + 0.03)
    # gpt-5: 10,000 x 1.25 + 1,000 x 10 = 22,500 -> $0.0225; 3 x $10 / 1,000
    assert cost_of("OpenAI", "gpt-5", tokens) == pytest.approx(0.0225 + 0.03)
    # gemini-2.5-flash grounding $35 per 1,000: 3,000 + 2,500 -> $0.0055 + $0.105
    assert cost_of("Google", "gemini-2.5-flash", tokens) == pytest.approx(0.0055 + 0.105)
    # gemini-3-pro-preview $14 per 1,000 queries: 20,000 + 12,000 -> $0.032 + $0.042
    assert cost_of("Google", "gemini-3-pro-preview", tokens) == pytest.approx(0.032 + 0.042)
    assert cost_of("OpenAI", "o3-mini", tokens) is None  # o3-mini has no web search tool
    assert cost_of("Mock", "anything", tokens) == 0.0


def test_batch_combines_with_cache_writes_but_not_with_the_search_fee():
    """A batched call pays the batch share of every token price, cache writes of both
    lifetimes included, while per-request web search fees stay whole."""
    tokens = TokenUsage(
        input=1_000, cached_input=100_000, cache_write=50_000, cache_write_1h=20_000, output=2_000
    )
    # the live call is $0.2955 (see above); half of it in a batch
    cost = cost_of("Anthropic", "claude-sonnet-4-5", tokens, batch=True)
    assert cost == pytest.approx(0.2955 / 2)
    searched = TokenUsage(input=1_000, cache_write=10_000, output=100, web_searches=2)
    # tokens: 3,000 + 37,500 + 1,500 = 42,000 -> $0.042, halved; searches 2 x $10 / 1,000
    cost = cost_of("Anthropic", "claude-sonnet-4-5", searched, batch=True)
    assert cost == pytest.approx(0.021 + 0.02)
    # Anthropic names a batched call's tier "batch": the same price
    assert cost_of("Anthropic", "claude-sonnet-4-5", searched, tier="batch") == pytest.approx(
        0.021 + 0.02
    )


def test_mock_models_are_free():
    """Every mock model costs 0 (known), not None (unknown), whatever it uses."""
    assert cost_of("Mock", "anything", TokenUsage(input=10, output=10)) == 0.0
    busy = TokenUsage(input=10, cache_write=300_000, cache_write_1h=5, web_searches=4)
    assert cost_of("Mock", "anything", busy) == 0.0


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


def test_set_price_takes_every_new_dimension():
    """set_price takes cache-write, long-context, web-search and tier prices (dicts or
    Structs), and cost_of uses each of them, scaling what the user left out like input."""
    ve.set_price(
        "Anthropic", "claude-house", input=2.0, output=10.0, cached_input=0.2,
        cache_write=2.5, cache_write_1h=4.0, web_search=10.0,
        long_context={"above": 100_000, "input": 4.0, "output": 15.0},
        tiers={"Priority": {"input": 3.0, "output": 15.0}, "flex": TierPrice(1.0, 5.0)},
    )  # fmt: skip
    price = find_price("Anthropic", "claude-house-20261128")
    assert price is not None
    assert price.long_context == LongContext(100_000, 4.0, 15.0)
    assert price.tiers == {"priority": TierPrice(3.0, 15.0), "flex": TierPrice(1.0, 5.0)}
    assert (price.cache_write, price.cache_write_1h, price.web_search) == (2.5, 4.0, 10.0)

    short = TokenUsage(input=1_000, cached_input=2_000, cache_write=3_000, cache_write_1h=1_000,
                       output=500, web_searches=1)  # fmt: skip
    # 1,000 x 2 + 2,000 x 0.2 + 2,000 x 2.5 + 1,000 x 4 + 500 x 10 = 16,400 -> $0.0164 + $0.01
    assert cost_of("Anthropic", "claude-house", short) == pytest.approx(0.0164 + 0.01)
    # priority (1.5x input): cached 0.3, writes 3.75 / 6:
    # 3,000 + 600 + 7,500 + 6,000 + 7,500 = 24,600
    assert cost_of("Anthropic", "claude-house", short, tier="priority") == pytest.approx(
        0.0246 + 0.01
    )
    long = TokenUsage(input=90_000, cached_input=10_000, cache_write=1_000, cache_write_1h=1_000,
                      output=1_000)  # fmt: skip
    # prompt 101,000 > 100,000: input 4, cached 0.2 x 2 = 0.4, 1-hour write 4 x 2 = 8, out 15:
    # 360,000 + 4,000 + 8,000 + 15,000 = 387,000
    assert cost_of("Anthropic", "claude-house", long) == pytest.approx(0.387)


def test_set_price_rejects_what_is_no_price():
    """A negative price, or a long-context price without its threshold, is refused at once."""
    with pytest.raises(ValueError, match="claude-bad"):
        ve.set_price("Anthropic", "claude-bad", input=-1.0, output=1.0)
    with pytest.raises(ValueError, match=r"above"):
        ve.set_price("Anthropic", "claude-bad", input=1.0, output=1.0, long_context={"input": 2})
    assert find_price("Anthropic", "claude-bad") is None


def test_one_hour_writes_on_a_model_pricing_only_five_minute_ones_cost_unknown():
    """A model priced for 5-minute writes alone has no known price for 1-hour writes: a call
    with some costs None, one without costs as usual."""
    ve.set_price("Anthropic", "claude-half", input=1.0, output=5.0, cache_write=1.25)
    assert cost_of("Anthropic", "claude-half", TokenUsage(cache_write=10, cache_write_1h=5)) is None
    assert cost_of("Anthropic", "claude-half", TokenUsage(cache_write=1_000_000)) == 1.25


def test_unknown_models_and_providers_have_no_price():
    """An unknown model or provider has price None and cost None, never 0."""
    tokens = TokenUsage(input=100, output=100)
    assert find_price("OpenAI", "not-a-model") is None
    assert find_price("NoSuchProvider", "gpt-4.1") is None
    assert cost_of("OpenAI", "not-a-model", tokens) is None
    assert cost_of("Anthropic", "claude-unknown", tokens) is None
    assert cost_of("Anthropic", "claude-unknown", tokens, tier="priority") is None
