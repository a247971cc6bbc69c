"""Write a finished log to disk, atomically, under Inspect's file-name scheme."""

from __future__ import annotations

import os
import re
import secrets
import string
import tempfile
from datetime import datetime
from pathlib import Path

from . import schema as s

__all__ = ["clean_task_name", "log_file_name", "new_id", "write_json_log"]

_ALPHABET = string.ascii_letters + string.digits


def new_id(length: int = 22) -> str:
    """A random id of letters and digits, as Inspect's run and eval ids are."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def clean_task_name(name: str) -> str:
    """A task name safe for file names: `_` and spaces become `-`, others dropped."""
    name = re.sub(r"[_\s/:+]+", "-", name.strip())
    return re.sub(r"[^A-Za-z0-9-]", "", name) or "task"


def log_file_name(created: float, task: str, log_id: str, ext: str = "json") -> str:
    """`<YYYY-MM-DDTHH-MM-SS±HH-MM>_<task>_<id>.<ext>`, the name Inspect's viewer lists."""
    stamp = datetime.fromtimestamp(created).astimezone().isoformat(timespec="seconds")
    stamp = stamp.replace(":", "-")
    return f"{stamp}_{clean_task_name(task)}_{log_id}.{ext}"


def write_json_log(path: Path, log: s.EvalLog) -> Path:
    """Write `log` as JSON to `path`, replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(s.encoder.encode(log))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
