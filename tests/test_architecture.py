"""The house's shape: imports run one way, the docs draw the same stack, names mean one thing.

The import contracts live in pyproject.toml (`[tool.importlinter]`). These tests run them,
show that they catch what they are meant to catch, and keep the table of layers of
docs/architecture.md ("How it is built") equal to the contract and to the imports the
code really makes.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("grimp")  # import-linter's: a dev dependency (`make setup`)

import grimp

import vitals_engine

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "vitals_engine"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the package importable from `cwd`, with our pyproject's contracts."""
    command = [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())",
        "--config",
        str(ROOT / "pyproject.toml"),
        "--no-cache",
        "--no-logo",
    ]
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def stack_contract() -> list[list[str]]:
    """The layers of the top-level contract, top first, each a list of sibling names."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    stack = next(c for c in contracts["contracts"] if c["id"] == "stack")
    return [[name.strip() for name in layer.split("|")] for layer in stack["layers"]]


def test_the_import_contracts_hold():
    """Every layer imports only layers below it, siblings stay apart: all contracts kept."""
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout


VIOLATIONS = [
    pytest.param(
        "vocab/turns.py",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..engine.run import Run\n",
        "vitals_engine.vocab.turns -> vitals_engine.engine.run",
        id="type-only-import-upward",
    ),
    pytest.param(
        "providers/openai.py",
        "from .anthropic import AnthropicProvider\n",
        "vitals_engine.providers.openai -> vitals_engine.providers.anthropic",
        id="provider-knows-another",
    ),
    pytest.param(
        "viewer/rows.py",
        "from ..chats.chat import Chat\n",
        "vitals_engine.viewer.rows -> vitals_engine.chats.chat",
        id="viewer-runs-models",
    ),
    pytest.param(
        "engine/supervisor.py",
        "from ..transport.pool import transport_scope\n",
        "vitals_engine.engine.supervisor -> vitals_engine.transport.pool",
        id="engine-speaks-http",
    ),
]


@pytest.mark.parametrize(("module", "added", "reported"), VIOLATIONS)
def test_a_crossing_breaks_the_check(tmp_path, module, added, reported):
    """An import against the house's shape (even a type-only one) fails the check and is named."""
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT / PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static"))
    target = copy / module
    target.write_text(target.read_text() + "\n" + added)
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert reported in result.stdout


# -- the table of docs/architecture.md -------------------------------------------------------

#: The page "How it is built", and the header row of its table of layers.
ARCHITECTURE_PAGE = ROOT / "docs" / "architecture.md"
LAYER_TABLE_HEADER = "| layer | holds | imports |"


def drawn_layers() -> list[tuple[list[str], set[str]]]:
    """The rows of the docs' layer table: (the layer's packages, the packages it imports)."""
    text = ARCHITECTURE_PAGE.read_text()
    assert LAYER_TABLE_HEADER in text, f"{ARCHITECTURE_PAGE} has no table of layers"
    table = text.split(LAYER_TABLE_HEADER, 1)[1].lstrip("\n")
    rows = []
    for line in table.splitlines():
        if not line.startswith("|"):
            break  # the table's end
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        uses = set(re.findall(r"`([^`]+)`", cells[-1]))
        rows.append((names, uses))
    return rows


def test_the_docs_draw_the_contracts_stack():
    """The docs' table lists the same layers, in the same order, as the contract."""
    drawn = [sorted(names) for names, _ in drawn_layers()]
    assert drawn == [sorted(layer) for layer in stack_contract()]


def test_the_docs_say_what_each_layer_imports():
    """Each row's last column is exactly what that layer's modules import (the bottom layer,
    which nearly every layer uses, left out)."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    foundation = set(stack_contract()[-1])
    for names, drawn in drawn_layers():
        imported = set()
        for name in names:
            top = f"{PACKAGE}.{name}"
            for module in graph.modules:
                if module == top or module.startswith(top + "."):
                    for other in graph.find_modules_directly_imported_by(module):
                        imported.add(other.split(".")[1])
        assert drawn == imported - set(names) - foundation, names


# -- names -----------------------------------------------------------------------------------


def packages() -> list[ModuleType]:
    found = [vitals_engine]
    for info in pkgutil.walk_packages(vitals_engine.__path__, PACKAGE + "."):
        if info.ispkg:
            found.append(importlib.import_module(info.name))
    return found


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.__name__)
def test_a_package_attribute_means_one_thing(package):
    """A submodule's name on its package is that submodule, never also a function or class
    (`vitals_engine.view` was both the viewer package and `ve.view()`)."""
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == "__main__":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        assert getattr(package, info.name) is module, f"{package.__name__}.{info.name}"
