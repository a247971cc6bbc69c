"""Functions stay small enough to read: each is a handful of named steps.

Ruff's C901 (mccabe) allows a complexity of 20 (`[tool.ruff.lint.mccabe]` in
pyproject.toml), and radon rates no function E or F (a complexity over 30).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("radon")  # a dev dependency (`make setup`)

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vitals_engine"


def test_no_function_is_past_ruffs_complexity():
    """`ruff check --select C901` finds no function of the package over 20."""
    command = [sys.executable, "-m", "ruff", "check", "--select", "C901", "--no-cache"]
    result = subprocess.run(
        [*command, str(PACKAGE)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_radon_rates_no_function_e_or_f():
    """radon's cyclomatic complexity rates every function and method A to D (30 or less)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for block in cc_visit(path.read_text()):
            if cc_rank(block.complexity) in ("E", "F"):
                where = f"{path.relative_to(ROOT)}:{block.lineno}"
                found.append(f"{where} {block.fullname} ({block.complexity})")
    assert not found, "\n".join(found)
