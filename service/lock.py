"""One daemon per state folder: an exclusive lock (flock) on `<state_dir>/handoff.lock`, taken
before anything in the folder is touched. A second daemon on the same folder would otherwise
take the first one's running tasks for left behind and stop them, and both would write the
same status file and history. The kernel drops the lock when the process ends however it
ends (a crash, SIGKILL), so a stale lock file never keeps handoff from starting."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

LOCK_FILE = "handoff.lock"


class AlreadyRunning(Exception):
    """Another handoff holds the state folder; the message says which and what to do."""


@contextlib.contextmanager
def state_folder_lock(state_dir: Path) -> Iterator[None]:
    """Hold the state folder for this process, or raise AlreadyRunning at once (never waits)."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise AlreadyRunning(
                f"another handoff{who} is already running on the state folder {state_dir}; stop it first "
                "(`handoff status` shows it), or give this one a folder of its own with --state-dir."
            ) from None
        with contextlib.suppress(OSError):  # the pid is only for the message above: a full disk may refuse it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
