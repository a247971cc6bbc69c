"""Every example runs, offline, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example, tmp_path):
    """The example exits 0 and writes its logs where VITALS_LOG_DIR says."""
    env = {**os.environ, "VITALS_LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "logs").glob("*.json")), "the example wrote no log"
