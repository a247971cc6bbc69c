"""The staging directory of a store: where runs logging to it keep their journals here.

A journal needs a local disk (each line handed to the operating system as it is
written, fsync once a second), so a run that logs to a URL writes it in a directory of
this machine keyed by the URL, and ships it from there (`shipper.py`). It is
`$VITALS_STAGING_DIR/<key>` when that variable is set, else under the user's cache
directory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..config import staging_dir_from_env

__all__ = ["mirror_dir", "staging_dir"]


def _base() -> Path:
    given = staging_dir_from_env()
    if given is not None:
        return Path(given).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("vitals-engine", appauthor=False)) / "staging"


def staging_dir(url: str) -> Path:
    """The local directory where runs logging to `url` stage their journals.

    Example:
        >>> staging_dir("s3://team-evals/qa").name
        'team-evals-qa-4b1f0c9e2d7a'
    """
    url = url.rstrip("/")
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9.-]+", "-", url.split("://", 1)[-1]).strip("-.")[:60]
    return _base() / f"{readable or 'store'}-{digest}"


def mirror_dir(url: str) -> Path:
    """Where copies of `url`'s logs are kept for reading (`read_logs()`, the viewer,
    `bundle()`): apart from the journals runs write, which a copy must never replace."""
    return staging_dir(url) / ".mirror"
