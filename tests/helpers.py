"""What many test modules need: the sums dataset, an OpenAI chat on the mock server,
waiting for a condition, a run on a thread of its own, and a virtual clock driven on.

Waiting: a test waits for what another task, thread or process does with `until()` (in
async code) or `wait_until()` (in a thread, or a test without an event loop). Both poll a
condition and fail loudly once `PATIENCE` seconds have passed, so a test whose code never
gets there fails instead of hanging. The bound is a hang guard, never a timing assertion,
and a sleep is never how a test waits for something to happen.

Time that a test controls: `drive(clock)` runs a `VirtualClock`, so that model latency
and backoff in a test take no real time and cannot reorder under load.

Free ports are in `tests/addresses.py`, the transport tests' servers in
`tests/netservers.py`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

import vitals_engine as ve

if TYPE_CHECKING:
    from vitals_engine.pacing.clock import Clock
    from vitals_engine.pacing.scope import CallScope, TextSink
    from vitals_engine.testing import MockServer
    from vitals_engine.testing.clock import VirtualClock
    from vitals_engine.vocab.model_calls import ModelCall

__all__ = [
    "PATIENCE",
    "all_blocked",
    "drive",
    "evaluating",
    "openai",
    "stage_scope",
    "sums",
    "until",
    "wait_until",
]

T = TypeVar("T")

#: The longest a test waits for anything before it fails (generous: only a failing test
#: waits that long, and a loaded machine is slow).
PATIENCE = 60.0


# -- a sample stage's scope ------------------------------------------------------------------


def stage_scope(
    role: str = "solver",
    *,
    calls: list[ModelCall] | None = None,
    on_text: TextSink | None = None,
    retry: ve.Retry | None = None,
    clock: Clock | None = None,
    **stacks: Any,
) -> CallScope:
    """The scope of one sample stage whose calls pass call stacks built as a run builds
    them, from `stacks` (`CallStacks`' keywords: `limits=`, `cache=`, `budget=` ...),
    `retry` (default: the default policy) and `clock` (default: the system's)."""
    from vitals_engine.chats import dispatch
    from vitals_engine.chats.layers.stacks import CallStacks
    from vitals_engine.pacing.clock import SystemClock
    from vitals_engine.pacing.scope import CallScope

    built = CallStacks(
        retry=retry or dispatch.DEFAULT_RETRY, clock=clock or SystemClock(), **stacks
    )
    return CallScope(role=role, stacks=built, calls=calls, on_text=on_text)


# -- data and models ------------------------------------------------------------------------


def sums(
    n: int | Iterable[int], prefix: str = "", *, start: int = 0, ids: bool = False
) -> list[dict[str, Any]]:
    """Rows "What's i+i?" with target 2i, for `n` numbers i from `start` (or for each
    number `n` holds), each input after `prefix`; with `ids`, each row's id is its i
    (without, the engine numbers the samples from 1).

    Example:
        >>> sums(2)
        [{'input': "What's 0+0?", 'target': '0'}, {'input': "What's 1+1?", 'target': '2'}]
        >>> sums(1, "A: ", start=3, ids=True)
        [{'id': 3, 'input': "A: What's 3+3?", 'target': '6'}]
    """
    numbers = range(start, start + n) if isinstance(n, int) else n
    return [
        ({"id": i} if ids else {}) | {"input": f"{prefix}What's {i}+{i}?", "target": str(2 * i)}
        for i in numbers
    ]


def openai(server: MockServer, model: str = "gpt-test", **options: Any) -> ve.Chat:
    """A `chat_openai` of `model` on the mock `server`, with `chat_openai`'s `options` (and
    a made-up key unless they name one)."""
    options.setdefault("api_key", "sk-test")
    return ve.chat_openai(model, base_url=server.base_url(), **options)


# -- waiting ----------------------------------------------------------------------------------


async def until(
    condition: Callable[[], T], what: str = "the condition", limit: float = PATIENCE
) -> T:
    """Wait for `condition()` to be truthy, checked between scheduler turns, and return
    it; fail once `limit` seconds have passed without."""
    with anyio.move_on_after(limit):
        while True:
            if value := condition():
                return value
            await anyio.sleep(0.005)
    raise AssertionError(f"gave up waiting for {what} after {limit:g} s")


def wait_until(
    condition: Callable[[], T], what: str = "the condition", limit: float = PATIENCE
) -> T:
    """`until()` for a thread: block until `condition()` is truthy and return it; fail once
    `limit` seconds have passed without."""
    deadline = time.monotonic() + limit
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {limit:g} s")
        time.sleep(0.02)
    return value


@contextmanager
def evaluating(
    task: ve.Task, *gates: threading.Event, **options: Any
) -> Iterator[threading.Thread]:
    """`task.eval(**options)` on a thread of its own while in the block (the thread is
    yielded). On leaving, open `gates` so that held samples finish, wait for the run to
    end (at most PATIENCE s), and check that it raised nothing."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            task.eval(**options)
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        yield runner
    finally:
        for gate in gates:
            gate.set()
        runner.join(timeout=PATIENCE)
    assert not runner.is_alive(), f"the run did not end in {PATIENCE:g} s"
    assert failures == []


# -- a virtual clock --------------------------------------------------------------------------


async def all_blocked() -> None:
    """Return once every other task of the event loop waits (for an event, a lock, a
    thread, a clock), as `anyio.wait_all_tasks_blocked()` does; on asyncio without its
    nap of 0.1 s each time a task can still run, which a run of many steps adds up."""
    try:
        this = asyncio.current_task()
    except RuntimeError:  # no asyncio loop: trio's own count is exact and quick
        await anyio.wait_all_tasks_blocked()
        return
    while True:
        await asyncio.sleep(0)  # one turn of the loop: whoever can run, runs
        if all(task is this or _waits(task) for task in asyncio.all_tasks()):
            return


def _waits(task: asyncio.Task[Any]) -> bool:
    waiter = task._fut_waiter  # type: ignore[attr-defined]  # what anyio reads too
    return waiter is not None and not waiter.done()


async def drive(clock: VirtualClock, tick: float = 0.001) -> None:
    """Forever: once every other task waits, move `clock` on by `tick`, waking whoever is
    due (`VirtualClock.drive()`, quicker on asyncio: see `all_blocked()`). Start it in the
    task group of the code under test, and cancel it once that is done.

    Work on anyio's worker threads (a log opened or synced through `anyio.to_thread`)
    takes no virtual time: while a thread of the default limiter works, the clock waits
    for it. (Else a run opening its journal on a thread would find the others far ahead
    in virtual time once it starts.) Threads under a limiter of their own are not seen.

    Example:
        >>> clock = VirtualClock()
        >>> async with anyio.create_task_group() as tg:
        ...     tg.start_soon(drive, clock)
        ...     await clock.sleep(0.5)   # returns at once, clock.now() is about 0.5
        ...     tg.cancel_scope.cancel()
    """
    threads = anyio.to_thread.current_default_thread_limiter()
    while True:
        await all_blocked()
        if threads.borrowed_tokens:
            await anyio.sleep(0.001)  # real time, for the thread: no virtual time passes
            continue
        clock.advance(tick)


async def killed_journal(task: ve.Task, keep: int) -> Path:
    """The journal a run of `task` killed after `keep` samples leaves (made from the log of
    a finished run: its start record, then `keep` sample records, no final log)."""
    import msgspec

    from vitals_engine.log.writer import LogWriter

    assert task.log_path is not None
    logged = ve.read_log(task.log_path)
    header = msgspec.structs.replace(logged.header, samples=msgspec.UNSET, status="started")
    writer = LogWriter(task.log_path, header)
    writer._open()
    for sample in logged.samples[:keep]:
        writer.add(sample)
    await writer.close()
    task.log_path.unlink()
    return writer.journal
