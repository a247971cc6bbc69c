"""What a sandbox is, whatever its kind: `Sandbox` (exec, read_file, write_file), the kind
that makes and removes them (`SandboxKind`), what a task asks for (`SandboxSpec`, parsed
once by `sandbox_spec`), and what an exec returns (`ExecResult`).

Every kind keeps the same rules (`tests/test_sandboxes.py` runs one suite against each):

- `exec(cmd)`: a string runs under `sh -c`, a sequence runs as it is. `env` adds to the
  sandbox's environment; `cwd` (relative to `workdir`) defaults to `workdir`. An exec ends
  when its command exits; what the command left running in the background ends with it in
  bwrap and local sandboxes, and lives on in a docker container until the sandbox is
  removed (docs/guide/agents.md). `timeout` kills it: `timed_out=True`, `returncode=-1`.
  Each of stdout and stderr is kept up to `output_limit` bytes (`DEFAULT_OUTPUT_LIMIT`,
  16 KiB), cut with a note saying how much was left out (`truncated=True`); bytes that
  are not UTF-8 are replaced, never an error. A command that is not found returns 127, a
  `cwd` that is not there 126.
- `read_file` / `write_file`: a relative path is under `workdir`; parent directories are
  made; a missing file is `FileNotFoundError`.
- A sandbox that dies under a sample (its container gone, out of memory) is a
  `SandboxError` carrying its last output, never a result.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._errors import ConfigError, SandboxError

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_OUTPUT_LIMIT",
    "KINDS",
    "SHARED_ROOT",
    "Capped",
    "ExecResult",
    "FileContents",
    "Sandbox",
    "SandboxKind",
    "SandboxSpec",
    "check_user",
    "file_error",
    "file_items",
    "is_local_dir",
    "memory_bytes",
    "run_setup",
    "sandbox_path",
    "sandbox_spec",
    "shared_path",
    "shell_argv",
    "solver_sandbox",
]

#: The bytes of stdout, and of stderr, an exec keeps unless told otherwise.
DEFAULT_OUTPUT_LIMIT = 16 * 1024
#: The kinds of sandbox, each a module of this package.
KINDS = ("bwrap", "docker", "local")

#: What a file given to `create(files=...)` holds: text, bytes, or a host file to copy.
FileContents = str | bytes | os.PathLike[str]


@dataclass(frozen=True)
class ExecResult:
    """What a command run in a sandbox did: its exit code (-1 when it timed out or was
    killed), its output as text (each stream cut at the limit, the cut marked), and how
    long it took.

    Example:
        >>> result = await sandbox.exec("echo hello; exit 3")
        >>> result.returncode, result.stdout, result.timed_out
        (3, 'hello\\n', False)
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0


@runtime_checkable
class Sandbox(Protocol):
    """One sample's sandbox, made by its kind (`SandboxKind.create`)."""

    kind: str
    workdir: str

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
        """Run `cmd` (a string under `sh -c`, or an argument list) in the sandbox.

        Example:
            >>> result = await sandbox.exec(["python3", "-c", "print(6 * 7)"], timeout=60)
            >>> result.stdout
            '42\\n'
        """
        ...

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at `path` (relative to `workdir`), as text or bytes.

        Example:
            >>> await sandbox.read_file("answer.txt")
            '42\\n'
        """
        ...

    async def write_file(self, path: str, contents: str | bytes) -> None:
        """Write `contents` to `path` (relative to `workdir`), making its directories.

        Example:
            >>> await sandbox.write_file("src/answer.py", "print(42)\\n")
        """
        ...


class SandboxKind(Protocol):
    """One kind of sandbox, made once per run from its `SandboxSpec` (`sandbox_kind`)."""

    spec: SandboxSpec

    async def check(self) -> None:
        """Raise `ConfigError` saying how to install or start what the kind needs (once per
        run, before any model call).

        Example:
            >>> await sandbox_kind(SandboxSpec("bwrap")).check()  # or: ConfigError, how to fix
        """
        ...

    async def create(
        self,
        *,
        run_id: str,
        sample_id: str,
        epoch: int,
        files: Mapping[str, FileContents] | None = None,
        setup: str | None = None,
    ) -> Sandbox:
        """A fresh sandbox for one sample: `files` written, then `setup` run in it (a failing
        setup is a `SandboxError`, and nothing of the sandbox is left).

        Example:
            >>> sandbox = await kind.create(run_id="r1", sample_id="7", epoch=1,
            ...                             files={"data.csv": "a,b\\n1,2\\n"}, setup="ls")
        """
        ...

    async def remove(self, sandbox: Sandbox) -> None:
        """Remove `sandbox` and everything it holds; safe to call twice.

        Example:
            >>> await kind.remove(sandbox)
        """
        ...

    async def remove_leftovers(self) -> int:
        """Remove the sandboxes runs that were killed left behind; how many there were.

        Example:
            >>> await kind.remove_leftovers()  # at a run's start; the caller logs the count
            2
        """
        ...


_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", re.IGNORECASE)


def memory_bytes(value: str) -> int:
    """Bytes in a memory size as Docker writes them: "512m", "2g", "1.5GiB", "65536".

    Example:
        >>> memory_bytes("512m")
        536870912
    """
    found = _MEMORY.fullmatch(value.strip())
    if not found:
        raise ConfigError(
            f'SandboxSpec(memory={value!r}) is not a size: write it as "512m" or "2g".'
        )
    number, unit = float(found[1]), found[2].lower()
    return int(number * 1024 ** " kmgt".index(unit or " "))


@dataclass(frozen=True)
class SandboxSpec:
    """What a task's samples run in: the kind ("bwrap", "docker" or "local") and, for
    docker, the image (or a Dockerfile built once per run) and its limits. `network`
    allows the network (off by default); `memory` ("512m"), `cpus` and `pids` limit a
    docker container (bwrap and local have no such limits, and refuse them).

    Example:
        >>> spec = ve.SandboxSpec("docker", image="python:3.12-slim", memory="1g", cpus=1.5)
        >>> spec.network, spec.memory
        (False, '1g')
    """

    kind: str
    image: str | None = None
    dockerfile: str | None = None
    network: bool = False
    memory: str | None = None
    cpus: float | None = None
    pids: int | None = None
    #: Host directories shown read-only inside, each at `shared_path(folder)` (what a
    #: solver brings, such as an agent CLI's installation; a local sandbox sees the host).
    shared: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(
                f"SandboxSpec(kind={self.kind!r}): the kinds are {', '.join(map(repr, KINDS))}."
            )
        self._check_what_runs()
        self._check_limits()
        for folder in self.shared:
            if not os.path.isabs(folder):
                raise ConfigError(f"SandboxSpec(shared=...): {folder!r} is not an absolute path.")

    def _check_what_runs(self) -> None:
        if self.kind == "docker":
            if (self.image is None) == (self.dockerfile is None):
                raise ConfigError(
                    "A docker sandbox needs an image or a Dockerfile (one of them): "
                    'SandboxSpec("docker", image="python:3.12-slim") or '
                    'sandbox=("docker", "Dockerfile").'
                )
            return
        given = [n for n in ("image", "dockerfile") if getattr(self, n) is not None]
        given += [n for n in ("memory", "cpus", "pids") if getattr(self, n) is not None]
        if given:
            raise ConfigError(
                f"A {self.kind} sandbox takes no {' or '.join(given)}: only docker "
                "runs an image and limits memory, CPUs and processes."
            )

    def _check_limits(self) -> None:
        if self.memory is not None:
            memory_bytes(self.memory)
        if self.cpus is not None and not (
            isinstance(self.cpus, int | float) and not isinstance(self.cpus, bool) and self.cpus > 0
        ):
            raise ConfigError(f"SandboxSpec(cpus={self.cpus!r}) must be a positive number.")
        if self.pids is not None and not (
            isinstance(self.pids, int) and not isinstance(self.pids, bool) and self.pids > 0
        ):
            raise ConfigError(f"SandboxSpec(pids={self.pids!r}) must be a whole number >= 1.")


_USAGE = (
    'sandbox= takes "bwrap", "docker", "local", ("docker", "path/Dockerfile"), '
    '("docker", {"image": "python:3.12-slim", ...}), a SandboxSpec or None'
)


def sandbox_spec(value: str | tuple[object, ...] | SandboxSpec | None) -> SandboxSpec | None:
    """What `Task(sandbox=...)` asks for, as a `SandboxSpec` (None: no sandbox).

    A string names the kind ("docker" alone runs `DEFAULT_IMAGE`, python:3.12-slim); a
    pair is the kind and either a Dockerfile's path or the spec's fields. Anything else is
    a `ConfigError`.

    Example:
        >>> sandbox_spec(("docker", {"image": "python:3.12-slim", "network": True})).network
        True
        >>> sandbox_spec("bwrap").kind
        'bwrap'
    """
    if value is None or isinstance(value, SandboxSpec):
        return value
    if isinstance(value, str):
        if value == "docker":
            return SandboxSpec("docker", image=DEFAULT_IMAGE)
        if value in KINDS:
            return SandboxSpec(value)
        raise ConfigError(f"sandbox={value!r} is no kind of sandbox: {_USAGE}.")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        kind: str = value[0]
        detail = value[1]
        if isinstance(detail, str | os.PathLike):
            if kind != "docker":
                raise ConfigError(f"sandbox={value!r}: only docker builds a Dockerfile.")
            return SandboxSpec("docker", dockerfile=os.fspath(detail))
        if isinstance(detail, Mapping):
            try:
                return SandboxSpec(kind, **{str(k): v for k, v in detail.items()})
            except TypeError as exc:
                raise ConfigError(f"sandbox={value!r}: {exc}. {_USAGE}.") from None
    raise ConfigError(f"sandbox={value!r}: {_USAGE}.")


#: The image `sandbox="docker"` runs when none is named.
DEFAULT_IMAGE = "python:3.12-slim"


def check_user(kind: str, user: str | None) -> None:
    """Refuse `user` unless it is the one running this process (bwrap, local)."""
    if user is None:
        return
    me = getpass.getuser()
    if user not in (me, str(os.getuid())):
        raise ConfigError(
            f"A {kind} sandbox runs commands as the user running the eval ({me}): "
            f"user={user!r} needs a docker sandbox."
        )


def shell_argv(cmd: str | Sequence[str]) -> list[str]:
    """The argument list that runs `cmd`: a string under `sh -c`, a sequence as it is."""
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    argv = [str(part) for part in cmd]
    if not argv:
        raise ValueError("exec() needs a command: an empty argument list was given.")
    return argv


def is_local_dir(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a directory on this machine: one stat, done on the event loop (a
    few microseconds, where a worker thread costs a hundred).

    Example:
        >>> is_local_dir("/tmp")
        True
    """
    return os.path.isdir(path)


def sandbox_path(workdir: str, path: str) -> str:
    """`path` inside the sandbox, absolute and normalised (relative ones under `workdir`)."""
    if not path:
        raise ValueError("a file path is empty")
    return posixpath.normpath(posixpath.join(workdir, path))


class Capped:
    """One output stream, kept up to `limit` bytes; what comes after is counted, not kept.

    Example:
        >>> out = Capped(4)
        >>> out.feed(b"abcdefgh")
        >>> out.text()
        'abcd\\n[output truncated: 4 bytes over the 4-byte limit]'
    """

    __slots__ = ("data", "limit", "over")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.over = 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) <= room:
            self.data += chunk
        else:
            if room > 0:
                self.data += chunk[:room]
            self.over += len(chunk) - max(room, 0)

    @property
    def truncated(self) -> bool:
        return self.over > 0

    def tail(self, n: int = 2000) -> str:
        """The last `n` bytes kept, as text (for an error's message)."""
        return bytes(self.data[-n:]).decode("utf-8", errors="replace")

    def text(self) -> str:
        """What was kept as text, and a note of what was cut."""
        data = bytes(self.data)
        if not self.over:
            return data.decode("utf-8", errors="replace")
        cut = _whole_characters(data)
        text = data[:cut].decode("utf-8", errors="replace")
        over = self.over + len(data) - cut
        separator = "" if text.endswith("\n") or not text else "\n"
        return f"{text}{separator}[output truncated: {over} bytes over the {self.limit}-byte limit]"


def _whole_characters(data: bytes) -> int:
    """Where to cut `data` so that no UTF-8 character is left in two."""
    start = len(data)
    while start > 0 and len(data) - start < 4 and (data[start - 1] & 0xC0) == 0x80:
        start -= 1
    if start == 0:
        return len(data)
    lead = data[start - 1]
    size = 2 if lead >= 0xC0 else 1
    size += (lead >= 0xE0) + (lead >= 0xF0)
    return start - 1 if start - 1 + size > len(data) else len(data)


def file_items(files: Mapping[str, FileContents] | None) -> list[tuple[str, bytes]]:
    """The files to write into a new sandbox, as (path, bytes): text encoded as UTF-8, a
    host file read, a host directory read file by file under its path.

    Example:
        >>> file_items({"a.txt": "hi", "data/b.bin": b"\\x00"})
        [('a.txt', b'hi'), ('data/b.bin', b'\\x00')]
    """
    items: list[tuple[str, bytes]] = []
    for path, contents in (files or {}).items():
        if isinstance(contents, str):
            items.append((path, contents.encode()))
        elif isinstance(contents, bytes | bytearray):
            items.append((path, bytes(contents)))
        elif isinstance(contents, os.PathLike):
            items += _host_files(path, os.fspath(contents))
        else:
            raise ConfigError(
                f"files[{path!r}] is a {type(contents).__name__}: give text, bytes or a "
                "pathlib.Path of a file to copy."
            )
    _refuse_files_inside_files(items)
    return items


def _refuse_files_inside_files(items: list[tuple[str, bytes]]) -> None:
    """A path given as a file cannot also be a folder of another: a ConfigError names both."""
    given = {posixpath.normpath(path) for path, _ in items}
    for path in sorted(given):
        parent = posixpath.dirname(path)
        while parent not in ("", "/"):
            if parent in given:
                raise ConfigError(
                    f"files: {path!r} would be inside {parent!r}, which is a file: "
                    "a path is either a file or a folder of files."
                )
            parent = posixpath.dirname(parent)


def _host_files(path: str, source: str) -> list[tuple[str, bytes]]:
    if os.path.isdir(source):
        found = []
        for root, _dirs, names in os.walk(source):
            for name in sorted(names):
                full = os.path.join(root, name)
                inside = os.path.relpath(full, source).replace(os.sep, "/")
                with open(full, "rb") as file:
                    found.append((posixpath.join(path, inside), file.read()))
        return found
    try:
        with open(source, "rb") as file:
            return [(path, file.read())]
    except FileNotFoundError:
        raise ConfigError(f"files[{path!r}]: the host file {source} does not exist.") from None


async def run_setup(sandbox: Sandbox, setup: str | None) -> None:
    """Run a sample's `setup` script in its new sandbox; a failure is a `SandboxError`
    carrying its output."""
    if setup is None:
        return
    result = await sandbox.exec(setup)
    if result.returncode != 0:
        raise SandboxError(
            f"The {sandbox.kind} sandbox's setup script failed (exit {result.returncode})",
            kind=sandbox.kind,
            output=f"{result.stdout}{result.stderr}"[-4000:],
        )


def file_error(message: str, path: str) -> OSError:
    """The OSError a failed file command's message (`cat: x: No such file or directory`)
    stands for, naming `path` inside the sandbox."""
    import errno

    for text, code in (
        ("No such file", errno.ENOENT),
        ("Is a directory", errno.EISDIR),
        ("Not a directory", errno.ENOTDIR),
        ("Permission denied", errno.EACCES),
        ("Read-only file system", errno.EROFS),
    ):
        if text in message:
            return OSError(code, os.strerror(code), path)
    return OSError(errno.EIO, message.strip() or "the file could not be read or written", path)


def solver_sandbox(spec: SandboxSpec | None, solver: object) -> SandboxSpec | None:
    """The task's sandbox with what its solver brings: the sandbox the solver asks for
    when the task names none (`__vitals_sandbox__`), and the host folders it needs shown
    inside (`__vitals_sandbox_shared__`; a solver that has it runs only in a sandbox).

    Example:
        >>> solver_sandbox(None, ve.claude_code(chat, sandbox="bwrap")).kind
        'bwrap'
    """
    wanted = getattr(solver, "__vitals_sandbox__", None)
    shared = getattr(solver, "__vitals_sandbox_shared__", None)
    if spec is None and wanted is not None:
        spec = sandbox_spec(wanted)
    if shared is None:
        return spec
    if spec is None:
        label = getattr(solver, "__vitals_label__", type(solver).__name__)
        raise ConfigError(
            f"{label} runs in each sample's sandbox: give the task one, "
            'Task(..., sandbox="bwrap") (or "docker", or "local"), or the solver sandbox=.'
        )
    joined = tuple(dict.fromkeys((*spec.shared, *shared)))
    return spec if joined == spec.shared else dataclasses.replace(spec, shared=joined)


#: Where a sandbox shows the host folders its spec shares (`SandboxSpec.shared`).
SHARED_ROOT = "/vitals-shared"


def shared_path(folder: str, kind: str) -> str:
    """Where the host `folder` a spec shares is inside a sandbox of `kind`: under
    `SHARED_ROOT` by its name (the host's own path for a local sandbox, which is the host).

    Example:
        >>> shared_path("/home/me/.cache/agent-clis/codex-0.169.0", "bwrap")
        '/vitals-shared/codex-0.169.0'
    """
    if kind == "local":
        return folder
    return f"{SHARED_ROOT}/{os.path.basename(folder.rstrip('/'))}"
