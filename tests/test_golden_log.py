"""A run's log does not change by a byte when the code under it is reorganised.

`tests/golden/run.py` runs a fixed task (a tool call, a judge, two epochs, a failing
sample, a frozen clock and counted ids) in a fresh process; its log must equal
`tests/golden/run.json` byte for byte, but for the tracebacks of the failing sample,
which name the files and lines they passed through. Refresh the file only for a
deliberate change of what a log holds (see `tests/golden/run.py`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "run.json"
_TRACEBACK = re.compile(rb'"(traceback|traceback_ansi)":"(?:[^"\\]|\\.)*"')


def _masked(data: bytes) -> bytes:
    return _TRACEBACK.sub(rb'"\1":"..."', data)


def test_the_fixed_run_writes_the_same_log_byte_for_byte(tmp_path):
    env = {**os.environ, "TZ": "UTC", "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.golden.run", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    written = Path(done.stdout.strip()).read_bytes()
    assert b'"traceback":"Traceback' in written  # the mask below hides something real
    assert _masked(written) == _masked(GOLDEN.read_bytes())
