"""The cloud-platform recordings (`tests/recordings/bedrock`, `azure_openai`, `vertex`) read
as a provider will need them: Bedrock's ConverseStream bodies split into AWS event-stream
frames whose CRCs hold (checked by our reader and by botocore's), and every request went
to one of the endpoint shapes the platform documents. `index.json` agrees with the files.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.recordings.cassettes import EVENTSTREAM, HERE, Interaction, load

CLOUD = ("bedrock", "azure_openai", "vertex")
INDEX = [e for e in json.loads((HERE / "index.json").read_text()) if e["api"] in CLOUD]
FILES = [e["file"] for e in INDEX]


def of(platform: str) -> list[str]:
    return [name for name in FILES if name.startswith(platform + "/")]


# -- the index and the files ------------------------------------------------------------


def test_index_lists_every_cloud_recording():
    on_disk = sorted(f"{p.parent.name}/{p.name}" for d in CLOUD for p in (HERE / d).iterdir())
    assert sorted(FILES) == on_disk
    assert len(of("bedrock")) >= 4
    assert len(of("azure_openai")) >= 2
    assert len(of("vertex")) >= 2


@pytest.mark.parametrize("entry", INDEX, ids=FILES)
def test_index_entry_matches_file(entry):
    assert entry["bytes"] == (HERE / entry["file"]).stat().st_size
    assert entry["source"]["license"] in ("MIT", "Apache-2.0", "BSD-3-Clause", "BSD-2-Clause")
    assert re.fullmatch(r"[0-9a-f]{40}", entry["source"]["commit"])
    recorded = load(entry["file"])
    assert len(recorded) == len(entry["interactions"])
    for row, interaction in zip(entry["interactions"], recorded, strict=True):
        got = (interaction.method, interaction.path, interaction.host, interaction.status)
        assert got == (row["method"], row["path"], row["host"], row["status"])
        assert row["streamed"] == (interaction.streamed or interaction.eventstream)
        assert set(row["shapes"]) <= set(entry["shapes"]) | {"oauth_token"}


@pytest.mark.parametrize("name", FILES)
def test_no_live_credentials(name):
    raw = (HERE / name).read_text()
    assert not re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", raw)
    assert not re.search(r"ya29\.|Bearer [A-Za-z0-9._~+/-]{20,}|X-Amz-Signature", raw)
    for line in re.findall(r"(?im)^\s*(?:authorization|api-key|x-api-key):\n\s*- (.*)$", raw):
        assert line.strip("'\"") == "<filtered>"


# -- Amazon Bedrock: Converse and ConverseStream ----------------------------------------

BEDROCK_HOST = re.compile(r"bedrock-runtime\.[a-z0-9-]+\.amazonaws\.com")
BEDROCK_PATH = re.compile(r"/model/[^/]+/(converse|converse-stream)")


def bedrock() -> list[tuple[str, Interaction]]:
    return [(name, i) for name in of("bedrock") for i in load(name)]


@pytest.mark.parametrize("name", of("bedrock"))
def test_bedrock_endpoints(name):
    for interaction in load(name):
        assert BEDROCK_HOST.fullmatch(interaction.host)
        match = BEDROCK_PATH.fullmatch(interaction.path)
        assert match, interaction.path
        assert interaction.query == ""
        assert isinstance(interaction.request_body["messages"], list)
        if interaction.status == 200:
            # ConverseStream answers an event stream, Converse JSON
            assert interaction.eventstream == (match[1] == "converse-stream")


@pytest.mark.parametrize("name", of("bedrock"))
def test_bedrock_stream_frames_check_out(name):
    eventstream = pytest.importorskip("botocore.eventstream")
    for interaction in load(name):
        if not interaction.eventstream:
            continue
        frames = interaction.frames()  # our reader: CRCs checked, a ValueError if not
        buffer = eventstream.EventStreamBuffer()  # botocore's, which checks them too
        buffer.add_data(interaction.body)
        theirs = list(buffer)
        assert [(m.headers, m.payload) for m in theirs] == [tuple(f) for f in frames]
        for frame in frames:
            assert frame.headers[":message-type"] == "event"
            assert frame.headers[":content-type"] == "application/json"
        kinds = [f.event_type for f in frames]
        assert kinds[0] == "messageStart"
        assert kinds[-2:] == ["messageStop", "metadata"]
        events = interaction.events()
        usage = events[-1]["metadata"]["usage"]  # the usage comes last, in `metadata`
        assert usage["inputTokens"] + usage["outputTokens"] == usage["totalTokens"]
        assert events[-2]["messageStop"]["stopReason"] in ("end_turn", "tool_use")


def test_bedrock_frames_reject_a_corrupt_body():
    interaction = load("bedrock/pydantic-ai__test_bedrock_model_stream.yaml")[0]
    body = bytearray(interaction.body)
    body[20] ^= 0xFF  # inside the first frame's headers: the message CRC no longer holds
    with pytest.raises(ValueError, match="message CRC"):
        Interaction(**{**vars(interaction), "body": bytes(body)}).frames()
    with pytest.raises(ValueError, match="frame at"):
        Interaction(**{**vars(interaction), "body": interaction.body[:-3]}).frames()


def test_bedrock_converse_replies():
    for _, interaction in bedrock():
        if interaction.status != 200 or interaction.eventstream:
            continue
        reply = interaction.json()
        assert reply["output"]["message"]["role"] == "assistant"
        assert reply["stopReason"] in ("end_turn", "tool_use")
        usage = reply["usage"]
        assert usage["inputTokens"] + usage["outputTokens"] <= usage["totalTokens"]


def delta_of(events: list[dict], kind: str) -> list[dict]:
    """The `kind` part (`text`, `toolUse`, `reasoningContent`) of each contentBlockDelta."""
    deltas = (e["contentBlockDelta"]["delta"] for e in events if "contentBlockDelta" in e)
    return [d[kind] for d in deltas if kind in d]


def test_bedrock_shapes():
    # tool use, streamed: a contentBlockStart names the tool (text blocks have none), the
    # input arrives as JSON text in `delta.toolUse.input`; the reply to it comes next
    stream, after = load("bedrock/pydantic-ai__test_bedrock_model_iter_stream.yaml")
    events = stream.events()
    starts = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert [s["start"]["toolUse"]["name"] for s in starts] == ["get_temperature"]
    tool_input = "".join(d["input"] for d in delta_of(events, "toolUse"))
    assert json.loads(tool_input) == {"city": "Paris"}
    assert any("toolResult" in c for m in after.request_body["messages"] for c in m["content"])

    # reasoning, streamed: text deltas, then the signature in a delta of its own
    (stream,) = load("bedrock/pydantic-ai__test_bedrock_model_thinking_part_stream.yaml")
    reasoning = delta_of(stream.events(), "reasoningContent")
    assert "text" in reasoning[0]
    assert list(reasoning[-1]) == ["signature"]
    (stream,) = load("bedrock/pydantic-ai__test_bedrock_model_thinking_part_redacted_stream.yaml")
    assert any("redactedContent" in r for r in delta_of(stream.events(), "reasoningContent"))

    # tool use with reasoning, then the toolResult sent back
    reply, after = load("bedrock/pydantic-ai__test_bedrock_anthropic_tool_with_thinking.yaml")
    content = reply.json()["output"]["message"]["content"]
    assert [next(iter(c)) for c in content] == ["reasoningContent", "text", "toolUse"]
    assert any("toolResult" in c for m in after.request_body["messages"] for c in m["content"])

    # prompt caching: written once, then read
    first, again = (
        i.json()["usage"]
        for i in load("bedrock/pydantic-ai__test_bedrock_cache_write_and_read.yaml")
    )
    assert first["cacheWriteInputTokens"] > 0 == first["cacheReadInputTokens"]
    assert again["cacheReadInputTokens"] == first["cacheWriteInputTokens"]

    # errors: a 400 JSON body (even for converse-stream), no error-type header recorded
    for name in (
        "bedrock/pydantic-ai__test_bedrock_error.yaml",
        "bedrock/pydantic-ai__test_bedrock_streaming_error.yaml",
    ):
        (error,) = load(name)
        assert (error.status, error.json()) == (
            400,
            {"message": "The provided model identifier is invalid."},
        )
        assert EVENTSTREAM not in error.content_type


# -- Azure OpenAI -----------------------------------------------------------------------

AZURE_HOST = re.compile(r"[a-z0-9-]+\.(openai\.azure\.com|cognitiveservices\.azure\.com)")
AZURE_V1 = re.compile(r"/openai/v1/(chat/completions|responses)")
AZURE_DATED = re.compile(r"/openai/(deployments/[^/]+/chat/completions|responses)")


@pytest.mark.parametrize("name", of("azure_openai"))
def test_azure_endpoints(name):
    for interaction in load(name):
        assert AZURE_HOST.fullmatch(interaction.host)
        if AZURE_V1.fullmatch(interaction.path):
            assert interaction.query == ""  # the v1 API takes no api-version
        else:
            assert AZURE_DATED.fullmatch(interaction.path), interaction.path
            assert re.fullmatch(r"api-version=\d{4}-\d{2}-\d{2}(-preview)?", interaction.query)


def test_azure_content_filter_refusal():
    (refusal,) = load("azure_openai/mirascope__test_refusal__azure_openai_gpt_5_mini__sync.yaml")
    assert refusal.status == 400
    error = refusal.json()["error"]
    assert (error["code"], error["param"], error["status"]) == ("content_filter", "prompt", 400)
    assert error["innererror"]["code"] == "ResponsibleAIPolicyViolation"
    categories = error["innererror"]["content_filter_result"]
    assert {c for c, r in categories.items() if r["filtered"]} == {"self_harm"}


def test_azure_prompt_filter_results():
    (stream,) = load("azure_openai/mirascope__test_call__azure_openai_gpt_5_mini__stream.yaml")
    first, *rest = stream.events()  # Azure's own first chunk: no choices, the prompt's filter
    assert first["choices"] == []
    assert first["id"] == ""
    assert (
        first["prompt_filter_results"][0]["content_filter_results"]["jailbreak"]["detected"]
        is False
    )
    assert rest[-1]["usage"]["total_tokens"] > 0
    (call,) = load("azure_openai/pydantic-ai__test_azure_provider_call.yaml")
    assert "prompt_filter_results" in call.json()
    (responses,) = load(
        "azure_openai/pydantic-ai__test_azure_responses_reasoning_context_default_wire_contract[gpt-5.4].yaml"
    )
    assert [f["source_type"] for f in responses.json()["content_filters"]] == [
        "prompt",
        "completion",
    ]


# -- Google Vertex AI: Gemini and Claude ------------------------------------------------

VERTEX_HOST = re.compile(r"(?:([a-z0-9-]+)-)?aiplatform\.googleapis\.com")
VERTEX_PATH = re.compile(
    r"/v1(?:beta1)?/projects/[^/]+/locations/([a-z0-9-]+)/publishers/(google|anthropic)/models/"
    r"[^/:]+:(generateContent|streamGenerateContent|rawPredict|streamRawPredict)"
)


@pytest.mark.parametrize("name", of("vertex"))
def test_vertex_endpoints(name):
    entry = INDEX[FILES.index(name)]
    seen = 0
    for row, interaction in zip(entry["interactions"], load(name), strict=True):
        if interaction.host == "oauth2.googleapis.com":  # the token exchange before the call
            assert row["shapes"] == ["oauth_token"]
            assert interaction.path == "/token"
            continue
        seen += 1
        host = VERTEX_HOST.fullmatch(interaction.host)
        path = VERTEX_PATH.fullmatch(interaction.path)
        assert host, interaction.host
        assert path, interaction.path
        assert host[1] in (None, path[1])  # a regional host names the path's location
        publisher, method = path[2], path[3]
        assert (publisher == "anthropic") == method.endswith(("rawPredict", "RawPredict"))
        if publisher == "anthropic":  # the model is in the path, the version in the body
            assert interaction.request_body["anthropic_version"] == "vertex-2023-10-16"
            assert "model" not in interaction.request_body
        if method.startswith("stream"):
            assert interaction.streamed
            assert interaction.query == ("alt=sse" if publisher == "google" else "")
    assert seen


def test_vertex_claude_replies():
    stream = load(
        "vertex/mirascope__test_call__anthropic-vertex_claude_haiku_4_5@20251001__stream.yaml"
    )[1]
    events = stream.events()
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    assert events[0]["message"]["id"].startswith("msg_vrtx_")
    tools = load(
        "vertex/mirascope__test_call_with_tools__anthropic-vertex_claude_haiku_4_5@20251001__sync.yaml"
    )
    assert [c["type"] for c in tools[1].json()["content"]] == ["tool_use", "tool_use"]


def test_vertex_gemini_blocked_prompt():
    blocked = load(
        "vertex/pydantic-ai__test_google_model_armor_prompt_template_text_gets_blocked.yaml"
    )[1]
    reply = blocked.json()
    assert blocked.status == 200
    assert "candidates" not in reply
    assert reply["promptFeedback"]["blockReason"] == "MODEL_ARMOR"
