"""A task's output as it arrives: every byte to the log file, the last few lines in memory.

Memory stays bounded however much a task prints: the tail keeps `max_lines` lines of at most
`max_line_chars` bytes each (plus one partial line, also capped), and a chunk holding more
lines than that is split only as far as its last `max_lines` lines.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Callable, Protocol

from config.logging_setup import redact

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


class LogFile(Protocol):
    @property
    def name(self) -> str: ...

    def write(self, data: bytes) -> object: ...


class Redactor:
    """Removes known secret values (and anything shaped like an API key) from output before
    it is logged, kept or spoken. Works on whole lines, so a secret split across two reads is
    still found; a line longer than `max_held` is passed on in pieces (only the last
    `overlap` bytes are held back, enough for the longest secret)."""

    def __init__(self, secrets: tuple[str, ...], out: Callable[[bytes], None], max_held: int = 65536) -> None:
        # latin-1 maps every byte to one character and back, so non-UTF-8 output survives intact.
        self._secrets = tuple(s.encode("utf-8", "replace").decode("latin-1") for s in secrets if s)
        self._out = out
        self._held = b""
        self._max_held = max_held
        self._overlap = max((len(s) for s in self._secrets), default=0) + 256

    def __call__(self, data: bytes) -> None:
        data = self._held + data
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > self._max_held:
            cut = len(data) - self._overlap
        self._held = data[cut:]
        if cut:
            self._out(self._clean(data[:cut]))

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, b""
            self._out(self._clean(held))

    def _clean(self, data: bytes) -> bytes:
        return redact(data.decode("latin-1"), self._secrets).encode("latin-1")


class OutputSink:
    """Where a running task's output goes: appended to its log, and into its tail."""

    def __init__(self, log_file: LogFile, tail: OutputTail) -> None:
        self._log_file: LogFile | None = log_file
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
