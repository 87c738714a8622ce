"""The settings' schema: one frozen dataclass per part, with the defaults a user gets.

A default that `.env` can change comes from `config.environment.ENV_DEFAULTS` (the one table of
defaults; `tests/config/test_settings_defaults.py` checks that nothing here disagrees with it).
A default whose key is "" in that table ("" = this default) lives here only.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.environment import ENV_DEFAULTS
from config.rooms import RoomSettings
from config.wake_phrases import model_for


def _default(key: str) -> str:
    """The default of an environment key, as the table has it."""
    return ENV_DEFAULTS[key]


def _default_flag(key: str) -> bool:
    return ENV_DEFAULTS[key].strip().lower() in ("true", "yes", "on", "1")


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
    realtime_model: str = _default("REALTIME_MODEL")
    transcribe_model: str = _default("TRANSCRIBE_MODEL")
    transcribe_language: str | None = _default("TRANSCRIBE_LANGUAGE") or None  # ISO-639-1 hint for the transcriber; None = detect
    noise_reduction: NoiseReduction = NoiseReduction(_default("NOISE_REDUCTION"))
    reader_voice: str = _default("READER_VOICE")
    connect_timeout_s: float = 10.0  # a handshake slower than this counts as a failed attempt


class UploadMode(enum.Enum):
    """What of the microphone leaves the machine (HANDOFF_UPLOAD_MODE)."""

    CONTINUOUS = "continuous"  # everything while not muted: the old behaviour
    SPEECH_ONLY = "speech_only"  # speech only, decided by an on-device VAD
    ON_DEVICE_WAKE = "wake_word"  # nothing until an on-device spotter hears the wake phrase


@dataclass(frozen=True)
class UploadSettings:
    mode: UploadMode = field(default_factory=lambda: default_upload_mode(_default("WAKE_PHRASE")))  # HANDOFF_UPLOAD_MODE=""
    preroll_ms: int = 500  # sent from before the detected onset, so the wake word's first syllable is kept
    hangover_ms: int = 1000  # silence still sent after speech: longer than the server VAD's, so it ends the turn
    wake_cutoff: float | None = None  # the wake model's probability cutoff (None: the model's own)
    wake_refractory_s: float = 3.0  # after a wake, the model does not wake it again for this long
    wake_strict: bool = False  # every wake needs both models (fewer sound-alikes, fewer synthetic voices): WAKE_STRICT
    wake_verify: bool = True  # a third opinion on each wake (detectors.wake_verify: fewer sound-alikes; on since session 24): WAKE_VERIFY


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

    wake_phrase: str = _default("WAKE_PHRASE")
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
    end_of_turn: EndOfTurn = EndOfTurn(_default("END_OF_TURN"))
    turn_end_ms: int = int(_default("TURN_END_MS"))  # counted in 20 ms chunks: a value between two is rounded up
    provisional_ms: int = int(_default("PROVISIONAL_MS"))  # the earliest pause that routes provisionally (0: never)
    provisional_token_budget: int = int(_default("PROVISIONAL_TOKEN_BUDGET"))  # % (decisions.pause_point)


class FollowUp(enum.Enum):
    """When an answer takes the next utterance without the wake phrase (FOLLOW_UP)."""

    INVITED = "invited"  # only when the answer asked the user something (its script ends with a question)
    ALWAYS = "always"  # after every answer (speech said to someone else may be taken as a command)
    NEVER = "never"


@dataclass(frozen=True)
class ConversationSettings:
    """The habits of a spoken conversation around each answer."""

    follow_up_s: float = 6.0  # after an answer, the next utterance this soon needs no wake phrase (0: off)
    follow_up: FollowUp = FollowUp(_default("FOLLOW_UP"))  # ... and after which answers
    working_sound_after_s: float = 1.0  # an answer not ready by then: a soft working sound until it is
    still_working_after_s: float = 8.0  # a tool running this long: "Still working on it." once


@dataclass(frozen=True)
class StopSettings:
    """"Hey Jarvis, stop" while it talks: an on-device detector listens to the microphone while a
    narration plays (nothing of it is uploaded) for the wake phrase followed by a stop word."""

    enabled: bool = _default_flag("STOP_WHILE_TALKING")  # the words are ListenerSettings.stop_words (STOP_WORDS)
    notices_after_s: float = 5.0  # a notice that was waiting behind the cut narration waits this long more
    barge_in: bool = True  # the wake phrase alone cuts it too, and the command after it is routed
    # While it talks, the wake model's first model (microWakeWord) wakes alone above this (None:
    # the model's own, 0.97, as in a quiet room): over the canceller's output "hey jarvis" often
    # scores just under it, and the preroll's check judges every hit there (docs/PERFORMANCE.md,
    # "Barge-in: the wake model's cutoff while it talks", issue 32, session 15). 0.9 since session
    # 18: on fresh rooms 1-2 more commands of 30 routed at 0 and -6 dB, no stop lost, and a fresh
    # hour of the narration's echo with 0 false hits ("Barge-in: the hold's check counts from the hit").
    barge_in_alone_cutoff: float | None = 0.9
    # The stop phrase's own pocketsphinx search for the wake phrase (it runs anyway) wakes a barge-in
    # too where the wake model heard nothing (`BargeInDetector(search_wakes=)`): voices the model
    # misses even alone (flite awb and slt at 200 wpm) are spotted by it (docs/PERFORMANCE.md,
    # "Barge-in: the stop phrase's search as a second wake", issue 32, session 23). On since session
    # 24, once the canceller's leak across a path change was checked (`PrerollSettings.max_residue_explained`):
    # fresh rooms 1600 / 1700 found "stop" +0..+3 and routed +3..+4 of 30 at every level, and fresh hours
    # 18 / 19 had 0 false with it (3 without the check) ("Barge-in: the canceller's leak explained").
    barge_in_search_wakes: bool = True


@dataclass(frozen=True)
class NarratorSettings:
    """The narrator: a fresh session per script."""

    min_similarity: float = 0.8  # a read below this (after normalising both sides) is logged and counted as weak, never re-read
    response_timeout_s: float = 60.0  # a narration that produces nothing for this long is abandoned
    max_script_chars: int = 1200  # longer scripts are cut at a sentence boundary
    # Keep one fresh session connected and configured ahead of need, so a narration costs one
    # response.create instead of a connect and a session.update (two round trips) first.
    warm: bool = _default_flag("NARRATOR_WARM")
    warm_max_age_s: float = float(_default("NARRATOR_WARM_MAX_AGE_S"))  # the spare is replaced before the server's 60-minute cap


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
    # installed; it runs only within `cancel_idle_s` of the last audio played (plus the devices'
    # latency): the echo's tail, `max_delay_ms` and the reverberation down to `floor_rms` at
    # `decay_db_per_s` (0.39 s). It ran 2 s after every sound played, more than half of its CPU
    # in a talking room (issue 34).
    cancel: bool = True
    cancel_idle_s: float = 0.4
    cancel_filter_ms: int = 200  # the adaptive filter's length: the air's delay and the room's reverberation
    cancel_frame_ms: int = 10  # speexdsp's frame: 20 costs 0.81-0.84 per chunk, weakens its suppressor, lost barge-ins (issue 34, session 22)
    # The shadow filter (following a room's change) on every chunk, or only while the main looks misadjusted
    cancel_shadow_always: bool = True
    cancel_margin_db: float = 12.0  # the gate behind the canceller: a cancelled chunk beats the residual by this much
    # speexdsp's residual echo suppressor after the canceller, only while the echo gate's learnt echo
    # gain (the microphone over what was played; its lowest over 3 s) is above this, dB (None: never).
    # It finds the user under a loud echo, and loses some of a quiet one's voice where the echo is
    # quiet: fresh rooms, 0 dB of echo, "stop" 26 -> 29 of 30; never on at -6 dB (docs/PERFORMANCE.md,
    # issue 32, session 20).
    cancel_suppress_over_db: float | None = -11.5


@dataclass(frozen=True)
class BrainSettings:
    """The text model behind `ask_brain`."""

    model: str = _default("BRAIN_MODEL")
    timeout_s: float = 20.0  # one request
    retry_budget_s: float = 45.0  # all attempts together
    max_attempts: int = 4
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 8.0
    web_search: bool = _default_flag("BRAIN_WEB_SEARCH")  # may use the Responses API's built-in web search (live answers)


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
    chunk_ms: int = 20  # what the detectors, the echo gate and the end of turn judge at a time
    read_ms: int = 40  # the device is read this much at a time, handed on in `chunk_ms` chunks (issue 34)
    # A silent room's reads go to the event loop `quiet_read_ms` at a time (issue 34: its CPU is the
    # loop's wake-ups): a read under `quiet_rms` (-64 dBFS, a microphone's hiss) after `quiet_after_s`
    # of such quiet waits for the next; any louder read goes at once (audio_io.quiet_reads). Three
    # 40 ms reads at a time: two met 1 % of a core only beside other work, not on an idle machine
    # (docs/PERFORMANCE.md, "A silent room's reads handed on together").
    quiet_read_ms: int = 120  # read_ms: off
    quiet_rms: int = 20
    quiet_after_s: float = 1.0
    # While no one is woken and nothing is narrated, any read may wait, up to this much together (the
    # wake heard up to 160 ms later; its decisions the same: audio_io.quiet_reads, issue 34, session 20).
    unhurried_read_ms: int = 200  # read_ms: off
    volume_percent: int = int(_default("NARRATOR_VOLUME"))  # everything played, 0-150 % (clipped above 100)
    wake_sound_wav: Path | None = None  # sounds to use instead of the built-in ones
    working_sound_wav: Path | None = None
    done_sound_wav: Path | None = None


@dataclass(frozen=True)
class LogSettings:
    """Where the log goes besides stderr, and what it may say."""

    file: Path | None = None  # also log here, rotated (0600)
    max_bytes: int = int(_default("LOG_MAX_BYTES"))  # rotate the file past this size
    backups: int = int(_default("LOG_BACKUPS"))  # rotated files kept (file.1 ... file.5)
    overheard: bool = _default_flag("LOG_OVERHEARD")  # log (and keep in history) the words of speech not addressed to us: debugging only


@dataclass(frozen=True)
class ServiceSettings:
    """What the daemon leaves in the state folder for `handoff status` and `handoff history`."""

    status_min_interval_s: float = 2.0  # the status file is rewritten on change, at most this often ...
    status_heartbeat_s: float = 15.0  # ... and at least this often (older than 3 of these: stale)
    history_max_rows: int = int(_default("HANDOFF_HISTORY_ROWS"))  # commands and what was said; the oldest go past this


@dataclass(frozen=True)
class WebSettings:
    """The page `handoff run` serves (web/): on 127.0.0.1 only, unless `host` is set; behind a
    token either way (on 127.0.0.1 every local user could open it otherwise: the page must be no
    wider than the control socket, which is 0600)."""

    port: int = int(_default("WEB_PORT"))  # 0: no page
    host: str = ""  # "": 127.0.0.1; an address set here opens it to the network (still behind the token)
    metrics_need_token: bool = _default_flag("WEB_METRICS_TOKEN")  # /metrics behind the token too

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
    mcp_routing: str = _default("MCP_ROUTING")  # auto: direct while few, else through the brain; direct; brain
    mcp_answer_wait_s: float = float(_default("MCP_ANSWER_WAIT_S"))  # a command waits this long for an MCP call
    log_level: LogLevel = LogLevel(_default("LOG_LEVEL"))
    log: LogSettings = field(default_factory=LogSettings)
    service: ServiceSettings = field(default_factory=ServiceSettings)
    web: WebSettings = field(default_factory=WebSettings)
    rooms: RoomSettings = field(default_factory=RoomSettings)  # satellites (config.rooms)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)



def default_upload_mode(wake_phrase: str) -> UploadMode:
    """Private by default: a phrase with a shipped model is heard on the machine and nothing goes
    up before it; any other phrase needs the room's speech transcribed to be found."""
    return UploadMode.ON_DEVICE_WAKE if model_for(wake_phrase) is not None else UploadMode.SPEECH_ONLY

