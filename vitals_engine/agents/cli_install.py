"""The agent CLIs the coding-agent solvers run, pinned and installed once into a cache of
this machine's (npm's registry is reached when installing, never during a run).

`install_agent("claude_code")` (or `vitals install-agent claude-code`) installs the
pinned version with npm into `<cache>/agent-clis/<name>-<version>/`; a run finds it
there, or stops before any model call saying how to install it. The cache is
`$VITALS_AGENT_CACHE` if set, else the user's cache directory for vitals-engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigError
from ..config import agent_cache_from_env

__all__ = ["AGENT_CLIS", "AgentCliPackage", "agent_cache", "install_agent", "installed_agent"]


@dataclass(frozen=True, slots=True)
class AgentCliPackage:
    """An agent CLI on npm: the package, the version pinned, and where its program is
    under the installation's `node_modules` (the first of `entries` there; a `.js` one
    runs with node)."""

    name: str
    package: str
    version: str
    entries: tuple[str, ...]

    def folder(self, version: str | None = None) -> str:
        return f"{self.name}-{version or self.version}"


AGENT_CLIS = {
    # A native program (a Bun executable) that npm's postinstall puts in place.
    "claude_code": AgentCliPackage(
        "claude-code",
        "@anthropic-ai/claude-code",
        "2.1.328",
        ("@anthropic-ai/claude-code/bin/claude.exe",),
    ),
    # The native (static, musl) program where npm installed this platform's; else the
    # node launcher, which finds it.
    "codex": AgentCliPackage(
        "codex",
        "@openai/codex",
        "0.169.0",
        (
            "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
            "@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex",
            "@openai/codex/bin/codex.js",
        ),
    ),
}


def agent_cache() -> Path:
    """Where the agent CLIs are installed: `$VITALS_AGENT_CACHE`, else the user's cache."""
    given = agent_cache_from_env()
    if given:
        return Path(given)
    import platformdirs

    return Path(platformdirs.user_cache_dir("vitals-engine")) / "agent-clis"


def _known(name: str) -> AgentCliPackage:
    key = name.replace("-", "_")
    if key not in AGENT_CLIS:
        pinned = ", ".join(
            f"{cli.name} ({cli.package} {cli.version})" for cli in AGENT_CLIS.values()
        )
        raise ConfigError(f"No agent CLI named {name!r}: the ones pinned are {pinned}.")
    return AGENT_CLIS[key]


def installed_agent(name: str, version: str | None = None) -> Path:
    """The program of the installed CLI `name` (at `version`, else the pinned one);
    a `ConfigError` saying how to install it when it is not.

    Example:
        >>> installed_agent("claude_code")
        PosixPath('/root/.cache/vitals-engine/agent-clis/claude-code-2.1.328/node_modules/@anthropic-ai/claude-code/bin/claude.exe')
    """
    cli = _known(name)
    modules = agent_cache() / cli.folder(version) / "node_modules"
    for entry in (modules / path for path in cli.entries):
        if entry.is_file():
            return entry
    pinned = f"=={version}" if version else ""
    call = f"{cli.name.replace('-', '_')!r}" + (f", {version!r}" if version else "")
    raise ConfigError(
        f"The {cli.package} CLI {version or cli.version} is not installed in {agent_cache()}: "
        f"install it once (it needs npm and its registry) with "
        f"`vitals install-agent {cli.name}{pinned}` or `ve.install_agent({call})`."
    )


def install_agent(name: str, version: str | None = None) -> Path:
    """Install the CLI `name` (its pinned version, or `version`) from npm into the cache,
    unless it is there; return its program.

    Example:
        >>> ve.install_agent("codex")
        PosixPath('/root/.cache/vitals-engine/agent-clis/codex-0.169.0/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex')
    """
    cli = _known(name)
    try:
        return installed_agent(name, version)
    except ConfigError:
        pass
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError(
            f"Installing {cli.package} needs npm (Node.js): `sudo apt-get install nodejs npm`."
        )
    cache = agent_cache()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / cli.folder(version)
    with tempfile.TemporaryDirectory(
        dir=cache, prefix=".installing-", ignore_cleanup_errors=True
    ) as scratch:
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                scratch,
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"{cli.package}@{version or cli.version}",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise ConfigError(
                f"npm could not install {cli.package}@{version or cli.version} "
                f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        shutil.rmtree(target, ignore_errors=True)
        os.replace(scratch, target)
        os.chmod(target, 0o755)
    return installed_agent(name, version)
