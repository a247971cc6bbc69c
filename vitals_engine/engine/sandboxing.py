"""A run's sandboxes: one per sample (per epoch), alive from its solving to its end.

`RunSandboxes` owns the sandboxes of one run of a task made with `Task(sandbox=)`:

- at the run's start (`start`), the kind checks what it needs (a `ConfigError` saying
  how to install or start it, before any model call) and removes what a killed run left
  (said on the library's logger);
- a sample's sandbox is made when its solving starts (`open`): it waits for room first,
  at most `max_sandboxes` alive at once (default: the run's concurrency), as for a seat,
  the wait not counted as its working time; its `files` are written and its `setup` run
  (the sample's columns of those names); a sandbox that cannot be made fails the sample
  (`SandboxError`), not the run;
- it is removed when the sample is handed on (`close`), and whatever is still open when
  the run ends, however it ends (`close_all`), shielded from cancellation.

What the sample's solver, tools and scorer do in it is recorded in the sample's
transcript (`RecordedSandbox`: an exec, a file read or written, each a `SandboxRecord`
in the span open at the time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._errors import ConfigError
from .._logging import log
from ..pacing.transcript import current_span, record
from ..samples import SampleRecord
from ..sandboxes.base import DEFAULT_OUTPUT_LIMIT, ExecResult, Sandbox, SandboxKind
from ..vocab.transcript import SandboxRecord

__all__ = ["RecordedSandbox", "RunSandboxes"]

#: Characters of a command's input and output a transcript keeps.
_SHOWN = 16 * 1024


class RecordedSandbox:
    """A sample's sandbox whose every action goes in the sample's transcript.

    Example:
        >>> sandbox = RecordedSandbox(made)
        >>> await sandbox.exec("ls")     # a SandboxRecord(action="exec", cmd="ls", ...)
    """

    __slots__ = ("inner",)

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner

    @property
    def kind(self) -> str:
        return self.inner.kind

    @property
    def workdir(self) -> str:
        return self.inner.workdir

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
        """Run `cmd` in the sandbox (see `Sandbox.exec`), recorded."""
        started = time.time()
        result = await self.inner.exec(
            cmd,
            input=input,
            cwd=cwd,
            env=env,
            user=user,
            timeout=timeout,
            output_limit=output_limit,
        )
        options = {"cwd": cwd, "timeout": timeout, "user": user}
        record(
            SandboxRecord(
                action="exec",
                started=started,
                completed=time.time(),
                cmd=cmd if isinstance(cmd, str) else " ".join(cmd),
                options={key: value for key, value in options.items() if value is not None},
                input=_shown(input),
                result=result.returncode,
                output=_shown(result.stdout + result.stderr),
                span=current_span(),
            )
        )
        return result

    async def read_file(self, path: str, *, text: bool = True) -> str | bytes:
        """The file at `path` (see `Sandbox.read_file`), recorded."""
        started = time.time()
        contents = await self.inner.read_file(path, text=text)
        record(
            SandboxRecord(
                action="read_file",
                started=started,
                completed=time.time(),
                file=path,
                output=_shown(contents),
                span=current_span(),
            )
        )
        return contents

    async def write_file(self, path: str, contents: str | bytes) -> None:
        """Write `contents` to `path` (see `Sandbox.write_file`), recorded."""
        started = time.time()
        await self.inner.write_file(path, contents)
        record(
            SandboxRecord(
                action="write_file",
                started=started,
                completed=time.time(),
                file=path,
                input=_shown(contents),
                span=current_span(),
            )
        )


def _shown(value: str | bytes | None) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else value.decode("utf-8", "replace")
    if len(text) <= _SHOWN:
        return text
    return text[:_SHOWN] + f"\n[{len(text) - _SHOWN:,} more characters not kept here]"


class RunSandboxes:
    """The sandboxes of one run (see the module docstring).

    Example:
        >>> sandboxes = RunSandboxes(sandbox_kind(spec), run_id="abc", max_sandboxes=50)
        >>> await sandboxes.start()
        >>> await sandboxes.open(record)     # record.sandbox, recorded
        >>> await sandboxes.close(record)
    """

    def __init__(self, kind: SandboxKind, *, run_id: str, max_sandboxes: int) -> None:
        self.kind = kind
        self.run_id = run_id
        self.room = anyio.CapacityLimiter(max_sandboxes)
        #: The sandboxes alive, by sample key (what `close_all` removes).
        self.open_now: dict[tuple[Any, int], Sandbox] = {}

    async def start(self) -> None:
        """Check the kind can make sandboxes, and remove what a killed run left."""
        await self.kind.check()
        left = await self.kind.remove_leftovers()
        if left:
            log.warning(
                f"vitals-engine: removed {left} {self.kind.spec.kind} sandbox(es) that a run "
                "stopped without cleaning up (killed, or its machine lost) had left behind."
            )

    async def open(self, sample: SampleRecord) -> None:
        """Make `sample`'s sandbox (waiting for room), as `sample.sandbox`."""
        await self.room.acquire_on_behalf_of(sample.key)
        try:
            made = await self._create(sample)
        except BaseException:
            self.room.release_on_behalf_of(sample.key)
            raise
        self.open_now[sample.key] = made
        sample.sandbox = RecordedSandbox(made)

    async def _create(self, sample: SampleRecord) -> Sandbox:
        metadata = sample.sample.metadata or {}
        return await self.kind.create(
            run_id=self.run_id,
            sample_id=str(sample.sample.id),
            epoch=sample.sample.epoch,
            files=_files(metadata.get("files"), sample.sample.id),
            setup=_setup(metadata.get("setup"), sample.sample.id),
        )

    async def close(self, sample: SampleRecord) -> None:
        """Remove `sample`'s sandbox, if it has one (shielded: it goes, whatever happens)."""
        sample.sandbox = None
        made = self.open_now.pop(sample.key, None)
        if made is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.kind.remove(made)
            except Exception as exc:  # the sample is done; what is left, the next run removes
                log.warning(f"vitals-engine: a sandbox could not be removed: {exc}")
            finally:
                self.room.release_on_behalf_of(sample.key)

    async def close_all(self) -> None:
        """Remove every sandbox still open (the run is ending, however it ends)."""
        with anyio.CancelScope(shield=True):
            for key in list(self.open_now):
                made = self.open_now.pop(key)
                try:
                    await self.kind.remove(made)
                except Exception as exc:
                    log.warning(f"vitals-engine: a sandbox could not be removed: {exc}")
                finally:
                    self.room.release_on_behalf_of(key)


def _files(value: Any, sample_id: Any) -> Mapping[str, Any] | None:
    """A sample's `files` column: a mapping of path to contents (JSON text of one too)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"Sample {sample_id!r}: its `files` must map paths to contents (text, bytes or a "
            'host path), e.g. {"notes/flag.txt": "flag{x}"}.'
        )
    return value


def _setup(value: Any, sample_id: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"Sample {sample_id!r}: its `setup` must be a shell script (text).")
    return value
