"""`vitals cache ls|stats|clear`: what the cache of model replies holds, and emptying it."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from .._words import plural
from ..caching.options import Cache, parse_age
from ..caching.store import STORE_FILE, ReplyStore
from .shared import EXIT_OK, RunError, say

__all__ = ["run_cache"]


def run_cache(args: argparse.Namespace) -> int:
    """`vitals cache ACTION`: list, count or remove the cached replies of a store.

    Example:
        >>> run_cache(build_parser().parse_args(["cache", "stats"]))
        0
    """
    age: str | None = getattr(args, "older_than", None)
    older_than = _age(age) if age is not None else None
    directory = Cache(dir=args.dir).path.expanduser()
    where = directory / STORE_FILE
    if not where.is_file():
        print(f"No cache in {directory} (no {STORE_FILE} there): nothing is cached yet.")
        return EXIT_OK
    with _opened(directory) as store:
        if args.cache_command == "ls":
            _ls(store, args.model, older_than, age, args.limit)
        elif args.cache_command == "stats":
            _stats(store, args.model)
        else:
            _clear(store, args.model, older_than, age)
    return EXIT_OK


def _age(text: str) -> float:
    """`--older-than` in seconds: "7d", "12h" ... or a plain number of seconds."""
    try:
        value: str | float = float(text)
    except ValueError:
        value = text
    return parse_age(value, "--older-than")


@contextmanager
def _opened(directory: Path) -> Iterator[ReplyStore]:
    """The store in `directory`; a store that cannot be read is a one-line error."""
    try:
        store = ReplyStore(directory)
    except (OSError, sqlite3.Error) as exc:
        raise RunError(f"the cache in {directory / STORE_FILE} cannot be read: {exc}") from exc
    try:
        yield store
    except sqlite3.Error as exc:
        raise RunError(f"the cache in {store.path} cannot be read: {exc}") from exc
    finally:
        store.close()


def _ls(
    store: ReplyStore, model: str | None, older_than: float | None, age: str | None, limit: int
) -> None:
    entries = store.entries(model=model, older_than=older_than, limit=limit + 1)
    if not entries:
        print(f"No replies{_which(model, age)} in the cache at {store.path}.")
        return
    lines = [["stored", "model", "size", "task", "sample", "epoch", "role", "log"]]
    for entry in entries[:limit]:
        origin = entry["origin"]
        lines.append(
            [
                _when(entry["created"]),
                f"{entry['provider']}/{entry['model']}",
                _size(entry["bytes"]),
                *(_cell(v) for v in (origin.task, origin.sample, origin.epoch, origin.role)),
                _cell(origin.log),
            ]
        )
    print(_columns(lines))
    if len(entries) > limit:
        say(f"The newest {limit:,} shown; `--limit N` shows more.")


def _stats(store: ReplyStore, model: str | None) -> None:
    rows = store.stats(model=model)
    print(f"Cache: {store.path} ({_size(store.path.stat().st_size)} on disk)")
    if not rows:
        print(f"No replies{_which(model, None)}.")
        return
    lines = [["model", "replies", "size", "oldest", "newest"]]
    for row in rows:
        lines.append(
            [
                f"{row.provider}/{row.model}",
                f"{row.replies:,}",
                _size(row.bytes),
                _when(row.oldest),
                _when(row.newest),
            ]
        )
    if len(rows) > 1:
        lines.append(
            [
                "total",
                f"{sum(r.replies for r in rows):,}",
                _size(sum(r.bytes for r in rows)),
                _when(min(r.oldest for r in rows)),
                _when(max(r.newest for r in rows)),
            ]
        )
    print(_columns(lines, numeric={1, 2}))


def _clear(store: ReplyStore, model: str | None, older_than: float | None, age: str | None) -> None:
    gone = store.clear(older_than=older_than, model=model)
    which = _which(model, age)
    print(f"Removed {plural(gone, 'reply', 'replies')}{which} from the cache at {store.path}.")


def _which(model: str | None, age: str | None) -> str:
    """The filters a command was given, as words: " of model M older than 7d"."""
    words = f" of model {model}" if model else ""
    return words + (f" older than {age}" if age is not None else "")


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _when(unix: float) -> str:
    return datetime.fromtimestamp(unix).astimezone().strftime("%Y-%m-%d %H:%M")


def _size(count: float) -> str:
    """Bytes as people read them: "512 B", "1.5 KB", "2.0 MB"."""
    if count < 1024:
        return f"{count:,.0f} B"
    for unit in ("KB", "MB"):
        count /= 1024
        if count < 1024:
            return f"{count:,.1f} {unit}"
    return f"{count / 1024:,.1f} GB"


def _columns(lines: list[list[str]], numeric: set[int] | None = None) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    right = numeric or {2}
    return "\n".join(
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    )
