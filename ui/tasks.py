"""The one task runner: blocking engine work runs on worker threads, results come back awaited.

Built once in ``app`` and handed to every view (STYLE §3). Workers never touch a QObject; views
``await runner.run(fn, *args)`` from an ``asyncSlot`` on the GUI thread, and drop stale results
with :class:`RequestTokens`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["RequestTokens", "TaskRunner"]

P = ParamSpec("P")
T = TypeVar("T")


class TaskRunner:
    """Runs callables on a small thread pool and awaits them on the running asyncio loop."""

    def __init__(self, max_workers: int = 4) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                           thread_name_prefix="mnemo-worker")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` on a worker thread and return its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def submit(self, fn: Callable[P, T], *args: P.args,
               **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
        """Start ``fn`` on a worker without awaiting (for fire-and-forget background work)."""
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self) -> None:
        """Stop accepting work and wait for running tasks."""
        self._pool.shutdown(wait=True, cancel_futures=True)


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
