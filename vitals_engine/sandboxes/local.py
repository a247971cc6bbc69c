"""The "local" kind: a temporary directory on the host, and no isolation at all.

A command runs in the directory as this process's user, with this process's environment
(plus the exec's `env`), and can read, write and reach whatever this process can: the
kind is for trusted code and quick tries, and says so once per run in a loud warning.
What a command leaves running in the background ends with the exec (its process group is
killed), as in the other kinds. The directory is `vitals-local-<pid>-<start>-<random>`
in the system's temporary directory; `remove_leftovers()` removes those whose process
no longer runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from .._errors import SandboxError
from .._logging import log
from .base import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    FileContents,
    SandboxSpec,
    check_user,
    file_items,
    is_local_dir,
    run_setup,
    sandbox_path,
    shell_argv,
)
from .owners import leftover_dirs, new_dir, remove_dir
from .processes import end_group, end_marked, run_process

__all__ = ["MARK", "LocalKind", "LocalSandbox"]

#: The variable in a local sandbox's commands' environment that names it, so that what a
#: killed run's commands still run is found and ended.
MARK = "VE_SANDBOX"


class LocalSandbox:
    """A directory on the host, where commands run unisolated."""

    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workdir = str(root)

    def __repr__(self) -> str:
        return f"LocalSandbox({self.workdir!r})"

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the command's limit, then killed
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        """Run `cmd` in the directory (see `Sandbox.exec`).

        Example:
            >>> (await sandbox.exec(["ls"])).stdout
            'notes.txt\\n'
        """
        check_user(self.kind, user)
        argv = shell_argv(cmd)
        where = sandbox_path(self.workdir, cwd) if cwd else self.workdir
        if not is_local_dir(self.root):
            raise SandboxError(f"The local sandbox's directory {self.root} is gone", kind="local")
        if not is_local_dir(where):
            return ExecResult(126, "", f"cwd {where}: no such directory\n")
        data = input.encode() if isinstance(input, str) else input
        try:
            done = await run_process(
                argv,
                input=data,
                cwd=where,
                env={**os.environ, **(env or {}), "PWD": where, MARK: self.root.name},
                time_limit=timeout,
                limit=output_limit,
                kill=end_group,
            )
        except FileNotFoundError:
            return ExecResult(127, "", f"{argv[0]}: command not found\n")
        except PermissionError:
            return ExecResult(126, "", f"{argv[0]}: permission denied\n")
        return ExecResult(
            returncode=done.returncode,
            stdout=done.stdout.text(),
            stderr=done.stderr.text(),
            timed_out=done.timed_out,
            truncated=done.stdout.truncated or done.stderr.truncated,
            seconds=done.seconds,
        )

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at `path` (relative to the directory).

        Example:
            >>> await sandbox.read_file("notes.txt")
            'remember the milk\\n'
        """
        data = await anyio.Path(sandbox_path(self.workdir, path)).read_bytes()
        return data.decode("utf-8", errors="replace") if text else data

    async def write_file(self, path: str, contents: str | bytes) -> None:
        """Write `contents` to `path` (relative to the directory), making its directories.

        Example:
            >>> await sandbox.write_file("notes.txt", "remember the milk\\n")
        """
        target = anyio.Path(sandbox_path(self.workdir, path))
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(contents.encode() if isinstance(contents, str) else contents)


def _lay_out(files: Mapping[str, FileContents] | None) -> LocalSandbox:
    """A new directory with `files` written into it (one thread hop for the whole; a
    failure removes what was made)."""
    items = file_items(files)
    sandbox = LocalSandbox(new_dir("local"))
    try:
        for path, data in items:
            target = Path(sandbox_path(sandbox.workdir, path))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except BaseException:
        remove_dir(sandbox.root)
        raise
    return sandbox


class LocalKind:
    """Makes and removes local sandboxes: temporary directories, nothing isolated."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self._warned = False

    def _warn(self) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "sandbox_not_isolated",
                kind="local",
                detail="local sandboxes are plain directories: the commands they run see "
                "and change this machine as this user; use bwrap or docker for code you "
                "do not trust",
            )

    async def check(self) -> None:
        """Nothing to install; warns that nothing is isolated."""
        self._warn()

    async def create(
        self,
        *,
        run_id: str,
        sample_id: str,
        epoch: int,
        files: Mapping[str, FileContents] | None = None,
        setup: str | None = None,
    ) -> LocalSandbox:
        """A fresh directory with `files` in it, after `setup` ran there."""
        self._warn()
        sandbox = await anyio.to_thread.run_sync(_lay_out, files)
        try:
            await run_setup(sandbox, setup)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.remove(sandbox)
            raise
        return sandbox

    async def remove(self, sandbox: object) -> None:
        """Remove the sandbox's directory (again: nothing to do)."""
        if isinstance(sandbox, LocalSandbox):
            await anyio.to_thread.run_sync(remove_dir, sandbox.root)

    async def remove_leftovers(self) -> int:
        """Remove the directories of local sandboxes whose process was killed, and end the
        commands they still ran (found by `MARK` in their environment)."""
        found = await anyio.to_thread.run_sync(leftover_dirs, "local")
        for path in found:
            await end_marked(f"{MARK}={path.name}")
            await anyio.to_thread.run_sync(remove_dir, path)
        return len(found)
