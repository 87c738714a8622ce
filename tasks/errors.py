"""User-facing task errors. Every message is a sentence that can be read aloud as it is."""

from __future__ import annotations

from typing import Sequence

from tasks.records import TaskRecord


class TaskError(Exception):
    """Base class: something the user asked for cannot be done; the message says why."""


class TaskConfigError(TaskError):
    """The task templates file is invalid; the message names the file and the entry."""


class UnknownTemplate(TaskError):
    """No template has that name."""


class ParameterError(TaskError):
    """A template parameter is missing, undeclared or has an unusable value."""


class ShellNotAllowed(TaskError):
    """A shell command was asked for but the config does not allow shell commands."""


class UnknownTask(TaskError):
    """No task matches the identifier."""


class NotStarted(TaskError):
    """The manager has not been started, or has been closed."""


class AmbiguousTask(TaskError):
    """Several tasks match; `question` asks which one, `candidates` are the matches."""

    def __init__(self, question: str, candidates: Sequence[TaskRecord]) -> None:
        super().__init__(question)
        self.question = question
        self.candidates = tuple(candidates)


class TooMany(TaskError):
    """A limit on waiting tasks or pending timers is reached (a runaway model cannot set 300)."""
