"""Settings: one frozen object, built once from CLI flags, then environment, then `.env`, then defaults.

Everything that has a timeout, a path or a model name lives here and is injected, so tests
can build a `Settings` with millisecond timeouts and a temporary workspace.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from dotenv import dotenv_values

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
    "WAKE_PHRASE": "computer",
    "WAKE_ALIASES": "",
    "WORKSPACE_ROOT": "",
    "AUDIO_INPUT_DEVICE": "",
    "AUDIO_OUTPUT_DEVICE": "",
    "HANDOFF_STATE_DIR": "",
    "HANDOFF_TASKS_CONFIG": "",
    "LOG_LEVEL": "INFO",
    "NARRATOR_WARM": "true",
    "NARRATOR_WARM_MAX_AGE_S": "3000",
}


class SettingsError(Exception):
    """A setting is missing or invalid; the message says which and where to set it."""


class NoiseReduction(enum.Enum):
    """The listener's input noise reduction (the GA session's `audio.input.noise_reduction`)."""

    FAR_FIELD = "far_field"  # a microphone across the room (laptop, desk, conference)
    NEAR_FIELD = "near_field"  # a headset or a close-talking microphone
    OFF = "off"


@dataclass(frozen=True)
class RealtimeSettings:
    """How to reach the OpenAI side (or the simulator)."""

    api_key: str = field(default="", repr=False)  # never printed: repr hides it
    base_url: str | None = None  # e.g. http://127.0.0.1:8765/v1 for the simulator; None = OpenAI
    realtime_model: str = "gpt-realtime"
    transcribe_model: str = "gpt-4o-mini-transcribe"
    transcribe_language: str | None = "en"  # ISO-639-1 hint for the transcriber; None = detect
    noise_reduction: NoiseReduction = NoiseReduction.FAR_FIELD
    reader_voice: str = "marin"
    connect_timeout_s: float = 10.0  # a handshake slower than this counts as a failed attempt


@dataclass(frozen=True)
class ListenerSettings:
    """The always-on listener and its wake gate."""

    wake_phrase: str = "computer"
    wake_aliases: tuple[str, ...] = ()  # extra spellings that also wake it, e.g. ("komputer",)
    wake_window_s: float = 8.0  # after a wake-only utterance, the next one within this is the command
    vad_silence_ms: int = 500  # server VAD: silence that ends an utterance
    recycle_after_s: float = 55 * 60.0  # recycle the session at a quiet moment before the 60-minute cap
    route_timeout_s: float = 30.0  # a routed command with no response by then gets an apology and a fresh session
    pre_connect_buffer_s: float = 10.0  # mic audio kept while the listener reconnects (bounded)


@dataclass(frozen=True)
class NarratorSettings:
    """The narrator: a fresh session per script."""

    min_similarity: float = 0.8  # a read below this (after normalising both sides) is logged and counted as weak, never re-read
    echo_margin_s: float = 0.3  # mic stays muted this long after playback ends, so the tail is not heard
    response_timeout_s: float = 60.0  # a narration that produces nothing for this long is abandoned
    max_script_chars: int = 1200  # longer scripts are cut at a sentence boundary
    # Keep one fresh session connected and configured ahead of need, so a narration costs one
    # response.create instead of a connect and a session.update (two round trips) first.
    warm: bool = True
    warm_max_age_s: float = 50 * 60.0  # the spare is replaced before the server's 60-minute cap


@dataclass(frozen=True)
class EchoSettings:
    """The listener's echo gate (`audio_io.echo.EchoSuppressor`); defaults suit a desk speaker
    and microphone. Tuning, not user settings: no environment keys."""

    max_delay_ms: int = 150  # the longest speaker -> mic delay expected (device buffers + air)
    unlearnt_gain_db: float = 0.0  # echo level assumed (relative to what was played) until learnt
    margin_db: float = 6.0  # a slot is speech when it beats the expected echo by this much
    decay_db_per_s: float = 300.0  # the room's reverberation after the reference stops (RT60 0.2 s)
    floor_rms: float = 25.0  # expected echo below this (about -62 dBFS) suppresses nothing
    loud_rms: float = 300.0  # reference slots at least this loud teach the echo path


@dataclass(frozen=True)
class BrainSettings:
    """The text model behind `ask_brain`."""

    model: str = "gpt-5.2"
    timeout_s: float = 20.0  # one request
    retry_budget_s: float = 45.0  # all attempts together
    max_attempts: int = 4
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 8.0


@dataclass(frozen=True)
class ReconnectSettings:
    """Backoff for failed handshakes; drops and session expiry reconnect at once."""

    initial_s: float = 0.5
    max_s: float = 30.0
    jitter_s: float = 0.5
    healthy_after_s: float = 30.0  # a session that lived this long resets the backoff; a shorter one that dropped backs off
    announce_after_failures: int = 3  # say "I can't reach OpenAI" after this many failed attempts in a row


@dataclass(frozen=True)
class AudioSettings:
    """Audio devices; all audio is pcm16 mono 24 kHz at the interface."""

    input_device: str | None = None  # index or name substring; None = system default
    output_device: str | None = None
    input_wav: Path | None = None  # drive the microphone from a WAV file instead
    output_wav: Path | None = None  # write what would be played to a WAV file instead
    realtime_wav_input: bool = True  # pace a WAV microphone like a real one
    chunk_ms: int = 20


@dataclass(frozen=True)
class Settings:
    realtime: RealtimeSettings = field(default_factory=RealtimeSettings)
    listener: ListenerSettings = field(default_factory=ListenerSettings)
    narrator: NarratorSettings = field(default_factory=NarratorSettings)
    echo: EchoSettings = field(default_factory=EchoSettings)
    brain: BrainSettings = field(default_factory=BrainSettings)
    reconnect: ReconnectSettings = field(default_factory=ReconnectSettings)
    audio: AudioSettings = field(default_factory=AudioSettings)
    workspace_root: Path = field(default_factory=Path.cwd)  # file tools never leave this folder
    state_dir: Path = field(default_factory=lambda: Path.home() / ".local" / "state" / "handoff")
    tasks_config: Path | None = None  # TOML file of task templates
    log_level: str = "INFO"

    def replace(self, **changes: object) -> "Settings":
        return dataclasses.replace(self, **changes)


def resolve_env(
    cli: Mapping[str, str | None] | None = None,
    environ: Mapping[str, str] | None = None,
    dotenv_path: Path | None = Path(".env"),
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


def build_settings(values: Mapping[str, str]) -> Settings:
    """Turn resolved key/value pairs into the frozen settings object."""
    state_dir = Path(values["HANDOFF_STATE_DIR"]).expanduser() if values.get("HANDOFF_STATE_DIR") else Settings().state_dir
    workspace = Path(values["WORKSPACE_ROOT"]).expanduser() if values.get("WORKSPACE_ROOT") else Path.cwd()
    if not workspace.is_dir():
        raise SettingsError(f"WORKSPACE_ROOT={workspace} is not a folder; set it in .env or the environment.")
    aliases = tuple(a.strip() for a in values.get("WAKE_ALIASES", "").split(",") if a.strip())
    wake_phrase = values.get("WAKE_PHRASE", "").strip()
    if not wake_phrase:
        raise SettingsError("WAKE_PHRASE is empty; set it in .env or the environment (default: computer).")
    tasks_config = values.get("HANDOFF_TASKS_CONFIG") or ""
    noise = values.get("NOISE_REDUCTION", "far_field").strip().lower()
    try:
        noise_reduction = NoiseReduction(noise)
    except ValueError:
        choices = ", ".join(n.value for n in NoiseReduction)
        raise SettingsError(f"NOISE_REDUCTION={noise} is not one of {choices}; set it in .env or the environment.") from None
    narrator_warm = _flag(values, "NARRATOR_WARM")
    warm_max_age_s = _positive_seconds(values, "NARRATOR_WARM_MAX_AGE_S")
    return Settings(
        realtime=RealtimeSettings(
            api_key=values.get("OPENAI_API_KEY", ""),
            base_url=values.get("OPENAI_BASE_URL") or None,
            realtime_model=values["REALTIME_MODEL"],
            transcribe_model=values["TRANSCRIBE_MODEL"],
            transcribe_language=values.get("TRANSCRIBE_LANGUAGE", "").strip() or None,
            noise_reduction=noise_reduction,
            reader_voice=values["READER_VOICE"],
        ),
        listener=ListenerSettings(wake_phrase=wake_phrase, wake_aliases=aliases),
        narrator=NarratorSettings(warm=narrator_warm, warm_max_age_s=warm_max_age_s),
        brain=BrainSettings(model=values["BRAIN_MODEL"]),
        audio=AudioSettings(
            input_device=values.get("AUDIO_INPUT_DEVICE") or None,
            output_device=values.get("AUDIO_OUTPUT_DEVICE") or None,
        ),
        workspace_root=workspace.resolve(),
        state_dir=state_dir,
        tasks_config=Path(tasks_config).expanduser() if tasks_config else state_dir / "tasks.toml",
        log_level=values.get("LOG_LEVEL", "INFO").upper(),
    )


def _flag(values: Mapping[str, str], key: str) -> bool:
    text = values.get(key, ENV_DEFAULTS[key]).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise SettingsError(f"{key}={text} is neither true nor false; set it in .env or the environment.")


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
    dotenv_path: Path | None = Path(".env"),
) -> Settings:
    return build_settings(resolve_env(cli, environ, dotenv_path))


def require_api_key(settings: Settings) -> None:
    """Live mode needs a key; say which one and where it goes (no traceback: the CLI exits 2)."""
    if not settings.realtime.api_key:
        raise SettingsError(
            "OPENAI_API_KEY is not set: put OPENAI_API_KEY=sk-... in .env (see .env.example) "
            "or export it, or run `handoff demo` for the offline demo."
        )
