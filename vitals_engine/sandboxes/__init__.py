"""Sandboxes for agents: one per sample, where its commands run and its files live.

One interface (`Sandbox`: exec, read_file, write_file; `base.py`) and one module per kind:
`bwrap` (bubblewrap, namespaces on this host), `docker` (a container per sample, over the
Docker Engine API's unix socket), `local` (a temporary directory, nothing isolated).
`sandbox_spec()` parses what a task asks for, `sandbox_kind()` makes its kind once per
run; the kind checks what it needs, creates and removes sandboxes, and removes what a
killed run left (`remove_leftovers`).
"""

from .base import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    Sandbox,
    SandboxKind,
    SandboxSpec,
    sandbox_spec,
)
from .kinds import sandbox_kind

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "ExecResult",
    "Sandbox",
    "SandboxKind",
    "SandboxSpec",
    "sandbox_kind",
    "sandbox_spec",
]
