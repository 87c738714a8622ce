"""Settings: one frozen object, built once from CLI flags, then environment, then `.env`, then defaults.

Everything that has a timeout, a path or a model name lives here and is injected, so tests
can build a `Settings` with millisecond timeouts and a temporary workspace.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, TypeVar
from urllib.parse import urlsplit

from dotenv import dotenv_values
from dotenv.parser import parse_stream

from config.wake_phrases import DEFAULT_PHRASE, model_for

from config.rooms import ENV_DEFAULTS as ROOM_DEFAULTS, RoomSettings, room_settings

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")

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
    "PROVISIONAL_MS": "140",  # END_OF_TURN=device: the earliest pause that sends the route provisionally (0: never)
    "STOP_WHILE_TALKING": "true",
    "NARRATOR_VOLUME": "100",
    "WAKE_SOUND_WAV": "",
    "WORKING_SOUND_WAV": "",
    "DONE_SOUND_WAV": "",
    "HANDOFF_UPLOAD_MODE": "",  # "" = wake_word when WAKE_PHRASE has a model, else speech_only
    "WAKE_CUTOFF": "",  # "" = the model's own; lower hears more (and wakes more falsely): `handoff wake-test`
    "WAKE_REFRACTORY_S": "",  # "" = UploadSettings' default
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


def default_workspace() -> Path:
    """The folder file tools read when WORKSPACE_ROOT is not set: one of their own (created at
    start), never the folder handoff runs in, which holds `.env` and the key."""
    return Path.home() / "handoff-workspace"


class SettingsError(Exception):
    """Settings are missing or invalid. Each problem is one sentence saying which setting and what
    to change; `str()` is the first, `problems` has them all (`handoff check` prints every one)."""

    def __init__(self, *problems: str) -> None:
        super().__init__(problems[0] if problems else "the settings are invalid")
        self.problems: tuple[str, ...] = problems or (str(self),)


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


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


class UploadMode(enum.Enum):
    """What of the microphone leaves the machine (HANDOFF_UPLOAD_MODE)."""

    CONTINUOUS = "continuous"  # everything while not muted: the old behaviour
    SPEECH_ONLY = "speech_only"  # speech only, decided by an on-device VAD
    ON_DEVICE_WAKE = "wake_word"  # nothing until an on-device spotter hears the wake phrase


@dataclass(frozen=True)
class UploadSettings:
    mode: UploadMode = UploadMode.SPEECH_ONLY
    preroll_ms: int = 500  # sent from before the detected onset, so the wake word's first syllable is kept
    hangover_ms: int = 1000  # silence still sent after speech: longer than the server VAD's, so it ends the turn
    wake_cutoff: float | None = None  # the wake model's probability cutoff (None: the model's own)
    wake_refractory_s: float = 3.0  # after a wake, the model does not wake it again for this long


@dataclass(frozen=True)
class PriceTable:
    """What OpenAI charges, in USD per million tokens (transcription: per minute of audio).

    Defaults are OpenAI's published prices (developers.openai.com, checked 2026-11) for the default
    models: gpt-realtime, gpt-4o-mini-transcribe, gpt-5.2. Prices change and other models cost
    differently, so each is an editable setting: PRICE_<FIELD NAME> in .env (PRICE_REALTIME_AUDIO_IN=32).
    """

    realtime_text_in: float = 4.00
    realtime_text_out: float = 16.00
    realtime_audio_in: float = 32.00
    realtime_audio_out: float = 64.00
    realtime_cached_in: float = 0.40  # cached text and audio input alike
    brain_text_in: float = 1.75
    brain_text_out: float = 14.00
    transcription_per_minute: float = 0.003


@dataclass(frozen=True)
class CostSettings:
    prices: PriceTable = field(default_factory=PriceTable)
    daily_budget_usd: float | None = None  # None = no budget


class EndOfTurn(enum.Enum):
    """Who ends a turn the device heard the wake in (END_OF_TURN)."""

    SERVER = "server"  # the server's VAD, after VAD_SILENCE_MS of silence, then its commit
    DEVICE = "device"  # the on-device VAD, after TURN_END_MS of silence: routed at once, inline


@dataclass(frozen=True)
class ListenerSettings:
    """The always-on listener and its wake gate."""

    wake_phrase: str = "computer"
    wake_aliases: tuple[str, ...] = ()  # extra spellings that also wake it, e.g. ("komputer",)
    # "<wake phrase> <stop word>" stops the narrator while it talks (detectors/stop_phrase.py).
    stop_words: tuple[str, ...] = ("stop", "cancel")
    wake_window_s: float = 8.0  # after a wake-only utterance, the next one within this is the command
    vad_silence_ms: int = 500  # server VAD: silence that ends an utterance
    recycle_after_s: float = 55 * 60.0  # recycle the session at a quiet moment before the 60-minute cap
    route_timeout_s: float = 30.0  # a routed command with no response by then gets an apology and a fresh session
    pre_connect_buffer_s: float = 10.0  # mic audio kept while the listener reconnects (bounded)
    retire_wait_s: float = 5.0  # a session handed over stays open this long at most for transcripts still due
    # An utterance the device heard the wake phrase in is routed at its commit, by its audio; its
    # transcript still confirms it (tools that change something wait for that) or cancels it.
    route_at_commit: bool = True
    # Who ends a turn the device heard the wake in: the server's VAD (after vad_silence_ms) or the
    # device's own VAD (after turn_end_ms of silence; the command's audio goes inline with its
    # route, before the server commits it). Chosen by benchmarks/end_of_turn.py: see docs.
    end_of_turn: EndOfTurn = EndOfTurn.DEVICE
    turn_end_ms: int = 460  # counted in 20 ms chunks: a value between two is rounded up
    provisional_ms: int = 140  # the earliest pause inside a woken turn that sends its route provisionally (0: never)


class FollowUp(enum.Enum):
    """When an answer takes the next utterance without the wake phrase (FOLLOW_UP)."""

    INVITED = "invited"  # only when the answer asked the user something (its script ends with a question)
    ALWAYS = "always"  # after every answer (speech said to someone else may be taken as a command)
    NEVER = "never"


@dataclass(frozen=True)
class ConversationSettings:
    """The habits of a spoken conversation around each answer."""

    follow_up_s: float = 6.0  # after an answer, the next utterance this soon needs no wake phrase (0: off)
    follow_up: FollowUp = FollowUp.INVITED  # ... and after which answers
    working_sound_after_s: float = 1.0  # an answer not ready by then: a soft working sound until it is
    still_working_after_s: float = 8.0  # a tool running this long: "Still working on it." once


@dataclass(frozen=True)
class StopSettings:
    """"Computer, stop" while it talks: an on-device detector listens to the microphone while a
    narration plays (nothing of it is uploaded) for the wake phrase followed by a stop word."""

    enabled: bool = True  # STOP_WHILE_TALKING; the words are ListenerSettings.stop_words (STOP_WORDS)
    notices_after_s: float = 5.0  # a notice that was waiting behind the cut narration waits this long more
    barge_in: bool = True  # the wake phrase alone cuts it too, and the command after it is routed


@dataclass(frozen=True)
class NarratorSettings:
    """The narrator: a fresh session per script."""

    min_similarity: float = 0.8  # a read below this (after normalising both sides) is logged and counted as weak, never re-read
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
    # The canceller in front of the on-device detectors (`audio_io.echo_cancel`, speexdsp), when
    # installed; it runs only within `cancel_idle_s` of the last audio played.
    cancel: bool = True
    cancel_idle_s: float = 2.0
    cancel_filter_ms: int = 200  # the adaptive filter's length: the air's delay and the room's reverberation
    cancel_margin_db: float = 12.0  # the gate behind the canceller: a cancelled chunk beats the residual by this much


@dataclass(frozen=True)
class BrainSettings:
    """The text model behind `ask_brain`."""

    model: str = "gpt-5.2"
    timeout_s: float = 20.0  # one request
    retry_budget_s: float = 45.0  # all attempts together
    max_attempts: int = 4
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 8.0
    web_search: bool = True  # may use the Responses API's built-in web search (live answers)


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
    volume_percent: int = 100  # everything played, 0-150 % (clipped above 100)
    wake_sound_wav: Path | None = None  # sounds to use instead of the built-in ones
    working_sound_wav: Path | None = None
    done_sound_wav: Path | None = None


@dataclass(frozen=True)
class LogSettings:
    """Where the log goes besides stderr, and what it may say."""

    file: Path | None = None  # also log here, rotated (0600)
    max_bytes: int = 10_000_000  # rotate the file past this size
    backups: int = 5  # rotated files kept (file.1 ... file.5)
    overheard: bool = False  # log (and keep in history) the words of speech not addressed to us: debugging only


@dataclass(frozen=True)
class ServiceSettings:
    """What the daemon leaves in the state folder for `handoff status` and `handoff history`."""

    status_min_interval_s: float = 2.0  # the status file is rewritten on change, at most this often ...
    status_heartbeat_s: float = 15.0  # ... and at least this often (older than 3 of these: stale)
    history_max_rows: int = 5000  # commands and what was said; the oldest go past this


@dataclass(frozen=True)
class WebSettings:
    """The page `handoff run` serves (web/): on 127.0.0.1 only, unless `host` is set; behind a
    token either way (on 127.0.0.1 every local user could open it otherwise: the page must be no
    wider than the control socket, which is 0600)."""

    port: int = 8788  # 0: no page
    host: str = ""  # "": 127.0.0.1; an address set here opens it to the network (still behind the token)
    metrics_need_token: bool = False  # /metrics behind the token too

    @property
    def bind_host(self) -> str:
        return self.host or "127.0.0.1"

    @property
    def needs_token(self) -> bool:
        return True  # (issue 27: on 127.0.0.1 too)


@dataclass(frozen=True)
class Settings:
    realtime: RealtimeSettings = field(default_factory=RealtimeSettings)
    listener: ListenerSettings = field(default_factory=ListenerSettings)
    narrator: NarratorSettings = field(default_factory=NarratorSettings)
    echo: EchoSettings = field(default_factory=EchoSettings)
    brain: BrainSettings = field(default_factory=BrainSettings)
    reconnect: ReconnectSettings = field(default_factory=ReconnectSettings)
    audio: AudioSettings = field(default_factory=AudioSettings)
    upload: UploadSettings = field(default_factory=UploadSettings)
    conversation: ConversationSettings = field(default_factory=ConversationSettings)
    stop: StopSettings = field(default_factory=StopSettings)
    cost: CostSettings = field(default_factory=CostSettings)
    workspace_root: Path = field(default_factory=default_workspace)  # file tools never leave this folder
    state_dir: Path = field(default_factory=lambda: Path.home() / ".local" / "state" / "handoff")
    tasks_config: Path | None = None  # TOML file of task templates
    tasks_config_named: bool = False  # the user named the file (HANDOFF_TASKS_CONFIG): it must exist
    mcp_config: Path | None = None  # the MCP servers' JSON file (hands.config); None: none
    mcp_config_named: bool = False  # the user named it (MCP_CONFIG): it must exist
    mcp_routing: str = "auto"  # auto: direct while few, else through the brain; direct; brain
    log_level: LogLevel = LogLevel.INFO
    log: LogSettings = field(default_factory=LogSettings)
    service: ServiceSettings = field(default_factory=ServiceSettings)
    web: WebSettings = field(default_factory=WebSettings)
    rooms: RoomSettings = field(default_factory=RoomSettings)  # satellites (config.rooms)

    def replace(self, **changes: object) -> "Settings":
        return dataclasses.replace(self, **changes)


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
    stop = _stop_settings(values, problems)
    # Each of these raises on its first problem: collected, so every problem is said at once.
    warm_max_age_s = _collected(problems, _positive_seconds, values, "NARRATOR_WARM_MAX_AGE_S")
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
                                  end_of_turn=end_of_turn, turn_end_ms=turn_end_ms, provisional_ms=provisional_ms),
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


def default_upload_mode(wake_phrase: str) -> UploadMode:
    """Private by default: a phrase with a shipped model is heard on the machine and nothing goes
    up before it; any other phrase needs the room's speech transcribed to be found."""
    return UploadMode.ON_DEVICE_WAKE if model_for(wake_phrase) is not None else UploadMode.SPEECH_ONLY


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
    return UploadSettings(mode, preroll, hangover, cutoff, refractory)


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
        choices = ", ".join(str(member.value) for member in kind)  # type: ignore[attr-defined]
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
