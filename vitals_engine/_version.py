"""The installed version of vitals-engine, read once."""

from __future__ import annotations

from functools import cache

__all__ = ["version"]


@cache
def version() -> str:
    """The installed distribution's version, or "0" when running from an uninstalled tree.

    Example:
        >>> version()
        '0.1.0'
    """
    import importlib.metadata  # with its email parser: only when a version is asked for

    try:
        return importlib.metadata.version("vitals-engine")
    except importlib.metadata.PackageNotFoundError:
        return "0"
