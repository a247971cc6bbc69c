"""How long the first moments take: `import vitals_engine`, `vitals --help`, the quickstart.

Each command runs in a fresh process, several times, in turn with the others
(so a slow spell of the machine touches them all alike), beside a bare
`python -c pass` that shows what the interpreter alone costs in the same run.
Prints the best and the median wall time of each, its target, and the
median CPU time (user + system) of the process: on a busy machine the wall
time grows with the load, the CPU time much less.

    .venv/bin/python bench/startup.py             # 7 rounds
    .venv/bin/python bench/startup.py --rounds 15
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _this_tree  # noqa: F401  (first: this tree's vitals_engine)

ROOT = Path(__file__).resolve().parents[1]


def commands() -> dict[str, tuple[list[str], float | None]]:
    """Name -> (argv, target seconds) of what is measured."""
    python = sys.executable
    script = Path(python).with_name("vitals")
    vitals = [str(script)] if script.exists() else [python, "-m", "vitals_engine"]
    return {
        "python -c pass": ([python, "-c", "pass"], None),
        "import vitals_engine": ([python, "-c", "import vitals_engine"], 0.3),
        "vitals --help": ([*vitals, "--help"], 0.4),
        "examples/quickstart.py": ([python, str(ROOT / "examples" / "quickstart.py")], 1.0),
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv`; fails loudly when the command fails."""
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    """Measure every command `--rounds` times, interleaved, and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    todo = commands()
    with tempfile.TemporaryDirectory() as logs:
        # This tree's package, whatever the venv has installed; the quickstart's log goes away.
        env = {**os.environ, "PYTHONPATH": str(ROOT), "VITALS_LOG_DIR": logs}
        for argv, _ in todo.values():  # warm the disk cache and write the .pyc files
            run_once(argv, env)
        times: dict[str, list[float]] = {name: [] for name in todo}
        cpus: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(args.rounds):
            for name, (argv, _) in todo.items():
                wall, cpu = run_once(argv, env)
                times[name].append(wall)
                cpus[name].append(cpu)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    version = sys.version.split()[0]
    print(f"{args.rounds} rounds, {os.cpu_count()} CPUs, load {load:.1f}, Python {version}")
    print(f"{'command':<26}{'best s':>8}{'median s':>10}{'target s':>10}{'CPU s':>12}")
    for name, (_, target) in todo.items():
        best, median = min(times[name]), statistics.median(times[name])
        verdict = "" if target is None else ("  ok" if median < target else "  MISS")
        shown = "" if target is None else f"{target:.1f}"
        cpu = statistics.median(cpus[name])
        print(f"{name:<26}{best:>8.3f}{median:>10.3f}{shown:>10}{verdict:<6}{cpu:>6.3f}")


if __name__ == "__main__":
    main()
