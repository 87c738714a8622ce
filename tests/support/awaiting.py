"""Awaiting what another process does, without polling: a file written (inotify on its folder)
and a process that ended (a pidfd turns readable). The kernel tells the loop; the test re-checks
its condition after each notice."""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
from pathlib import Path
from typing import Callable

_libc = ctypes.CDLL(None, use_errno=True)
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_CREATE = 0x2, 0x8, 0x80, 0x100
_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (inotify(7))


async def file_written(folder: Path, holds: Callable[[], object], timeout: float = 60.0) -> None:
    """Return once `holds()` is true, re-checked whenever a file in `folder` is created, written
    or renamed into it (a status file replaced atomically, a log appended to)."""
    fd = _libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    changed = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        mask = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE
        if _libc.inotify_add_watch(fd, os.fsencode(folder), mask) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        loop.add_reader(fd, _drain, fd, changed)
        async with asyncio.timeout(timeout):
            while not holds():  # (checked after the watch exists: nothing written between is missed)
                await changed.wait()
                changed.clear()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _drain(fd: int, changed: asyncio.Event) -> None:
    try:
        while os.read(fd, 64 * _EVENT_HEADER.size):
            pass
    except BlockingIOError:
        pass
    changed.set()


async def process_ended(pid: int, timeout: float = 60.0) -> None:
    """Return once process `pid` (any process, not only a child) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, ended.set)
    try:
        async with asyncio.timeout(timeout):
            await ended.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
