"""Workspace confinement: the one folder file tools may touch, and the single place that
decides whether a path may be touched (`Workspace.resolve`)."""

from __future__ import annotations

import os
from pathlib import Path

from tools.result import ToolError


class Workspace:
    """The one folder file tools may touch. Paths are resolved (symlinks followed) and checked."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve(strict=True)
        # The root as configured, in case it is itself reached through a symlink:
        # absolute paths spelled through it are inside too.
        self._spelled_root = Path(os.path.abspath(root))

    def resolve(self, path: str) -> Path:
        """The real path of an existing file or folder inside the workspace, or ToolError."""
        if "\x00" in path:
            raise ToolError("That path contains a NUL character, which no file name can.")
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
        except (OSError, RuntimeError):  # symlink loops (RuntimeError before 3.13), permissions
            raise ToolError("That path cannot be followed: a link loops or a folder cannot be read.")
        if not _is_within(real, self.root):
            raise ToolError("That path is outside the workspace folder.")  # a symlink pointing out
        return real

    def relative(self, real: Path) -> str:
        """How to name a resolved path to the user: relative to the root, '.' for the root itself."""
        return real.relative_to(self.root).as_posix() or "."

    def describe_request(self, path: str) -> str:
        """The user's own path, made relative when it was spelled absolute inside the workspace."""
        requested = Path(path.strip())
        if not requested.is_absolute():
            return requested.as_posix()
        spelled = Path(os.path.normpath(requested))
        base = self.root if _is_within(spelled, self.root) else self._spelled_root
        return spelled.relative_to(base).as_posix() or "."


def _is_within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)
