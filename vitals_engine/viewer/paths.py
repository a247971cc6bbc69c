"""Which files the viewer may touch: log files found under the log directory, by safe paths.

Every path that comes from a URL goes through `resolve_inside()`, which
refuses empty, absolute, `.`/`..` and backslash segments, resolves symlinks,
and checks that the result is still inside the directory. Sample ids become
URL- and file-system-safe keys with `sample_key()` (and back with
`parse_sample_key()`), so an id such as `"../x"` or `"a/b"` is a plain
path segment in the live API and in a bundle alike.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from ..log.formats import LOG_SUFFIXES
from ..log.journal_format import JOURNAL_SUFFIX

__all__ = [
    "MANIFESTS",
    "LogFile",
    "final_log_of",
    "log_files",
    "parse_sample_key",
    "resolve_inside",
    "sample_key",
]

#: JSON files a log directory may hold that are not logs: viewer manifests.
MANIFESTS = frozenset({"listing.json", "logs.json", "eval-set.json"})

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_INT_ID = re.compile(r"-?[0-9]{1,30}")


def sample_key(id: int | str) -> str:
    """A sample id as one safe path segment: ints and plain names as they are, else `~base64`.

    Example:
        >>> sample_key(3), sample_key("q-1"), sample_key("../x")
        ('3', 'q-1', '~Li4veA')
    """
    if isinstance(id, int):
        return str(id)
    if _SAFE_ID.fullmatch(id) and not _INT_ID.fullmatch(id):
        return id
    return "~" + base64.urlsafe_b64encode(id.encode()).decode().rstrip("=")


def parse_sample_key(key: str) -> int | str | None:
    """The sample id a `sample_key()` stands for (None for a malformed key).

    Example:
        >>> parse_sample_key("~Li4veA")
        '../x'
    """
    if key.startswith("~"):
        body = key[1:]
        try:
            return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
    if _INT_ID.fullmatch(key):
        return int(key)
    if _SAFE_ID.fullmatch(key):
        return key
    return None


def resolve_inside(root: Path, relative: str) -> Path | None:
    """`root / relative` resolved, or None unless it is an existing file inside `root`.

    `relative` is a `/`-separated path from a URL; `root` must be resolved.

    Example:
        >>> resolve_inside(Path("/srv/logs").resolve(), "../etc/passwd") is None
        True
    """
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        return None
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    try:
        resolved = root.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a symlink loop
        return None
    if not resolved.is_relative_to(root) or not resolved.is_file():
        return None
    return resolved


def is_log_name(relative: str) -> bool:
    """Whether a relative path names a log the viewer lists (by suffix, never a manifest).

    Example:
        >>> is_log_name("runs/a.eval"), is_log_name("listing.json"), is_log_name(".tmp-1.json")
        (True, False, False)
    """
    name = relative.rsplit("/", 1)[-1]
    if name.startswith(".") or name in MANIFESTS:
        return False
    return any(name.lower().endswith(suffix) for suffix in LOG_SUFFIXES)


class LogFile:
    """A log found in the directory: its `/`-separated relative path and `os.stat` identity.

    Example:
        >>> next(log_files(Path("logs").resolve())).relative
        '2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json'
    """

    __slots__ = ("path", "relative", "stamp")

    def __init__(self, relative: str, path: Path, stamp: tuple[int, int, int, int]) -> None:
        self.relative = relative
        self.path = path
        self.stamp = stamp  # (device, inode, size, mtime_ns): any change means "re-read"


def final_log_of(journal: Path) -> Path | None:
    """The finished log beside a journal (same stem, `.json` or `.eval`), if it exists.

    Example:
        >>> final_log_of(Path("logs/2026-01-14T16-19-11-06-00_add_abc.journal"))
        PosixPath('logs/2026-01-14T16-19-11-06-00_add_abc.json')
    """
    for suffix in (".json", ".eval"):
        candidate = journal.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def log_files(root: Path) -> Iterator[LogFile]:
    """The logs under `root` (resolved), recursively, sorted by relative path.

    Hidden files and folders (temporary files of atomic writes) are left out,
    and so are symlinks that lead outside `root`, what is not a regular file
    (a FIFO named `x.json` would block a read), manifests, and journals
    whose run has finished (their final log holds the same samples).

    Example:
        >>> [f.relative for f in log_files(Path("logs").resolve())]
        ['2026-01-14T16-19-11-06-00_simple-addition_add3e3e94f8e2faf092a58.json']
    """
    found: list[LogFile] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(folder)
        prefix = base.relative_to(root).as_posix()
        for name in files:
            relative = name if prefix == "." else f"{prefix}/{name}"
            if not is_log_name(relative):
                continue
            path = base / name
            if path.is_symlink():
                target = resolve_inside(root, relative)
                if target is None:
                    continue
            try:
                st = path.stat()
            except OSError:
                continue  # removed while we looked
            if not stat.S_ISREG(st.st_mode):
                continue  # a FIFO or device named like a log: reading it could block
            if name.endswith(JOURNAL_SUFFIX) and final_log_of(path) is not None:
                continue
            found.append(
                LogFile(relative, path, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
            )
    found.sort(key=lambda f: f.relative)
    yield from found
