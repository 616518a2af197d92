"""The one task runner: blocking engine work runs on worker threads, results come back awaited.

Built once in ``app`` and handed to every view (STYLE §3). Workers never touch a QObject; views
``await runner.run(fn, *args)`` from an ``asyncSlot`` on the GUI thread, and drop stale results
with :class:`RequestTokens`. Long work takes a :class:`CancelFlag` (polled by the worker) and a
progress function from :meth:`TaskRunner.progress_relay`, which hands the latest
``(done, total)`` to a GUI-thread callback without flooding the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

__all__ = ["CancelFlag", "RequestTokens", "TaskRunner", "pending_tasks", "spawn", "wait_until"]

P = ParamSpec("P")
T = TypeVar("T")


_RUNNING: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Run a coroutine on the GUI loop from a plain slot (the typed twin of ``asyncSlot``).

    The task is kept alive until done; an exception that escapes it is a bug and goes to
    ``sys.excepthook`` (the crash reporter; pytest-qt turns it into a test failure).
    """
    task = asyncio.ensure_future(coro)
    _RUNNING.add(task)

    def done(finished: asyncio.Task[T]) -> None:
        _RUNNING.discard(finished)
        if not finished.cancelled() and finished.exception() is not None:
            exc = finished.exception()
            assert exc is not None
            sys.excepthook(type(exc), exc, exc.__traceback__)

    task.add_done_callback(done)
    return task


def pending_tasks() -> list[asyncio.Task[Any]]:
    """The tasks started with :func:`spawn` that have not finished (the GUI tests wait for
    none to be left before their event loop goes)."""
    return [task for task in _RUNNING if not task.done()]


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``predicate`` on the GUI loop every 50 ms until true or ``timeout``; returns it.

    For scripted runs (``--screenshot``), not for views: a view reacts to the result it awaits.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return predicate()


class TaskRunner:
    """Runs callables on a small thread pool and awaits them on the running asyncio loop."""

    def __init__(self, max_workers: int = 4) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                           thread_name_prefix="mnemo-worker")
        self._count_lock = threading.Lock()
        self._pending = 0

    def _counted(self, fn: Callable[[], T]) -> Callable[[], T]:
        with self._count_lock:
            self._pending += 1

        def call() -> T:
            try:
                return fn()
            finally:
                with self._count_lock:
                    self._pending -= 1

        return call

    def pending(self) -> int:
        """Calls submitted and not finished yet (0: the workers are idle)."""
        with self._count_lock:
            return self._pending

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` on a worker thread and return its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool,
                                          self._counted(lambda: fn(*args, **kwargs)))

    def submit(self, fn: Callable[P, T], *args: P.args,
               **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
        """Start ``fn`` on a worker without awaiting (for fire-and-forget background work)."""
        return self._pool.submit(self._counted(lambda: fn(*args, **kwargs)))

    @staticmethod
    def progress_relay(on_progress: Callable[[int, int], None]) -> Callable[[int, int], None]:
        """A thread-safe ``progress(done, total)`` for workers that reports on the GUI loop.

        Must be created on the GUI thread (inside the running loop). At most one delivery is
        queued at a time; later values overwrite earlier undelivered ones, so a worker that
        reports per record costs the GUI one callback per loop turn, not one per record.
        """
        loop = asyncio.get_running_loop()
        lock = threading.Lock()
        latest: list[tuple[int, int]] = []

        def deliver() -> None:
            with lock:
                value = latest.pop() if latest else None
                latest.clear()
            if value is not None:
                on_progress(*value)

        def progress(done: int, total: int) -> None:
            with lock:
                queued = bool(latest)
                latest[:] = [(done, total)]
            if not queued:
                loop.call_soon_threadsafe(deliver)

        return progress

    def shutdown(self) -> None:
        """Stop accepting work and wait for running tasks."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class CancelFlag:
    """Set on the GUI thread, polled by a worker (``cancelled=flag.is_set``)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the worker to stop at its next check."""
        self._event.set()

    def is_set(self) -> bool:
        """True once cancellation was asked for."""
        return self._event.is_set()


class RequestTokens:
    """Monotonic tokens so a view applies only the result of its latest request."""

    def __init__(self) -> None:
        self._current = 0

    def next_token(self) -> int:
        """A new token; earlier ones become stale."""
        self._current += 1
        return self._current

    def is_current(self, token: int) -> bool:
        """True when ``token`` is the latest."""
        return token == self._current
