"""Vertex AI (Gemini and Claude) over real HTTP against the mock server, with the real
google-auth finding Application Default Credentials: a service-account file (its JWT
grant at the mock's token endpoint), gcloud's authorized-user file (its refresh-token
grant), and the metadata server."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import vitals_engine as ve
from tests.helpers import sums
from vitals_engine.providers.vertex import VertexClaude, VertexGemini, vertex_root
from vitals_engine.testing import MockReply
from vitals_engine.transport.base import HttpResponse

pytestmark = [pytest.mark.usefixtures("no_retries", "no_adc")]

PROJECT = "test-project"
CLAUDE = "claude-sonnet-4-5@20250929"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(scope="module")
def private_key() -> str:
    """A throwaway RSA key, PEM, for the service-account file."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
def no_adc(monkeypatch, tmp_path, server):
    """No credentials anywhere: no variables, an empty gcloud config, and a metadata-server
    probe that answers "not Google" at once (a 404 from the mock)."""
    for name in (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GCE_METADATA_HOST",
        "GOOGLE_VERTEX_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "gcloud"
    config.mkdir()
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(config))
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{server.port}/no-metadata-server")
    return config


@pytest.fixture
def vertex_mock(server):
    """The mock's Vertex format, its clock put back after the test."""
    fmt = server.wire_format("vertex")
    fmt.issued.clear()
    before = fmt.now() - time.time()
    yield fmt
    fmt.advance(before - (fmt.now() - time.time()))


@pytest.fixture
def service_account(monkeypatch, tmp_path, server, private_key):
    """GOOGLE_APPLICATION_CREDENTIALS: a service-account key file whose token_uri is the
    mock's token endpoint."""
    info = {
        "type": "service_account",
        "project_id": "sa-project",
        "private_key_id": "0123456789abcdef",
        "private_key": private_key,
        "client_email": "evals@sa-project.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "token_uri": f"{server.base_url('vertex')}/google/token",
    }
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return info


def vertex(server, model="gemini-test", **kw):
    kw.setdefault("project", PROJECT)
    kw.setdefault("location", "us-central1")
    return ve.chat_google_vertex(model, base_url=server.base_url("vertex"), **kw)


def header(record, name):
    return next(v for k, v in record.headers.items() if k.lower() == name)


# -- Gemini ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_gemini_whole_with_a_service_account_token(server, vertex_mock, service_account):
    """generateContent at Vertex's path, with a bearer from the service account's JWT grant."""
    chat = vertex(server)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    record = server.log[-1]
    assert record.format == "vertex"
    assert record.request.format == "vertex/google"
    assert not record.request.stream
    assert chat.provider.url() == (
        f"{server.base_url('vertex')}/v1/projects/{PROJECT}/locations/us-central1/publishers/"
        "google/models/gemini-test:generateContent"
    )
    assert header(record, "authorization").startswith("Bearer ya29.mock-")
    assert "x-goog-api-key" not in {k.lower() for k in record.headers}
    assert vertex_mock.issued == {"jwt-bearer": 1}
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=2, output=5)
    assert chat.provider.model_id == "vertex/gemini-test"


@pytest.mark.anyio
async def test_gemini_streamed_tools_and_thinking(server, vertex_mock, service_account):
    """streamGenerateContent?alt=sse, a tool call round trip and thought parts."""
    chat = vertex(server, stream=True, reasoning=2048)
    chat.register_tool(add)
    assert await chat.chat_async("Use add on 3 and 4") == "The tool returned 7."
    first, second = server.log[-2:]
    assert first.request.stream
    assert chat.provider.stream_url().endswith(":streamGenerateContent?alt=sse")
    assert first.body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 2048}
    assert second.body["contents"][2]["parts"][0]["functionResponse"]["response"] == {"result": 7}
    server.script(lambda r: MockReply(text="4", reasoning="Two and two."))
    await chat.chat_async("What's 2+2?")
    thinking = chat.last_turn().contents[0]
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.thinking == "Two and two."
    assert vertex_mock.issued == {"jwt-bearer": 1}  # one token for all four calls


@pytest.mark.anyio
async def test_the_global_location_and_the_default_one(monkeypatch):
    """'global' has its own host; the location defaults to GOOGLE_CLOUD_LOCATION, then
    global."""
    assert vertex_root("global") == "https://aiplatform.googleapis.com"
    provider = ve.chat_google_vertex("gemini-2.5-pro", project="p").provider
    assert isinstance(provider, VertexGemini)
    assert provider.base_url == "https://aiplatform.googleapis.com"
    assert provider.location == "global"
    claude = ve.chat_google_vertex(CLAUDE, project="p", location="us-east5").provider
    assert isinstance(claude, VertexClaude)
    assert claude.base_url == "https://us-east5-aiplatform.googleapis.com"
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", "https://vertex-proxy.example.com/")
    assert ve.chat_google_vertex("gemini-2.5-pro").provider.base_url == (
        "https://vertex-proxy.example.com"
    )
    with pytest.raises(ve.ConfigError, match="not a Google Cloud location"):
        ve.chat_google_vertex("gemini-2.5-pro", project="p", location="US Central")


def test_the_endpoint_is_project_location_and_model(monkeypatch):
    """Rate limits are shared per project, location and model."""
    a = ve.chat_google_vertex("gemini-2.5-pro", project="a", location="us-central1").provider
    b = ve.chat_google_vertex("gemini-2.5-pro", project="b", location="us-central1").provider
    c = ve.chat_google_vertex("gemini-2.5-pro", project="a", location="europe-west4").provider
    assert len({a.endpoint, b.endpoint, c.endpoint}) == 3
    assert a.endpoint[0] == "Vertex AI"
    assert a.endpoint[2] == "gemini-2.5-pro"
    assert "projects/a/locations/us-central1" in a.endpoint[1]


# -- Claude ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_claude_whole_and_streamed_with_its_vertex_body(server, vertex_mock, service_account):
    """rawPredict and streamRawPredict, the body without model and with anthropic_version."""
    chat = vertex(server, CLAUDE, location="us-east5")
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    record = server.log[-1]
    assert record.request.format == "vertex/anthropic"
    assert record.model == CLAUDE
    assert chat.provider.url() == (
        f"{server.base_url('vertex')}/v1/projects/{PROJECT}/locations/us-east5/publishers/"
        f"anthropic/models/{CLAUDE}:rawPredict"
    )
    assert "model" not in record.body
    assert record.body["anthropic_version"] == "vertex-2023-10-16"
    streamed = vertex(server, CLAUDE, location="us-east5", stream=True)
    assert await streamed.chat_async("What's 3+3?") == "3 + 3 = 6"
    assert server.log[-1].request.stream
    assert server.log[-1].body["stream"] is True
    assert streamed.provider.model_id == f"vertex/{CLAUDE}"


@pytest.mark.anyio
async def test_claude_prompt_cache_and_thinking(server, vertex_mock, service_account):
    """cache_control breakpoints as chat_anthropic sends them; the cache's reads come back
    as cached input; thinking blocks with their signatures."""
    rubric = "Grade carefully. " * 700
    chat = vertex(server, CLAUDE, system_prompt=rubric, reasoning=2048)
    await chat.chat_async("What's 2+2?")
    assert chat.last_turn().tokens.cache_write > 0
    body = server.log[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert any("cache_control" in block for block in body["system"])
    await chat.chat_async("What's 3+3?")
    assert chat.last_turn().tokens.cached_input > 0
    server.script(lambda r: MockReply(text="4", reasoning="two and two"))
    await chat.chat_async("What's 2+2 again?")
    assert isinstance(chat.last_turn().contents[0], ve.ContentThinking)


@pytest.mark.anyio
async def test_claude_refuses_model_in_the_body(server, vertex_mock, service_account):
    """The mock refuses what Vertex refuses: a body naming its model."""
    token = await ve.chat_google_vertex(CLAUDE, project=PROJECT).provider.auth.token()
    url = (
        f"{server.base_url('vertex')}/v1/projects/{PROJECT}/locations/us-east5/publishers/"
        f"anthropic/models/{CLAUDE}:rawPredict"
    )
    body = {"model": CLAUDE, "anthropic_version": "vertex-2023-10-16", "max_tokens": 5}
    body["messages"] = [{"role": "user", "content": "Hi"}]
    async with httpx.AsyncClient() as client:
        answer = await client.post(url, json=body, headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 400
    assert "model" in answer.json()["error"]["message"]


# -- credentials ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_gclouds_user_credentials_refresh_at_the_token_endpoint(
    server, vertex_mock, no_adc, monkeypatch
):
    """The file `gcloud auth application-default login` writes: a refresh-token grant, its
    quota project sent as x-goog-user-project, the project from GOOGLE_CLOUD_PROJECT."""
    import google.oauth2.credentials

    monkeypatch.setattr(
        google.oauth2.credentials,
        "_GOOGLE_OAUTH2_TOKEN_ENDPOINT",
        f"{server.base_url('vertex')}/google/token",
    )
    user = {
        "type": "authorized_user",
        "client_id": "764086051850-x.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//0refresh",
        "quota_project_id": "billing-project",
    }
    (no_adc / "application_default_credentials.json").write_text(json.dumps(user))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    chat = vertex(server, project=None)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    record = server.log[-1]
    assert "/projects/env-project/" in chat.provider.url()
    assert header(record, "x-goog-user-project") == "billing-project"
    assert vertex_mock.issued == {"refresh_token": 1}


@pytest.mark.anyio
async def test_a_revoked_refresh_token_is_an_authentication_error(
    server, vertex_mock, no_adc, monkeypatch
):
    import google.oauth2.credentials

    monkeypatch.setattr(
        google.oauth2.credentials,
        "_GOOGLE_OAUTH2_TOKEN_ENDPOINT",
        f"{server.base_url('vertex')}/google/token",
    )
    user = {"type": "authorized_user", "client_id": "c", "client_secret": "s"}
    user["refresh_token"] = "revoked-1"
    (no_adc / "application_default_credentials.json").write_text(json.dumps(user))
    chat = vertex(server)
    with pytest.raises(ve.AuthenticationError, match="application-default login") as caught:
        await chat.chat_async("What's 2+2?")
    assert "invalid_grant" in str(caught.value)
    assert server.requests == 0


@pytest.mark.anyio
async def test_the_metadata_server(server, vertex_mock, monkeypatch):
    """On Google Cloud: google-auth probes the metadata server, reads the project and asks
    it for the token (GCE_METADATA_HOST; google-auth reads that variable when it is first
    imported, so the module's copy is set too)."""
    from google.auth.compute_engine import _metadata

    where = f"127.0.0.1:{server.port}"
    monkeypatch.setenv("GCE_METADATA_HOST", where)
    monkeypatch.setenv("GCE_METADATA_IP", where)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", where)
    chat = vertex(server, project=None)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert "/projects/mock-project/" in chat.provider.url()
    assert vertex_mock.issued == {"metadata": 1}


@pytest.mark.anyio
async def test_a_token_expiring_during_the_run_is_refreshed_before_a_call_fails(
    server, vertex_mock, service_account
):
    """Near its expiry (within the margin) and past it, on the credential's clock and the
    server's, the next call goes out with a fresh token and no call fails (one attempt
    each: no retries)."""
    chat = vertex(server)
    credential = chat.provider.auth.token_credential
    await chat.chat_async("What's 2+2?")
    first = header(server.log[-1], "authorization")
    ahead = 3600 - credential.margin + 10  # inside the margin: still valid, soon not
    credential.clock = lambda: time.time() + ahead
    vertex_mock.advance(ahead)
    await chat.chat_async("What's 3+3?")
    second = header(server.log[-1], "authorization")
    assert second != first
    vertex_mock.advance(3600)  # both tokens lapsed on the server
    credential.clock = lambda: time.time() + ahead + 3600
    async with httpx.AsyncClient() as client:
        stale = await client.post(
            f"{server.base_url('vertex')}/v1/projects/p/locations/l/publishers/google/models/"
            "m:generateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
            headers={"authorization": second},
        )
    assert stale.status_code == 401
    assert stale.json()["error"]["status"] == "UNAUTHENTICATED"
    assert await chat.chat_async("What's 4+4?") == "4 + 4 = 8"
    assert vertex_mock.issued == {"jwt-bearer": 3}
    assert credential.loads == 3


@pytest.mark.anyio
async def test_no_credentials_is_an_error_before_any_request(server, vertex_mock):
    chat = vertex(server)
    with pytest.raises(ve.AuthenticationError) as caught:
        await chat.chat_async("What's 2+2?")
    message = str(caught.value)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message
    assert "gcloud auth application-default login" in message
    assert server.requests == 0
    assert vertex_mock.issued == {}


def test_no_project_is_an_error_before_any_request(server, vertex_mock, service_account, tmp_path):
    """A key file without a project, no project= and no GOOGLE_CLOUD_PROJECT."""
    path = tmp_path / "sa-no-project.json"
    path.write_text(json.dumps({k: v for k, v in service_account.items() if k != "project_id"}))
    import os

    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(path)  # restored by monkeypatch
    chat = vertex(server, project=None)
    with pytest.raises(ve.ConfigError, match="GOOGLE_CLOUD_PROJECT"):
        chat.provider.check_key()
    with pytest.raises(ve.ConfigError, match="project="):
        chat.chat("What's 2+2?")
    assert server.requests == 0
    assert vertex_mock.issued == {}


def test_a_missing_extra_names_the_install_command(server, monkeypatch):
    for name in ("google", "google.auth", "google.auth.transport", "google.auth.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)
    chat = vertex(server)
    with pytest.raises(ve.ConfigError, match=r'pip install "vitals-engine\[vertex\]"'):
        chat.provider.check_key()
    assert server.requests == 0


def test_traces_name_the_platform_as_the_genai_conventions_do():
    from vitals_engine.tracing.genai import provider_name

    assert provider_name(ve.chat_google_vertex("gemini-2.5-pro").provider.name) == "gcp.vertex_ai"


def test_an_api_key_is_refused():
    with pytest.raises(ve.ConfigError, match="no api_key"):
        ve.chat_google_vertex("gemini-2.5-pro", api_key="x")


def test_importing_the_package_and_building_a_chat_import_no_google_auth():
    code = (
        "import sys, vitals_engine as ve\n"
        "ve.chat_google_vertex('gemini-2.5-pro', project='p')\n"
        "ve.chat('vertex/claude-sonnet-4-5@20250929', project='p')\n"
        "assert 'google.auth' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- errors ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resource_exhausted_is_a_rate_limit_and_retried(server, vertex_mock, service_account):
    """Vertex's 429 RESOURCE_EXHAUSTED is its busy shared quota: retried, never the
    account's spent quota."""
    server.fail("quota")
    chat = vertex(server)
    with pytest.raises(ve.RateLimitError) as caught:
        await chat.chat_async("What's 2+2?")
    assert not isinstance(caught.value, ve.QuotaExhausted)
    assert caught.value.retryable
    assert caught.value.status == 429
    assert "RESOURCE_EXHAUSTED" in str(caught.value)
    server.fail("quota", times=2, retry_after=0.01)
    retried = vertex(server, retry=ve.Retry(max_attempts=3, backoff=0.01))
    assert await retried.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert server.requests == 4


def _answer(status: int, message: str, code: str) -> HttpResponse:
    body = {"error": {"code": status, "message": message, "status": code}}
    return HttpResponse(status, {}, json.dumps(body).encode())


def test_permission_denied_says_which_role_and_apis():
    gemini = ve.chat_google_vertex("gemini-2.5-pro", project="p").provider
    claude = ve.chat_google_vertex(CLAUDE, project="p", location="us-east5").provider
    said = "Permission 'aiplatform.endpoints.predict' denied on resource"
    error = gemini._error(_answer(403, said, "PERMISSION_DENIED"))
    assert isinstance(error, ve.AuthenticationError)
    assert "roles/aiplatform.user" in error.message
    assert "aiplatform.googleapis.com" in error.message
    assert "Model Garden" not in error.message
    error = claude._error(_answer(403, said, "PERMISSION_DENIED"))
    assert "Model Garden" in error.message
    assert said in error.message


def test_not_found_says_the_model_may_not_be_served_there():
    claude = ve.chat_google_vertex(CLAUDE, project="p", location="europe-west9").provider
    said = "Publisher Model `projects/p/locations/europe-west9/publishers/anthropic/...` not found."
    error = claude._error(_answer(404, said, "NOT_FOUND"))
    assert not error.retryable
    assert "may not be served in location 'europe-west9'" in error.message


@pytest.mark.anyio
async def test_the_token_never_shows_in_an_error(server, vertex_mock, service_account):
    """A gateway echoing the request's headers: the bearer is taken out."""
    chat = vertex(server)
    await chat.chat_async("What's 2+2?")
    token = header(server.log[-1], "authorization").removeprefix("Bearer ")
    provider = chat.provider
    error = provider._error(_answer(500, f"echo: Bearer {token}", "INTERNAL"))
    provider._redact(error)
    assert token not in str(error)
    assert token not in (error.body or "")
    assert token not in repr(provider)


# -- runs -----------------------------------------------------------------------------


def test_a_run_with_vertex_models(server, vertex_mock, service_account, tmp_path):
    """A task solved by Gemini on Vertex and graded by Claude on Vertex; costs by platform."""
    ve.set_price("Vertex AI", "gemini-test", input=1, output=2)
    solver = ve.generate(vertex(server))
    task = ve.Task(sums(3), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    task.eval()
    assert task.get_samples().select("score").to_series().to_list() == ["C", "C", "C"]
    assert ve.read_log(task.log_path).status == "success"
    assert vertex_mock.issued == {"jwt-bearer": 1}


def test_batch_mode_is_refused(server, vertex_mock, service_account, tmp_path):
    solver = ve.generate(vertex(server))
    task = ve.Task(sums(2), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.ConfigError, match="cannot send batches"):
        task.eval(batch=ve.Batch(size=10, wait=0.05, poll=0.02))
    assert len(server.log) == 0
