"""AWS credentials for Bedrock from botocore's chain: temporary keys from a container
credentials endpoint (the mock's) are loaded again before they expire, so calls go on
without a failure when the keys of the first hour lapse; the region and profile are
found where the AWS tools look for them."""

from __future__ import annotations

import time

import pytest

import vitals_engine as ve
from tests.cloud import no_aws_of_this_machine
from vitals_engine.cloud.aws import find_region
from vitals_engine.testing.formats.bedrock import BedrockFormat

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture
def container(server, monkeypatch, tmp_path):
    """The environment of a container whose credentials come from the mock's endpoint; the
    server's Bedrock format, its clock put back after the test."""
    no_aws_of_this_machine(monkeypatch, tmp_path)
    monkeypatch.setenv(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", server.base_url("bedrock") + "/aws/credentials"
    )
    fmt = server.wire_format("bedrock")
    assert isinstance(fmt, BedrockFormat)
    issued_before = len(fmt.keys.issued)
    yield fmt, issued_before
    fmt.keys.offset = 0.0
    fmt.keys.lifetime = 3600.0


@pytest.mark.anyio
async def test_keys_that_expire_during_the_run_are_refreshed_before(server, container):
    """The first call signs with keys issued for an hour; when both clocks pass that hour,
    the next call loads new keys first: the server saw two keys and no failed call."""
    fmt, before = container
    offset = [0.0]
    chat = ve.chat_aws_bedrock(MODEL, region="us-east-1", base_url=server.base_url("bedrock"))
    provider = chat.provider
    provider.auth.credential.clock = lambda: time.time() + offset[0]
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    first = fmt.keys.issued[before:]
    assert len(first) == 1
    offset[0] += 3700  # past the first keys' expiry, on our clock and the server's
    fmt.keys.advance(3700)
    assert await chat.chat_async("What's 3+3?") == "3 + 3 = 6"
    assert await chat.chat_async("What's 4+4?") == "4 + 4 = 8"
    issued = fmt.keys.issued[before:]
    assert len(issued) == 2
    assert [entry.outcome for entry in server.log] == ["ok", "ok", "ok"]
    used = [e.headers["Authorization"].split("Credential=")[1].split("/")[0] for e in server.log]
    assert used == [issued[0], issued[1], issued[1]]
    assert provider.auth.credential.loads == 2


def test_keys_are_loaded_again_margin_seconds_before_they_expire(server, container):
    """Keys within the refresh margin of their expiry (not yet expired) are replaced before
    the call: the old ones never reach the server that close to their end."""
    fmt, before = container
    offset = [0.0]
    chat = ve.chat_aws_bedrock(MODEL, region="us-east-1", base_url=server.base_url("bedrock"))
    chat.provider.auth.credential.clock = lambda: time.time() + offset[0]
    chat.chat("Hello")
    offset[0] += 3600 - 200  # 200 s left: inside the 300 s margin
    chat.chat("Hello again")
    assert len(fmt.keys.issued[before:]) == 2
    assert all(entry.outcome == "ok" for entry in server.log)


def test_an_expired_token_the_server_refuses_is_loaded_again_for_the_retry(server, container):
    """Keys the server says are expired (its clock ahead of ours) are dropped: the retry
    loads new ones and succeeds."""
    fmt, before = container
    chat = ve.chat_aws_bedrock(
        MODEL, region="us-east-1", base_url=server.base_url("bedrock"),
        retry=ve.Retry(max_attempts=3, backoff=0),
    )  # fmt: skip
    chat.chat("Hello")
    fmt.keys.advance(3700)  # only the server's clock moves
    assert chat.chat("Hello again")
    assert [entry.outcome for entry in server.log] == ["ok", "ok"]
    assert len(fmt.keys.issued[before:]) == 2


def test_the_region_comes_from_the_argument_the_environment_or_the_profile(monkeypatch, tmp_path):
    """region= first, then AWS_REGION, AWS_DEFAULT_REGION, then the profile's region."""
    config = tmp_path / "config"
    config.write_text("[profile research]\nregion = eu-central-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    assert find_region(None, "research") == "eu-central-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert find_region(None, "research") == "us-west-2"
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert find_region(None, "research") == "ap-south-1"
    assert find_region("us-east-1", "research") == "us-east-1"


def test_keys_from_a_profile_in_the_shared_files(server, monkeypatch, tmp_path, container):
    """profile= names a profile of the shared credentials file, whose keys sign."""
    from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY

    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[research]\naws_access_key_id = {TEST_ACCESS_KEY}\n"
        f"aws_secret_access_key = {TEST_SECRET_KEY}\n"
    )
    chat = ve.chat_aws_bedrock(
        MODEL, region="us-east-1", profile="research", base_url=server.base_url("bedrock")
    )
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"
    assert TEST_ACCESS_KEY in server.log[-1].headers["Authorization"]


def test_an_unknown_profile_says_so_before_any_request(server, container):
    """A profile that does not exist is an AuthenticationError naming it."""
    chat = ve.chat_aws_bedrock(
        MODEL, region="us-east-1", profile="nope", base_url=server.base_url("bedrock")
    )
    with pytest.raises(ve.AuthenticationError, match="nope"):
        chat.chat("Hi")
    assert server.log == []
