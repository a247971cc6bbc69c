"""Replacing a file atomically: write a temporary file beside it, then rename it into place.

The temporary file is created with the permissions any new file gets (0666
less the umask), not `mkstemp`'s 0600, so logs stay readable by a web server
or a colleague as the directory allows.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["replace_atomically"]


def _create_beside(path: Path, suffix: str) -> tuple[int, Path]:
    while True:
        tmp = path.parent / f".tmp-{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def replace_atomically(
    path: Path,
    write: Callable[[BinaryIO], object],
    suffix: str,
    *,
    sync: bool = True,
    check: Callable[[Path], object] | None = None,
) -> Path:
    """Write `path` through `write(fh)` on a temporary file beside it, fsync it (unless
    `sync=False`), and move it into place: readers see the old file or the new, never half.
    `check(temporary path)`, when given, reads the new file back first; if it raises,
    nothing is replaced.

    Example:
        >>> replace_atomically(Path("logs/listing.json"), lambda fh: fh.write(b"{}"), ".json")
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path, suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
