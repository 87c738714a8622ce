"""The environment's side of the settings: every key `.env` or the environment may set, with its
default (the one table of defaults: `config.schema`'s dataclasses take theirs from it), and how
the sources are merged: CLI flags, then environment, then `.env`, then defaults.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Mapping

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from config.rooms import ENV_DEFAULTS as ROOM_DEFAULTS
from config.wake_phrases import DEFAULT_PHRASE

# Every key `.env` / the environment may set, with its default ("" = unset).
ENV_DEFAULTS: dict[str, str] = {
    "OPENAI_API_KEY": "",
    "OPENAI_BASE_URL": "",
    "REALTIME_MODEL": "gpt-realtime",
    "TRANSCRIBE_MODEL": "gpt-4o-mini-transcribe",
    "TRANSCRIBE_LANGUAGE": "en",
    "NOISE_REDUCTION": "far_field",
    "READER_VOICE": "marin",
    "BRAIN_MODEL": "gpt-5.2",
    "BRAIN_WEB_SEARCH": "true",  # the brain may search the web (the Responses API's web_search tool)
    "MCP_CONFIG": "",  # "" = <state dir>/mcp.json: MCP servers whose tools the assistant may call (hands/)
    "MCP_ROUTING": "auto",  # auto | direct | brain: how commands reach MCP tools (hands/routing.py)
    "MCP_ANSWER_WAIT_S": "3",  # a slower MCP call goes on in the background; its answer comes as a notice
    "WAKE_PHRASE": DEFAULT_PHRASE,  # a phrase with a shipped model (config/wake_phrases.py) is heard on the machine
    "WAKE_ALIASES": "",
    "STOP_WORDS": "",  # "" = ListenerSettings' default (stop, cancel)
    "WORKSPACE_ROOT": "",
    "AUDIO_INPUT_DEVICE": "",
    "AUDIO_OUTPUT_DEVICE": "",
    "HANDOFF_STATE_DIR": "",
    "HANDOFF_TASKS_CONFIG": "",
    "LOG_LEVEL": "INFO",
    "FOLLOW_UP_WINDOW_S": "",  # "" = ConversationSettings' default
    "FOLLOW_UP": "invited",  # invited | always | never: when an answer takes a follow-up without the wake phrase
    "END_OF_TURN": "device",  # device | server: who ends a turn the device heard the wake in
    "TURN_END_MS": "460",  # END_OF_TURN=device: silence that ends it
    "PROVISIONAL_MS": "120",  # END_OF_TURN=device: the earliest pause that sends the route provisionally (0: never)
    "PROVISIONAL_TOKEN_BUDGET": "15",  # % more routing tokens the withdrawn provisional routes may cost
    "STOP_WHILE_TALKING": "true",
    "NARRATOR_VOLUME": "100",
    "WAKE_SOUND_WAV": "",
    "WORKING_SOUND_WAV": "",
    "DONE_SOUND_WAV": "",
    "HANDOFF_UPLOAD_MODE": "",  # "" = wake_word when WAKE_PHRASE has a model, else speech_only
    "WAKE_CUTOFF": "",  # "" = the model's own; lower hears more (and wakes more falsely): `handoff wake-test`
    "WAKE_REFRACTORY_S": "",  # "" = UploadSettings' default
    "WAKE_STRICT": "false",  # true: every wake needs both models (issue 34: half the near misses)
    "WAKE_VERIFY": "true",  # a third opinion on each wake (issue 34: a quarter of the near misses, more commands heard); false: the two models alone
    "HANDOFF_PREROLL_MS": "",
    "HANDOFF_HANGOVER_MS": "",
    "DAILY_BUDGET_USD": "",  # "" = no budget
    # Prices ("" = the published default in PriceTable); one key per PriceTable field.
    "PRICE_REALTIME_TEXT_IN": "",
    "PRICE_REALTIME_TEXT_OUT": "",
    "PRICE_REALTIME_AUDIO_IN": "",
    "PRICE_REALTIME_AUDIO_OUT": "",
    "PRICE_REALTIME_CACHED_IN": "",
    "PRICE_BRAIN_TEXT_IN": "",
    "PRICE_BRAIN_TEXT_OUT": "",
    "PRICE_TRANSCRIPTION_PER_MINUTE": "",
    "LOG_FILE": "",
    "LOG_MAX_BYTES": "10000000",
    "LOG_BACKUPS": "5",
    "LOG_OVERHEARD": "false",
    "HANDOFF_HISTORY_ROWS": "5000",
    "NARRATOR_WARM": "true",
    "NARRATOR_WARM_MAX_AGE_S": "3000",
    "WEB_PORT": "8788",
    "WEB_HOST": "",
    "WEB_METRICS_TOKEN": "false",
    **ROOM_DEFAULTS,  # SATELLITES and the rest of config.rooms
}


# The settings file, read from the folder handoff starts in. It holds the API key: file tools
# never read it (tools.workspace) and `handoff check` refuses a workspace that holds it.
SETTINGS_FILE = Path(".env")


def resolve_env(
    cli: Mapping[str, str | None] | None = None,
    environ: Mapping[str, str] | None = None,
    dotenv_path: Path | None = SETTINGS_FILE,
) -> dict[str, str]:
    """Merge the sources, first one that sets a key wins: CLI flags, environment, `.env`, defaults."""
    cli = {k: v for k, v in (cli or {}).items() if v not in (None, "")}
    environ = os.environ if environ is None else environ
    dotenv: dict[str, str] = {}
    if dotenv_path is not None and dotenv_path.is_file():
        dotenv = {k: v for k, v in dotenv_values(dotenv_path).items() if v is not None}
    merged: dict[str, str] = {}
    for key, default in ENV_DEFAULTS.items():
        for source in (cli, environ, dotenv):
            value = source.get(key)
            if value not in (None, ""):
                merged[key] = str(value)
                break
        else:
            merged[key] = default
    return merged


def dotenv_problems(path: Path | None) -> list[str]:
    """Lines of `.env` that set nothing (python-dotenv skips them with a warning): a typo there
    would otherwise leave a setting at its default without a word."""
    if path is None or not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{path} cannot be read ({exc}); fix or remove it."]
    return [
        f"line {binding.original.line} of {path} is not a setting; write it as NAME=value, or start it with # to keep it as a comment."
        for binding in parse_stream(io.StringIO(text))
        if binding.error or (binding.key is not None and binding.value is None)
    ]
