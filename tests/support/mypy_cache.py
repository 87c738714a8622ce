"""mypy's cache, kept between suites on one machine (this module holds no tests).

A fresh clone's check costs 22-28 s of CPU, almost all of it the SDKs'; with the cache another
clone left, about 1.5 s (session 21). mypy writes its cache in place and unsynchronised, so a run
killed mid-write could spoil it for every later one: each check works on its own copy, and only a
check that passed puts its copy back, whole, by renaming."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

# What decides the cache's contents besides the code itself (which mypy checks file by file).
KEYED_BY = ("pyproject.toml", "constraints.txt", "requirements.txt", "requirements-dev.txt")


def shared_cache(repo: Path) -> Path:
    """This machine's cache for checks of `repo`'s kind: one per Python, mypy and set of pins."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "handoff" / "mypy"
    key = hashlib.sha256(f"{sys.version}\n{version('mypy')}\n".encode())
    for name in KEYED_BY:
        key.update((repo / name).read_bytes() if (repo / name).exists() else b"-")
    return base / key.hexdigest()[:16]


def take_copy(shared: Path, work: Path) -> None:
    """`work` starts as a copy of the shared cache, or empty (a cold check) when there is none or
    it changed under the copy."""
    try:
        shutil.copytree(shared, work)
    except (OSError, shutil.Error):
        shutil.rmtree(work, ignore_errors=True)


def put_back(work: Path, shared: Path) -> None:
    """`work` (a passed check's cache) becomes the shared one, and caches for other keys go. A
    reader finds the old copy, the new one or none: never half of one. A cache that cannot be
    written (no home, a full disk) only makes the next check cold."""
    fresh = shared.parent / f".{shared.name}.{os.getpid()}.new"
    stale = shared.parent / f".{shared.name}.{os.getpid()}.old"
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work, fresh)
    except (OSError, shutil.Error):
        shutil.rmtree(fresh, ignore_errors=True)
        return
    with contextlib.suppress(FileNotFoundError):
        shared.rename(stale)
    try:
        fresh.rename(shared)
    except OSError:  # another suite put its copy back in between: theirs stands
        shutil.rmtree(fresh, ignore_errors=True)
    shutil.rmtree(stale, ignore_errors=True)
    for other in shared.parent.iterdir():
        if other.name != shared.name and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
