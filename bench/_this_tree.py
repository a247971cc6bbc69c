"""Imported first by every benchmark: `vitals_engine` is this tree's, not the installed one.

A benchmark run from another checkout (a worktree of an older commit, to compare before
and after in one sitting) would otherwise measure whichever tree the virtual environment
installed, it and the child processes it starts alike (they inherit `PYTHONPATH`).
"""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT)]
)
