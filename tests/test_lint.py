"""Functions stay small enough to read, and modules hold one job each.

Ruff's C901 (mccabe) allows a complexity of 20 (`[tool.ruff.lint.mccabe]` in
pyproject.toml), radon rates no function above 20 (rank D or worse), and no module
of the package is over 800 lines (past that it is two jobs: see STYLE.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("radon")  # a dev dependency (`make setup`)

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vitals_engine"

#: The most complex a function may be, as radon rates it (rank C at most).
MAX_COMPLEXITY = 20
#: The most lines a module of the package may have.
MAX_LINES = 800


def too_complex() -> dict[tuple[str, str], str]:
    """Every function of the package radon rates over MAX_COMPLEXITY: (path, name) -> where
    it is and its complexity."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for block in cc_visit(path.read_text()):
            if block.complexity > MAX_COMPLEXITY:
                found[relative, block.fullname] = (
                    f"{relative}:{block.lineno} {block.fullname} ({block.complexity})"
                )
    return found


def test_no_function_is_past_ruffs_complexity():
    """`ruff check --select C901` finds no function of the package over 20."""
    command = [sys.executable, "-m", "ruff", "check", "--select", "C901", "--no-cache"]
    result = subprocess.run(
        [*command, str(PACKAGE)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_radon_rates_no_function_above_20():
    """radon's cyclomatic complexity rates every function and method A to C (20 or less)."""
    found = list(too_complex().values())
    assert not found, "\n".join(found)


def test_no_module_is_over_800_lines():
    """Every .py file of the package has at most 800 lines."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not found, "\n".join(found)
