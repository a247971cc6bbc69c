"""`vitals install-agent NAME[==VERSION] ...`: the agent CLIs the coding-agent solvers run,
installed once into this machine's cache."""

from __future__ import annotations

import argparse

from ..agents.cli_install import install_agent
from .shared import EXIT_OK

__all__ = ["run_install_agent"]


def run_install_agent(args: argparse.Namespace) -> int:
    """Install each named CLI (its pinned version unless `==VERSION` says another) and say
    where it is.

    Example:
        >>> run_install_agent(build_parser().parse_args(["install-agent", "codex"]))
        codex: /root/.cache/vitals-engine/agent-clis/codex-0.169.0/...
        0
    """
    for given in args.names:
        name, _, version = given.partition("==")
        program = install_agent(name, version or None)
        print(f"{name}: {program}")
    return EXIT_OK
