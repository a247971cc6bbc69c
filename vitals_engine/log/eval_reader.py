"""The reader of `.eval` logs: Inspect's zip, read here rather than with `zipfile`.

The zip holds `header.json` (or `_journal/start.json` while the run is going:
status "started"), `samples/*.json`, `summaries.json` (or
`_journal/summaries/<k>.json`). Members may be stored, deflated or
zstd-compressed (method 93); each is checked against its CRC. A header-only
read decodes the header member alone. A sample (id, epoch) written twice
counts once, as its last copy.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec

from .._errors import LogFormatError
from . import schema as s
from .decoding import decode_json, header_decoder
from .journal_format import bulk_objects

__all__ = [
    "MAX_HEADER_BYTES",
    "MAX_MEMBER_BYTES",
    "ZipIndex",
    "ZipMember",
    "eval_log",
    "eval_summaries",
]

#: The most one zip member may inflate to (a sample with images, 100,000 summaries).
MAX_MEMBER_BYTES = 1 << 30
#: The most a header member may inflate to: a header-only read stays cheap.
MAX_HEADER_BYTES = 64 << 20


# -- the zip ---------------------------------------------------------------------------------

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

    def read(self, member: ZipMember, limit: int | None = None) -> bytes:
        """A member's bytes, decompressed and checked against its CRC, refused if it declares
        more than `limit` bytes inflated (default `MAX_MEMBER_BYTES`)."""
        limit = MAX_MEMBER_BYTES if limit is None else limit
        m = self._map
        offset = member.offset
        if m[offset : offset + 4] != _LOCAL or offset + _LOCAL_FMT.size > len(m):
            raise self._member_error(member, f"no local header at byte {offset}")
        name_len, extra_len = _LOCAL_LENGTHS.unpack_from(m, offset + 26)
        start = offset + _LOCAL_FMT.size + name_len + extra_len
        end = start + member.compressed_size
        if end > len(m):
            raise self._member_error(member, f"data truncated at byte {len(m)} (end of file)")
        if member.size > limit:
            why = (
                f"it declares {member.size} bytes inflated, more than the "
                f"{limit >> 20} MiB such a member may hold"
            )
            raise self._member_error(member, why)
        try:
            data = _inflate(member.method, m[start:end], member.size)
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


def _inflate(method: int, raw: bytes, size: int) -> bytes:
    """A member's data decompressed, never past its declared `size` (a member that would
    inflate further is refused, so a small file cannot fill the memory)."""
    if method == 0:
        data = raw
    elif method == 8:
        inflater = zlib.decompressobj(-15)
        data = inflater.decompress(raw, size + 1)
        if len(data) > size or inflater.unconsumed_tail:
            raise LogFormatError(f"the data inflates past its declared {size} bytes")
    elif method == 93:
        try:
            import zstandard
        except ImportError:  # pragma: no cover - a declared dependency
            raise LogFormatError(
                "the member is zstd-compressed; install the `zstandard` package to read it"
            ) from None
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        out = bytearray()
        while len(out) <= size:
            piece = reader.read(size + 1 - len(out))
            if not piece:
                break
            out += piece
        if len(out) > size:
            raise LogFormatError(f"the data inflates past its declared {size} bytes")
        data = bytes(out)
    else:
        raise LogFormatError(f"unsupported zip compression method {method}")
    if len(data) != size:
        raise LogFormatError(f"the data is {len(data)} bytes, not its declared {size}")
    return data


# -- the .eval members ------------------------------------------------------------------------

_sample_decoder = msgspec.json.Decoder(s.EvalSample)
_summaries_decoder = msgspec.json.Decoder(list[s.EvalSampleSummary])


def _eval_header(index: ZipIndex) -> s.EvalLog:
    member = index.find("header.json") or index.find("_journal/start.json")
    if member is None:
        raise LogFormatError(f"{index.path}: no header.json or _journal/start.json in the zip.")
    data = index.read(member, MAX_HEADER_BYTES)
    return decode_json(header_decoder, data, index.path, member.name).header(index.path)


def eval_log(path: Path, header_only: bool) -> tuple[s.EvalLog, list[s.EvalSample]]:
    """A `.eval`'s header and samples (no samples, none parsed, when `header_only`)."""
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
