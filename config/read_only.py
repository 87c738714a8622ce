"""Settings for the commands that only read (`status`, `history`, `tasks`, `web-url`,
`wake-test`): a typo in `.env` made while the assistant runs must not blind the user to it."""

from __future__ import annotations

import dataclasses
import sys
from typing import Mapping

from config.settings import ENV_DEFAULTS, Settings, SettingsError, build_settings, load_settings, resolve_env


def readable_settings(cli: Mapping[str, str | None], command: str) -> Settings:
    """The settings for a command that only reads (`status`, `history`, `tasks`, `web-url`,
    `wake-test`): a value in `.env` or the environment that cannot be used is said in one sentence
    on stderr and read as its default, so a typo made while the assistant runs does not hide how
    it is doing. A value given as a flag is still refused."""
    try:
        return load_settings(cli)
    except SettingsError as exc:
        problems = exc.problems
    values = resolve_env(cli)
    given = {key for key, value in cli.items() if value not in (None, "")}
    bad = {key for key in ENV_DEFAULTS if any(p.startswith((f"{key}=", f"{key} ", f"{key}:")) for p in problems)}
    if bad & given:
        raise SettingsError(*problems)
    try:
        settings = build_settings({**values, **{key: ENV_DEFAULTS[key] for key in bad}})
    except SettingsError:
        raise SettingsError(*problems) from None
    if "OPENAI_API_KEY" in bad:  # a key of a bad shape is still a key: kept, to be cut out of what is shown
        settings = settings.replace(realtime=dataclasses.replace(settings.realtime, api_key=values["OPENAI_API_KEY"]))
    for problem in problems:
        print(f"handoff: {problem.rstrip('.')} (`handoff {command}` reads it as its default meanwhile; "
              "`handoff run` refuses it).", file=sys.stderr)
    return settings
