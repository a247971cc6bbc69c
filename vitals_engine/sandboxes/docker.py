"""The "docker" kind: a container per sample, over the Docker Engine API (`engine_api.py`).

A container runs the spec's image (or one built once per run from its Dockerfile, tagged
`vitals-build:<hash of the context>`) with `sleep infinity` under docker's init, no
network (`NetworkMode: none`) unless `network=True`, and the spec's memory, CPU and
process limits. Its `workdir` is the image's WORKDIR, or `/work` when the image has none.

Each container is labelled with the run (`vitals.run_id`, `vitals.sample`,
`vitals.epoch`) and its maker (`vitals.owner`: host, pid and the process's start time).
`remove_leftovers()` removes the containers whose maker, on this host, no longer runs:
what a killed run left is removed by the next run that starts. Containers made on
another host (a shared daemon) are left alone.

An exec is the exec API's: the command's environment marked with a variable of its own,
its output read from the multiplexed stream as it comes. A timeout, or a cancelled
caller, SIGKILLs every process of the container carrying the mark (a `sh` and `grep`
in the image do it, looking in /proc), and waits until none is left. A container that
died under an exec (out of memory, killed, its daemon gone) is a `SandboxError` with the
exec's last output and the container's state. Files go in and out as tar archives
(`PUT` / `GET /containers/{id}/archive`); a missing parent directory is made.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import posixpath
import re
import secrets
import tarfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._errors import ConfigError, SandboxError
from .base import (
    DEFAULT_OUTPUT_LIMIT,
    Capped,
    ExecResult,
    FileContents,
    SandboxSpec,
    file_items,
    memory_bytes,
    run_setup,
    sandbox_path,
    shared_path,
    shell_argv,
)
from .engine_api import EngineAPI, EngineError, EngineUnreachable, Frames, one_file, tar_of
from .owners import HOST, alive, owner

__all__ = ["DockerKind", "DockerSandbox"]

#: The work directory of a container whose image names none.
DEFAULT_WORKDIR = "/work"
#: The largest file `read_file` returns.
MAX_FILE_BYTES = 256 * 1024 * 1024
_MARK = "VE_SANDBOX_EXEC"
#: Kills every process whose environment holds the mark, until none is left.
_KILL = (
    'while :; do left=; for p in /proc/[0-9]*; do if grep -qs "$1" "$p/environ"; then '
    'kill -9 "${p#/proc/}" 2>/dev/null; left=1; fi; done; [ -z "$left" ] && exit 0; done'
)
_OWNER_LABEL = "vitals.owner"


def _slug(text: str, size: int) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text)[:size].strip("-.") or "x"


def _died(state: Mapping[str, Any]) -> str:
    """What a stopped container's state says of its end."""
    if state.get("OOMKilled"):
        return "it ran out of memory (OOM-killed)"
    error = state.get("Error")
    return f"it stopped (exit {state.get('ExitCode')}{', ' + error if error else ''})"


class DockerSandbox:
    """One sample's container."""

    kind = "docker"

    def __init__(self, api: EngineAPI, container: str, name: str, workdir: str) -> None:
        self.api = api
        self.container = container
        self.name = name
        self.workdir = workdir

    def __repr__(self) -> str:
        return f"DockerSandbox({self.name!r})"

    async def _dead(self, why: str, output: str) -> SandboxError:
        """The error for a container found not running (or the daemon gone)."""
        try:
            info = await self.api.call("GET", f"/containers/{self.container}/json")
        except EngineError as exc:
            state = f"the container is gone ({exc.message})"
        except EngineUnreachable as exc:
            state = f"docker's daemon does not answer ({exc})"
        else:
            if info["State"].get("Running"):
                state = "the container is stopping"
            else:
                state = _died(info["State"])
        return SandboxError(
            f"The docker sandbox {self.name} died: {why}; {state}", kind=self.kind, output=output
        )

    async def _start(
        self, argv: list[str], *, stdin: bool, cwd: str, env: Mapping[str, str], user: str | None
    ) -> str:
        body: dict[str, Any] = {
            "AttachStdin": stdin,
            "AttachStdout": True,
            "AttachStderr": True,
            "Tty": False,
            "Cmd": argv,
            "Env": [f"{k}={v}" for k, v in env.items()],
            "WorkingDir": cwd,
        }
        if user is not None:
            body["User"] = user
        try:
            made = await self.api.call("POST", f"/containers/{self.container}/exec", json_body=body)
        except (EngineError, EngineUnreachable) as exc:
            raise await self._dead(f"an exec could not start ({exc})", "") from None
        return made["Id"]

    async def _run(
        self,
        argv: list[str],
        *,
        input: bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        time_limit: float | None = None,
        limit: int = DEFAULT_OUTPUT_LIMIT,
        mark: bool = True,
    ) -> tuple[int, Capped, Capped, bool, float]:
        """Run `argv`: its exit code, stdout, stderr, whether it timed out, its seconds."""
        started = time.perf_counter()
        nonce = f"{_MARK}={secrets.token_hex(8)}"
        variables = dict(env or {})
        if mark:
            variables[_MARK] = nonce.split("=", 1)[1]
        exec_id = await self._start(
            argv, stdin=input is not None, cwd=cwd or self.workdir, env=variables, user=user
        )
        out, err = Capped(limit), Capped(limit)
        timed_out = ended = False
        conn = None
        try:  # from the start on: a cancelled caller kills what may have started
            try:
                conn, early = await self.api.attach(
                    f"/exec/{exec_id}/start", {"Detach": False, "Tty": False}
                )
            except (EngineError, EngineUnreachable) as exc:
                ended = True
                raise await self._dead(f"an exec could not start ({exc})", "") from None
            async with anyio.create_task_group() as group:
                if input is not None:
                    group.start_soon(_send_input, conn.stream, input)
                with anyio.move_on_after(time_limit):
                    await _read_frames(conn.stream, early, out, err)
                    ended = True
                if not ended:
                    timed_out = True
                    await self._kill(nonce)
                    ended = True
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if not ended and mark:
                    await self._kill(nonce)
                if conn is not None:
                    await conn.stream.aclose()
        code = -1 if timed_out else await self._exit_code(exec_id, out, err, check=mark)
        return code, out, err, timed_out, time.perf_counter() - started

    async def _exit_code(self, exec_id: str, out: Capped, err: Capped, *, check: bool) -> int:
        for _ in range(200):  # the stream ends as the process does; its code follows
            try:
                info = await self.api.call("GET", f"/exec/{exec_id}/json")
            except (EngineError, EngineUnreachable) as exc:
                raise await self._dead(str(exc), out.tail() + err.tail()) from None
            if not info.get("Running") and info.get("ExitCode") is not None:
                code = int(info["ExitCode"])
                if code >= 128 and check:
                    await self._check_alive(out, err)
                return code
            await anyio.sleep(0.01)
        raise await self._dead("an exec's output ended but it never did", out.tail() + err.tail())

    async def _check_alive(self, out: Capped, err: Capped) -> None:
        """After a command died of a signal: was it the container? A probe exec answers
        soonest (runc refuses an exec into a container whose first process is gone, while
        the daemon's state may lag); the daemon's state settles what a probe cannot."""
        for _ in range(3):
            if not await self._running():
                break
            if await self._probe() and await self._running():
                return
            await anyio.sleep(0.1)
        raise await self._dead("its command was killed with it", out.tail() + err.tail())

    async def _probe(self) -> bool:
        """Whether a trivial exec runs in the container (or would, but for a lack of
        `true` in the image)."""
        try:
            code, probe_out, probe_err, _, _ = await self._run(["true"], mark=False, limit=4096)
        except SandboxError:
            return False
        said = probe_out.text() + probe_err.text()
        return code == 0 or "executable file not found" in said

    async def _running(self) -> bool:
        try:
            info = await self.api.call("GET", f"/containers/{self.container}/json")
        except (EngineError, EngineUnreachable):
            return False
        return bool(info["State"].get("Running"))

    async def _kill(self, nonce: str) -> None:
        """SIGKILL the processes of one exec (and what they started), and wait for them."""
        with anyio.move_on_after(30):
            with contextlib.suppress(SandboxError):  # the container is gone, and all in it
                await self._run(["sh", "-c", _KILL, "sh", nonce], user="0", mark=False)

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
        """Run `cmd` in the container (see `Sandbox.exec`); `user` is any the image knows.

        Example:
            >>> (await sandbox.exec(["id", "-un"], user="nobody")).stdout
            'nobody\\n'
        """
        argv = shell_argv(cmd)
        where = sandbox_path(self.workdir, cwd) if cwd else self.workdir
        code, out, err, timed_out, seconds = await self._run(
            argv,
            input=input.encode() if isinstance(input, str) else input,
            cwd=where,
            env=env,
            user=user,
            time_limit=timeout,
            limit=output_limit,
        )
        stdout, stderr = out.text(), err.text()
        if code in (126, 127) and "OCI runtime exec failed" in stdout + stderr:
            said, stdout = stdout + stderr, ""  # docker's words for what runc could not do
            if "chdir" in said:
                code, stderr = 126, f"cwd {where}: no such directory\n"
            elif "not found" in said or "no such file" in said:
                code, stderr = 127, f"{argv[0]}: command not found\n"
            else:
                stderr = said
        return ExecResult(
            returncode=code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            seconds=seconds,
        )

    async def _archive(self, where: str) -> bytes:
        try:
            reply = await self.api.request(
                "GET", f"/containers/{self.container}/archive", query={"path": where}
            )
        except EngineUnreachable as exc:
            raise await self._dead(str(exc), "") from None
        if reply.status == 404:
            raise FileNotFoundError(2, "No such file or directory", where)
        if reply.status != 200:
            raise OSError(f"{where}: {EngineError(reply.status, reply.body.decode()).message}")
        return reply.body

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at `path` in the container (relative: under `workdir`).

        Example:
            >>> await sandbox.read_file("/etc/hostname")
        """
        where = sandbox_path(self.workdir, path)
        for _ in range(40):  # links followed, as a command would
            archive = await self._archive(where)
            link = _link(archive)
            if link is None:
                data = one_file(archive)
                return data.decode("utf-8", errors="replace") if text else data
            where = posixpath.normpath(posixpath.join(posixpath.dirname(where), link))
        raise OSError(40, "Too many levels of symbolic links", path)

    async def _exists(self, where: str) -> bool:
        reply = await self.api.request(
            "HEAD", f"/containers/{self.container}/archive", query={"path": where}
        )
        return reply.status == 200

    async def write_file(self, path: str, contents: str | bytes) -> None:
        """Write `contents` to `path` (relative: under `workdir`), making its directories.

        Example:
            >>> await sandbox.write_file("src/app.py", "print('hi')\\n")
        """
        where = sandbox_path(self.workdir, path)
        data = contents.encode() if isinstance(contents, str) else contents
        base = posixpath.dirname(where)
        missing: list[str] = []
        while base != "/" and not await self._exists(base):
            missing.insert(0, posixpath.basename(base))
            base = posixpath.dirname(base)
        folders = tuple("/".join(missing[: i + 1]) for i in range(len(missing)))
        name = "/".join([*missing, posixpath.basename(where)])
        reply = await self.api.request(
            "PUT",
            f"/containers/{self.container}/archive",
            query={"path": base},
            body=tar_of({name: data}, folders),
            headers={"Content-Type": "application/x-tar"},
        )
        if reply.status != 200:
            message = EngineError(reply.status, reply.body.decode(errors="replace")).message
            code = 21 if "directory" in message else 13 if reply.status == 403 else 5
            raise OSError(code, message.strip(), where)


def _link(archive: bytes) -> str | None:
    """Where the archive's one entry points, if it is a symbolic link."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        first = tar.next()
        return first.linkname if first is not None and first.issym() else None


async def _send_input(stream: Any, data: bytes) -> None:
    try:
        if data:
            await stream.send(data)
        await stream.send_eof()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _read_frames(stream: Any, early: bytes, out: Capped, err: Capped) -> None:
    frames = Frames()
    pending = early
    while True:
        for kind, data in frames.feed(pending):
            (err if kind == 2 else out).feed(data)
        try:
            pending = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


def _context_tar(dockerfile: str) -> tuple[bytes, str]:
    """A Dockerfile's directory as a tar (its build context), and its name in it."""
    folder = os.path.dirname(os.path.abspath(dockerfile))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(folder, arcname=".")
    return out.getvalue(), os.path.relpath(os.path.abspath(dockerfile), folder)


def _binds(shared: Sequence[str]) -> dict[str, Any]:
    """The host folders a container shows read-only (at `shared_path`)."""
    binds = [f"{folder}:{shared_path(folder, 'docker')}:ro" for folder in shared]
    return {"Binds": binds} if binds else {}


class DockerKind:
    """Makes and removes docker sandboxes: checks the daemon and the image (or builds it)."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.image = spec.image
        self.workdir = DEFAULT_WORKDIR
        self._api: EngineAPI | None = None
        self._checked = False
        self._checking = anyio.Lock()

    @property
    def api(self) -> EngineAPI:
        if self._api is None:
            try:
                self._api = EngineAPI.from_env()
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return self._api

    async def check(self) -> None:
        """ConfigError unless docker's daemon answers and the image is there (a Dockerfile is
        built now, once per run)."""
        api = self.api
        try:
            await api.call("GET", "/_ping")
        except (EngineUnreachable, EngineError) as exc:
            raise ConfigError(
                f"Docker's daemon does not answer at {api.socket_path} ({exc}): start it "
                "(`sudo systemctl start docker`, or `sudo dockerd &`), give this user its "
                "socket (`sudo usermod -aG docker $USER`), or set DOCKER_HOST=unix://<socket>."
            ) from None
        if self.spec.dockerfile is not None:
            self.image = await self._build(self.spec.dockerfile)
        assert self.image is not None
        try:
            info = await api.call("GET", f"/images/{self.image}/json")
        except EngineError as exc:
            if exc.status != 404:
                raise ConfigError(f"Docker cannot read the image {self.image}: {exc}") from None
            raise ConfigError(
                f"The image {self.image} is not on this machine: `docker pull {self.image}` "
                "(or build it) before the run."
            ) from None
        self.workdir = (info.get("Config") or {}).get("WorkingDir") or DEFAULT_WORKDIR
        self._checked = True

    async def _build(self, dockerfile: str) -> str:
        if not await anyio.Path(dockerfile).is_file():
            raise ConfigError(f'sandbox=("docker", {dockerfile!r}): there is no such file.')
        context, name = await anyio.to_thread.run_sync(_context_tar, dockerfile)
        tag = f"vitals-build:{hashlib.sha256(context).hexdigest()[:16]}"
        output: list[str] = []
        try:
            messages = self.api.messages(
                "POST",
                "/build",
                query={"t": tag, "dockerfile": name, "rm": True, "forcerm": True},
                body=context,
                headers={"Content-Type": "application/x-tar"},
            )
            async with contextlib.aclosing(messages):  # closed here, even when left early
                async for message in messages:
                    output.append(str(message.get("stream", message.get("status", ""))))
                    if "error" in message:
                        raise EngineError(500, str(message["error"]))
        except (EngineError, EngineUnreachable) as exc:
            raise ConfigError(
                f"docker build of {dockerfile} failed: {exc}. Its last output:\n"
                + "".join(output)[-2000:]
            ) from None
        return tag

    def _container(self, run_id: str, sample_id: str, epoch: int) -> tuple[str, dict[str, Any]]:
        pid, started = owner()
        labels = {
            "vitals.run_id": run_id,
            "vitals.sample": str(sample_id),
            "vitals.epoch": str(epoch),
            _OWNER_LABEL: f"{HOST}:{pid}:{started}",
        }
        limits: dict[str, Any] = {"NetworkMode": "bridge" if self.spec.network else "none"}
        if self.spec.memory is not None:
            limits["Memory"] = limits["MemorySwap"] = memory_bytes(self.spec.memory)
        if self.spec.cpus is not None:
            limits["NanoCpus"] = int(self.spec.cpus * 1e9)
        if self.spec.pids is not None:
            limits["PidsLimit"] = self.spec.pids
        name = (
            f"vitals-{_slug(run_id, 12)}-{_slug(str(sample_id), 24)}-{epoch}-{secrets.token_hex(3)}"
        )
        return name, {
            "Image": self.image,
            "Entrypoint": ["sleep"],
            "Cmd": ["infinity"],
            "WorkingDir": self.workdir,
            "Labels": labels,
            "HostConfig": {**limits, "Init": True, **_binds(self.spec.shared)},
        }

    async def create(
        self,
        *,
        run_id: str,
        sample_id: str,
        epoch: int,
        files: Mapping[str, FileContents] | None = None,
        setup: str | None = None,
    ) -> DockerSandbox:
        """A fresh container with `files` in it, after `setup` ran there."""
        async with self._checking:  # samples started at once check (or build) once
            if not self._checked:
                await self.check()
        items = await anyio.to_thread.run_sync(file_items, files)
        name, body = self._container(run_id, sample_id, epoch)
        try:
            made = await self.api.call(
                "POST", "/containers/create", query={"name": name}, json_body=body
            )
        except (EngineError, EngineUnreachable) as exc:
            raise SandboxError(
                f"The docker sandbox {name} could not be made: {exc}", kind="docker"
            ) from None
        sandbox = DockerSandbox(self.api, made["Id"], name, self.workdir)
        try:
            try:
                await self.api.call("POST", f"/containers/{sandbox.container}/start")
            except (EngineError, EngineUnreachable) as exc:
                raise SandboxError(
                    f"The docker sandbox {name} could not start: {exc}", kind="docker"
                ) from None
            for path, data in items:
                await sandbox.write_file(path, data)
            await run_setup(sandbox, setup)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.remove(sandbox)
            raise
        return sandbox

    async def remove(self, sandbox: object) -> None:
        """Remove the container, killing what runs in it (again: nothing to do)."""
        if isinstance(sandbox, DockerSandbox):
            await self._remove(sandbox.container)

    async def _remove(self, container: str) -> None:
        with contextlib.suppress(EngineUnreachable):  # no daemon: no container of it runs
            await self.api.call(
                "DELETE",
                f"/containers/{container}",
                query={"force": True, "v": True},
                ok=(200, 204, 404, 409),
            )

    async def remove_leftovers(self) -> int:
        """Remove the containers made on this host by processes that no longer run."""
        try:
            found = await self.api.call(
                "GET",
                "/containers/json",
                query={"all": True, "filters": {"label": [_OWNER_LABEL]}},
            )
        except (EngineError, EngineUnreachable):
            return 0
        removed = 0
        for container in found:
            host, _, rest = container["Labels"].get(_OWNER_LABEL, "").partition(":")
            pid, _, started = rest.partition(":")
            if host != HOST or not (pid.isdecimal() and started.isdecimal()):
                continue
            if not alive(int(pid), int(started)):
                await self._remove(container["Id"])
                removed += 1
        return removed
