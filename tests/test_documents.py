"""Documents (`ContentDocument`): attached by the user, sent to each provider in its API's
shape over real HTTP to the mock server, refused before sending where an API takes no such
type, logged as Inspect's `ContentDocument`, read back, and keyed by the reply cache."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import vitals_engine as ve
from tests.cloud import GoogleCredentials, use_aws_test_keys
from vitals_engine.bridging.anthropic_api import AnthropicApi
from vitals_engine.bridging.chat_completions_api import ChatCompletionsApi
from vitals_engine.bridging.responses_api import ResponsesApi
from vitals_engine.caching.keys import reply_key
from vitals_engine.log.logged_turns import message_contents
from vitals_engine.log.reader import read_log
from vitals_engine.providers.converse import document_name
from vitals_engine.providers.http import HttpProvider
from vitals_engine.vocab.model_calls import ChatRequest

KEY = "sk-test"


def tiny_pdf(text: str = "Hello") -> bytes:
    """A minimal valid one-page PDF saying `text`, its cross-reference table exact."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


PDF = tiny_pdf()
DOC = ve.ContentDocument.from_bytes(PDF, filename="Q3 report_final.pdf")
B64 = base64.b64encode(PDF).decode()
CSV = ve.ContentDocument.from_bytes(b"a,b\n1,2\n", "text/csv", "table.csv")
DOCX = ve.ContentDocument.from_bytes(
    b"PK\x03\x04", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    use_aws_test_keys(monkeypatch, tmp_path)


def anthropic(server: Any) -> ve.Chat:
    return ve.chat_anthropic(
        "claude-sonnet-4-5", api_key=KEY, base_url=server.base_url("anthropic")
    )


def bedrock(server: Any) -> ve.Chat:
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    return ve.chat_aws_bedrock(model, region="us-east-1", base_url=server.base_url("bedrock"))


def gemini(server: Any) -> ve.Chat:
    return ve.chat_google_gemini(
        "gemini-2.5-flash", api_key=KEY, base_url=server.base_url("google")
    )


def vertex(server: Any) -> ve.Chat:
    return ve.chat_google_vertex(
        "gemini-2.5-flash",
        project="test-project",
        location="us-central1",
        credentials=GoogleCredentials(server),
        base_url=server.base_url("vertex"),
    )


def chat_completions(server: Any) -> ve.Chat:
    return ve.chat_openai(
        "gpt-4.1", base_url=server.base_url(), api_key=KEY, api="chat_completions"
    )


def responses(server: Any) -> ve.Chat:
    return ve.chat_openai("gpt-4.1", base_url=server.base_url(), api_key=KEY, api="responses")


def _anthropic_block(body: dict[str, Any]) -> Any:
    return body["messages"][0]["content"][1]


def _bedrock_block(body: dict[str, Any]) -> Any:
    return body["messages"][0]["content"][1]


def _gemini_block(body: dict[str, Any]) -> Any:
    return body["contents"][0]["parts"][1]


def _chat_block(body: dict[str, Any]) -> Any:
    return body["messages"][0]["content"][1]


def _responses_block(body: dict[str, Any]) -> Any:
    return body["input"][0]["content"][1]


#: Each provider: its chat, where its request holds the document, and that block.
SHAPES = {
    "anthropic": (
        anthropic,
        _anthropic_block,
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": B64},
            "title": "Q3 report_final.pdf",
        },
    ),
    "bedrock": (
        bedrock,
        _bedrock_block,
        {"document": {"format": "pdf", "name": "Q3 report final", "source": {"bytes": B64}}},
    ),
    "gemini": (gemini, _gemini_block, {"inlineData": {"mimeType": "application/pdf", "data": B64}}),
    "vertex": (vertex, _gemini_block, {"inlineData": {"mimeType": "application/pdf", "data": B64}}),
    "chat_completions": (
        chat_completions,
        _chat_block,
        {
            "type": "file",
            "file": {
                "filename": "Q3 report_final.pdf",
                "file_data": f"data:application/pdf;base64,{B64}",
            },
        },
    ),
    "responses": (
        responses,
        _responses_block,
        {
            "type": "input_file",
            "filename": "Q3 report_final.pdf",
            "file_data": f"data:application/pdf;base64,{B64}",
        },
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("api", sorted(SHAPES))
async def test_a_pdf_reaches_each_provider_in_its_apis_shape(api, server, aws_env):
    """A PDF the user attaches goes over HTTP as the block that API documents, after the
    prompt's text, and the mock server takes it."""
    make, block, expected = SHAPES[api]
    reply = await make(server).chat_async("Summarise this report.", DOC)
    assert reply
    assert block(server.log[-1].body) == expected


@pytest.mark.anyio
async def test_a_text_document_goes_to_anthropic_as_plain_text(server):
    """Anthropic takes a text document (CSV, markdown, HTML ...) as a plain-text source."""
    await anthropic(server).chat_async("Add the columns.", CSV)
    assert _anthropic_block(server.log[-1].body)["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "a,b\n1,2\n",
    }


@pytest.mark.anyio
async def test_text_documents_go_to_bedrock_gemini_and_responses_as_their_types(server, aws_env):
    """Converse takes a CSV as format csv, Gemini as text/csv inline data, the Responses API
    as a file."""
    await bedrock(server).chat_async("Add the columns.", CSV)
    assert _bedrock_block(server.log[-1].body)["document"]["format"] == "csv"
    await gemini(server).chat_async("Add the columns.", CSV)
    assert _gemini_block(server.log[-1].body)["inlineData"]["mimeType"] == "text/csv"
    await responses(server).chat_async("Add the columns.", CSV)
    assert _responses_block(server.log[-1].body)["filename"] == "table.csv"


@pytest.mark.parametrize(
    ("make", "document", "says"),
    [
        (chat_completions, CSV, "Chat Completions takes no text/csv document"),
        (anthropic, DOCX, "Anthropic's Messages API takes no application/vnd"),
        (gemini, DOCX, "Gemini takes no application/vnd"),
        (bedrock, ve.ContentDocument.from_bytes(b"x", "application/rtf"), "pdf, csv, doc"),
    ],
)
def test_a_type_the_api_does_not_take_is_a_config_error_before_sending(
    make, document, says, server, aws_env
):
    """A document type the API takes not is a ConfigError naming what it takes, and nothing
    reaches the server."""
    with pytest.raises(ve.ConfigError, match=says) as refused:
        make(server).chat("Read this.", document)
    assert "it takes" in str(refused.value)
    assert server.requests == 0


def test_bedrock_document_names_keep_only_what_converse_allows():
    """Converse allows letters, digits, single spaces, hyphens, parentheses and brackets."""
    assert document_name("Q3  report_final.v2.pdf") == "Q3 report final v2"
    assert document_name("(draft) [v1]-notes.md") == "(draft) [v1]-notes"
    assert document_name("___.pdf") == "document"


def test_from_file_reads_the_type_from_the_extension(tmp_path):
    """A .pdf file is application/pdf with its file name; an unknown extension says to pass
    media_type=."""
    (tmp_path / "report.pdf").write_bytes(PDF)
    doc = ve.ContentDocument.from_file(tmp_path / "report.pdf")
    assert (doc.media_type, doc.filename, doc.decoded()) == ("application/pdf", "report.pdf", PDF)
    (tmp_path / "notes.xyz").write_bytes(b"x")
    with pytest.raises(ve.ConfigError, match="pass media_type="):
        ve.ContentDocument.from_file(tmp_path / "notes.xyz")
    typed = ve.ContentDocument.from_file(tmp_path / "notes.xyz", media_type="text/plain")
    assert typed.media_type == "text/plain"


def test_a_run_logs_the_document_as_inspects_and_reads_it_back(server, tmp_path):
    """A dataset input holding a document is sent, logged as Inspect's ContentDocument (a
    data URI, its file name and type: Inspect's reader reads the log), and read back as our
    ContentDocument."""
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ContentDocument as InspectDocument

    rows = [{"input": ["Summarise this report.", DOC], "target": "Summarise"}]
    task = ve.Task(rows, ve.generate(anthropic(server)), ve.detect_includes(), dir=tmp_path)
    done = task.eval()
    assert done.metrics == {"accuracy": 1.0}
    assert _anthropic_block(server.log[-1].body)["source"]["data"] == B64
    inspect_log = read_eval_log(str(done.log_path))
    assert inspect_log.samples is not None
    sample = inspect_log.samples[0]
    content = sample.messages[0].content
    assert not isinstance(content, str)
    document = content[1]
    assert isinstance(document, InspectDocument)
    assert (document.type, document.filename, document.mime_type) == (
        "document",
        "Q3 report_final.pdf",
        "application/pdf",
    )
    assert document.document == f"data:application/pdf;base64,{B64}"
    assert done.log_path is not None
    ours = read_log(done.log_path).samples[0]
    assert message_contents(ours.messages[0].content) == [
        ve.ContentText("Summarise this report."),
        DOC,
    ]


def test_the_reply_cache_key_changes_with_the_documents_bytes():
    """Two requests that differ only in a document's bytes have different keys; the same
    document, the same key."""

    def key(document: ve.ContentDocument) -> str:
        request = ChatRequest([ve.Turn.user("Summarise this report.", document)])
        return reply_key("Anthropic", "https://api.anthropic.com/v1", "claude", request)

    other = ve.ContentDocument.from_bytes(tiny_pdf("Goodbye"), filename="Q3 report_final.pdf")
    assert key(DOC) == key(ve.ContentDocument.from_bytes(PDF, filename="Q3 report_final.pdf"))
    assert key(DOC) != key(other)


@pytest.mark.parametrize(
    ("make", "api"),
    [
        (anthropic, AnthropicApi()),
        (chat_completions, ChatCompletionsApi()),
        (responses, ResponsesApi()),
    ],
    ids=["anthropic", "chat_completions", "responses"],
)
def test_the_bridge_reads_a_document_as_our_providers_write_it(make, api, server):
    """An agent's inline PDF (Anthropic's base64 document, OpenAI's file_data) reaches the
    engine as the ContentDocument it was."""
    provider = make(server).provider
    assert isinstance(provider, HttpProvider)
    body = provider.body(ChatRequest([ve.Turn.user("Summarise this report.", DOC)]))
    asked = api.read(body)
    assert asked.request.turns[0].contents == [ve.ContentText("Summarise this report."), DOC]


def test_the_bridge_refuses_a_file_it_would_have_to_fetch():
    """An OpenAI file given by id is refused, saying the bridge takes file_data."""
    from vitals_engine.bridging.wire import WireError

    part = {"type": "file", "file": {"file_id": "file-1"}}
    body = {"model": "m", "messages": [{"role": "user", "content": [part]}]}
    with pytest.raises(WireError, match="file_data"):
        ChatCompletionsApi().read(body)
