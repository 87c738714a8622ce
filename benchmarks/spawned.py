"""A part of a benchmark in a process of its own (a fresh interpreter: its CPU time is its own, and
it has no copy of the caller's event loop), talked to over a pipe."""

from __future__ import annotations

import contextlib
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def spawned(target: Callable[..., None], *args: Any, stop: Any, name: str | None = None) -> Iterator[Connection]:
    """`target(*args, conn)` running in a spawned child; yields this side's end of the pipe. On the
    way out the child is sent `stop` and given 30 s to end, then killed."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=target, args=(*args, child), name=name, daemon=True)
    process.start()
    # Only the child holds its end: once the child is gone, a read here ends (EOFError) instead of
    # waiting for ever. A benchmark that failed with a read pending in a thread (a timeout under
    # load) left asyncio.run's clean-up waiting for that thread, and the suite with it (session 21).
    child.close()
    try:
        yield parent
    finally:
        with contextlib.suppress(OSError):  # (the child may be gone already)
            parent.send(stop)
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()
