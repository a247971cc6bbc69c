"""A cloud platform's credential kept until shortly before it expires, then loaded again
once, whoever asks; and a platform's missing library named with its install command."""

import threading

import anyio
import pytest

import vitals_engine as ve
from vitals_engine.cloud.extras import install_command, require
from vitals_engine.cloud.refresh import RefreshingCredential


class Issuer:
    """Hands out numbered tokens that live `lifetime` seconds on a clock the test moves."""

    def __init__(self, lifetime: float | None = 3600.0) -> None:
        self.now = 1_000_000.0
        self.lifetime = lifetime
        self.issued = 0

    def load(self) -> tuple[str, float | None]:
        self.issued += 1
        expires = None if self.lifetime is None else self.now + self.lifetime
        return f"token-{self.issued}", expires


def credential(issuer: Issuer, margin: float = 300.0) -> RefreshingCredential[str]:
    return RefreshingCredential(
        issuer.load, what="a test token", margin=margin, clock=lambda: issuer.now
    )


@pytest.mark.anyio
async def test_a_token_is_kept_until_the_margin_before_its_expiry_then_loaded_again():
    issuer = Issuer(lifetime=3600)
    token = credential(issuer, margin=300)
    assert token.fresh() is None  # nothing loaded: the caller must load, off the event loop
    assert await token.get() == "token-1"
    issuer.now += 3299  # one second before the margin
    assert await token.get() == "token-1"
    assert token.fresh() == "token-1"
    issuer.now += 1  # 300 s before expiry: too close to send a request with it
    assert token.fresh() is None
    assert await token.get() == "token-2"
    assert token.expires_at == issuer.now + 3600
    assert issuer.issued == token.loads == 2


@pytest.mark.anyio
async def test_a_credential_without_expiry_is_loaded_once():
    issuer = Issuer(lifetime=None)
    token = credential(issuer)
    for _ in range(3):
        assert await token.get() == "token-1"
        issuer.now += 10**7
    assert issuer.issued == 1


@pytest.mark.anyio
async def test_many_callers_at_once_share_one_load():
    started = threading.Event()
    release = threading.Event()
    issued = []

    def slow_load() -> tuple[str, float]:
        issued.append(1)
        started.set()
        release.wait(10)
        return "shared", 2e9

    token = RefreshingCredential(slow_load, what="a slow token", clock=lambda: 0.0)
    seen: list[str] = []

    async def ask() -> None:
        seen.append(await token.get())

    async with anyio.create_task_group() as tasks:
        for _ in range(8):
            tasks.start_soon(ask)
        await anyio.to_thread.run_sync(started.wait)
        release.set()
    assert seen == ["shared"] * 8
    assert len(issued) == 1


@pytest.mark.anyio
async def test_a_failed_load_raises_to_the_caller_and_the_next_call_tries_again():
    attempts = []

    def flaky() -> tuple[str, float | None]:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("the token endpoint did not answer")
        return "second", None

    token = RefreshingCredential(flaky, what="a flaky token")
    with pytest.raises(OSError, match="did not answer"):
        await token.get()
    assert await token.get() == "second"


@pytest.mark.anyio
async def test_invalidate_makes_the_next_call_load_again():
    issuer = Issuer()
    token = credential(issuer)
    assert await token.get() == "token-1"
    token.invalidate()
    assert await token.get() == "token-2"


def test_a_missing_library_is_a_config_error_naming_its_install_command():
    with pytest.raises(ve.ConfigError) as caught:
        require("vitals_no_such_library.sub", extra="bedrock", platform="Amazon Bedrock")
    message = str(caught.value)
    assert "Amazon Bedrock needs the Python package 'vitals_no_such_library'" in message
    assert install_command("bedrock") in message
    assert require("json", extra="x", platform="y").dumps({}) == "{}"


def test_importing_the_engine_imports_no_cloud_library():
    import subprocess
    import sys

    code = (
        "import sys, vitals_engine as ve; ve.chat_openai; ve.Task; "
        "import vitals_engine.cloud.refresh, vitals_engine.providers.http; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('botocore', 'boto3', 'google', 'azure')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
