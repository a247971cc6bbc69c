"""`vitals ls`: one line per log of a directory, newest first."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .. import config
from .._errors import LogFormatError, StoreError
from ..log import schema as log_schema
from ..log.decoding import NotALogError
from ..log.formats import LOG_SUFFIXES
from ..log.logged_eval import LoggedEval
from ..log.reader import read_log
from ..storage.location import is_url
from .shared import EXIT_OK, RunError, UsageError, default_dir

__all__ = ["run_ls"]

#: JSON files a log directory holds that are not logs: viewer manifests.
_MANIFESTS = {"listing.json", "logs.json", "eval-set.json"}


def _log_files(root: Path) -> Iterator[Path]:
    """Logs under `root`: .json/.eval files and journals of runs without a final log."""
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.suffix.lower() not in LOG_SUFFIXES or path.name in _MANIFESTS:
            continue
        if not path.is_file():
            continue
        if path.suffix == ".journal" and any(
            path.with_suffix(ext).exists() for ext in (".json", ".eval")
        ):
            continue
        yield path


def _created(header: log_schema.EvalLog, modified: float) -> datetime:
    try:
        when = datetime.fromisoformat(header.eval.created)
    except (TypeError, ValueError):
        return datetime.fromtimestamp(modified, tz=UTC)
    return when if when.tzinfo is not None else when.astimezone()


def _samples_cell(header: log_schema.EvalLog) -> str:
    results = header.results
    if isinstance(results, log_schema.EvalResults):
        total, done = results.total_samples, results.completed_samples
        return f"{total}" if done == total else f"{done}/{total}"
    return "-"


def _metric_cell(metrics: dict[str, float | int | None] | None) -> str:
    for name, value in (metrics or {}).items():
        return f"{name} {value:.4g}" if isinstance(value, int | float) else f"{name} -"
    return "-"


def run_ls(args: argparse.Namespace) -> int:
    """`vitals ls [DIR]`: print one line per log, newest first (DIR may be a store's URL)."""
    given = args.dir or config.log_dir() or config.DEFAULT_LOG_DIR
    found = _stored(given) if is_url(given) else _local(default_dir(args.dir))
    rows: list[tuple[datetime, list[str]]] = []
    for name, modified, header, running in found:
        if isinstance(header, NotALogError):
            continue
        if isinstance(header, LogFormatError):
            when = datetime.fromtimestamp(modified, tz=UTC)
            rows.append((when, [_when(when), "?", "?", "unreadable", "-", "-", name]))
            continue
        logged = LoggedEval(Path(name), header, [], header_only=True)
        when = _created(header, modified)
        status = logged.status + (" (running)" if running else "")
        cells = [
            _when(when),
            logged.task,
            logged.model,
            status,
            _samples_cell(header),
            _metric_cell(logged.metrics),
            name,
        ]
        rows.append((when, cells))
    if not rows:
        print(f"No logs in {given if is_url(given) else default_dir(args.dir)}.")
        return EXIT_OK
    rows.sort(key=lambda r: r[0].timestamp(), reverse=True)
    header_cells = ["date", "task", "model", "status", "samples", "metric", "file"]
    print(_columns([header_cells, *(cells for _, cells in rows)]))
    return EXIT_OK


Found = Iterator[tuple[str, float, "log_schema.EvalLog | LogFormatError", bool]]


def _local(root: Path) -> Found:
    if not root.exists():
        raise UsageError(f"Log directory '{root}' not found.")
    if not root.is_dir():
        raise UsageError(f"'{root}' is a file, not a log directory.")
    for path in _log_files(root):
        name = str(path.relative_to(root))
        modified = path.stat().st_mtime
        try:
            header: log_schema.EvalLog | LogFormatError = read_log(path, header_only=True).header
        except LogFormatError as exc:
            header = exc
        yield name, modified, header, path.suffix == ".journal"


def _stored(url: str) -> Found:
    from ..log.stored import stored_headers

    try:
        yield from stored_headers(url)
    except StoreError as exc:
        raise RunError(str(exc)) from None


def _when(when: datetime) -> str:
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def _columns(lines: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
