"""Run an eval from async code: `eval_async()` inside your own event loop.

The engine runs on anyio, so it works under asyncio and trio alike. (In a
notebook, plain `task.eval()` also works: it detects the running loop.)
"""

import anyio

import vitals_engine as ve


async def main() -> None:
    task = ve.Task(
        dataset=[{"input": f"What's {i}+{i}?", "target": str(2 * i)} for i in range(20)],
        solver=ve.generate(ve.chat_mock(latency=0.05)),
        scorer=ve.detect_includes(),
        name="async-demo",
    )
    await task.eval_async(max_concurrency=20)
    print(task.metrics)


anyio.run(main)  # or: anyio.run(main, backend="trio")
