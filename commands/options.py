"""The options `handoff run`, `auto` and `check` share, and the settings they make: one module
of its own, so `check` and `run` read the command line the same way without importing each
other."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Mapping

from config.settings import Settings, SettingsError, load_settings

# CLI flag -> settings key (CLI beats environment beats .env beats defaults).
_FLAG_KEYS = {
    "base_url": "OPENAI_BASE_URL",
    "workspace": "WORKSPACE_ROOT",
    "input_device": "AUDIO_INPUT_DEVICE",
    "output_device": "AUDIO_OUTPUT_DEVICE",
    "wake_phrase": "WAKE_PHRASE",
    "log_level": "LOG_LEVEL",
    "state_dir": "HANDOFF_STATE_DIR",
}


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. the simulator's http://127.0.0.1:8765/v1")
    parser.add_argument("--workspace", help="folder the file tools may read (WORKSPACE_ROOT)")
    parser.add_argument("--wake-phrase", help="the word that addresses the assistant (WAKE_PHRASE)")
    parser.add_argument("--state-dir", help="where task records and logs live (HANDOFF_STATE_DIR)")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--input-device", help="microphone by index or name part (see `handoff devices`)")
    parser.add_argument("--output-device", help="speaker by index or name part")
    parser.add_argument("--input-wav", type=Path, help="read the microphone from this WAV file instead")
    parser.add_argument("--output-wav", type=Path, help="write what would be played to this WAV file instead")
    parser.add_argument("--fast", action="store_true", help="read --input-wav as fast as possible, not in real time")


def settings_from_args(args: argparse.Namespace) -> Settings:
    settings = flagged_settings({key: (f"--{flag.replace('_', '-')}", getattr(args, flag, None))
                                 for flag, key in _FLAG_KEYS.items()})  # fmt: skip
    input_wav, output_wav = getattr(args, "input_wav", None), getattr(args, "output_wav", None)
    if input_wav or output_wav:
        settings = settings.replace(audio=dataclasses.replace(
            settings.audio, input_wav=input_wav, output_wav=output_wav, realtime_wav_input=not getattr(args, "fast", False)
        ))
    return settings


def flagged_settings(flags: Mapping[str, tuple[str, str | None]]) -> Settings:
    """`load_settings` with `flags` (settings key -> (its flag, the value given, or None)) given on
    the command line: a value the user typed as a flag that cannot be used is blamed on the flag,
    as typed, not on the setting in `.env`."""
    try:
        return load_settings({key: value for key, (_flag, value) in flags.items()})
    except SettingsError as exc:
        raise SettingsError(*(blame_flag(problem, flags) for problem in exc.problems)) from None


def blame_flag(problem: str, flags: Mapping[str, tuple[str, str | None]]) -> str:
    """`problem` ("KEY=value is not ...; set it in .env or the environment.") said of the flag
    that gave KEY its value ("--flag Value is not ...; change --flag."), if a flag did."""
    for key, (flag, value) in flags.items():
        if value in (None, ""):
            continue
        raw = str(value)
        for shown in dict.fromkeys((raw, raw.strip(), raw.lower(), raw.strip().lower(), raw.strip().upper(),
                                    raw.strip().rstrip("%").strip())):  # as the settings normalised it  # fmt: skip
            prefix = f"{key}={shown}"
            if problem.startswith(prefix) and problem[len(prefix):len(prefix) + 1] in (" ", ";", ":"):
                rest = problem[len(prefix):]
                rest = re.sub(r"set (it|\S+ or \S+) in \.env or the environment", f"change {flag}", rest)
                return f"{flag} {raw}{rest}"
    return problem

