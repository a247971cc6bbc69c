"""Old public names that keep working for one release, with a warning naming the new one.

A renamed public name (`ve.batch_solver`, now `ve.vectorized_solver`) is looked up in
`RENAMED` by the package's `__getattr__`; a renamed keyword argument is taken by
`renamed_keyword()` where the function reads its arguments. Each use warns with a
`DeprecationWarning` that says what to write instead; nothing else changes.
"""

from __future__ import annotations

import warnings
from collections.abc import MutableMapping
from typing import Any

__all__ = ["RENAMED", "renamed", "renamed_keyword"]

#: The package's old public names, each with the name that replaces it.
RENAMED: dict[str, str] = {
    "BatchFunction": "VectorizedFunction",
    "batch_solver": "vectorized_solver",
    "batch_scorer": "vectorized_scorer",
}


def renamed(old: str, new: str, *, where: str = "ve.", stacklevel: int = 3) -> None:
    """Warn that `old` is deprecated for `new`.

    Example:
        >>> renamed("batch_solver", "vectorized_solver")   # DeprecationWarning
    """
    warnings.warn(
        f"{where}{old} is deprecated and will be removed in the next release: use "
        f"{where}{new} instead.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed_keyword(
    kwargs: MutableMapping[str, Any], old: str, new: str, *, where: str, stacklevel: int = 4
) -> None:
    """Move `old=` of `kwargs` to `new=`, warning that it is deprecated (`where`: the
    function, as the user calls it). Both given is a `TypeError`, as for any keyword
    given twice.

    Example:
        >>> kwargs = {"max_cost": 2.0}
        >>> renamed_keyword(kwargs, "max_cost", "cost_budget", where="eval")
        >>> kwargs
        {'cost_budget': 2.0}
    """
    if old not in kwargs:
        return
    if new in kwargs:
        raise TypeError(f"{where}() got both {old}= (deprecated) and {new}=: give {new}= only.")
    warnings.warn(
        f"{where}({old}=) is deprecated and will be removed in the next release: use "
        f"{where}({new}=) instead.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    kwargs[new] = kwargs.pop(old)
