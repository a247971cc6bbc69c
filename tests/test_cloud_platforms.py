"""What every provider gets, on each cloud platform too: the reply cache, the budget, the
cost table and the log naming the platform, the endpoint as the rate limits' key. Each
platform's chat runs against the mock server over HTTP, authenticated as on the platform
(SigV4, an Entra ID token, a Vertex bearer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import vitals_engine as ve
from tests.cloud import EntraCredential, GoogleCredentials, use_aws_test_keys
from tests.helpers import sums
from vitals_engine.log.reader import read_log
from vitals_engine.testing.formats.azure_openai import AZURE

pytestmark = pytest.mark.anyio


def bedrock(server: Any, **options: Any) -> ve.Chat:
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    url = server.base_url("bedrock")
    return ve.chat_aws_bedrock(model, region="us-east-1", base_url=url, **options)


def azure(server: Any, **options: Any) -> ve.Chat:
    url = server.base_url("azure")
    return ve.chat_azure_openai(
        url, deployment="gpt-5-mini", credential=EntraCredential(), **options
    )


def vertex(server: Any, **options: Any) -> ve.Chat:
    return ve.chat_google_vertex(
        "gemini-2.5-flash",
        project="test-project",
        location="us-central1",
        credentials=GoogleCredentials(server),
        base_url=server.base_url("vertex"),
        **options,
    )


PLATFORMS: dict[str, tuple[Callable[..., ve.Chat], str]] = {
    "bedrock": (bedrock, "Bedrock"),
    "azure": (azure, "Azure OpenAI"),
    "vertex": (vertex, "Vertex AI"),
}


@pytest.fixture(params=sorted(PLATFORMS))
def platform(request, server, monkeypatch, tmp_path) -> tuple[Callable[..., ve.Chat], str]:
    """Each platform's chat maker and its name; the AWS environment holds the mock's test
    keys and nothing of this machine's."""
    use_aws_test_keys(monkeypatch, tmp_path)
    AZURE.reset()
    yield PLATFORMS[request.param]
    AZURE.reset()


def task(chat: ve.Chat, tmp_path: Any, n: int = 3) -> ve.Task:
    return ve.Task(sums(n), ve.generate(chat), ve.detect_includes(), dir=tmp_path)


async def test_the_cost_table_and_the_log_name_the_platform(platform, server, tmp_path):
    make, name = platform
    chat = make(server)
    done = await task(chat, tmp_path).eval_async()
    assert done.metrics == {"accuracy": 1.0}
    cost = done.get_cost()
    assert cost["provider"].to_list() == [name]
    assert cost["cost"][0] is not None  # the platform's own price
    assert cost["cost"][0] > 0
    log = read_log(done.log_path)
    assert log.header.eval.model == chat.provider.model_id
    assert chat.provider.model_id.startswith(f"{chat.provider.id_prefix}/")


async def test_a_second_run_is_answered_from_the_reply_cache(platform, server, tmp_path):
    make, _ = platform
    cache = ve.Cache(dir=tmp_path / "cache")
    first = await task(make(server), tmp_path).eval_async(cache=cache)
    sent = server.requests
    assert sent == 3
    second = await task(make(server), tmp_path).eval_async(cache=cache)
    assert server.requests == sent  # nothing sent again
    assert second.get_cost().select("cached", "requests", "cost").rows() == [(True, 3, 0.0)]
    assert second.metrics == first.metrics


async def test_a_budget_stops_the_run_on_the_platforms_prices(platform, server, tmp_path):
    make, _ = platform
    probe = task(make(server), tmp_path / "probe", n=2)
    await probe.eval_async()
    one = probe.get_cost()["cost"].sum() / 2
    budget = task(make(server), tmp_path / "stopped", n=40)
    with pytest.raises(ve.BudgetExceeded):
        await budget.eval_async(cost_budget=one * 5)
    assert budget.get_cost()["cost"].sum() <= one * 6


def test_an_azure_deployment_is_its_own_endpoint_for_the_rate_limits():
    def endpoint(resource: str, deployment: str) -> tuple[str, str, str]:
        chat = ve.chat_azure_openai(resource, deployment=deployment, api_key="k")
        return chat.provider.endpoint

    here = endpoint("https://one.openai.azure.com", "gpt-5-mini")
    assert here[0] == "Azure OpenAI"
    assert here == endpoint("https://one.openai.azure.com", "gpt-5-mini")
    assert here != endpoint("https://two.openai.azure.com", "gpt-5-mini")
    assert here != endpoint("https://one.openai.azure.com", "prod-gpt-5-mini")


async def test_a_deployment_of_the_users_name_is_budgeted_at_its_models_price(server, tmp_path):
    """An Azure deployment named by the user ("prod-mini") with `model=` is priced as that
    model before its first reply too: a budget in dollars holds its calls, and stops them."""
    url = server.base_url("azure")
    AZURE.reset()

    def chat(**options: Any) -> ve.Chat:
        return ve.chat_azure_openai(
            url, deployment="prod-mini", api_key="azure-test-key", **options
        )

    assert chat(model="gpt-5-mini").provider.priced_model == "gpt-5-mini"
    unnamed = task(chat(), tmp_path / "unnamed", n=2)
    with pytest.raises(ve.ConfigError, match="no known price"):
        await unnamed.eval_async(cost_budget=1.0)  # nothing says what "prod-mini" costs

    probe = task(chat(model="gpt-5-mini"), tmp_path / "probe", n=2)
    await probe.eval_async(cost_budget=1.0)
    one = probe.get_cost()["cost"].sum() / 2
    assert one > 0
    stopped = task(chat(model="gpt-5-mini"), tmp_path / "stopped", n=40)
    with pytest.raises(ve.BudgetExceeded):
        await stopped.eval_async(cost_budget=one * 5)
    assert stopped.get_cost()["cost"].sum() <= one * 6


@pytest.mark.parametrize(
    ("model", "premium"), [("claude-sonnet-4-5@20250929", 1.1), ("claude-3-5-haiku@20241022", 1.0)]
)
async def test_claude_on_vertex_costs_more_in_a_region_from_4_5_on(server, model, premium):
    """The same reply costs 10% more at a regional location than at "global" for Claude
    4.5 and later, and the same for older Claude."""

    def claude(location: str) -> ve.Chat:
        return ve.chat_google_vertex(
            model,
            project="test-project",
            location=location,
            credentials=GoogleCredentials(server),
            base_url=server.base_url("vertex"),
        )

    costs = {}
    for location in ("global", "us-east5"):
        chat = claude(location)
        await chat.chat_async("What's 2+2?")
        costs[location] = chat.get_cost()
    assert costs["global"] > 0
    assert costs["us-east5"] == pytest.approx(costs["global"] * premium)


@pytest.mark.usefixtures("platform")
@pytest.mark.parametrize("platform", ["bedrock"], indirect=True)
async def test_a_bedrock_region_that_costs_more_prices_its_calls_so(server):
    """Llama 3 70B costs $3.18 / $4.20 in ap-south-1 against $2.65 / $3.50 in us-east-1:
    each region's chat is priced at its own."""
    model = "meta.llama3-70b-instruct-v1:0"
    costs = {}
    for region in ("us-east-1", "ap-south-1"):
        chat = ve.chat_aws_bedrock(model, region=region, base_url=server.base_url("bedrock"))
        await chat.chat_async("What's 2+2?")
        tokens = chat.last_turn().tokens
        costs[region] = (chat.get_cost(), tokens.input, tokens.output)
    for region, (input_price, output_price) in {
        "us-east-1": (2.65, 3.5),
        "ap-south-1": (3.18, 4.2),
    }.items():
        cost, input_tokens, output_tokens = costs[region]
        assert cost == pytest.approx(
            (input_tokens * input_price + output_tokens * output_price) / 1e6
        )
