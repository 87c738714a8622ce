"""The one async wake-up primitive: `Changes` (notify sync, wait async), and waits built on it.

Why one: an `asyncio.Event` cleared and then awaited loses a `set()` that lands between the two,
and a shared Event lets one waiter swallow another's wake-up. A `Changes` waiter registers itself
before it checks anything, so no notification in between can be lost; every waiter wakes.

(Timeouts in this project use `asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11
wait_for can swallow a cancellation that lands as its inner await completes, which left a
cancelled task running forever.)
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class Changes:
    """Wakes every waiter when something changed: `notify` is sync (state setters call it),
    `wait` is async. Unlike a shared Event, one waiter cannot swallow another's wake-up."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def wait(self, timeout: float | None = None) -> None:
        """Return on the next change, or after `timeout` seconds (callers re-check their condition)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> None:
        """Return as soon as `predicate()` holds, re-checked after every change; TimeoutError
        after `timeout` seconds (None: no limit)."""
        async with asyncio.timeout(timeout):
            while not predicate():
                await self.wait()


async def wait_for(observed: T, predicate: Callable[[T], bool], timeout: float) -> None:
    """Await a state of `observed` (a `decisions.timeline.Timeline`, or anything with an `on_add`
    list of observers) without sleeping: returns as soon as `predicate(observed)` holds,
    TimeoutError after `timeout` seconds."""
    changes = Changes()
    observers: list[Callable[[Any], None]] = observed.on_add  # type: ignore[attr-defined]
    notify = lambda _entry: changes.notify()  # noqa: E731
    observers.append(notify)
    try:
        await changes.wait_until(lambda: predicate(observed), timeout)
    finally:
        observers.remove(notify)
