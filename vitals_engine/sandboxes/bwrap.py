"""The "bwrap" kind: each sample's sandbox a directory, each exec a bubblewrap of its own.

What a command sees: the host's system read-only (/usr, /etc, /opt and the /bin, /lib
... beside them; not /home, /root or the eval's own files), a fresh /proc and /dev, and
two writable directories that last as long as the sandbox: `/work` (the `workdir`, where
commands start) and `/tmp`. Its environment is a clean one (PATH, HOME=/tmp, TMPDIR,
LANG=C.UTF-8), plus the exec's `env`: none of the eval's variables (API keys) leak in.

Every exec is `bwrap --unshare-all --die-with-parent --new-session`: namespaces of its
own (no network unless the spec says `network=True`; its own PIDs, so what it left in
the background ends with it), killed with this process. A timeout, or the caller being
cancelled, SIGKILLs the namespace's first process (its PID read from bwrap's
`--json-status-fd`): the kernel then kills the rest, and the exec returns once all are
gone. State between execs is the files in /work and /tmp, as for an agent's shell.

`read_file` and `write_file` run `cat` inside the sandbox, so a path means what it means
to the commands (a link the command made is followed there, never on the host). Files
given at `create` are written straight into the fresh directory (under /work or /tmp).
Commands run as the user running the eval; bwrap limits neither memory nor CPUs (docker
does). The directories are `vitals-bwrap-<pid>-<start>-<random>` in the system's
temporary directory; `remove_leftovers()` removes those whose process no longer runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import signal
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import anyio
import anyio.abc

from .._errors import ConfigError, SandboxError
from .base import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    FileContents,
    SandboxSpec,
    check_user,
    file_error,
    file_items,
    is_local_dir,
    run_setup,
    sandbox_path,
    shared_path,
    shell_argv,
)
from .owners import leftover_dirs, new_dir, remove_dir
from .processes import Finished, kill_group, run_process

__all__ = ["WORKDIR", "BwrapKind", "BwrapSandbox"]

#: Where the sandbox's work directory is, as its commands see it.
WORKDIR = "/work"
#: The largest file `read_file` returns.
MAX_FILE_BYTES = 256 * 1024 * 1024
_SYSTEM = ("/usr", "/etc", "/opt", "/nix", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}
_INSTALL = (
    "bwrap (bubblewrap) is not installed: `sudo apt-get install bubblewrap` (Debian, "
    'Ubuntu), `sudo dnf install bubblewrap` (Fedora), or choose sandbox="docker".'
)


@cache
def _system_mounts(network: bool) -> tuple[str, ...]:
    """bwrap's arguments that show the host's system read-only."""
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    if network:  # /etc/resolv.conf may point into /run (systemd-resolved)
        resolv = os.path.realpath("/etc/resolv.conf")
        if not resolv.startswith(("/etc/", "/usr/")):
            folder = os.path.dirname(resolv)
            args += ["--ro-bind-try", folder, folder]
    return (*args, "--proc", "/proc", "--dev", "/dev")


def _status(fd: int) -> dict[str, int]:
    """What bwrap has written to its status pipe so far ("child-pid", "exit-code")."""
    found: dict[str, int] = {}
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return found
    for line in data.splitlines():
        try:
            found.update(json.loads(line))
        except ValueError:
            continue
    return found


class _Run:
    """One bwrap process: its status pipe, and how to kill its namespace."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        os.set_blocking(self.read, False)
        self.seen: dict[str, int] = {}

    def status(self) -> dict[str, int]:
        self.seen.update(_status(self.read))
        return self.seen

    async def kill(self, process: anyio.abc.Process) -> None:
        if process.returncode is not None:
            return  # ended: its namespace, and all in it, went with it
        child = self.status().get("child-pid")
        if child is None:
            kill_group(process.pid)
            return
        try:  # the namespace's first process: the kernel kills the rest
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            kill_group(process.pid)

    def close(self) -> None:
        for fd in (self.read, self.write):
            with contextlib.suppress(OSError):
                os.close(fd)


class BwrapSandbox:
    """A sample's directory, where each exec runs in a bubblewrap of its own."""

    kind = "bwrap"
    workdir = WORKDIR

    def __init__(self, root: Path, network: bool, shared: Sequence[str] = ()) -> None:
        self.root = root
        self.network = network
        self.shared_mounts = tuple(
            arg for folder in shared for arg in ("--ro-bind", folder, shared_path(folder, "bwrap"))
        )

    def __repr__(self) -> str:
        return f"BwrapSandbox({str(self.root)!r})"

    def _argv(self, argv: list[str], cwd: str, env: Mapping[str, str], fd: int) -> list[str]:
        settings: list[str] = []
        for name, value in {**_ENV, **env, "PWD": cwd}.items():
            settings += ["--setenv", name, value]
        return [
            "bwrap",
            "--unshare-all",
            *(["--share-net"] if self.network else []),
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            *_system_mounts(self.network),
            *self.shared_mounts,
            "--bind",
            str(self.root / "work"),
            WORKDIR,
            "--bind",
            str(self.root / "tmp"),
            "/tmp",
            "--chdir",
            cwd,
            "--clearenv",
            *settings,
            "--json-status-fd",
            str(fd),
            "--",
            *argv,
        ]

    async def _run(
        self,
        argv: list[str],
        *,
        input: bytes | None = None,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        time_limit: float | None = None,
        limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> Finished:
        if not is_local_dir(self.root / "work"):
            raise SandboxError(f"The bwrap sandbox's directory {self.root} is gone", kind=self.kind)
        run = _Run()
        try:
            done = await run_process(
                self._argv(argv, cwd, env or {}, run.write),
                input=input,
                cwd=None,
                env={},
                time_limit=time_limit,
                limit=limit,
                kill=run.kill,
                pass_fds=(run.write,),
            )
            started = done.returncode == 0 or "child-pid" in run.status()
            if not started and not done.timed_out:  # exit 0 is the command's: it started
                raise SandboxError(
                    f"bwrap could not start the sandbox (exit {done.returncode})",
                    kind=self.kind,
                    output=done.stderr.tail() + done.stdout.tail(),
                )
            return done
        finally:
            run.close()

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
        """Run `cmd` in a bubblewrap of its own (see `Sandbox.exec`).

        Example:
            >>> (await sandbox.exec("pwd; ls /")).stdout
            '/work\\nbin\\ndev\\netc\\nlib\\nlib64\\nproc\\nsbin\\ntmp\\nusr\\nwork\\n'
        """
        check_user(self.kind, user)
        argv = shell_argv(cmd)
        where = sandbox_path(WORKDIR, cwd) if cwd else WORKDIR
        done = await self._run(
            argv,
            input=input.encode() if isinstance(input, str) else input,
            cwd=where,
            env=env,
            time_limit=timeout,
            limit=output_limit,
        )
        stderr = done.stderr.text()
        returncode = done.returncode
        if returncode == 1 and stderr.startswith("bwrap: "):  # before the command ran
            if stderr.startswith("bwrap: execvp"):
                found = "No such file" in stderr
                returncode = 127 if found else 126
                why = "command not found" if found else "permission denied"
                stderr = f"{argv[0]}: {why}\n"
            elif stderr.startswith("bwrap: Can't chdir"):
                returncode, stderr = 126, f"cwd {where}: no such directory\n"
            else:
                raise SandboxError(
                    "bwrap could not set the sandbox up", kind=self.kind, output=stderr
                )
        return ExecResult(
            returncode=returncode,
            stdout=done.stdout.text(),
            stderr=stderr,
            timed_out=done.timed_out,
            truncated=done.stdout.truncated or done.stderr.truncated,
            seconds=done.seconds,
        )

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at `path` as the sandbox's commands see it (relative: under /work).

        Example:
            >>> await sandbox.read_file("/etc/os-release")  # the host's, read-only
        """
        where = sandbox_path(WORKDIR, path)
        done = await self._run(["cat", "--", where], limit=MAX_FILE_BYTES)
        if done.returncode != 0:
            raise file_error(done.stderr.text(), where)
        if done.stdout.truncated:
            raise OSError(f"{where} is larger than {MAX_FILE_BYTES} bytes")
        data = bytes(done.stdout.data)
        return data.decode("utf-8", errors="replace") if text else data

    async def write_file(self, path: str, contents: str | bytes) -> None:
        """Write `contents` to `path` (relative: under /work), making its directories; only
        /work and /tmp are writable.

        Example:
            >>> await sandbox.write_file("src/app.py", "print('hi')\\n")
        """
        where = sandbox_path(WORKDIR, path)
        data = contents.encode() if isinstance(contents, str) else contents
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        done = await self._run(["sh", "-c", script, "sh", where], input=data)
        if done.returncode != 0:
            raise file_error(done.stderr.text(), where)

    def host_path(self, path: str) -> Path:
        """Where the file the sandbox sees at `path` (under /work or /tmp) is on the host."""
        where = sandbox_path(WORKDIR, path)
        for inside, folder in ((WORKDIR, "work"), ("/tmp", "tmp")):
            if where == inside or where.startswith(inside + "/"):
                return self.root / folder / posixpath.relpath(where, inside)
        raise ConfigError(
            f"A bwrap sandbox holds files only under {WORKDIR} and /tmp: {path!r} is elsewhere."
        )


def _lay_out(
    files: Mapping[str, FileContents] | None, network: bool, shared: Sequence[str]
) -> BwrapSandbox:
    """A new sandbox's directories with `files` written into them (one thread hop for the
    whole; a failure removes what was made)."""
    items = file_items(files)
    sandbox = BwrapSandbox(new_dir("bwrap"), network, shared)
    try:
        for folder in ("work", "tmp"):
            (sandbox.root / folder).mkdir()
        for path, data in items:
            target = sandbox.host_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except BaseException:
        remove_dir(sandbox.root)
        raise
    return sandbox


class BwrapKind:
    """Makes and removes bwrap sandboxes."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec

    async def check(self) -> None:
        """ConfigError unless bwrap is installed and can make its namespaces here."""
        if shutil.which("bwrap") is None:
            raise ConfigError(_INSTALL)
        root = await anyio.to_thread.run_sync(new_dir, "bwrap")
        try:
            for folder in ("work", "tmp"):
                (root / folder).mkdir()
            await BwrapSandbox(root, self.spec.network)._run(["true"])
        except SandboxError as exc:
            raise ConfigError(
                "bwrap is installed but cannot make a sandbox here (user namespaces may be "
                "off: `sysctl kernel.unprivileged_userns_clone=1`, or restricted by "
                f'AppArmor), or choose sandbox="docker": {exc.output}'
            ) from None
        finally:
            await anyio.to_thread.run_sync(remove_dir, root)

    async def create(
        self,
        *,
        run_id: str,
        sample_id: str,
        epoch: int,
        files: Mapping[str, FileContents] | None = None,
        setup: str | None = None,
    ) -> BwrapSandbox:
        """A fresh sandbox with `files` in it, after `setup` ran there."""
        sandbox = await anyio.to_thread.run_sync(
            _lay_out, files, self.spec.network, self.spec.shared
        )
        try:
            await run_setup(sandbox, setup)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.remove(sandbox)
            raise
        return sandbox

    async def remove(self, sandbox: object) -> None:
        """Remove the sandbox's directories (again: nothing to do). No process of it runs:
        each exec's ended with it."""
        if isinstance(sandbox, BwrapSandbox):
            await anyio.to_thread.run_sync(remove_dir, sandbox.root)

    async def remove_leftovers(self) -> int:
        """Remove the directories of bwrap sandboxes whose process was killed (their
        processes died with it: `--die-with-parent`)."""
        found = await anyio.to_thread.run_sync(leftover_dirs, "bwrap")
        for path in found:
            await anyio.to_thread.run_sync(remove_dir, path)
        return len(found)
