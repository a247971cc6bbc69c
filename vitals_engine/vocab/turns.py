"""A conversation's records: turns, their contents and their token counts.

Turns are msgspec Structs so they serialise cheaply into logs and journals.
Treat them as values: `Chat` never mutates a turn it has handed out.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Literal

import msgspec

from .._errors import ConfigError

__all__ = [
    "DOCUMENT_TYPES",
    "Content",
    "ContentCompaction",
    "ContentDocument",
    "ContentImage",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "TokenUsage",
    "Turn",
]


class ContentText(msgspec.Struct, tag="text", tag_field="type", frozen=True):
    """Plain text.

    Example:
        >>> ve.Turn("user", [ve.ContentText("What's 2+2?")]).text
        "What's 2+2?"
    """

    text: str


class ContentImage(msgspec.Struct, tag="image", tag_field="type", frozen=True, omit_defaults=True):
    """An image, either inline (`data` + `media_type`) or remote (`url`).

    Example:
        >>> ContentImage.from_bytes(b"...", "image/png")
    """

    url: str | None = None
    data: str | None = None  # base64
    media_type: str = "image/png"
    detail: Literal["auto", "low", "high"] = "auto"

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str = "image/png") -> ContentImage:
        """An inline image from raw bytes."""
        return cls(data=base64.b64encode(data).decode("ascii"), media_type=media_type)

    @property
    def data_uri(self) -> str:
        """The image as a `data:` URI (inline) or its URL (remote)."""
        if self.data is not None:
            return f"data:{self.media_type};base64,{self.data}"
        return self.url or ""


#: The media type of each document extension the providers take (`ContentDocument.from_file`).
DOCUMENT_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".doc": "application/msword",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xls": "application/vnd.ms-excel",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


class ContentDocument(
    msgspec.Struct, tag="document", tag_field="type", frozen=True, omit_defaults=True
):
    """A document sent inline: its bytes (base64 in `data`), media type and file name.

    PDFs go to every provider; text documents (`text/plain`, `text/csv`, `text/html`,
    `text/markdown`) and office files to those whose API takes them, and a provider that
    does not is a `ConfigError` naming the types it takes, before anything is sent.

    Example:
        >>> doc = ve.ContentDocument.from_bytes(b"%PDF-1.4 ...", filename="report.pdf")
        >>> doc.media_type, doc.name
        ('application/pdf', 'report.pdf')
        >>> chat = ve.chat_mock()
        >>> chat.chat("Summarise this report.", doc)  # the mock echoes the prompt's text
        'Summarise this report.'
    """

    data: str  # base64
    media_type: str = "application/pdf"
    filename: str | None = None

    @classmethod
    def from_bytes(
        cls, data: bytes, media_type: str = "application/pdf", filename: str | None = None
    ) -> ContentDocument:
        """A document from its raw bytes.

        Example:
            >>> ContentDocument.from_bytes(b"a,b\\n1,2\\n", "text/csv", "table.csv").data
            'YSxiCjEsMgo='
        """
        return cls(base64.b64encode(data).decode("ascii"), media_type, filename)

    @classmethod
    def from_file(cls, path: str | Path, media_type: str | None = None) -> ContentDocument:
        """A document read from a file, its media type from its extension (`DOCUMENT_TYPES`)
        unless `media_type` says it, its file name the file's.

        Example:
            >>> doc = ve.ContentDocument.from_file("report.pdf")
            >>> doc.media_type, doc.filename
            ('application/pdf', 'report.pdf')
        """
        path = Path(path)
        kind = media_type or DOCUMENT_TYPES.get(path.suffix.lower())
        if kind is None:
            known = ", ".join(sorted(DOCUMENT_TYPES))
            raise ConfigError(
                f"Cannot tell the media type of the document {path.name!r} from its "
                f"extension (known: {known}): pass media_type=, e.g. "
                f'ContentDocument.from_file({str(path)!r}, media_type="application/pdf").'
            )
        try:
            data = path.read_bytes()
        except OSError as error:
            raise ConfigError(f"Cannot read the document {str(path)!r}: {error}.") from error
        return cls.from_bytes(data, kind, path.name)

    @property
    def name(self) -> str:
        """Its file name, or `document.<subtype>` when it has none."""
        if self.filename:
            return self.filename
        subtype = self.media_type.rpartition("/")[2]
        return f"document.{subtype}" if subtype.isalnum() else "document"

    @property
    def data_uri(self) -> str:
        """The document as a `data:` URI."""
        return f"data:{self.media_type};base64,{self.data}"

    @property
    def is_text(self) -> bool:
        """Whether it is a text document (`text/...`)."""
        return self.media_type.startswith("text/")

    def decoded(self) -> bytes:
        """Its raw bytes."""
        return base64.b64decode(self.data)

    def refused(self, api: str, takes: str) -> ConfigError:
        """The error of an API that cannot take this document's type (`takes`: what it
        takes), for a provider to raise before sending.

        Example:
            >>> ContentDocument.from_bytes(b"x", "text/csv").refused("Chat Completions", "PDF")
            ConfigError('Chat Completions takes no text/csv document (document.csv): ...')
        """
        return ConfigError(
            f"{api} takes no {self.media_type} document ({self.name}): it takes {takes}. "
            "Send the document as one of those (a PDF goes to every provider), or its "
            "text as a prompt."
        )


class ContentToolRequest(msgspec.Struct, tag="tool_request", tag_field="type", frozen=True):
    """The model asks to call tool `name` with `arguments`.

    Example:
        >>> chat = ve.chat_mock()
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> _ = chat.register_tool(add)
        >>> chat.chat("Use add to add 3 and 4")
        'The tool returned 7.'
        >>> chat.turns[1].contents
        [ContentToolRequest(id='call_0_add', name='add', arguments={'a': 3, 'b': 4})]
    """

    id: str
    name: str
    arguments: dict[str, Any]


class ContentToolResult(
    msgspec.Struct, tag="tool_result", tag_field="type", frozen=True, omit_defaults=True
):
    """What a tool returned (or the error it raised) for request `id`.

    Example:
        >>> ve.ContentToolResult("call_0_add", "add", value=7).text
        '7'
        >>> ve.ContentToolResult("call_0_add", "add", error="TypeError: bad operand").text
        'Error: TypeError: bad operand'
    """

    id: str
    name: str
    value: Any = None
    error: str | None = None
    #: What kind of error (a `ToolError`'s: "timeout", "exit" ...; None: another error).
    error_kind: str | None = None

    @property
    def text(self) -> str:
        """The result as the text sent back to the model."""
        if self.error is not None:
            return f"Error: {self.error}"
        if isinstance(self.value, str):
            return self.value
        return msgspec.json.encode(self.value).decode()


class ContentThinking(
    msgspec.Struct, tag="thinking", tag_field="type", frozen=True, omit_defaults=True
):
    """The model's reasoning, as the provider returned it: its text (a summary, where the
    provider shows no more), the provider's signature or encrypted form of it, and its item
    id where the provider names it (OpenAI's Responses API), so it can be sent back.

    Example:
        >>> from vitals_engine.testing import MockServer, reply
        >>> with MockServer() as server:
        ...     server.script(lambda request: reply("4", reasoning="Two and two make four."))
        ...     chat = ve.chat_anthropic("claude-sonnet-4-5", api_key="x",
        ...                              base_url=server.base_url("anthropic"))
        ...     chat.chat("What's 2+2?")
        '4'
        >>> chat.last_turn().contents[0].thinking
        'Two and two make four.'
    """

    thinking: str
    signature: str | None = None
    redacted: bool = False
    id: str | None = None


class ContentCompaction(
    msgspec.Struct, tag="compaction", tag_field="type", frozen=True, omit_defaults=True
):
    """A summary the provider made of the conversation before it (Anthropic's server-side
    compaction: a `compaction` block the reply opens with), kept verbatim so it goes back
    with its turn and the provider need not compact again. Other providers' requests leave
    it out; it is not part of the reply's text.

    Example:
        >>> ContentCompaction("The user pasted one sentence, repeated.").content
        'The user pasted one sentence, repeated.'
    """

    content: str | None = None
    encrypted_content: str | None = None


Content = (
    ContentText
    | ContentImage
    | ContentDocument
    | ContentToolRequest
    | ContentToolResult
    | ContentThinking
    | ContentCompaction
)


class TokenUsage(msgspec.Struct, frozen=True, omit_defaults=True, repr_omit_defaults=True):
    """Tokens (and per-request fees) of one model call, as the provider billed them.

    `input` excludes the input read from the provider's prompt cache (`cached_input`)
    and the input written to it (`cache_write`), as in Inspect's logs: the whole prompt
    is `input + cached_input + cache_write`. `cache_write_1h` is the part of
    `cache_write` kept for an hour (Anthropic bills it dearer than 5-minute writes).
    `reasoning` is part of `output`. `web_searches` counts server-side web searches,
    billed per request.

    Example:
        >>> TokenUsage(input=10, output=2) + TokenUsage(input=5, cache_write=100)
        TokenUsage(input=15, output=2, cache_write=100)
    """

    input: int = 0
    output: int = 0
    cached_input: int = 0
    reasoning: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    web_searches: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cached_input + other.cached_input,
            self.reasoning + other.reasoning,
            self.cache_write + other.cache_write,
            self.cache_write_1h + other.cache_write_1h,
            self.web_searches + other.web_searches,
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input - other.input,
            self.output - other.output,
            self.cached_input - other.cached_input,
            self.reasoning - other.reasoning,
            self.cache_write - other.cache_write,
            self.cache_write_1h - other.cache_write_1h,
            self.web_searches - other.web_searches,
        )

    @property
    def prompt(self) -> int:
        """The whole prompt: uncached, read from the cache and written to it."""
        return self.input + self.cached_input + self.cache_write

    @property
    def total(self) -> int:
        return self.input + self.cached_input + self.cache_write + self.output


FinishReason = Literal["stop", "max_tokens", "tool_calls", "content_filter", "unknown"]


class Turn(msgspec.Struct, omit_defaults=True):
    """One message of a conversation: a role and its contents.

    Assistant turns also carry the call's token usage, finish reason, model,
    cost and timing.

    Example:
        >>> Turn("user", [ContentText("What's 2+2?")]).text
        "What's 2+2?"
    """

    role: Literal["user", "assistant"]
    contents: list[Content]
    tokens: TokenUsage | None = None
    finish_reason: FinishReason | None = None
    model: str | None = None
    cost: float | None = None
    started_at: float | None = None  # unix time of the request
    duration: float | None = None  # seconds the request took
    retries: int = 0
    #: The service tier that served the call, as the provider said ("flex", "priority"
    #: ...; None: the standard one), for its price.
    service_tier: str | None = None
    #: What the provider said about the reply beyond its contents, for the log (a content
    #: filter's categories: `{"content_filter": {...}}`); None: nothing.
    metadata: dict[str, Any] | None = None

    @classmethod
    def user(cls, *parts: str | Content) -> Turn:
        """A user turn from strings and content objects."""
        return cls("user", [ContentText(p) if isinstance(p, str) else p for p in parts])

    @property
    def text(self) -> str:
        """The concatenated text of this turn's text contents."""
        return "".join(c.text for c in self.contents if isinstance(c, ContentText))

    @property
    def tool_requests(self) -> list[ContentToolRequest]:
        return [c for c in self.contents if isinstance(c, ContentToolRequest)]
