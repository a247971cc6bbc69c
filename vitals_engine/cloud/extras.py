"""Optional libraries a platform needs, imported only when that platform is used.

Example:
    >>> botocore = require("botocore", extra="bedrock", platform="Amazon Bedrock")
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .._errors import ConfigError

__all__ = ["install_command", "require"]


def install_command(extra: str) -> str:
    """The command that installs the extra `extra`.

    Example:
        >>> install_command("vertex")
        'pip install "vitals-engine[vertex]"'
    """
    return f'pip install "vitals-engine[{extra}]"'


def require(module: str, *, extra: str, platform: str) -> ModuleType:
    """The module `module`, or a ConfigError naming the command that installs `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{platform} needs the Python package {module.split('.')[0]!r}, which is not "
            f"installed ({exc}): {install_command(extra)}"
        ) from None
