"""The systemd user unit that runs `handoff run` as a service, rendered from where handoff is
installed. `handoff service install` writes it; docs/USING.md ("Running as a service") says
why each line is there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

UNIT_NAME = "handoff.service"


@dataclass(frozen=True)
class UnitSettings:
    exec_start: tuple[str, ...]  # the venv's handoff and its arguments
    working_directory: Path  # where `.env` is: the service reads its settings from there
    watchdog_s: int = 60  # no WATCHDOG=1 for this long: systemd restarts handoff
    restart_s: int = 10
    start_limit_interval_s: int = 600  # at most start_limit_burst starts in this window, then it stays down
    start_limit_burst: int = 5
    stop_timeout_s: int = 20  # handoff stops within 10 s; after this systemd kills what is left
    start_timeout_s: int = 300  # READY=1 comes with the first listener session: network and OpenAI must answer
    nofile: int = 65536  # open files: the page's connections are capped far below it (a reserve for the rest)


def unit_path(environ: dict[str, str] | None = None) -> Path:
    """~/.config/systemd/user/handoff.service (XDG_CONFIG_HOME respected)."""
    environ = dict(os.environ) if environ is None else environ
    config = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME") or Path.home()) / ".config")
    return config / "systemd" / "user" / UNIT_NAME


def render_unit(unit: UnitSettings) -> str:
    exec_start = " ".join(_quote(arg) for arg in unit.exec_start)
    return f"""\
# handoff, the voice assistant, as a systemd user service. Written by `handoff service install`.
# Settings come from {unit.working_directory}/.env (the environment of your shell is not seen).
[Unit]
Description=handoff voice assistant
StartLimitIntervalSec={unit.start_limit_interval_s}
StartLimitBurst={unit.start_limit_burst}

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec_start}
WorkingDirectory={_escape_path(unit.working_directory)}
Environment=PYTHONUNBUFFERED=1
Restart=on-failure
RestartSec={unit.restart_s}
# Exit 2 is a setting to fix (handoff says which in the journal): restarting cannot help.
RestartPreventExitStatus=2
WatchdogSec={unit.watchdog_s}
# Ready once the first listener session is up; without a network that waits, retrying, until this.
TimeoutStartSec={unit.start_timeout_s}
# SIGTERM to handoff alone: it stops its background tasks itself and records them as stopped.
KillMode=mixed
TimeoutStopSec={unit.stop_timeout_s}
# Open files: systemd's default of 1,024 ran out under a flood of half-sent requests to the page
# (EMFILE for the listener's and narrator's own connections). The page takes at most a few dozen.
LimitNOFILE={unit.nofile}

[Install]
WantedBy=default.target
"""


def _escape_path(path: Path) -> str:
    return str(path).replace("%", "%%")  # "%" starts a unit specifier


def _quote(arg: str) -> str:
    """One ExecStart word: specifiers escaped, quoted when it holds spaces or quotes."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if any(c.isspace() or c in "\"'\\;" for c in escaped):
        return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped
