"""Workspace confinement: the one folder file tools may touch, and the single place that
decides whether a path may be touched (`Workspace.resolve`) and opens it (`Workspace.open`).

A check on a path and a later open of the same path can see different files: a symlink swapped
in between would be followed out of the workspace. So `open` checks the file it actually opened,
by the real path of its descriptor (/proc/self/fd), not the path it asked for.

Some files inside the workspace are never opened, whatever the workspace is: settings files
(`.env` and its kind hold API keys) and handoff's own private files (the settings file it was
started with, its state folder, its log), checked on the real path, so a link to one is
refused too.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterable

from tools.result import ToolError

PRIVATE = "That file holds settings or handoff's own records, which I never read out."


def is_settings_file(name: str) -> bool:
    """`.env`, `.env.local`, `prod.env`, `.envrc`: files of the kind that hold keys."""
    lowered = name.lower()
    return lowered in (".env", ".envrc") or lowered.startswith(".env.") or lowered.endswith(".env")


class Workspace:
    """The one folder file tools may touch. Paths are resolved (symlinks followed) and checked."""

    def __init__(self, root: Path, private: Iterable[Path] = ()) -> None:
        self.root = Path(root).resolve(strict=True)
        # The root as configured, in case it is itself reached through a symlink:
        # absolute paths spelled through it are inside too.
        self._spelled_root = Path(os.path.abspath(root))
        # Files and folders never opened (see the module's doc); only those inside matter.
        self._private = tuple(p for p in (Path(p).resolve() for p in private) if _is_within(p, self.root))

    def resolve(self, path: str) -> Path:
        """The real path of an existing file or folder inside the workspace, or ToolError."""
        if "\x00" in path:
            raise ToolError("That path contains a NUL character, which no file name can.")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(f"That path is too long: at most {MAX_PATH_CHARS} characters.")
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from the model: no file can be named by it
            raise ToolError("That path contains a broken character; please say it again.") from None
        requested = Path(path.strip() or ".")
        candidate = self.root / requested  # an absolute `requested` replaces the root here
        # Check the spelled-out path first so `../x` is refused as outside even when it does not exist.
        spelled = Path(os.path.normpath(candidate))
        if not (_is_within(spelled, self.root) or _is_within(spelled, self._spelled_root)):
            raise ToolError("That path is outside the workspace folder.")
        try:
            real = candidate.resolve(strict=True)
        except FileNotFoundError:
            raise ToolError(f"There is no file or folder called {self.describe_request(path)} in the workspace.")
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise ToolError("That path is too long for the file system.") from None
            raise ToolError("That path cannot be followed: a link loops or a folder cannot be read.") from None
        except RuntimeError:  # symlink loops before Python 3.13
            raise ToolError("That path cannot be followed: a link loops or a folder cannot be read.") from None
        if not _is_within(real, self.root):
            raise ToolError("That path is outside the workspace folder.")  # a symlink pointing out
        self._refuse_private(real)
        return real

    def _refuse_private(self, real: Path) -> None:
        if is_settings_file(real.name) or any(_is_within(real, private) for private in self._private):
            raise ToolError(PRIVATE)

    def open(self, path: str, *, folder: bool) -> tuple[int, Path]:
        """A descriptor (the caller closes it) for the file or folder `path` names, and its real
        path; ToolError unless what was opened is inside the workspace, whatever changed on
        disk between the check and the open."""
        real = self.resolve(path)
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK  # NONBLOCK: a FIFO must not hang the open
        # "a.txt/" names a folder (as the kernel reads it), though resolving drops the slash.
        folder = folder or path.rstrip().endswith("/")
        try:
            fd = os.open(real, flags | (os.O_DIRECTORY if folder else 0))
        except NotADirectoryError:
            raise ToolError("That path is a file, not a folder.") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last part became a symlink since the check
                raise ToolError("That path changed while I was opening it; please ask again.") from None
            raise ToolError(f"That path cannot be opened: {(exc.strerror or 'the system refused').lower()}.") from None
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not _is_within(opened, self.root):  # a folder on the way was swapped for a link out
            os.close(fd)
            raise ToolError("That path is outside the workspace folder.")
        try:
            self._refuse_private(opened)  # swapped for a link to one since the check
        except ToolError:
            os.close(fd)
            raise
        return fd, opened

    def relative(self, real: Path) -> str:
        """How to name a resolved path to the user: relative to the root, '.' for the root itself
        (a name that is not UTF-8 keeps replacement characters where its bad bytes were)."""
        return speakable_name(real.relative_to(self.root).as_posix() or ".")

    def describe_request(self, path: str) -> str:
        """The user's own path, made relative when it was spelled absolute inside the workspace."""
        requested = Path(path.strip())
        if not requested.is_absolute():
            return requested.as_posix()
        spelled = Path(os.path.normpath(requested))
        base = self.root if _is_within(spelled, self.root) else self._spelled_root
        return spelled.relative_to(base).as_posix() or "."


MAX_PATH_CHARS = 4096  # Linux's PATH_MAX: a longer path cannot name a file


def speakable_name(name: str) -> str:
    """A file name from the disk, fit to send on: bytes that are not UTF-8 (decoded by Python as
    lone surrogates, `caf\\udce9`) become the replacement character."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)
