"""A task's output as it arrives: every byte to the log file, the last few lines in memory.

Memory stays bounded however much a task prints: the tail keeps `max_lines` lines of at most
`max_line_chars` bytes each (plus one partial line, also capped), and a chunk holding more
lines than that is split only as far as its last `max_lines` lines.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import BinaryIO

log = logging.getLogger(__name__)


class OutputTail:
    """The last lines of a byte stream, fed in arbitrary chunks."""

    def __init__(self, max_lines: int, max_line_chars: int) -> None:
        self._lines: deque[bytes] = deque(maxlen=max_lines)
        self._max_lines = max_lines
        self._max_bytes = max_line_chars
        self._partial = b""  # the current line, not yet ended by a newline (capped)
        self._newlines = 0

    def feed(self, data: bytes) -> None:
        newlines = data.count(b"\n")
        if not newlines:
            self._partial = self._clip(self._partial + data)
            return
        self._newlines += newlines
        if newlines > self._max_lines:
            # Everything before the last max_lines lines scrolls out anyway: don't split it.
            complete = data.rsplit(b"\n", self._max_lines + 1)[1:]
        else:
            complete = data.split(b"\n")
            complete[0] = self._partial + complete[0]
        self._partial = self._clip(complete.pop())
        self._lines.extend(self._clip(line) for line in complete)

    @property
    def line_count(self) -> int:
        """Lines seen so far, counting an unfinished last line."""
        return self._newlines + (1 if self._partial else 0)

    def lines(self) -> tuple[str, ...]:
        """The kept lines, decoded, oldest first (an unfinished last line included)."""
        kept = list(self._lines)
        if self._partial:
            kept.append(self._partial)
        return tuple(_decode(line) for line in kept[-self._max_lines :])

    def _clip(self, line: bytes) -> bytes:
        return line if len(line) <= self._max_bytes else line[: self._max_bytes]


def _decode(line: bytes) -> str:
    # errors="replace": output is whatever the program printed, not necessarily UTF-8.
    return line.decode("utf-8", errors="replace").rstrip("\r")


class OutputSink:
    """Where a running task's output goes: appended to its log, and into its tail."""

    def __init__(self, log_file: BinaryIO, tail: OutputTail) -> None:
        self._log_file: BinaryIO | None = log_file
        self._tail = tail

    def __call__(self, data: bytes) -> None:
        self._tail.feed(data)
        if self._log_file is None:
            return
        try:
            self._log_file.write(data)
        except OSError as exc:
            # A full disk must not kill the task; the tail still works. Say so once.
            log.error("cannot write task log %s (%s); the rest of its output is not logged", self._log_file.name, exc)
            self._log_file = None
