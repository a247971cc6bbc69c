"""Streaming finished samples to your code, and resuming a run that stopped.

`stream_async()` hands over each sample as soon as it is solved and scored.
Leaving early cancels the run; its log keeps what finished, and
`eval(resume=...)` later runs only the rest.
"""

import anyio

import vitals_engine as ve

data = [{"input": f"What's {i}*3?", "target": str(3 * i)} for i in range(30)]


async def main() -> None:
    task = ve.Task(
        data, ve.generate(ve.chat_mock(latency=0.01)), ve.detect_includes(), name="stream-demo"
    )
    async with task.stream_async(max_concurrency=4) as samples:
        async for record in samples:
            print("finished", record.sample.id, record.score.value if record.score else None)
            if record.sample.id >= 10:
                break  # stop early: the run is cancelled, its log keeps what finished
    stopped = ve.read_log(task.log_path)
    print("first run:", stopped.status, len(stopped.samples), "samples")

    again = ve.Task(data, ve.generate(ve.chat_mock()), ve.detect_includes(), name="stream-demo")
    await again.eval_async(resume=task.log_path)
    print("resumed:", again.metrics, "log:", again.log_path)


anyio.run(main)
