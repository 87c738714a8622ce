"""`handoff service install [--print]`: the systemd user unit that runs `handoff run` as a
service (docs/USING.md, "Running as a service")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from config.settings import ENV_DEFAULTS
from service.systemd import UnitSettings, render_unit, unit_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="service_action", metavar="ACTION")
    install = actions.add_parser("install", help="write the systemd user unit and say how to start it",
                                 description="Write ~/.config/systemd/user/handoff.service for `handoff run`.")  # fmt: skip
    install.add_argument("--print", dest="print_only", action="store_true", help="only print the unit; write nothing")
    install.add_argument("--working-directory", type=Path, default=None,
                         help="where the service runs and reads .env from (default: the current folder)")  # fmt: skip


def handoff_executable() -> tuple[str, ...]:
    """The handoff next to this Python (the venv's), absolute; else this Python running the CLI."""
    script = Path(sys.executable).absolute().parent / "handoff"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    return (str(Path(sys.executable).absolute()), "-m", "commands.cli")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "service_action", None) != "install":
        print("handoff service: say what to do: `handoff service install` (or `install --print`).", file=sys.stderr)
        return 2
    folder = (args.working_directory or Path.cwd()).expanduser().absolute()
    if not folder.is_dir():
        print(f"handoff service: --working-directory {folder} is not a folder; give the folder with your .env.", file=sys.stderr)
        return 2
    unit = render_unit(UnitSettings(exec_start=(*handoff_executable(), "run"), working_directory=folder))
    if args.print_only:
        print(unit, end="")
        return 0
    path = unit_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        path.write_text(unit)
    except OSError as exc:
        print(f"handoff service: cannot write {path}: {exc.strerror or exc}; check that folder's permissions.", file=sys.stderr)
        return 2
    print(f"{'Replaced' if existed else 'Wrote'} {path} (runs `handoff run` in {folder}).")
    if not (folder / ".env").is_file():
        print(f"Note: {folder / '.env'} does not exist yet; the service reads its settings (OPENAI_API_KEY) from there.")
    elif any(os.environ.get(key) for key in ENV_DEFAULTS if key.startswith("OPENAI_")):
        print("Note: OPENAI_* settings exported in this shell are not seen by the service; keep them in .env.")
    print("Next, run `handoff check` in that folder, then:")
    print("  systemctl --user daemon-reload")
    print("  systemctl --user enable --now handoff")
    print("  loginctl enable-linger \"$USER\"     # keep it running while you are logged out")
    print("  journalctl --user -u handoff -f    # its log; `handoff status` for how it is doing")
    return 0
