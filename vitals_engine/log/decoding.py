"""JSON decoding shared by the `.json` and `.eval` readers.

Invariants: a header is read leniently (the records below fill what other
writers leave out), but a log format newer than `LOG_VERSION` is refused;
bare `NaN` / `Infinity` tokens (Inspect writes them) are read as null; every
error names the file, the member and the position.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from .._errors import LogFormatError, NotALogError
from . import schema as s

__all__ = ["HeaderIn", "NotALogError", "decode_json", "has_nans", "header_decoder", "null_nans"]

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


class HeaderIn(msgspec.Struct, kw_only=True):
    """A log's header as any writer leaves it; `header()` makes it our `EvalLog`."""

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


header_decoder = msgspec.json.Decoder(HeaderIn)


# -- JSON decoding with positions ----------------------------------------------------------


_NAN_OR_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def null_nans(data: bytes) -> bytes:
    """Bare NaN / Infinity tokens (outside strings) replaced by null."""
    return _NAN_OR_STRING.sub(lambda m: b"null" if m.group(1) else m.group(0), data)


def has_nans(data: bytes) -> bool:
    """Whether `data` may hold a bare NaN / Infinity token (a cheap test before `null_nans`)."""
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
        if not has_nans(data):
            raise LogFormatError(
                f"{where}: cannot read the log: {_where(exc, len(data))}."
            ) from None
        try:
            return decoder.decode(null_nans(data))
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
