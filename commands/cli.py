"""The `handoff` command: a thin dispatcher. Each subcommand's options and behaviour live with
the module that owns them (`add_arguments(parser)` / `run(args) -> exit code`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from config.settings import SettingsError

# subcommand -> (module owning it, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "auto": ("commands.run", "the live assistant when OPENAI_API_KEY is set, else the offline demo"),
    "run": ("commands.run", "the live assistant: microphone, speaker, OpenAI (key required)"),
    "demo": ("commands.demo", "offline demo against the built-in simulator; no key, no sound card needed"),
    "sim": ("realtime_sim.command", "serve the Realtime + Responses simulator on 127.0.0.1"),
    "devices": ("commands.devices", "list audio input and output devices"),
    "tasks": ("tasks.command", "list background tasks, show one's output, start or cancel one"),
    "say": ("commands.say", "read a text aloud through the narrator, to try a voice, a speaker or a volume"),
    "check": ("commands.checks", "check settings, voice, models, folders and task templates, then exit"),
    "service": ("commands.service", "install the systemd user unit that runs handoff as a service"),
    "status": ("commands.status", "how the running assistant is doing (exit 0 running, 1 unwell, 3 not running)"),
    "history": ("commands.status", "what the assistant was asked and what it said"),
    "satellite": ("commands.satellite", "be a satellite (mic, speaker, wake word) for a handoff hub on another machine"),
}

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="handoff", description="A wake-word voice assistant.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        add = getattr(module, f"add_{name}_arguments", None) or getattr(module, "add_arguments")
        add(sub_parser)
        sub_parser.set_defaults(_module=module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    module = importlib.import_module(args._module)
    runner = getattr(module, f"run_{args.command}", None) or getattr(module, "run")
    try:
        return int(runner(args) or 0)
    except SettingsError as exc:
        # One line per problem, naming the setting and what to change: no traceback for a
        # configuration mistake.
        for problem in exc.problems:
            print(f"handoff: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
