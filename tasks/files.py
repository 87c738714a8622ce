"""Task files are the user's alone: folders 0700, files 0600 whatever the umask, because a
task's output and its records can hold anything the user's programs print."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) and make it 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask, and an old folder keeps its own
    return path


class TaskLog:
    """A task's output log, 0600, unbuffered (`handoff tasks show` sees it live). When it
    reaches `max_bytes` it is renamed to `<name>.1` (replacing an older one) and a new one
    begun, so one task never holds more than about twice that on disk."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = Path(path)
        self._max_bytes = max_bytes
        self._fd = self._open()
        self._size = 0

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)
        return fd

    @property
    def name(self) -> str:
        return str(self.path)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._size >= self._max_bytes:
                self._rotate()
            room = self._max_bytes - self._size
            chunk = view[:room]
            written = os.write(self._fd, chunk)
            self._size += written
            view = view[written:]

    def _rotate(self) -> None:
        os.close(self._fd)
        os.replace(self.path, f"{self.path}.1")
        self._fd = self._open()
        self._size = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "TaskLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prune_logs(log_dir: Path, max_total_bytes: int, keep: set[str]) -> None:
    """Delete the oldest log files in `log_dir` until together they fit in `max_total_bytes`;
    files named in `keep` (running tasks' logs) stay."""
    try:
        entries = [(_age_key(e.name), e.stat().st_size, e.path) for e in os.scandir(log_dir) if e.is_file()]
    except OSError as exc:
        log.warning("cannot look through task logs in %s: %s", log_dir, exc)
        return
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= max_total_bytes:
            break
        if path in keep:
            continue
        try:
            os.unlink(path)
            total -= size
        except OSError as exc:
            log.warning("cannot delete old task log %s: %s", path, exc)


def _age_key(name: str) -> tuple[int, int]:
    """Oldest first: by task number (ids only grow), a task's rotated part before its current
    one. (Modification times can tie on coarse file systems.)"""
    stem, _, rest = name.partition(".")
    return (int(stem) if stem.isdigit() else -1, 0 if rest.endswith(".1") else 1)
