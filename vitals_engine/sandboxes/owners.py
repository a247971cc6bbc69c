"""Which process made a sandbox, so the next run can tell what a killed one left behind.

A sandbox is marked with its maker's `owner()`: the host, the process id and the
process's start time (Linux: from /proc; elsewhere 0), so a process id that the system
gave again to another program is not taken for the maker still running. The temporary
directories of bwrap and local sandboxes carry it in their names
(`vitals-bwrap-<pid>-<start>-<random>`), docker's containers in their labels.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
from functools import cache
from pathlib import Path

__all__ = ["HOST", "Owner", "alive", "leftover_dirs", "new_dir", "owner", "remove_dir"]

HOST = socket.gethostname()

#: (pid, start time) of a process.
Owner = tuple[int, int]


def _started(pid: int) -> int:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat's 22nd field);
    0 where there is no /proc; -1 when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return -1 if Path("/proc/self").exists() else 0
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[19])


@cache
def _this_process(pid: int) -> Owner:
    return pid, _started(pid)


def owner() -> Owner:
    """This process, as its sandboxes are marked."""
    return _this_process(os.getpid())


def alive(pid: int, started: int) -> bool:
    """Whether the process that marked a sandbox (`pid`, started at `started`) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _started(pid)
    return now == started or now == 0 or started == 0


def new_dir(kind: str) -> Path:
    """A fresh temporary directory for one `kind` sandbox, named after this process."""
    pid, started = owner()
    path = Path(tempfile.gettempdir(), f"vitals-{kind}-{pid}-{started}-{secrets.token_hex(4)}")
    path.mkdir(mode=0o700)
    return path


def leftover_dirs(kind: str) -> list[Path]:
    """The temporary directories of `kind` sandboxes whose maker no longer runs."""
    found = []
    for path in Path(tempfile.gettempdir()).glob(f"vitals-{kind}-*-*-*"):
        parts = path.name.split("-")
        if len(parts) != 5 or not (parts[2].isdecimal() and parts[3].isdecimal()):
            continue
        if not alive(int(parts[2]), int(parts[3])):
            found.append(path)
    return found


def remove_dir(path: Path) -> None:
    """Remove a sandbox's directory, whatever modes its contents were left with."""
    if path.is_symlink() or not path.exists():
        return
    path.chmod(0o700)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            child = os.path.join(root, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)
    shutil.rmtree(path, ignore_errors=True)
