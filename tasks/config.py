"""What background tasks may run (templates from the user's TOML file) and how they are run
(`TaskSettings`).

Voice never supplies a program: it picks a template by name and fills the parameters the
template declares. Each value replaces a `{name}` placeholder inside one argv element and is
passed to the program as that argument, never through a shell, so `; rm -rf x` or `$(touch y)`
arrive as literal text. Shell commands are a separate path, off unless `allow_shell = true`.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tasks.errors import ParameterError, TaskConfigError, UnknownTemplate
from tasks.speech import and_list, match_key, or_list, sentence_start

# `{name}` is a placeholder; `{{` and `}}` are literal braces. A brace that is not part of
# either (`{print $1}` has a space) is left as it is.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TEMPLATE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_PARAM_CHARS = 8000  # an agent prompt fits; a runaway transcript does not
# The start_task voice tool takes parameters next to these arguments of its own.
RESERVED_PARAM_NAMES = frozenset({"name", "command"})


@dataclass(frozen=True)
class TaskSettings:
    """How tasks are run and announced. Tests build this with tiny values."""

    state_dir: Path  # tasks live under <state_dir>/tasks/: tasks.db and logs/<id>.log
    max_concurrent: int = 5  # more tasks than this wait with status "queued"
    default_timeout_s: float = 3600.0  # for templates that set no timeout_s
    kill_grace_s: float = 5.0  # after SIGTERM, how long a task's processes get before SIGKILL
    tail_lines: int = 50  # output lines kept in memory per task (the log on disk has them all)
    max_line_chars: int = 400  # longer lines are cut in the in-memory tail only
    drain_s: float = 1.0  # after a task ends, how long to wait for the rest of its output
    merge_older_than_s: float = 120.0  # notices older than this, when delivered, are merged into one
    max_merged_notices: int = 6  # a merged notice names this many tasks and counts the rest
    summary_lines: int = 2  # output lines quoted when a task's outcome is announced
    log_max_bytes: int = 10 * 1024 * 1024  # a task's log is rotated (one old part kept) past this
    logs_max_total_bytes: int = 200 * 1024 * 1024  # oldest finished logs are deleted past this
    late_after_s: float = 60.0  # a timer fired this long after its time (a suspend) is said to be late
    # The longest a pending timer's wait goes without looking at the wall clock: the loop's clock
    # stops while the machine sleeps, so after a suspend a timer is at most this late.
    timer_recheck_s: float = 60.0
    # Values never passed to a task's environment nor kept in its output; the first is the API
    # key (given to a template that names OPENAI_API_KEY in its `env`).
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        if self.tail_lines < 1:
            raise ValueError("tail_lines must be at least 1")

    @property
    def tasks_dir(self) -> Path:
        return self.state_dir / "tasks"

    @property
    def db_path(self) -> Path:
        return self.tasks_dir / "tasks.db"

    @property
    def log_dir(self) -> Path:
        return self.tasks_dir / "logs"

    @property
    def control_path(self) -> Path:
        """The assistant's socket for `handoff tasks start` / `cancel`."""
        return self.tasks_dir / "control.sock"

    def log_path(self, task_id: int) -> Path:
        return self.log_dir / f"{task_id}.log"

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> "TaskSettings":
        """From the application's `settings.Settings` (its state_dir and its secrets)."""
        realtime = getattr(settings, "realtime", None)
        secrets = tuple(s for s in (getattr(realtime, "api_key", ""),) if s)
        return cls(state_dir=Path(settings.state_dir), **{"secrets": secrets, **overrides})


@dataclass(frozen=True)
class TaskParam:
    """A parameter a template declares; voice may fill only these."""

    name: str
    description: str = ""
    default: str | None = None  # None: voice must supply a value

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class TaskTemplate:
    """A named program the user allows voice to start."""

    name: str
    argv: tuple[str, ...]
    cwd: Path | None = None  # None: the home folder
    timeout_s: float | None = None  # None: TaskSettings.default_timeout_s
    description: str = ""
    params: tuple[TaskParam, ...] = ()
    agent: bool = False  # the template "go do this work" requests are routed to
    spoken: str = ""  # how speech names it, e.g. "the test run"; default "the <name> task"
    env: tuple[str, ...] = ()  # environment variables passed on even though they are secret

    def __post_init__(self) -> None:
        where = f"task template '{self.name}'"
        if not _TEMPLATE_NAME.match(self.name):
            raise TaskConfigError(
                f"The {where} has an unusable name: use lowercase letters, digits, dashes or underscores."
            )
        if not self.argv or not all(isinstance(a, str) for a in self.argv) or not self.argv[0]:
            raise TaskConfigError(f"The {where} needs argv: a non-empty list of strings, the program first.")
        if any(m.group(1) for m in _PLACEHOLDER.finditer(self.argv[0])):
            raise TaskConfigError(f"The {where} cannot take its program name from a parameter.")
        declared = {p.name for p in self.params}
        for name in sorted(declared & RESERVED_PARAM_NAMES):
            raise TaskConfigError(
                f"The {where} cannot have a parameter called '{name}': "
                "the start_task tool uses that word for itself, so pick another."
            )
        used = {m.group(1) for a in self.argv for m in _PLACEHOLDER.finditer(a) if m.group(1)}
        for name in sorted(used - declared):
            raise TaskConfigError(
                f"The {where} uses {{{name}}} in argv but declares no parameter '{name}'; "
                f"declare it under params, or write {{{{{name}}}}} for literal braces."
            )
        for name in sorted(declared - used):
            raise TaskConfigError(f"The {where} declares parameter '{name}' but argv never uses {{{name}}}.")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise TaskConfigError(f"The {where} has timeout_s {self.timeout_s}; it must be more than zero.")

    @property
    def spoken_name(self) -> str:
        return self.spoken or f"the {re.sub(r'[_-]+', ' ', self.name)} task"

    def fill(self, values: Mapping[str, object]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """(argv with the parameters substituted, the parameter values used); ParameterError if
        a parameter is undeclared, missing, or has an unusable value."""
        declared = {p.name: p for p in self.params}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            takes = f"It takes: {', '.join(declared)}." if declared else "It takes no parameters."
            raise ParameterError(f"{sentence_start(self.spoken_name)} has no parameter '{unknown[0]}'. {takes}")
        filled: dict[str, str] = {}
        for param in self.params:
            raw = values.get(param.name, param.default)
            if raw is None or (isinstance(raw, str) and not raw.strip() and param.default is None):
                hint = f": {param.description}" if param.description else ""
                raise ParameterError(f"{sentence_start(self.spoken_name)} needs a value for {param.name}{hint}.")
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                raise ParameterError(f"The value for {param.name} must be text.")
            filled[param.name] = check_text(str(raw), f"The value for {param.name}")
        argv = []
        for element in self.argv:
            value = _PLACEHOLDER.sub(lambda m: _substitute(m, filled), element)
            if value.startswith("-") and not element.startswith("-"):
                # The dash came from a value: the program would read the argument as an option
                # (`{since}..HEAD` with since="--output=x"). Templates put `--` before such arguments.
                first = _PLACEHOLDER.search(element)
                name = first.group(1) if first and first.group(1) else "a parameter"
                raise ParameterError(f"The value for {name} cannot start with a dash.")
            argv.append(value)
        return tuple(argv), tuple(filled.items())


def check_text(value: str, what: str, max_chars: int = MAX_PARAM_CHARS) -> str:
    """`value` if it can be passed to a program, a path or the database; otherwise a
    ParameterError saying why ("The value for prompt ..."). Models can send any JSON string,
    including lone surrogates, which no argv, file name or UTF-8 column can hold."""
    if len(value) > max_chars:
        raise ParameterError(f"{what} is too long: at most {max_chars} characters.")
    if "\x00" in value:
        raise ParameterError(f"{what} contains a null character, which no program accepts.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ParameterError(f"{what} contains a broken character that cannot be passed on; please say it again.") from None
    return value


def _substitute(match: re.Match[str], values: Mapping[str, str]) -> str:
    if match.group(1):
        return values[match.group(1)]
    return match.group(0)[0]  # "{{" -> "{", "}}" -> "}"


@dataclass(frozen=True)
class TaskConfig:
    """The user's task templates and whether voice may run shell commands."""

    templates: tuple[TaskTemplate, ...] = ()
    allow_shell: bool = False
    shell_cwd: Path | None = None  # None: the home folder
    shell_timeout_s: float | None = None  # None: TaskSettings.default_timeout_s
    source: Path | None = None  # the file it came from, named in error messages

    def __post_init__(self) -> None:
        names = [t.name for t in self.templates]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise TaskConfigError(f"Two task templates are called '{duplicates[0]}'{self._in_file()}.")
        agents = [t.name for t in self.templates if t.agent]
        if len(agents) > 1:
            raise TaskConfigError(
                f"Only one task template can be the agent{self._in_file()}; "
                f"{' and '.join(agents)} both set agent = true."
            )

    @property
    def agent_template(self) -> TaskTemplate | None:
        return next((t for t in self.templates if t.agent), None)

    def template(self, name: str) -> TaskTemplate:
        """The template called `name` (case, dashes, a leading "the" and a trailing "task" do not
        matter; a unique partial name is accepted)."""
        wanted = match_key(name)
        exact = [t for t in self.templates if wanted in (match_key(t.name), match_key(t.spoken_name))]
        partial = [t for t in self.templates if wanted and wanted in match_key(t.name)]
        for found in (exact, partial):
            if len(found) == 1:
                return found[0]
        if len(partial) > 1:
            raise UnknownTemplate(f"'{name}' could be {or_list([t.name for t in partial])}; which one?")
        if not self.templates:
            where = f" Add templates to {self.source}." if self.source else ""
            raise UnknownTemplate(f"No task templates are set up.{where}")
        names = and_list([t.name for t in self.templates])
        raise UnknownTemplate(f"There is no task template called '{name}'. The templates are: {names}.")

    def _in_file(self) -> str:
        return f" in {self.source}" if self.source else ""


def load_task_config(path: Path | None) -> TaskConfig:
    """Read the templates file; a missing file means no templates (and no shell)."""
    if path is None or not Path(path).exists():
        return TaskConfig(source=path)
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskConfigError(f"The task templates file {path} is not valid TOML: {exc}.") from exc
    except OSError as exc:
        raise TaskConfigError(f"Cannot read the task templates file {path}: {exc.strerror}.") from exc
    return parse_task_config(data, base_dir=path.parent, source=path)


def parse_task_config(data: Mapping[str, Any], base_dir: Path, source: Path | None = None) -> TaskConfig:
    """Build a TaskConfig from parsed TOML; relative folders are relative to `base_dir`."""
    where = f" in {source}" if source else ""
    known_top = {"allow_shell", "shell_cwd", "shell_timeout_s", "tasks"}
    for key in data:
        if key not in known_top:
            raise TaskConfigError(f"Unknown setting '{key}'{where}; expected one of: {', '.join(sorted(known_top))}.")
    allow_shell = data.get("allow_shell", False)
    if not isinstance(allow_shell, bool):
        raise TaskConfigError(f"allow_shell{where} must be true or false.")
    tasks = data.get("tasks", {})
    if not isinstance(tasks, dict):
        raise TaskConfigError(f"'tasks'{where} must be a table of templates, like [tasks.backup].")
    templates = tuple(_parse_template(name, body, base_dir, where) for name, body in tasks.items())
    return TaskConfig(
        templates=templates,
        allow_shell=allow_shell,
        shell_cwd=_folder(data.get("shell_cwd"), base_dir, f"shell_cwd{where}"),
        shell_timeout_s=_timeout(data.get("shell_timeout_s"), f"shell_timeout_s{where}"),
        source=source,
    )


_TEMPLATE_KEYS = {"argv", "cwd", "timeout_s", "description", "params", "agent", "spoken", "env"}


def _parse_template(name: str, body: Any, base_dir: Path, where: str) -> TaskTemplate:
    label = f"[tasks.{name}]{where}"
    if not isinstance(body, dict):
        raise TaskConfigError(f"{label} must be a table.")
    for key in body:
        if key not in _TEMPLATE_KEYS:
            raise TaskConfigError(f"{label} has an unknown key '{key}'; expected: {', '.join(sorted(_TEMPLATE_KEYS))}.")
    argv = body.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise TaskConfigError(f"{label} needs argv: a non-empty list of strings, the program first.")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise TaskConfigError(f"{label}: params must be a table, like params = {{ prompt = \"what to do\" }}.")
    for key in ("description", "spoken"):
        if not isinstance(body.get(key, ""), str):
            raise TaskConfigError(f"{label}: {key} must be text.")
    if not isinstance(body.get("agent", False), bool):
        raise TaskConfigError(f"{label}: agent must be true or false.")
    env = body.get("env", [])
    if not isinstance(env, list) or not all(isinstance(n, str) and n and "=" not in n for n in env):
        raise TaskConfigError(f"{label}: env must be a list of environment variable names, like env = [\"GITHUB_TOKEN\"].")
    try:
        return TaskTemplate(
            name=name,
            # "~" in the template's own text means the home folder; parameter values are never expanded.
            argv=tuple(os.path.expanduser(a) if a.startswith("~") else a for a in argv),  # keeps a trailing "/"
            cwd=_folder(body.get("cwd"), base_dir, f"{label}: cwd"),
            timeout_s=_timeout(body.get("timeout_s"), f"{label}: timeout_s"),
            description=body.get("description", ""),
            params=tuple(_parse_param(p, spec, label) for p, spec in params.items()),
            agent=body.get("agent", False),
            spoken=body.get("spoken", ""),
            env=tuple(env),
        )
    except TaskConfigError as exc:
        raise TaskConfigError(f"{exc}{'' if not where else ' (' + where.strip() + ')'}") from None


def _parse_param(name: str, spec: Any, label: str) -> TaskParam:
    if isinstance(spec, str):
        return TaskParam(name=name, description=spec)
    if isinstance(spec, dict) and set(spec) <= {"description", "default"}:
        default = spec.get("default")
        if default is not None and not isinstance(default, str):
            raise TaskConfigError(f"{label}: the default for parameter '{name}' must be text.")
        return TaskParam(name=name, description=str(spec.get("description", "")), default=default)
    raise TaskConfigError(
        f"{label}: parameter '{name}' must be a description, or a table with description and default."
    )


def _folder(value: Any, base_dir: Path, label: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise TaskConfigError(f"{label} must be a folder path.")
    folder = Path(value).expanduser()
    return folder if folder.is_absolute() else (base_dir / folder)


def _timeout(value: Any, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskConfigError(f"{label} must be a number of seconds above zero.")
    return float(value)
