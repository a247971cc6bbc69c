"""What the sandbox tests share: the kinds this machine can run (one fixture per kind, its
setup once per session), sandboxes made and removed around a test, and looking on the
host for the processes a test marked.

bwrap and docker come from `make sandboxes` (part of `make test`): Debian's bubblewrap
and docker.io, a dockerd it starts, and the test images `vitals-sandbox-test:1` (busybox
and python3) and `vitals-agent-test:1` (the same with node and bash, for the coding
agents). Where the system cannot provide them their tests skip, saying why; under CI
they fail instead.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from vitals_engine import ConfigError
from vitals_engine.sandboxes import Sandbox, SandboxKind, SandboxSpec, sandbox_kind

#: The image `make sandboxes` imports (busybox-static's applets and the host's python3).
TEST_IMAGE = "vitals-sandbox-test:1"
#: The coding agents' image it imports: the test image's files, the host's node and bash,
#: and the glibc libraries they and Claude Code's `claude.exe` load.
AGENT_IMAGE = "vitals-agent-test:1"
KIND_NAMES = ("bwrap", "docker", "local")
_SETUP = (
    "`make sandboxes` (part of `make test`) installs bubblewrap and docker.io, starts dockerd "
    "and makes the test image"
)


def unavailable(message: str) -> None:
    """Skip the test that needs what is missing; fail it under CI, where setup provides it."""
    if os.environ.get("CI"):
        pytest.fail(f"{message}: {_SETUP}")
    pytest.skip(f"{message}: {_SETUP}")


def spec_of(name: str, **options: Any) -> SandboxSpec:
    """The spec of kind `name` for the tests (docker: the test image)."""
    if name == "docker":
        options.setdefault("image", TEST_IMAGE)
    return SandboxSpec(name, **options)


def kind_of(name: str, **options: Any) -> SandboxKind:
    return sandbox_kind(spec_of(name, **options))


def _checked(name: str) -> str:
    if name == "bwrap" and shutil.which("bwrap") is None:
        unavailable("bwrap is not installed")
    try:
        anyio.run(kind_of(name).check)
    except ConfigError as exc:
        unavailable(f"the {name} sandbox cannot run here ({exc})")
    return name


@pytest.fixture(scope="session")
def bwrap_ready() -> str:
    """bwrap, checked once per session."""
    return _checked("bwrap")


@pytest.fixture(scope="session")
def docker_ready() -> str:
    """dockerd answering and the test image there, checked once per session."""
    return _checked("docker")


@pytest.fixture(scope="session")
def docker_agent_ready() -> str:
    """dockerd answering and the coding agents' image there, checked once per session."""
    try:
        anyio.run(kind_of("docker", image=AGENT_IMAGE).check)
    except ConfigError as exc:
        unavailable(f"docker cannot run the coding agents' image {AGENT_IMAGE} here ({exc})")
    return AGENT_IMAGE


@pytest.fixture(params=KIND_NAMES)
def kind_name(request: pytest.FixtureRequest) -> str:
    """Each kind in turn (skipped, saying why, where the system cannot run it)."""
    if request.param != "local":
        request.getfixturevalue(f"{request.param}_ready")
    return request.param


@pytest.fixture
async def kind(kind_name: str, anyio_backend: str) -> SandboxKind:
    return kind_of(kind_name)


@pytest.fixture
async def sandbox(kind: SandboxKind, anyio_backend: str) -> AsyncIterator[Sandbox]:
    """A fresh sandbox of the kind, removed after the test."""
    made = await kind.create(run_id="test-run", sample_id="1", epoch=1)
    try:
        yield made
    finally:
        await kind.remove(made)


def mark() -> dict[str, str]:
    """An environment variable no other process has, to find a test's processes by."""
    return {"VITALS_TEST_MARK": uuid.uuid4().hex}


def marked(env: dict[str, str]) -> list[int]:
    """The processes on this host (sandboxed ones too) whose environment holds `env`'s
    mark; zombies have no environment, so the dead are not counted."""
    needle = "\0".join(f"{k}={v}" for k, v in env.items()).encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdecimal():
            continue
        try:
            data = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle in data:
            found.append(int(entry.name))
    return found
