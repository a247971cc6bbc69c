"""Read eval logs back: ours, the R package vitals', and Inspect's `.json` and `.eval`.

`read_log(path)` returns a `LoggedEval`. One reader per format, chosen by
`formats` on the suffix: `json_reader`, `eval_reader`, `journal_format`; what
they share is in `decoding`. A logged sample becomes a record in
`logged_sample`.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import LogFormatError
from ..storage.location import is_url
from .formats import read_parts
from .logged_eval import LoggedEval

__all__ = ["read_log"]


def read_log(path: str | Path, header_only: bool = False) -> LoggedEval:
    """Read an eval log: ours (`.json`, `.journal`), vitals' (R) or Inspect's (`.json`, `.eval`),
    on this disk or at the URL of an object store (`s3://bucket/prefix/<log>`).

    `header_only=True` reads the header (status, task, model, metrics, usage)
    without parsing samples, in milliseconds whatever the file's size.

    Raises `LogFormatError` (naming the file and the position) for a missing,
    truncated or corrupt log.

    Example:
        >>> logged = read_log(task.log_path)
        >>> logged.get_samples()
    """
    if is_url(path):
        return _read_stored(str(path), header_only)
    path = Path(path)
    header, samples, damage = read_parts(path, header_only)
    return LoggedEval(path, header, samples, damage, header_only=header_only)


def _read_stored(url: str, header_only: bool) -> LoggedEval:
    """A log in a store: its header read in ranges, or the whole log from a local copy."""
    from .stored import fetch, split_url, stored_header

    if header_only and not url.endswith(".journal"):
        store, name = split_url(url)
        try:
            header = stored_header(store, name)
        except FileNotFoundError:
            raise LogFormatError(f"{url}: the log does not exist.") from None
        return LoggedEval(_fetched_at(url), header, [], header_only=True)
    local = fetch(url)
    header, samples, damage = read_parts(local, header_only)
    return LoggedEval(local, header, samples, damage, header_only=header_only)


def _fetched_at(url: str) -> Path:
    """Where `fetch(url)` puts its local copy."""
    from ..storage.staging import mirror_dir
    from .stored import split_url

    store, name = split_url(url)
    return mirror_dir(store.url) / name
