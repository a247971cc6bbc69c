"""The kind of sandbox a spec names, made once per run: `sandbox_kind(spec)`."""

from __future__ import annotations

from .base import SandboxKind, SandboxSpec

__all__ = ["sandbox_kind"]


def sandbox_kind(spec: SandboxSpec) -> SandboxKind:
    """The kind that makes `spec`'s sandboxes (its module imported now, not before).

    Example:
        >>> kind = sandbox_kind(SandboxSpec("bwrap"))
        >>> await kind.check()  # ConfigError: how to install bwrap, if it is missing
        >>> sandbox = await kind.create(run_id="r1", sample_id="1", epoch=1)
        >>> (await sandbox.exec("echo hi")).stdout
        'hi\\n'
        >>> await kind.remove(sandbox)
    """
    if spec.kind == "bwrap":
        from .bwrap import BwrapKind

        return BwrapKind(spec)
    if spec.kind == "docker":
        from .docker import DockerKind

        return DockerKind(spec)
    from .local import LocalKind

    return LocalKind(spec)
