"""Keep the API key out of reach of the daemon's own children and of other processes of the
same user (issue 23, defect 11: a task read it from /proc/$PPID/environ, base64'd past the
output redaction).

Once the settings are read, the key lives in the settings object alone (the OpenAI client gets
it explicitly): `keep_key_private` takes every variable holding it out of `os.environ` (nothing
started later inherits it), overwrites it in the environment block the process was started
with (what /proc/PID/environ shows, whatever `os.environ` says now), and makes the process
non-dumpable (its /proc files and memory become unreadable to other processes of the user, and
no core dump holds the key).
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import MutableMapping

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
# In /proc/PID/stat, after the ")" that ends the command name: env_start and env_end, the
# addresses of the environment block (fields 50 and 51 of proc(5), counted from 1).
_ENV_START_FIELD = 50 - 3


def keep_key_private(key: str, environ: MutableMapping[str, str] = os.environ) -> None:
    if key:
        for name in [name for name, value in environ.items() if key in value]:
            del environ[name]
        _overwrite_in_initial_environment(key)
    _not_dumpable()


def _overwrite_in_initial_environment(key: str) -> None:
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rfind(b")") + 2 :].split()
        start, end = int(fields[_ENV_START_FIELD]), int(fields[_ENV_START_FIELD + 1])
    except (OSError, IndexError, ValueError):
        log.warning("could not find this process's environment block: the key stays in /proc/%d/environ", os.getpid())
        return
    if not 0 < start < end:
        return
    needle = key.encode("utf-8", "surrogateescape")
    block = ctypes.string_at(start, end - start)
    at = block.find(needle)
    while at != -1:
        ctypes.memset(start + at, ord("*"), len(needle))  # the same length: the block's layout is kept
        at = block.find(needle, at + len(needle))


def _not_dumpable() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        failed = libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0
    except (OSError, AttributeError):  # no libc prctl: not Linux
        failed = True
    if failed:
        log.warning("could not make this process non-dumpable; other programs of this user may read its memory")
