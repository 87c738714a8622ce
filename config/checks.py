"""The settings' checks: resolved key/value pairs become the frozen `Settings`, and every value
that cannot be used is said at once, each in one sentence saying what to change.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Callable, Mapping, TypeVar
from urllib.parse import urlsplit

from config.environment import ENV_DEFAULTS, SETTINGS_FILE, dotenv_problems, resolve_env
from config.rooms import room_settings
from config.schema import (
    BrainSettings, ConversationSettings, CostSettings, EndOfTurn, FollowUp, ListenerSettings, LogLevel,
    LogSettings, NarratorSettings, NoiseReduction, PriceTable, RealtimeSettings, ServiceSettings, Settings,
    SettingsError, StopSettings, UploadMode, UploadSettings, WebSettings, AudioSettings, default_upload_mode,
    default_workspace,
)
from config.wake_phrases import DEFAULT_PHRASE

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")


def build_settings(values: Mapping[str, str]) -> Settings:
    """Turn resolved key/value pairs into the frozen settings object. Every value that cannot be
    used is reported at once (SettingsError.problems), each with what to change."""
    problems: list[str] = []
    where = "set it in .env or the environment"
    state_dir = Path(values["HANDOFF_STATE_DIR"]).expanduser() if values.get("HANDOFF_STATE_DIR") else Settings().state_dir
    workspace = Path(values["WORKSPACE_ROOT"]).expanduser() if values.get("WORKSPACE_ROOT") else default_workspace()
    if values.get("WORKSPACE_ROOT") and not workspace.is_dir():  # the default is created at start
        problems.append(f"WORKSPACE_ROOT={workspace} is not a folder; {where}.")
    aliases = tuple(a.strip() for a in values.get("WAKE_ALIASES", "").split(",") if a.strip())
    stop_words = tuple(w.strip().lower() for w in values.get("STOP_WORDS", "").split(",") if w.strip()) \
        or ListenerSettings.stop_words
    wake_phrase = values.get("WAKE_PHRASE", "").strip()
    if not wake_phrase:
        problems.append(f"WAKE_PHRASE is empty; {where} (default: {DEFAULT_PHRASE}).")
    tasks_config = values.get("HANDOFF_TASKS_CONFIG") or ""
    mcp_config = values.get("MCP_CONFIG", "").strip()
    brain_web_search = _flag(values, "BRAIN_WEB_SEARCH", problems)
    mcp_routing = values.get("MCP_ROUTING", "auto").strip().lower() or "auto"
    if mcp_routing not in ("auto", "direct", "brain"):
        problems.append(f"MCP_ROUTING={mcp_routing} is not auto, direct or brain; {where}.")
    noise_reduction = _choice(values, "NOISE_REDUCTION", NoiseReduction, str.lower, problems)
    log_level = _choice(values, "LOG_LEVEL", LogLevel, str.upper, problems, flag="--log-level")
    api_key = values.get("OPENAI_API_KEY", "")
    problems += key_problems(api_key)
    base_url = values.get("OPENAI_BASE_URL", "").strip()
    problems += base_url_problems(base_url)
    log_file = values.get("LOG_FILE", "").strip()
    log_settings = LogSettings(
        file=Path(log_file).expanduser() if log_file else None,
        max_bytes=_number(values, "LOG_MAX_BYTES", 1000, problems),
        backups=_number(values, "LOG_BACKUPS", 0, problems),
        overheard=_flag(values, "LOG_OVERHEARD", problems),
    )
    history_rows = _number(values, "HANDOFF_HISTORY_ROWS", 1, problems)
    narrator_warm = _flag(values, "NARRATOR_WARM", problems)
    follow_up_mode = _choice(values, "FOLLOW_UP", FollowUp, str.lower, problems)
    end_of_turn = _choice(values, "END_OF_TURN", EndOfTurn, str.lower, problems)
    turn_end_ms = _number(values, "TURN_END_MS", 100, problems)
    provisional_ms = _number(values, "PROVISIONAL_MS", 0, problems)
    provisional_budget = _number(values, "PROVISIONAL_TOKEN_BUDGET", 0, problems)
    stop = _stop_settings(values, problems)
    # Each of these raises on its first problem: collected, so every problem is said at once.
    warm_max_age_s = _collected(problems, _positive_seconds, values, "NARRATOR_WARM_MAX_AGE_S")
    mcp_answer_wait_s = _collected(problems, _positive_seconds, values, "MCP_ANSWER_WAIT_S")
    upload = _collected(problems, _upload_settings, values, ListenerSettings().vad_silence_ms, wake_phrase)
    follow_up = _collected(problems, _seconds, values, "FOLLOW_UP_WINDOW_S", ConversationSettings.follow_up_s)
    cost = _collected(problems, _cost_settings, values)
    volume = values.get("NARRATOR_VOLUME", "100").strip().rstrip("%").strip()
    if not volume.isdigit() or int(volume) > 150:
        problems.append(f"NARRATOR_VOLUME={volume} is not a whole number from 0 to 150 (percent); set it in .env or the environment.")
    web = WebSettings(port=_number(values, "WEB_PORT", 0, problems), host=values.get("WEB_HOST", "").strip(),
                      metrics_need_token=_flag(values, "WEB_METRICS_TOKEN", problems))  # fmt: skip
    if web.port > 65535:
        problems.append(f"WEB_PORT={web.port} is not a port (0 to 65535, 0: no page); {where}.")
    rooms = room_settings(values, problems)
    if problems:
        raise SettingsError(*problems)
    assert noise_reduction is not None and log_level is not None and follow_up_mode is not None and end_of_turn is not None
    sounds = {key: Path(values[key]).expanduser() if values.get(key) else None
              for key in ("WAKE_SOUND_WAV", "WORKING_SOUND_WAV", "DONE_SOUND_WAV")}  # fmt: skip
    return Settings(
        upload=upload,
        conversation=ConversationSettings(follow_up_s=follow_up, follow_up=follow_up_mode),
        stop=stop,
        cost=cost,
        realtime=RealtimeSettings(
            api_key=api_key,
            base_url=base_url or None,
            realtime_model=values["REALTIME_MODEL"],
            transcribe_model=values["TRANSCRIBE_MODEL"],
            transcribe_language=values.get("TRANSCRIBE_LANGUAGE", "").strip() or None,
            noise_reduction=noise_reduction,
            reader_voice=values["READER_VOICE"],
        ),
        listener=ListenerSettings(wake_phrase=wake_phrase, wake_aliases=aliases, stop_words=stop_words,
                                  end_of_turn=end_of_turn, turn_end_ms=turn_end_ms, provisional_ms=provisional_ms,
                                  provisional_token_budget=provisional_budget),
        narrator=NarratorSettings(warm=narrator_warm, warm_max_age_s=warm_max_age_s),
        brain=BrainSettings(model=values["BRAIN_MODEL"], web_search=brain_web_search),
        audio=AudioSettings(
            input_device=values.get("AUDIO_INPUT_DEVICE") or None,
            output_device=values.get("AUDIO_OUTPUT_DEVICE") or None,
            volume_percent=int(volume),
            wake_sound_wav=sounds["WAKE_SOUND_WAV"],
            working_sound_wav=sounds["WORKING_SOUND_WAV"],
            done_sound_wav=sounds["DONE_SOUND_WAV"],
        ),
        workspace_root=workspace.resolve(),
        state_dir=state_dir,
        tasks_config=Path(tasks_config).expanduser() if tasks_config else state_dir / "tasks.toml",
        tasks_config_named=bool(tasks_config),
        mcp_config=Path(mcp_config).expanduser() if mcp_config else state_dir / "mcp.json",
        mcp_config_named=bool(mcp_config),
        mcp_routing=mcp_routing,
        mcp_answer_wait_s=mcp_answer_wait_s,
        log_level=log_level,
        log=log_settings,
        service=ServiceSettings(history_max_rows=history_rows),
        web=web,
        rooms=rooms,
    )


def _collected(problems: list[str], build: Callable[..., T], *args: object) -> T:
    """`build(*args)`; its SettingsError's problems go into `problems` (the value is then None,
    never used: the caller raises them all before building the settings)."""
    try:
        return build(*args)
    except SettingsError as exc:
        problems.extend(exc.problems)
        return None  # type: ignore[return-value]



def _upload_settings(values: Mapping[str, str], server_silence_ms: int, wake_phrase: str) -> UploadSettings:
    mode_value = (values.get("HANDOFF_UPLOAD_MODE") or default_upload_mode(wake_phrase).value).strip().lower()
    try:
        mode = UploadMode(mode_value)
    except ValueError:
        choices = ", ".join(m.value for m in UploadMode)
        raise SettingsError(f"HANDOFF_UPLOAD_MODE={mode_value} is not one of {choices}; set it in .env or the environment.") from None
    preroll = _whole_number(values, "HANDOFF_PREROLL_MS", UploadSettings.preroll_ms)
    hangover = _whole_number(values, "HANDOFF_HANGOVER_MS", UploadSettings.hangover_ms)
    if preroll < 300:
        raise SettingsError(f"HANDOFF_PREROLL_MS={preroll} would cut the first syllable of the wake word; use 300 or more.")
    if hangover <= server_silence_ms:
        raise SettingsError(
            f"HANDOFF_HANGOVER_MS={hangover} must be longer than the server's {server_silence_ms} ms of silence "
            "that ends a turn, or a command is never ended (or is cut at a pause); use 1000."
        )
    cutoff_raw = values.get("WAKE_CUTOFF", "").strip()
    cutoff = None
    if cutoff_raw:
        try:
            cutoff = float(cutoff_raw)
        except ValueError:
            cutoff = -1.0
        if not 0 < cutoff < 1:
            raise SettingsError(f"WAKE_CUTOFF={cutoff_raw} is not a number between 0 and 1; leave it empty for the "
                                "model's own, or run `handoff wake-test` to find yours.")
    refractory = _seconds(values, "WAKE_REFRACTORY_S", UploadSettings.wake_refractory_s)
    if not 0 <= refractory <= 10:
        raise SettingsError(f"WAKE_REFRACTORY_S={refractory:g} is not from 0 to 10 seconds; 2 to 5 is usual (default 3).")
    flag_problems: list[str] = []
    strict = _flag(values, "WAKE_STRICT", flag_problems)
    verify = _flag(values, "WAKE_VERIFY", flag_problems)
    if flag_problems:
        raise SettingsError(flag_problems[0])
    return UploadSettings(mode, preroll, hangover, cutoff, refractory, strict, verify)


def _stop_settings(values: Mapping[str, str], problems: list[str]) -> StopSettings:
    return StopSettings(enabled=_flag(values, "STOP_WHILE_TALKING", problems))


def _seconds(values: Mapping[str, str], key: str, default: float) -> float:
    raw = values.get(key, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise SettingsError(f"{key}={raw} is not a number of seconds from 0 to 3600; set it in .env or the environment.")
    return seconds


def _whole_number(values: Mapping[str, str], key: str, default: int) -> int:
    raw = values.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{key}={raw} is not a whole number of milliseconds; set it in .env or the environment.") from None


def _cost_settings(values: Mapping[str, str]) -> CostSettings:
    prices = {
        f.name: _dollars(values, f"PRICE_{f.name.upper()}", "a price in US dollars (e.g. 0.4 or 32)")
        for f in dataclasses.fields(PriceTable)
    }
    budget = _dollars(values, "DAILY_BUDGET_USD", "an amount in US dollars (e.g. 2.50)")
    if budget == 0:
        raise SettingsError("DAILY_BUDGET_USD=0 would stop every request; use an amount above 0, or leave it empty for no budget.")
    return CostSettings(PriceTable(**{k: v for k, v in prices.items() if v is not None}), budget)


def _dollars(values: Mapping[str, str], key: str, what: str) -> float | None:
    raw = values.get(key, "").strip().lstrip("$")
    if not raw:
        return None
    try:
        amount = float(raw)
    except ValueError:
        amount = float("nan")
    if not 0 <= amount < float("inf"):  # also refuses nan and inf
        raise SettingsError(f"{key}={raw} is not {what}; set it in .env or the environment.")
    return amount


def _number(values: Mapping[str, str], key: str, minimum: int, problems: list[str]) -> int:
    raw = values.get(key, ENV_DEFAULTS[key]).strip().replace("_", "")
    if raw.isdigit() and int(raw) >= minimum:
        return int(raw)
    problems.append(f"{key}={raw} is not a whole number of at least {minimum}; set it in .env or the environment.")
    return minimum


def _flag(values: Mapping[str, str], key: str, problems: list[str]) -> bool:
    raw = values.get(key, ENV_DEFAULTS[key]).strip().lower()
    if raw in ("true", "yes", "on", "1"):
        return True
    if raw not in ("false", "no", "off", "0"):
        problems.append(f"{key}={raw} is neither true nor false; set it in .env or the environment.")
    return False


def _choice(
    values: Mapping[str, str], key: str, kind: type[E], fold: Callable[[str], str], problems: list[str], flag: str = ""
) -> E | None:
    raw = fold(values.get(key, ENV_DEFAULTS[key]).strip())
    try:
        return kind(raw)
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        also = f"{flag} or " if flag else ""
        problems.append(f"{key}={raw} is not one of {choices}; set {also}{key} in .env or the environment.")
        return None


def key_problems(key: str) -> list[str]:
    """What is wrong with the shape of an API key (never the key itself: it is not repeated)."""
    if not key:
        return []
    if any(c.isspace() for c in key):
        return ["OPENAI_API_KEY has a space or line break in it; paste the key again, without spaces, in .env."]
    odd = next((c for c in key if not (c.isascii() and c.isprintable())), None)
    if odd is not None or any(c in "\"'`" for c in key):
        return ["OPENAI_API_KEY has a character no key has (a pasted quote?); paste the key again, "
                "without quotes, in .env."]
    return []


def base_url_problems(url: str) -> list[str]:
    """An OpenAI-compatible base URL: http(s) or ws(s), with a host."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        parts.port  # raises ValueError for a port that is not a number or out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname or any(
        c.isspace() for c in url
    ):
        return [f"OPENAI_BASE_URL={url} is not an http(s) or ws(s) URL; write it like "
                "http://127.0.0.1:8765/v1, or leave it empty for OpenAI."]
    return []




def _positive_seconds(values: Mapping[str, str], key: str) -> float:
    text = values.get(key, ENV_DEFAULTS[key]).strip()
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise SettingsError(f"{key}={text} is not a positive number of seconds; set it in .env or the environment.")
    return seconds


def load_settings(
    cli: Mapping[str, str | None] | None = None,
    environ: Mapping[str, str] | None = None,
    dotenv_path: Path | None = SETTINGS_FILE,
) -> Settings:
    unreadable = dotenv_problems(dotenv_path)
    try:
        settings = build_settings(resolve_env(cli, environ, dotenv_path))
    except SettingsError as exc:
        raise SettingsError(*unreadable, *exc.problems) from None
    if unreadable:
        raise SettingsError(*unreadable)
    return settings


def require_api_key(settings: Settings) -> None:
    """Live mode needs a key; say which one and where it goes (no traceback: the CLI exits 2)."""
    if not settings.realtime.api_key:
        raise SettingsError(
            "OPENAI_API_KEY is not set: put OPENAI_API_KEY=sk-... in .env (see .env.example) "
            "or export it, or run `./run demo` for the offline demo."
        )
