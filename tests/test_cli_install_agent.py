"""`vitals install-agent`: the agent CLIs installed once into the cache, or a clear error."""

from __future__ import annotations

import shutil

import pytest

import vitals_engine as ve
from vitals_engine.agents.cli_install import AGENT_CLIS, installed_agent
from vitals_engine.cli import main


def test_an_installed_cli_is_found_and_said_where(monkeypatch, capsys):
    """Asked for a CLI the cache holds, the command says where its program is and installs
    nothing (npm is not needed)."""
    try:
        program = installed_agent("codex")
    except ve.ConfigError as exc:  # a machine without `make agents`
        pytest.skip(f"codex is not installed: {exc}")
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no npm: none is run
    assert main(["install-agent", "codex"]) == 0
    assert capsys.readouterr().out.strip() == f"codex: {program}"


def test_an_unknown_cli_is_a_usage_error_naming_the_pinned_ones(capsys):
    """A name that is no pinned CLI exits 2, naming the ones there are and their versions."""
    assert main(["install-agent", "gemini-cli"]) == 2
    said = capsys.readouterr().err
    assert "No agent CLI named 'gemini-cli'" in said
    for cli in AGENT_CLIS.values():
        assert f"{cli.name} ({cli.package} {cli.version})" in said


def test_a_missing_cli_is_a_config_error_saying_how_to_install_it(monkeypatch, tmp_path):
    """A run asking for a CLI the cache does not hold stops before any model call, with the
    command that installs it."""

    monkeypatch.setenv("VITALS_AGENT_CACHE", str(tmp_path))
    with pytest.raises(ve.ConfigError, match="vitals install-agent claude-code"):
        ve.claude_code(ve.chat_mock())
