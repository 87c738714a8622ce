"""The `handoff` command: a thin dispatcher. Each subcommand's options and behaviour live with
the module that owns them (`add_arguments(parser)` / `run(args) -> exit code`)."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Sequence

# subcommand -> (module owning it, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "auto": ("commands.run", "the live assistant when OPENAI_API_KEY is set, else the offline demo"),
    "run": ("commands.run", "the live assistant: microphone, speaker, OpenAI (key required)"),
    "demo": ("commands.demo", "offline demo against the built-in simulator; no key, no sound card needed"),
    "sim": ("realtime_sim.command", "serve the Realtime + Responses simulator on 127.0.0.1"),
    "devices": ("commands.devices", "list audio input and output devices"),
    "tasks": ("tasks.command", "list background tasks, show one's output, start or cancel one"),
    "say": ("commands.say", "read a text aloud through the narrator, to try a voice, a speaker or a volume"),
    "tools": ("commands.tools", "every tool the assistant can call, where it comes from and whether it needs a spoken yes"),
    "check": ("commands.checks", "check settings, voice, models, folders and task templates, then exit"),
    "service": ("commands.service", "install the systemd user unit that runs handoff as a service"),
    "status": ("commands.status", "how the running assistant is doing (exit 0 running, 1 unwell, 2 no state folder there, 3 not running, 4 unknown)"),
    "history": ("commands.status", "what the assistant was asked and what it said"),
    "wake-test": ("commands.wake_test", "say the wake phrase a few times: does the wake the assistant runs hear you"),
    "web-url": ("commands.web_url", "the address of the running assistant's page (with its token, when it needs one)"),
    "satellite": ("commands.satellite", "be a satellite (mic, speaker, wake word) for a handoff hub on another machine"),
    "rooms": ("commands.pairing", "pair this hub with a room's satellite: handoff rooms pair ROOM CODE"),
}

EXIT_USAGE = 2


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Every subcommand is listed, but only the chosen one's module is imported to add its
    options (`argv` None: all of them): `handoff status` must not load the audio and network
    libraries the live assistant needs."""
    chosen = None if argv is None else _chosen(argv)
    parser = argparse.ArgumentParser(prog="handoff", description="A wake-word voice assistant.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        sub_parser.set_defaults(_module=module_name, _parser=sub_parser)
        if argv is not None and name != chosen:
            continue
        module = importlib.import_module(module_name)
        add = getattr(module, f"add_{name}_arguments", None) or getattr(module, "add_arguments")
        add(sub_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # Ctrl-C at any moment, even while the modules load
        return 130
    except BrokenPipeError:
        # `handoff status | head -1`: the reader has gone, so the rest is not wanted. Point stdout
        # at /dev/null so the flush at exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: list[str]) -> int:
    from config.settings import SettingsError

    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand's parser: its usage, not the top-level one (`run --bogus`)
        (args._parser if args.command else parser).error(f"unrecognized arguments: {' '.join(unknown)}")
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


if __name__ == "__main__":
    sys.exit(main())
