"""A KeyboardInterrupt or SystemExit from the user's code ends the process, after the log.

Each case runs a small script in a subprocess: on asyncio, a task that raised one
used to stop the event loop under the run, leaving worker threads that kept the
process from ever exiting. The timeout is only a guard against that hang.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vitals_engine as ve

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    '''
    import sys

    import anyio
    import vitals_engine as ve

    interrupt, solver_kind, backend, log_dir, base_url = sys.argv[1:]


    def stop():
        raise KeyboardInterrupt if interrupt == "KeyboardInterrupt" else SystemExit(3)


    def sync_solver(input, sample):
        if sample.id == 4:
            stop()
        return input


    async def async_solver(input, sample):
        if sample.id == 4:
            stop()
        return input


    def boom(what: str) -> str:
        """Stop everything."""
        stop()


    async def tool_solver(input, sample):
        chat = ve.chat_openai("gpt-test", base_url=base_url, api_key="sk-test")
        chat.register_tool(boom)
        return await chat.chat_async("please call boom" if sample.id == 4 else input)


    solvers = {"sync": sync_solver, "async": async_solver, "tool": tool_solver}
    data = [{"input": f"q{i}", "target": "q"} for i in range(10)]
    solver = solvers[solver_kind.removesuffix("-stream")]
    task = ve.Task(data, solver=solver, scorer=ve.detect_includes(), dir=log_dir,
                   name="interrupted")


    async def main():
        if solver_kind.endswith("-stream"):
            async with task.stream_async(max_concurrency=1) as samples:
                async for _ in samples:
                    pass
        else:
            await task.eval_async(max_concurrency=1)


    anyio.run(main, backend=backend)
    '''
)

CASES = [
    *itertools.product(["KeyboardInterrupt", "SystemExit"], ["sync", "async"], ["asyncio", "trio"]),
    ("KeyboardInterrupt", "tool", "asyncio"),  # raised in a tool, in a chat's own task group
    ("SystemExit", "async-stream", "asyncio"),  # the run in stream_async's task group
]


@pytest.mark.parametrize(
    ("interrupt", "solver", "backend"), CASES, ids=["-".join(case) for case in CASES]
)
def test_interrupt_in_user_code_writes_the_log_and_exits(
    interrupt, solver, backend, server, tmp_path
):
    """Sample 4 raises: the process exits as the exception says (SIGINT for
    KeyboardInterrupt, 3 for SystemExit(3)), and the log holds the samples of 1-3 that
    had finished (solved and scored; one solved but still being scored had not) with the
    status "cancelled" (the process stopping, either way), and counts them."""
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    logs = tmp_path / "logs"
    proc = subprocess.run(
        [sys.executable, str(script), interrupt, solver, backend, str(logs), server.base_url()],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = -signal.SIGINT if interrupt == "KeyboardInterrupt" else 3
    assert proc.returncode == expected, proc.stderr[-3000:]
    if interrupt == "KeyboardInterrupt":  # as itself, not wrapped in a group
        assert proc.stderr.rstrip().endswith("\nKeyboardInterrupt"), proc.stderr[-3000:]
    [path] = logs.glob("*_interrupted_*.json")
    log = ve.read_log(path)
    assert log.status == "cancelled"
    if interrupt == "SystemExit":
        assert log.header.error is not None
        assert log.header.error.message == "SystemExit: 3"
    ids = [s.id for s in log.samples]
    assert ids == list(range(1, len(ids) + 1))
    assert len(ids) <= 3
    assert all(s.error is None and s.output.completion and s.scores for s in log.samples)
    assert log.header.results.total_samples == len(ids)
