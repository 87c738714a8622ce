"""mypy's cache, kept between suites on one machine (this module holds no tests).

A fresh clone's check costs 22-28 s of CPU, almost all of it the SDKs'; with the cache another
clone left, about 1.5 s (session 21). mypy writes its cache in place and unsynchronised, so a run
killed mid-write could spoil it for every later one: each check works on its own copy, and only a
check that passed puts its copy back, whole, by renaming. (mypy checks every cached module against
its source, options and plugins, so a cache from other code makes a check slower, never wrong.)"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

# What decides the cache's contents besides the code itself (which mypy checks file by file).
KEYED_BY = ("pyproject.toml", "constraints.txt", "requirements.txt", "requirements-dev.txt")
KEPT_KEYS = 3  # caches for other pins (another clone, a worktree) kept beside, newest first
LEFTOVER_S = 3600.0  # a half-made copy this old was left by a run that was killed


def shared_cache(repo: Path) -> Path:
    """This machine's cache for checks of `repo`'s kind: one per Python, mypy and set of pins."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "handoff" / "mypy"
    key = hashlib.sha256(f"{sys.version}\n{version('mypy')}\n".encode())
    for name in KEYED_BY:
        key.update((repo / name).read_bytes() if (repo / name).exists() else b"-")
    return base / key.hexdigest()[:16]


def take_copy(shared: Path, work: Path) -> None:
    """`work` starts as a copy of the shared cache, or empty (a cold check) when there is none or
    another suite put its copy back while this one was taken."""
    try:
        before = shared.stat().st_ino
        shutil.copytree(shared, work)
        if shared.stat().st_ino == before:
            return
    except (OSError, shutil.Error):
        pass
    shutil.rmtree(work, ignore_errors=True)


def put_back(work: Path, shared: Path) -> None:
    """`work` (a passed check's cache) becomes the shared one. A reader finds the old copy, the new
    one or none: never half of one. A cache that cannot be written (no home, a full disk) only
    makes the next check cold."""
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(dir=shared.parent, prefix=f".{shared.name}."))
    except OSError:
        return
    stale = fresh.with_name(fresh.name + ".old")  # (the shared copy moves here, then goes)
    try:
        shutil.copytree(work, fresh, dirs_exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            shared.rename(stale)
        fresh.rename(shared)
    except (OSError, shutil.Error):  # (another suite put its copy back in between: theirs stands)
        pass
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)
    _tidy(shared)


def _tidy(shared: Path) -> None:
    """Half-made copies of killed runs go, and caches for other pins beyond the newest few."""
    now = time.time()
    others = []
    for entry in shared.parent.iterdir():
        with contextlib.suppress(OSError):
            if entry.name.startswith("."):
                if now - entry.stat().st_mtime > LEFTOVER_S:
                    shutil.rmtree(entry, ignore_errors=True)
            elif entry.name != shared.name:
                others.append((entry.stat().st_mtime, entry))
    for _, entry in sorted(others, reverse=True)[KEPT_KEYS:]:
        shutil.rmtree(entry, ignore_errors=True)
