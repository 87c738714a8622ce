"""Simulator settings: one frozen object, injected into the server and every connection."""

from __future__ import annotations

from dataclasses import dataclass

from realtime_sim.script import FATAL_FAULTS, FAULT_KINDS, HOSTILE_FAULTS, FaultKind

# What the real service says by default (shortened); `session.created` carries it.
DEFAULT_INSTRUCTIONS = (
    "You are a helpful, witty, and friendly AI. Act like a human, but remember that you aren't a "
    "human and that you can't do human things in the real world."
)

# Random faults never include the fatal ones (a 401, no quota): a client must stop on them, which
# would end a soak test instead of exercising recovery; nor hostile frames (tests ask for those).
DEFAULT_RANDOM_FAULT_KINDS: tuple[FaultKind, ...] = tuple(
    k for k in FAULT_KINDS if k not in FATAL_FAULTS | HOSTILE_FAULTS
)


@dataclass(frozen=True)
class SimConfig:
    """How the simulator behaves. Tests shorten the times; `handoff sim` uses the defaults."""

    seed: int | None = None  # seeds random faults and ids; None = different every run
    fault_rate: float = 0.0  # probability that a new connection gets one random fault
    random_fault_kinds: tuple[FaultKind, ...] = DEFAULT_RANDOM_FAULT_KINDS
    random_fault_delay_s: float = 2.0  # how long a random "delay" fault holds frames back
    session_length_s: float = 3600.0  # the session_expired error + close 1001 come after this long
    model: str = "gpt-realtime"  # reported when the client names no model
    default_instructions: str = DEFAULT_INSTRUCTIONS
    fallback_transcript: str = "mm-hm"  # what a speech segment "says" when no transcript is scripted
    audio_chunk_ms: int = 200  # audio per response.output_audio.delta
    audio_frame_delay_s: float = 0.05  # pause after each audio delta so audio streams over time; 0 = burst
    use_espeak: bool = True  # speak with espeak-ng when installed; False = synthetic voiced signal
    espeak_voice: str = "en-us"
    espeak_words_per_minute: int = 175
    synthetic_ms_per_char: float = 60.0  # duration of the synthetic voice, per character of text
    rate_limit_tokens: int = 15_000_000  # the token budget reported in rate_limits.updated
    shutdown_timeout_s: float = 2.0  # how long stop() waits for connections to close
    # Keep every frame in ConnectionRecord.sent/received and every brain request body. Tests want
    # them; `handoff sim`, left running for days with a live microphone, turns this off.
    record_events: bool = True
    # Limits a misbehaving client cannot push past (the real service has its own).
    request_read_timeout_s: float = 10.0  # a request's headers (and a brain request's body) must arrive within this
    max_conversation_items: int = 5_000  # conversation.item.create past this is refused with an error event
    max_conversation_bytes: int = 16 * 1024 * 1024  # ... and past this many bytes of item JSON
    max_outbox_bytes: int = 32 * 1024 * 1024  # events queued for a client that does not read: past this, close 1008
    # A real model, not a perfect one (see realtime_sim/performance.py): reads come back with
    # numbers, times, dates and units in words and the odd filler word; a script sent as a user
    # message is answered or obeyed; input transcripts complete late, after other events.
    # False = the perfect model: verbatim reads, transcripts right after the commit.
    realistic: bool = True
    paraphrase_rate: float = 0.2  # share of reads with one filler word dropped or added
    transcription_delay_ms: tuple[int, int] = (200, 1500)  # realistic: completed this long after the commit
    # A network between client and server, so the project can measure its own latency: every
    # WebSocket frame, both directions, arrives this much later (in order); the upgrade (TCP,
    # TLS and HTTP handshake together) takes `upgrade_delay_s` more. RTT = 2 * network_delay_s.
    network_delay_s: float = 0.0
    upgrade_delay_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be between 0 and 1, got {self.fault_rate}")
        if self.session_length_s <= 0:
            raise ValueError(f"session_length_s must be positive, got {self.session_length_s}")
        if self.audio_chunk_ms < 10:
            raise ValueError(f"audio_chunk_ms must be at least 10, got {self.audio_chunk_ms}")
        if self.audio_frame_delay_s < 0:
            raise ValueError(f"audio_frame_delay_s cannot be negative, got {self.audio_frame_delay_s}")
        if not 0.0 <= self.paraphrase_rate <= 1.0:
            raise ValueError(f"paraphrase_rate must be between 0 and 1, got {self.paraphrase_rate}")
        if self.network_delay_s < 0 or self.upgrade_delay_s < 0:
            raise ValueError(
                f"network delays cannot be negative, got network_delay_s={self.network_delay_s}, "
                f"upgrade_delay_s={self.upgrade_delay_s}"
            )
        low, high = self.transcription_delay_ms
        if not 0 <= low <= high:
            raise ValueError(f"transcription_delay_ms must be (low, high) with 0 <= low <= high, got {self.transcription_delay_ms}")
        unknown = [k for k in self.random_fault_kinds if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds in random_fault_kinds: {unknown}; known: {list(FAULT_KINDS)}")
        for name in ("request_read_timeout_s", "max_conversation_items", "max_conversation_bytes", "max_outbox_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.fault_rate > 0 and not self.random_fault_kinds:
            raise ValueError("fault_rate is set but random_fault_kinds is empty")
