"""Read eval logs back: ours, the R package vitals', and Inspect's `.json` and `.eval`.

`read_log(path)` returns a `LoggedEval`, a Task-like view of a finished (or
running) eval: its status, task, model and metrics, the log header, the
samples, and `get_samples()` / `get_cost()` frames shaped like a `Task`'s.

Formats:
- `.json`: one `EvalLog` object (ours, vitals', Inspect's). Inspect may write
  bare `NaN` / `Infinity` tokens; they are read as null.
- `.eval`: Inspect's zip: `header.json` (or `_journal/start.json` while the
  run is going: status "started"), `samples/*.json`, `summaries.json` (or
  `_journal/summaries/<k>.json`). Members may be stored, deflated or
  zstd-compressed (method 93); the zip is read here, not with `zipfile`.
- `.journal`: our run journal (see `journal_format`).

A header-only read never parses samples: for `.json` it decodes the bytes
before the top-level `"samples"` key, for `.eval` only the header member.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec
import polars as pl

from .._errors import LogFormatError
from ..chats.chat import Chat
from ..frames import records_frame
from ..providers.replay import ReplayProvider, provider_display_name, split_model_id
from ..samples import Sample, SampleError, SampleRecord, Score
from ..vocab.calls import RetryNote
from ..vocab.turns import (
    Content,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)
from ..vocab.usage import COST_SCHEMA
from . import schema as s
from .journal_format import JournalDamage, bulk_objects, read_journal, read_journal_header
from .logged_chat import LoggedChat

__all__ = ["LoggedEval", "LoggedSampleError", "read_log"]

T = TypeVar("T")


# -- lenient header records ------------------------------------------------------------
# Inspect fills defaults for `version`, `status`, `plan` and `stats`; a journal's
# start.json has no status; vitals (R) names cache tokens differently.


class _UsageIn(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_cache_write: int | None = None
    input_tokens_cache_read: int | None = None
    cache_creation_input_tokens: int | None = None  # vitals (R)
    cache_read_input_tokens: int | None = None  # vitals (R)
    reasoning_tokens: int | None = None
    total_cost: float | None = None

    def usage(self) -> s.ModelUsage:
        write = self.input_tokens_cache_write
        read = self.input_tokens_cache_read
        return s.ModelUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            input_tokens_cache_write=write
            if write is not None
            else self.cache_creation_input_tokens,
            input_tokens_cache_read=read if read is not None else self.cache_read_input_tokens,
            reasoning_tokens=self.reasoning_tokens,
            total_cost=self.total_cost,
        )


class _StatsIn(msgspec.Struct):
    started_at: str | None = ""
    completed_at: str | None = ""
    model_usage: dict[str, _UsageIn] | None = None
    role_usage: dict[str, _UsageIn] | None = None
    connection_limit_history: list[Any] | None = None

    def stats(self) -> s.EvalStats:
        return s.EvalStats(
            started_at=self.started_at or "",
            completed_at=self.completed_at or "",
            model_usage={k: v.usage() for k, v in (self.model_usage or {}).items()},
            role_usage={k: v.usage() for k, v in (self.role_usage or {}).items()},
            connection_limit_history=_limit_history(self.connection_limit_history),
        )


def _limit_history(entries: list[Any] | None) -> list[s.ConnectionLimitChange]:
    """Concurrency changes as logged; entries of another shape (other tools) are left out."""
    history: list[s.ConnectionLimitChange] = []
    for entry in entries or []:
        try:
            history.append(msgspec.convert(entry, s.ConnectionLimitChange))
        except msgspec.ValidationError:
            continue
    return history


class _HeaderIn(msgspec.Struct, kw_only=True):
    version: int = s.LOG_VERSION
    status: s.Status = "started"
    eval: s.EvalSpec
    plan: s.EvalPlan = msgspec.field(default_factory=s.EvalPlan)
    results: s.EvalResults | None = None
    stats: _StatsIn = msgspec.field(default_factory=_StatsIn)
    error: s.EvalError | None = None

    def header(self, path: Path) -> s.EvalLog:
        if self.version > s.LOG_VERSION:
            raise LogFormatError(
                f"{path}: version {self.version} of the log format is newer than this "
                f"reader understands (up to {s.LOG_VERSION})."
            )
        return s.EvalLog(
            version=self.version,
            status=self.status,
            eval=self.eval,
            plan=self.plan,
            results=self.results if self.results is not None else msgspec.UNSET,
            stats=self.stats.stats(),
            error=self.error if self.error is not None else msgspec.UNSET,
        )


class _LogIn(_HeaderIn, kw_only=True):
    samples: list[s.EvalSample] | None = None


_header_decoder = msgspec.json.Decoder(_HeaderIn)
_log_decoder = msgspec.json.Decoder(_LogIn)
_sample_decoder = msgspec.json.Decoder(s.EvalSample)
_summaries_decoder = msgspec.json.Decoder(list[s.EvalSampleSummary])


# -- JSON decoding with positions ----------------------------------------------------------


class NotALogError(LogFormatError):
    """A JSON file that is valid JSON but not an eval log (a manifest, a schema ...)."""


_NAN_OR_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _null_nans(data: bytes) -> bytes:
    """Bare NaN / Infinity tokens (outside strings) replaced by null."""
    return _NAN_OR_STRING.sub(lambda m: b"null" if m.group(1) else m.group(0), data)


def _has_nans(data: bytes) -> bool:
    return b"NaN" in data or b"Infinity" in data


def _where(exc: Exception, size: int) -> str:
    message = str(exc)
    if "truncated" in message:
        return f"{message} (at byte {size}, the end of the data)"
    return message


def decode_json(decoder: msgspec.json.Decoder[T], data: bytes, path: Path, what: str = "") -> T:
    """Decode `data` with `decoder`, reading bare NaN / Infinity as null.

    A malformed or mistyped file raises `LogFormatError` naming `path`, the
    member (`what`) and the position; valid JSON of another shape raises
    `NotALogError`.
    """
    where = f"{path}{f' (member {what})' if what else ''}"
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        error = exc
    except msgspec.DecodeError as exc:
        if not _has_nans(data):
            raise LogFormatError(
                f"{where}: cannot read the log: {_where(exc, len(data))}."
            ) from None
        try:
            return decoder.decode(_null_nans(data))
        except msgspec.ValidationError as inner:
            error = inner
        except msgspec.DecodeError:
            raise LogFormatError(
                f"{where}: cannot read the log: {_where(exc, len(data))}."
            ) from None
    message = str(error)
    if " - at `$" not in message:
        raise NotALogError(f"{where}: not an eval log: {message}.") from None
    raise LogFormatError(f"{where}: not a valid eval log: {message}.") from None


# -- .json ---------------------------------------------------------------------------------

_SAMPLES_KEY = re.compile(rb',\s*"samples"\s*:')
_FIRST_CHUNK = 64 * 1024


def _try_prefix(prefix: bytes, path: Path) -> s.EvalLog | None:
    """The header if `prefix + "}"` is the log's top-level object, else None.

    A `"samples"` key inside a string or a nested object leaves braces open,
    so only the top-level one makes valid JSON. A prefix that is valid JSON
    but not a header (keys in an unusual order, a mistyped field) is None
    too: the caller then decodes the whole file, which says what is wrong.
    """
    data = prefix + b"}"
    try:
        return _header_decoder.decode(data).header(path)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:
        if not _has_nans(data):
            return None
    try:
        return _header_decoder.decode(_null_nans(data)).header(path)
    except msgspec.DecodeError:  # ValidationError included
        return None


def _json_header(path: Path) -> s.EvalLog:
    """The header of a `.json` log, decoded from the bytes before its `"samples"` key."""
    tried: set[int] = set()
    data = b""
    size = _FIRST_CHUNK
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(size)
            data += chunk
            for match in _SAMPLES_KEY.finditer(data):
                if match.start() in tried:
                    continue
                tried.add(match.start())
                header = _try_prefix(data[: match.start()], path)
                if header is not None:
                    return header
            if len(chunk) < size:
                break
            size *= 2
    return decode_json(_header_decoder, data, path).header(path)


def _json_log(path: Path) -> tuple[s.EvalLog, list[s.EvalSample]]:
    data = path.read_bytes()
    with bulk_objects():
        log = decode_json(_log_decoder, data, path)
    return log.header(path), list(log.samples or [])


# -- .eval (zip) ---------------------------------------------------------------------------

_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_CENTRAL_FMT = struct.Struct("<4sHHHHHHIIIHHHHHII")
_LOCAL_FMT = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_LENGTHS = struct.Struct("<HH")  # name and extra field lengths, at byte 26
_MAX32 = 0xFFFFFFFF


class ZipMember(NamedTuple):
    name: str
    method: int
    crc: int
    compressed_size: int
    size: int
    offset: int


class ZipIndex:
    """The central directory of a zip, and its members' bytes (stored, deflate or zstd).

    The file is memory-mapped: reading a member is a slice, not a seek and two reads.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise self._fail("the file is empty")
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._directory = self._read_directory()
        except BaseException:
            self._map.close()
            raise

    def __enter__(self) -> ZipIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self._map.close()

    def _fail(self, why: str) -> LogFormatError:
        return LogFormatError(f"{self.path}: not a readable .eval zip: {why}.")

    def _read_directory(self) -> bytes:
        m = self._map
        size = len(m)
        tail_len = min(size, 22 + 65535)
        tail = m[size - tail_len :]
        at = tail.rfind(_EOCD)
        if at < 0 or len(tail) - at < 22:
            raise self._fail(
                f"no end-of-central-directory record in its last {tail_len} bytes "
                f"(the file is {size} bytes: truncated, or not a zip)"
            )
        eocd_pos = size - tail_len + at
        (_, _, _, _, count, cd_size, cd_offset, _) = struct.unpack("<4sHHHHIIH", tail[at : at + 22])
        if cd_size == _MAX32 or cd_offset == _MAX32 or count == 0xFFFF:
            locator = tail[at - 20 : at] if at >= 20 else b""
            if not locator.startswith(_EOCD64_LOCATOR):
                raise self._fail(f"zip64 locator missing before byte {eocd_pos}")
            (eocd64_pos,) = struct.unpack("<Q", locator[8:16])
            record = m[eocd64_pos : eocd64_pos + 56]
            if not record.startswith(_EOCD64):
                raise self._fail(f"zip64 end record missing at byte {eocd64_pos}")
            cd_size, cd_offset = struct.unpack("<QQ", record[40:56])
        if cd_offset + cd_size > size:
            raise self._fail(
                f"its central directory (bytes {cd_offset}..{cd_offset + cd_size}) lies "
                f"past the end of the file ({size} bytes)"
            )
        directory = m[cd_offset : cd_offset + cd_size]
        if not directory.startswith(_CENTRAL) and directory:
            raise self._fail(f"no central directory at byte {cd_offset}")
        return directory

    def _entry(self, pos: int) -> tuple[ZipMember, int]:
        d = self._directory
        fields = _CENTRAL_FMT.unpack_from(d, pos)
        if fields[0] != _CENTRAL:
            raise self._fail(f"damaged central directory entry at directory byte {pos}")
        method, crc, csize, usize = fields[4], fields[7], fields[8], fields[9]
        name_len, extra_len, comment_len, offset = fields[10], fields[11], fields[12], fields[16]
        start = pos + _CENTRAL_FMT.size
        name = d[start : start + name_len].decode("utf-8", "replace")
        if _MAX32 in (csize, usize, offset):
            usize, csize, offset = self._zip64(
                d[start + name_len : start + name_len + extra_len], usize, csize, offset
            )
        end = start + name_len + extra_len + comment_len
        return ZipMember(name, method, crc, csize, usize, offset), end

    @staticmethod
    def _zip64(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
        i = 0
        while i + 4 <= len(extra):
            tag, length = struct.unpack_from("<HH", extra, i)
            if tag == 1:
                values = list(struct.unpack_from(f"<{length // 8}Q", extra, i + 4))
                if usize == _MAX32 and values:
                    usize = values.pop(0)
                if csize == _MAX32 and values:
                    csize = values.pop(0)
                if offset == _MAX32 and values:
                    offset = values.pop(0)
                break
            i += 4 + length
        return usize, csize, offset

    def members(self) -> Iterator[ZipMember]:
        """Every member in directory order (a name written twice appears twice)."""
        pos = 0
        while pos + _CENTRAL_FMT.size <= len(self._directory):
            member, pos = self._entry(pos)
            yield member

    def find(self, name: str) -> ZipMember | None:
        """The last member called `name`, found without walking the whole directory."""
        target = name.encode()
        d = self._directory
        at = len(d)
        while True:
            at = d.rfind(target, 0, at)
            if at < 0:
                return None
            pos = at - _CENTRAL_FMT.size
            if pos >= 0 and d[pos : pos + 4] == _CENTRAL:
                (name_len,) = struct.unpack_from("<H", d, pos + 28)
                if name_len == len(target):
                    return self._entry(pos)[0]

    def read(self, member: ZipMember) -> bytes:
        """A member's bytes, decompressed and checked against its CRC."""
        m = self._map
        offset = member.offset
        if m[offset : offset + 4] != _LOCAL or offset + _LOCAL_FMT.size > len(m):
            raise self._member_error(member, f"no local header at byte {offset}")
        name_len, extra_len = _LOCAL_LENGTHS.unpack_from(m, offset + 26)
        start = offset + _LOCAL_FMT.size + name_len + extra_len
        end = start + member.compressed_size
        if end > len(m):
            raise self._member_error(member, f"data truncated at byte {len(m)} (end of file)")
        try:
            if member.method == 8:  # deflate: nearly every member
                data = zlib.decompress(m[start:end], -15)
            else:
                data = _decompress(member.method, m[start:end])
        except LogFormatError as exc:
            raise self._member_error(member, str(exc)) from None
        except Exception as exc:
            why = f"cannot decompress the data at byte {start}: {exc}"
            raise self._member_error(member, why) from None
        if zlib.crc32(data) != member.crc:
            raise self._member_error(member, f"CRC mismatch (data at byte {start} is damaged)")
        return data

    def _member_error(self, member: ZipMember, why: str) -> LogFormatError:
        return LogFormatError(f"{self.path} (member {member.name}): {why}.")


def _decompress(method: int, raw: bytes) -> bytes:
    if method == 0:
        return raw
    if method == 8:
        return zlib.decompress(raw, -15)
    if method == 93:
        try:
            import zstandard
        except ImportError:  # pragma: no cover - a declared dependency
            raise LogFormatError(
                "the member is zstd-compressed; install the `zstandard` package to read it"
            ) from None
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    raise LogFormatError(f"unsupported zip compression method {method}")


def _eval_header(index: ZipIndex) -> s.EvalLog:
    member = index.find("header.json") or index.find("_journal/start.json")
    if member is None:
        raise LogFormatError(f"{index.path}: no header.json or _journal/start.json in the zip.")
    data = index.read(member)
    return decode_json(_header_decoder, data, index.path, member.name).header(index.path)


def _eval_log(path: Path, header_only: bool) -> tuple[s.EvalLog, list[s.EvalSample]]:
    with ZipIndex(path) as index:
        header = _eval_header(index)
        if header_only:
            return header, []
        members = [
            m for m in index.members() if m.name.startswith("samples/") and m.name.endswith(".json")
        ]
        samples: dict[tuple[int | str, int], s.EvalSample] = {}
        with bulk_objects():
            for member in members:
                sample = decode_json(_sample_decoder, index.read(member), path, member.name)
                samples[(sample.id, sample.epoch)] = sample
        return header, list(samples.values())


_JOURNAL_SUMMARY = re.compile(r"^_journal/summaries/(\d+)\.json$")


def eval_summaries(path: Path) -> tuple[s.EvalLog, list[s.EvalSampleSummary] | None]:
    """A `.eval`'s header and sample summaries (None when it has no summaries)."""
    with ZipIndex(path) as index:
        header = _eval_header(index)
        member = index.find("summaries.json")
        if member is not None:
            return header, decode_json(_summaries_decoder, index.read(member), path, member.name)
        parts = sorted(
            (int(m[1]), member)
            for member in index.members()
            if (m := _JOURNAL_SUMMARY.match(member.name))
        )
        if not parts:
            return header, None
        summaries: dict[tuple[int | str, int], s.EvalSampleSummary] = {}
        for _, member in parts:
            for summary in decode_json(_summaries_decoder, index.read(member), path, member.name):
                summaries[(summary.id, summary.epoch)] = summary
        return header, list(summaries.values())


# -- rebuilding chats and records --------------------------------------------------------------

_PROVIDERS: dict[str, ReplayProvider] = {}
_STOP = {"stop", "max_tokens", "tool_calls", "content_filter", "unknown"}
_DATA_URI = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)
_BARE_MODEL = re.compile(r"\(([^()]+)\)\s*$")


def _provider(model_id: str) -> ReplayProvider:
    provider = _PROVIDERS.get(model_id)
    if provider is None:
        provider = _PROVIDERS[model_id] = ReplayProvider(model_id)
    return provider


@functools.lru_cache(maxsize=256)
def normalize_model(model: str) -> str:
    """A log's model as `provider/model`; vitals (R) names a bare model or a solver label.

    Example:
        >>> normalize_model("generate(chat_claude()) (claude-sonnet-4-5)")
        'anthropic/claude-sonnet-4-5'
    """
    if "/" in model and "(" not in model:
        return model
    match = _BARE_MODEL.search(model)
    bare = match[1].strip() if match else model
    if "/" in bare:
        return bare
    prefix, name = split_model_id(bare)
    return f"{prefix}/{name}" if prefix != "unknown" else name


def _image(block: s.ContentImage) -> ContentImage:
    detail: Any = block.detail if block.detail in ("auto", "low", "high") else "auto"
    match = _DATA_URI.match(block.image)
    if match:
        return ContentImage(data=match[2], media_type=match[1], detail=detail)
    return ContentImage(url=block.image, detail=detail)


def _contents(content: str | list[s.LogContent]) -> list[Content]:
    if isinstance(content, str):
        return [ContentText(content)] if content else []
    out: list[Content] = []
    for block in content:
        if isinstance(block, s.ContentText):
            out.append(ContentText(block.text))
        elif isinstance(block, s.ContentImage):
            out.append(_image(block))
        elif isinstance(block, s.ContentReasoning):
            out.append(ContentThinking(block.reasoning, block.signature, block.redacted))
        # audio, video, documents and data have no counterpart in a Turn: left out
    return out


def _text(content: str | list[s.LogContent]) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, s.ContentText))


def _tool_result(message: s.ChatMessageTool) -> ContentToolResult:
    if message.error is not None:
        return ContentToolResult(
            message.tool_call_id or "", message.function or "", error=message.error.message
        )
    return ContentToolResult(
        message.tool_call_id or "", message.function or "", value=_text(message.content)
    )


@functools.lru_cache(maxsize=256)
def _model_name(model: str) -> str:
    return split_model_id(model)[1]


class _Transcript(NamedTuple):
    system: str | None
    turns: list[Turn]
    replies: list[Turn]  # the assistant turns
    model: str | None  # the first model an assistant message names
    has_ids: bool  # whether any message carries an id


def _turns(messages: Sequence[s.ChatMessage]) -> _Transcript:
    """Inspect messages -> turns; consecutive tool messages make one user turn."""
    system: list[str] = []
    turns: list[Turn] = []
    replies: list[Turn] = []
    results: list[ContentToolResult] = []
    first_tool_id: str | None = None
    model: str | None = None
    has_ids = False
    for message in messages:
        if message.id is not None:
            has_ids = True
        if type(message) is s.ChatMessageTool:
            if not results:
                first_tool_id = message.id
            results.append(_tool_result(message))
            continue
        if results:
            if type(message) is s.ChatMessageUser and first_tool_id == f"{message.id}t0":
                turns.append(Turn("user", [*results, *_contents(message.content)]))
                results = []
                continue
            turns.append(Turn("user", list[Content](results)))
            results = []
        if type(message) is s.ChatMessageAssistant:
            contents = _contents(message.content)
            calls = message.tool_calls
            if calls:
                contents += [ContentToolRequest(c.id, c.function, dict(c.arguments)) for c in calls]
            reply = Turn(
                "assistant",
                contents,
                finish_reason="tool_calls" if calls else None,
                model=_model_name(message.model) if message.model else None,
            )
            if model is None and message.model:
                model = message.model
            turns.append(reply)
            replies.append(reply)
        elif type(message) is s.ChatMessageUser:
            turns.append(Turn("user", _contents(message.content)))
        elif type(message) is s.ChatMessageSystem:
            system.append(_text(message.content))
    if results:
        turns.append(Turn("user", list[Content](results)))
    return _Transcript("\n\n".join(system) if system else None, turns, replies, model, has_ids)


def _tokens(usage: s.ModelUsage) -> TokenUsage:
    return TokenUsage(
        input=usage.input_tokens + (usage.input_tokens_cache_write or 0),
        output=usage.output_tokens,
        cached_input=usage.input_tokens_cache_read or 0,
        reasoning=usage.reasoning_tokens or 0,
    )


def _solver_chat(sample: s.EvalSample, default_model: str, ours: bool) -> Chat | None:
    messages = sample.messages
    if not messages:
        return None
    if ours and all(m.id is None for m in messages):
        return None  # our writer's stand-in transcript of a solver that used no chat
    named = next((m.model for m in messages if type(m) is s.ChatMessageAssistant and m.model), None)
    model_id = normalize_model(named or sample.output.model or default_model)
    return LoggedChat(_provider(model_id), _solver_transcript, sample)


def _solver_transcript(sample: s.EvalSample, model_id: str) -> tuple[str | None, list[Turn]]:
    """The solver's conversation, its last reply carrying the sample's usage and output."""
    transcript = _turns(sample.messages)
    output = sample.output
    replies = transcript.replies
    if replies:
        last = replies[-1]
        role = sample.role_usage.get("solver")
        if role is not None and len(replies) == 1:
            last.tokens, last.cost = _tokens(role), role.total_cost
        elif output.usage is not None:
            last.tokens = _tokens(output.usage)
        if output.choices:
            reason = output.choices[0].stop_reason
            last.finish_reason = reason if reason in _STOP else "unknown"  # type: ignore[assignment]
        last.duration = output.time
        if last.model is None:
            last.model = _model_name(model_id)
    return transcript.system, transcript.turns


_messages_type = list[s.ChatMessage]


def _scorer_chat(
    score: s.LogScore, sample: s.EvalSample, default_model: str
) -> tuple[Chat | None, Any]:
    """The judge's chat (from `metadata["grading"]`) and the rest of the score's metadata."""
    metadata = dict(score.metadata or {})
    grading = metadata.pop("grading", None)
    rest: Any = metadata or None
    if isinstance(rest, dict) and list(rest) == ["scorer_metadata"]:
        rest = rest["scorer_metadata"]
    if not isinstance(grading, list) or not grading:
        return None, rest
    try:
        messages = msgspec.convert(grading, _messages_type)
    except msgspec.ValidationError:
        return None, score.metadata
    transcript = _turns(messages)
    judge = metadata.get("judge_model")
    model_id = normalize_model(str(judge or transcript.model or default_model))
    replies = transcript.replies
    role = sample.role_usage.get("scorer")
    if replies and role is not None and len(replies) == 1:
        replies[0].tokens, replies[0].cost = _tokens(role), role.total_cost
    for reply in replies:
        if reply.model is None:
            reply.model = _model_name(model_id)
    chat = Chat(_provider(model_id), system_prompt=transcript.system, turns=transcript.turns)
    return chat, rest


def sample_result(sample: s.EvalSample, score: s.LogScore | None) -> str | None:
    """What the solver returned: the completion, else the score's answer, else the last reply."""
    output = sample.output
    if output.choices:
        return output.completion or _text(output.choices[0].message.content)
    if output.completion:
        return output.completion
    if score is not None and score.answer is not None:
        return score.answer
    for message in reversed(sample.messages):
        if isinstance(message, s.ChatMessageAssistant):
            return _text(message.content)
    return None


def _input(value: str | list[s.ChatMessage]) -> Any:
    if isinstance(value, str):
        return value
    if all(isinstance(m, s.ChatMessageUser) for m in value):
        return [c for m in value for c in _contents(m.content)]
    return list(value)


def score_value(score: s.LogScore) -> Any:
    """A logged score's value; our no-grade marker ("N", reason grader_failed) is None."""
    if score.value == s.NO_GRADE and score.reason == s.NO_GRADE_REASON:
        return None
    return score.value


def first_score(scores: dict[str, s.LogScore] | None) -> tuple[str | None, s.LogScore | None]:
    if not scores:
        return None, None
    name, score = next(iter(scores.items()))
    return name, score


class LoggedSampleError(SampleError):
    """A sample's error as a log records it: `str()` is the logged message."""

    __slots__ = ()

    def __str__(self) -> str:
        return self.message


_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?:\(|:| while )")
_ERROR_STAGE = re.compile(r" while (solving|scoring):")


def _error(error: s.EvalError | None) -> SampleError | None:
    if error is None:
        return None
    kind = _ERROR_TYPE.match(error.message)
    stage = _ERROR_STAGE.search(error.message)
    return LoggedSampleError(
        stage={"solving": "solve", "scoring": "score"}[stage[1]] if stage else "",
        type=kind[1] if kind else "",
        message=error.message,
        traceback=error.traceback,
    )


class _RetriedCall(msgspec.Struct):
    event: str
    model: str = ""
    retries: int | None = None
    metadata: dict[str, Any] | None = None


_retried_calls = msgspec.json.Decoder(list[_RetriedCall])


def _unix(stamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return 0.0


_RETRIES_KEY = re.compile(rb'"retries":')


def _logged_retries(events: msgspec.Raw) -> list[RetryNote] | None:
    """The retries the sample's model events record: ours with their reasons
    (`metadata.retries`), Inspect's as a bare count."""
    if _RETRIES_KEY.search(memoryview(events)) is None:  # most samples: no copy, no decode
        return None
    notes: list[RetryNote] = []
    for event in _retried_calls.decode(events):
        if event.event != "model" or not event.retries:
            continue
        logged = (event.metadata or {}).get("retries")
        if not isinstance(logged, list):
            logged = [{"attempt": i + 1} for i in range(event.retries)]
        for entry in logged:
            notes.append(
                RetryNote(
                    at=_unix(entry.get("at")),
                    model=event.model,
                    attempt=int(entry.get("attempt") or 0),
                    reason=str(entry.get("reason") or "not recorded"),
                    wait=float(entry.get("wait") or 0.0),
                )
            )
    return notes or None


def sample_record(sample: s.EvalSample, default_model: str, ours: bool) -> SampleRecord:
    """One logged sample as the engine's record (chats rebuilt on replay providers)."""
    metadata = sample.metadata
    solver_metadata = None
    if "solver_metadata" in metadata:
        metadata = dict(metadata)
        solver_metadata = metadata.pop("solver_metadata")
    _, logged = first_score(sample.scores)
    score: Score | None = None
    if logged is not None:
        chat, rest = _scorer_chat(logged, sample, default_model)
        score = Score(score_value(logged), logged.answer, logged.explanation, rest, chat)
    return SampleRecord(
        Sample(sample.id, sample.epoch, _input(sample.input), sample.target, metadata),
        result=sample_result(sample, logged),
        solver_chat=_solver_chat(sample, default_model, ours),
        solver_metadata=solver_metadata,
        score=score,
        error=_error(sample.error),
        logged_retries=_logged_retries(sample.events),
    )


# -- the result ------------------------------------------------------------------------------


class LoggedEval:
    """An eval read from a log: a Task-like view of its header, samples and usage.

    Attributes:
        path: the file read.
        header: the `EvalLog` without samples.
        samples: the logged `EvalSample`s ([] after a header-only read).
        damage: where a journal stopped being readable (None when clean).

    Example:
        >>> logged = read_log("logs/2026-01-14T16-19-11-06-00_simple-addition_abc.json")
        >>> logged.status, logged.metrics
        ('success', {'accuracy': 1.0})
        >>> logged.get_samples()
    """

    def __init__(
        self,
        path: Path,
        header: s.EvalLog,
        samples: list[s.EvalSample],
        damage: JournalDamage | None = None,
        header_only: bool = False,
    ) -> None:
        self.path = path
        self.header = header
        self.samples = samples
        self.damage = damage
        self.header_only = header_only
        self._records: list[SampleRecord] | None = None

    @property
    def status(self) -> str:
        return self.header.status

    @property
    def task(self) -> str:
        return self.header.eval.task

    @property
    def run_id(self) -> str | None:
        return self.header.eval.run_id

    @property
    def model(self) -> str:
        """The solver's model as `provider/model`."""
        return normalize_model(self.header.eval.model)

    @property
    def ours(self) -> bool:
        """Whether vitals-engine wrote this log."""
        return "vitals_engine" in self.header.eval.packages

    @property
    def scorer(self) -> str | None:
        """The (first) scorer's name."""
        results = self.header.results
        if isinstance(results, s.EvalResults) and results.scores:
            return results.scores[0].scorer
        for sample in self.samples:
            name, _ = first_score(sample.scores)
            if name is not None:
                return name
        return None

    @property
    def metrics(self) -> dict[str, float | int | None] | None:
        """The first scorer's metrics, name -> value (None when the log has no results)."""
        results = self.header.results
        if not isinstance(results, s.EvalResults) or not results.scores:
            return None
        return {name: metric.value for name, metric in results.scores[0].metrics.items()}

    def _load(self) -> None:
        if self.header_only:
            full = read_log(self.path)
            self.header, self.samples, self.damage = full.header, full.samples, full.damage
            self.header_only = False

    def records(self) -> list[SampleRecord]:
        """The samples as the engine's records, chats rebuilt (a header-only read loads them)."""
        self._load()
        if self._records is None:
            model, ours = self.header.eval.model, self.ours
            with bulk_objects():
                self._records = [sample_record(x, model, ours) for x in self.samples]
        return self._records

    def get_samples(self) -> pl.DataFrame:
        """One row per (sample, epoch), with the columns `Task.get_samples()` has after an eval."""
        records = self.records()
        results = self.header.results
        scored = (isinstance(results, s.EvalResults) and bool(results.scores)) or any(
            r.score is not None for r in records
        )
        return records_frame(records, self.scorer, scored=scored)

    def _requests(self, role: str) -> int | None:
        if self.header_only:
            return None
        count = 0
        for record in self.records():
            chat = record.solver_chat if role == "solver" else None
            if role == "scorer" and record.score is not None:
                chat = record.score.chat
            if chat is not None:
                count += sum(1 for t in chat.turns if t.role == "assistant")
        return count

    def _role_model(self, role: str) -> str | None:
        solver = normalize_model(self.header.eval.model)
        if role == "solver":
            return solver
        for sample in self.samples:
            _, score = first_score(sample.scores)
            judge = (score.metadata or {}).get("judge_model") if score is not None else None
            if judge:
                return normalize_model(str(judge))
        keys = [normalize_model(k) for k in self.header.stats.model_usage]
        if len(keys) == 1:
            return keys[0]
        others = [k for k in keys if k != solver]
        return others[0] if len(others) == 1 else None

    def get_cost(self) -> pl.DataFrame:
        """Requests, tokens and cost by role and model, with `Task.get_cost()`'s columns.

        From the log's per-role usage when it has solver/scorer rows, else its
        per-model usage (as role "solver"). `requests` counts the rebuilt
        chats' replies (None after a header-only read).
        """
        stats = self.header.stats
        order = {"solver": 0, "scorer": 1}
        rows: list[tuple[str, str | None, s.ModelUsage, int | None]] = []
        roles = {r: u for r, u in stats.role_usage.items() if r in order}
        if roles:
            for role in sorted(roles, key=order.__getitem__):
                rows.append((role, self._role_model(role), roles[role], self._requests(role)))
        else:
            single = len(stats.model_usage) == 1
            for key, usage in stats.model_usage.items():
                requests = self._requests("solver") if single else None
                rows.append(("solver", normalize_model(key), usage, requests))
        providers, models = [], []
        for _, model_id, _, _ in rows:
            prefix, model = split_model_id(model_id) if model_id else (None, None)
            providers.append(provider_display_name(prefix) if prefix else None)
            models.append(model)
        return pl.DataFrame(
            {
                "role": [r[0] for r in rows],
                "provider": providers,
                "model": models,
                "requests": [r[3] for r in rows],
                "input_tokens": [_tokens(r[2]).input for r in rows],
                "cached_input_tokens": [_tokens(r[2]).cached_input for r in rows],
                "output_tokens": [r[2].output_tokens for r in rows],
                "reasoning_tokens": [r[2].reasoning_tokens or 0 for r in rows],
                "cost": [r[2].total_cost for r in rows],
            },
            schema=COST_SCHEMA,
        )

    def __repr__(self) -> str:
        metrics = ", ".join(
            f"{k}={v:.3g}" for k, v in (self.metrics or {}).items() if isinstance(v, int | float)
        )
        count = "header only" if self.header_only else f"{len(self.samples)} samples"
        return (
            f"<LoggedEval {self.task} ({self.model}): {self.status}, {count}"
            + (f", {metrics}" if metrics else "")
            + f" from {self.path.name}>"
        )


# -- entry point ---------------------------------------------------------------------------------

LOG_SUFFIXES = (".json", ".eval", ".journal")


def read_log(path: str | Path, header_only: bool = False) -> LoggedEval:
    """Read an eval log: ours (`.json`, `.journal`), vitals' (R) or Inspect's (`.json`, `.eval`).

    `header_only=True` reads the header (status, task, model, metrics, usage)
    without parsing samples, in milliseconds whatever the file's size.

    Raises `LogFormatError` (naming the file and the position) for a missing,
    truncated or corrupt log.

    Example:
        >>> logged = read_log(task.log_path)
        >>> logged.get_samples()
    """
    path = Path(path)
    if not path.exists():
        raise LogFormatError(f"{path}: the log does not exist.")
    if path.is_dir():
        raise LogFormatError(f"{path} is a directory, not a log; read_logs() reads directories.")
    suffix = path.suffix.lower()
    try:
        if suffix == ".journal":
            if header_only:
                return LoggedEval(path, read_journal_header(path), [], None, header_only=True)
            header, samples, damage = read_journal(path)
            return LoggedEval(path, header, samples, damage)
        if suffix == ".eval":
            header, samples = _eval_log(path, header_only)
        elif suffix == ".json":
            if header_only:
                header, samples = _json_header(path), []
            else:
                header, samples = _json_log(path)
        else:
            raise LogFormatError(
                f"{path}: not a log file: expected a .json, .eval or .journal file."
            )
    except OSError as exc:
        raise LogFormatError(f"{path}: cannot read the log: {exc}.") from None
    return LoggedEval(path, header, samples, None, header_only=header_only)
