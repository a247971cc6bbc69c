"""Read eval logs back: ours, the R package vitals', and Inspect's `.json` and `.eval`.

`read_log(path)` returns a `LoggedEval`. One reader per format, chosen by
`formats` on the suffix: `json_reader`, `eval_reader`, `journal_format`; what
they share is in `decoding`. A logged sample becomes a record in
`logged_sample`.
"""

from __future__ import annotations

from pathlib import Path

from .formats import read_parts
from .logged_eval import LoggedEval

__all__ = ["read_log"]


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
    header, samples, damage = read_parts(path, header_only)
    return LoggedEval(path, header, samples, damage, header_only=header_only)
