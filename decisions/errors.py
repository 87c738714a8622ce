"""The one `IllegalTransition`: a state machine was asked for a move its table does not allow."""

from __future__ import annotations


class IllegalTransition(RuntimeError):
    """An event that makes no sense in the current state (a bug, not a user error)."""
