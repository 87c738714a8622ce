"""Logging for handoff: one format, and a filter that keeps secrets and terminal control
characters out of every log line (what the model, a transcript or a task said can be logged:
it must not forge a line or act on the terminal reading the log)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, TextIO

from safety.text import printable

# API keys and bearer tokens, whatever logged them (our code, the SDK, websockets, aiohttp).
_SECRET_PATTERNS = (
    re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}"),  # not inside a word: "task-list-for-today" is no key
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.]{8,}"),
    re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\",\s]{8,}"),
)


_ADDED_SECRETS: set[str] = set()  # found at run time (an MCP server's env values and headers)


def add_secrets(values: Iterable[str]) -> None:
    """Secrets read after logging was set up (hands.config: MCP `env` and `headers` values): from
    now on `redact` cuts them out too, everywhere it cuts out the API key (log lines, tool results,
    scripts, errors)."""
    _ADDED_SECRETS.update(v for v in values if v and len(v) >= 4)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secret values and anything shaped like a key with a placeholder."""
    for secret in sorted({*secrets, *_ADDED_SECRETS}, key=len, reverse=True):  # longest first: a token inside its header
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    return text


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a line is logged, not to the stream it was when
    logging was set up: a stream replaced and closed since (a test's capture, a redirected
    stderr) must not turn every later line into a "Logging error"."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


class RedactingFilter(logging.Filter):
    """Rewrites each record's final message with secrets removed and control characters (a
    newline too: one record is one line) shown as escapes; args are folded in first."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = printable(redact(message, self._secrets))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:  # a traceback keeps its lines
            record.exc_text = printable(redact(record.exc_text, self._secrets), lines=True)
        record.msg, record.args = cleaned, None
        return True


class RepeatFilter(logging.Filter):
    """Bounds a line that repeats: of records with the same logger, level and message, at most
    `burst` per `window_s`; the rest are counted, and the next one let through after the window
    says how many were left out. (A flood of connections once wrote 408,747
    "accept() out of system resource" lines, 181 MB, in 70 s.)"""

    def __init__(self, burst: int = 50, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 1000) -> None:  # fmt: skip
        super().__init__()
        self.burst, self.window_s, self._clock, self._max_keys = burst, window_s, clock, max_keys
        self._seen: dict[tuple[str, int, str], list[float | int]] = {}  # key -> [window start, passed, left out]
        self.left_out = 0

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage()[:300])
        now = self._clock()
        entry = self._seen.get(key)
        if entry is None or now - entry[0] >= self.window_s:
            left_out = int(entry[2]) if entry is not None else 0
            if len(self._seen) >= self._max_keys:
                self._seen.clear()  # (bounded itself: a flood of distinct lines starts it afresh)
            self._seen[key] = [now, 1, 0]
            if left_out:
                record.msg, record.args = (f"{record.getMessage()} [{left_out} more like this left out in the last "
                                           f"{self.window_s:.0f} s]"), None  # fmt: skip
            return True
        if entry[1] < self.burst:
            entry[1] += 1
            return True
        entry[2] += 1
        self.left_out += 1
        return False


# Dated: an assistant left running for days logs across midnights.
LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file that only its owner can read (0600), the rotated ones too: the log
    names commands and files, and is nobody else's business."""

    def _open(self):  # type: ignore[no-untyped-def]
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)  # an older file may have been created looser
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def configure_logging(
    level: str = "INFO",
    secrets: Iterable[str] = (),
    file: Path | None = None,
    max_bytes: int = 10_000_000,
    backups: int = 5,
) -> None:
    """Configure the root logger once: readable dated lines on stderr (and in `file`, rotated),
    secrets redacted. Raises OSError if `file` cannot be opened (checked at start, see
    commands.checks)."""
    formatter = logging.Formatter(LOG_FORMAT, DATE_FORMAT)
    redacting = RedactingFilter(secrets)
    repeats = RepeatFilter()  # one for all handlers: the file and stderr leave out the same lines
    handlers: list[logging.Handler] = [_StderrHandler()]
    if file is not None:
        handlers.append(PrivateRotatingFileHandler(file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(repeats)  # first: a line left out costs no redaction
        handler.addFilter(redacting)
        root.addHandler(handler)
    root.setLevel(level.upper())
    # Library chatter (frames, handshakes) is only useful when debugging them.
    for noisy in ("websockets", "openai", "httpx", "httpx2", "httpcore", "httpcore2", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
