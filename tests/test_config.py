"""The environment: every `VITALS_*` variable is read in `config.py` and listed in the docs
(docs/guide/command-line.md, "Environment variables")."""

from __future__ import annotations

import re
from pathlib import Path

from vitals_engine import config

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vitals_engine"
#: The page with the table of environment variables.
VARIABLES_PAGE = ROOT / "docs" / "guide" / "command-line.md"


def configured() -> set[str]:
    """The variables `config.py` reads (its `ENV_*` names)."""
    return {value for name, value in vars(config).items() if name.startswith("ENV_")}


def test_config_knows_every_variable_the_package_names():
    """Each `VITALS_*` name in the package's source (code, help, docstrings) is one that
    `config.py` reads."""
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"\bVITALS_[A-Z_]+\b", path.read_text()))
    assert named == configured()


def test_only_config_reads_them():
    """No module but `config.py` looks a `VITALS_*` variable up itself: they go through
    config's functions."""
    readers = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "config.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"\b(environ|getenv)\b", line) and re.search(r"VITALS_|ENV_", line):
                readers.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not readers, "\n".join(readers)


def test_the_docs_list_them_in_one_table():
    """The "Environment variables" table of the command line's page has one row per
    variable: its name, what it does, its default."""
    text = VARIABLES_PAGE.read_text()
    assert "## Environment variables" in text, f"{VARIABLES_PAGE} has no such section"
    section = text.split("## Environment variables", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("| `")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert {row[0].strip("`") for row in cells} == configured()
    assert all(len(row) == 3 and all(row) for row in cells), cells


def test_each_is_read_when_asked(monkeypatch):
    """The functions read the environment at each call, an empty value as unset."""
    monkeypatch.setenv("VITALS_CACHE_DIR", "/tmp/replies")
    monkeypatch.setenv("VITALS_TRANSPORT", "httpx")
    monkeypatch.setenv("VITALS_GC_TUNING", "0")
    assert config.cache_dir_from_env() == "/tmp/replies"
    assert config.transport_from_env() == "httpx"
    assert config.gc_tuning_from_env() is False
    for name in ("VITALS_CACHE_DIR", "VITALS_TRANSPORT"):
        monkeypatch.setenv(name, "")
    monkeypatch.delenv("VITALS_GC_TUNING")
    assert config.cache_dir_from_env() is None
    assert config.transport_from_env() is None
    assert config.gc_tuning_from_env() is True
