"""The upload gate: which microphone audio leaves the machine.

A pure synchronous state machine. It is fed one mic chunk at a time with the on-device
detectors' verdicts and the clock time, and returns the chunks to upload now:

- CONTINUOUS: everything (the old behaviour).
- SPEECH_ONLY: speech, from `preroll_s` before the onset the VAD reported (so the first
  syllable of the wake word is kept), until `hangover_s` after the last speech. The hangover
  outlasts the server VAD's silence_duration_ms, so the server ends the turn on silence we sent,
  and a pause inside a command shorter than it never splits the upload. Silence is not sent.
- ON_DEVICE_WAKE: nothing until a local keyword hit near the start of an utterance; then that
  utterance from its pre-roll. When that utterance was the wake phrase alone ("computer ..."),
  speech in the next `command_window_s` goes up as in SPEECH_ONLY (the command after the pause),
  as the server's wake gate expects; once a command has been sent, the gate closes after its
  hangover. The server's transcript gate still has the final word.

The clock is injected (times are plain floats, seconds), so tests drive time; `next_deadline()`
tells an async shell when a time-based change is due, and `advance(now)` applies it when no
chunk arrives (e.g. muted). No asyncio, no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

from config.settings import UploadMode
from decisions.errors import IllegalTransition


class GateState(Enum):
    STREAMING = "streaming"  # CONTINUOUS: always sending
    QUIET = "quiet"  # nothing sent; the pre-roll ring fills
    HEARING = "hearing"  # ON_DEVICE_WAKE: speech, no wake yet; held locally, not sent
    SENDING = "sending"  # uploading speech (and its hangover)
    WINDOW = "window"  # ON_DEVICE_WAKE: woken, silent, command window still open; nothing sent


class GateEvent(Enum):
    SPEECH = "speech"  # speech onset (the VAD's first speech chunk after quiet)
    WAKE = "wake"  # an accepted keyword hit
    HANGOVER_ENDED = "hangover_ended"  # hangover_s without speech
    WINDOW_ENDED = "window_ended"  # command_window_s after the last wake
    COMMAND_ENDED = "command_ended"  # hangover_s without speech after a command was sent: no window needed
    REJECTED = "rejected"  # the listener's transcript gate ignored what was sent: a false local wake
    FOLLOW_UP = "follow_up"  # an answer asked the user something: the next utterance needs no wake


# Every legal transition, per mode. Events not listed for a state are illegal.
TRANSITIONS: dict[tuple[UploadMode, GateState, GateEvent], GateState] = {
    (UploadMode.SPEECH_ONLY, GateState.QUIET, GateEvent.SPEECH): GateState.SENDING,
    (UploadMode.SPEECH_ONLY, GateState.SENDING, GateEvent.HANGOVER_ENDED): GateState.QUIET,
    (UploadMode.ON_DEVICE_WAKE, GateState.QUIET, GateEvent.SPEECH): GateState.HEARING,
    (UploadMode.ON_DEVICE_WAKE, GateState.QUIET, GateEvent.WAKE): GateState.SENDING,  # VAD missed the onset
    (UploadMode.ON_DEVICE_WAKE, GateState.HEARING, GateEvent.WAKE): GateState.SENDING,
    (UploadMode.ON_DEVICE_WAKE, GateState.HEARING, GateEvent.HANGOVER_ENDED): GateState.QUIET,
    (UploadMode.ON_DEVICE_WAKE, GateState.SENDING, GateEvent.WAKE): GateState.SENDING,  # reopens the window
    (UploadMode.ON_DEVICE_WAKE, GateState.SENDING, GateEvent.HANGOVER_ENDED): GateState.WINDOW,
    (UploadMode.ON_DEVICE_WAKE, GateState.SENDING, GateEvent.COMMAND_ENDED): GateState.QUIET,
    (UploadMode.ON_DEVICE_WAKE, GateState.WINDOW, GateEvent.SPEECH): GateState.SENDING,
    (UploadMode.ON_DEVICE_WAKE, GateState.WINDOW, GateEvent.WAKE): GateState.SENDING,
    (UploadMode.ON_DEVICE_WAKE, GateState.WINDOW, GateEvent.WINDOW_ENDED): GateState.QUIET,
    (UploadMode.ON_DEVICE_WAKE, GateState.WINDOW, GateEvent.REJECTED): GateState.QUIET,  # no command is coming
    # An answer that asked something: the reply goes up without a wake (only then: FOLLOW_UP).
    (UploadMode.ON_DEVICE_WAKE, GateState.QUIET, GateEvent.FOLLOW_UP): GateState.WINDOW,
    (UploadMode.ON_DEVICE_WAKE, GateState.HEARING, GateEvent.FOLLOW_UP): GateState.WINDOW,  # held speech began before it: dropped
    (UploadMode.ON_DEVICE_WAKE, GateState.WINDOW, GateEvent.FOLLOW_UP): GateState.WINDOW,
    (UploadMode.ON_DEVICE_WAKE, GateState.SENDING, GateEvent.FOLLOW_UP): GateState.SENDING,
}


@dataclass(frozen=True)
class KeywordHit:
    """The on-device spotter heard the wake phrase."""

    phrase: str
    start_s: float  # clock time the phrase began
    detected_s: float  # clock time it was recognised (the end of the chunk that completed it)


@dataclass(frozen=True)
class UploadGateSettings:
    mode: UploadMode = UploadMode.SPEECH_ONLY
    # Audio kept from before the VAD's onset. The VAD reports speech 30-100 ms late and a soft
    # first consonant ("c" of computer) is quieter than what it detects, so keep at least 300 ms.
    preroll_s: float = 0.5
    # Silence still sent after the last speech. Must outlast the server VAD's silence_duration_ms
    # (settings.ListenerSettings.vad_silence_ms, 500 ms) so the server ends the turn itself, and
    # bridges pauses inside a command.
    hangover_s: float = 1.0
    command_window_s: float = 8.0  # ON_DEVICE_WAKE: as the server gate's wake window (wake_window_s)
    # ON_DEVICE_WAKE: speech after the wake word that makes a command ("what time is it" is about
    # 1 s). Less, and the utterance was the wake phrase alone: the command window opens.
    command_min_s: float = 0.6
    # ON_DEVICE_WAKE: a hit whose phrase starts later than this after the utterance onset is not
    # a wake ("I bought a new computer"). Room for a slow "okay" in front (0.45 s) and for a VAD
    # that, in a room with other talk, reports the run up to 0.25 s early.
    max_wake_lead_s: float = 0.7
    # ON_DEVICE_WAKE: how late after the phrase's start the VAD may report the speech run it begins.
    vad_lag_s: float = 0.3
    # ON_DEVICE_WAKE: the most audio held in memory (never sent) while waiting for a keyword hit,
    # which pocketsphinx reports at the phrase's end, up to a second or two after it began.
    hold_s: float = 4.0
    sample_rate: int = 24000
    sample_width: int = 2

    def __post_init__(self) -> None:
        if self.preroll_s < 0 or self.hangover_s <= 0 or self.command_window_s < 0:
            raise ValueError("preroll_s must be >= 0, hangover_s > 0, command_window_s >= 0")
        if self.hold_s < self.preroll_s + self.max_wake_lead_s:
            raise ValueError("hold_s must cover preroll_s + max_wake_lead_s, or an accepted wake loses its onset")


class UploadGate:
    """Feed every mic chunk in order: `feed(chunk, now, is_speech, keyword_hit)` -> chunks to upload.

    `now` is the clock time at the end of `chunk`. Chunks are returned unchanged (same objects),
    in order, each at most once; what is not returned is never sent. Between chunks (muted),
    `next_deadline()` says when `advance(now)` has something to do.
    """

    def __init__(self, settings: UploadGateSettings = UploadGateSettings()) -> None:
        self.settings = settings
        self._bytes_per_s = settings.sample_rate * settings.sample_width
        self._follow_up_until: float | None = None  # an invited follow-up's window (survives a reset)
        self.accepted_wake: KeywordHit | None = None  # the last hit taken as a wake (UploadFilter.take_wake clears it)
        self._start_quiet()

    def _start_quiet(self) -> None:
        self.state = GateState.STREAMING if self.settings.mode is UploadMode.CONTINUOUS else GateState.QUIET
        # (start time, chunk) of recent unsent audio: the pre-roll, or in HEARING the utterance so far.
        self._held: deque[tuple[float, bytes]] = deque()
        self._last_speech: float | None = None  # end time of the last speech chunk
        # Start times of recent speech runs (speech after non-speech) while waiting for a wake:
        # in a room with other talk the utterance that holds the wake word is not the first run.
        self._onsets: deque[float] = deque()
        self._was_speech = False
        self._window_until: float | None = None
        self._woke_at: float | None = None  # when the last wake was recognised
        self._command_heard = False  # the listener routed a command since that wake
        if self._follow_up_until is not None and self.settings.mode is UploadMode.ON_DEVICE_WAKE:
            # An invited follow-up outlives the earcon's mute (a reset): the window was promised.
            self.state, self._window_until = GateState.WINDOW, self._follow_up_until
        self._speech_since_wake = 0.0  # seconds of speech sent after it: the command

    # ------------------------------------------------------------------ public

    def feed(self, chunk: bytes, now: float, is_speech: bool, keyword_hit: KeywordHit | None = None) -> list[bytes]:
        if self.state is GateState.STREAMING:
            return [chunk]
        start = now - len(chunk) / self._bytes_per_s
        if self.state is not GateState.QUIET:  # (quiet, nothing is due: most chunks of a day)
            self.advance(start)  # deadlines that passed before this chunk began
        out: list[bytes] = []
        if is_speech:
            if not self._was_speech:
                self._note_onset(start)
            if self.state in (GateState.QUIET, GateState.WINDOW):
                self._follow_up_until = None  # taken: a later reset does not reopen it
                self._fire(GateEvent.SPEECH)
                if self.state is GateState.SENDING:  # type: ignore[comparison-overlap]  # (_fire moved it)
                    out.extend(self._release_preroll(start))
            self._last_speech = now
        self._was_speech = is_speech
        wake_onset = self._wake_onset(keyword_hit) if keyword_hit is not None else None
        if wake_onset is not None:
            if self.state in (GateState.QUIET, GateState.HEARING):
                out.extend(self._release_preroll(wake_onset))
                self._onsets.clear()
            if self.state in (GateState.QUIET, GateState.HEARING):
                self.accepted_wake = keyword_hit  # a new utterance begins with the wake phrase
            self._fire(GateEvent.WAKE)
            self._follow_up_until = None
            self._window_until = now + self.settings.command_window_s
            self._woke_at = now
            self._command_heard = False
            self._speech_since_wake = 0.0
            self._last_speech = max(self._last_speech or now, now)
        elif is_speech and self._woke_at is not None and self.state is GateState.SENDING:
            self._speech_since_wake += now - start
        if self.state is GateState.SENDING:
            out.append(chunk)
        else:
            self._hold(start, chunk)
        return out

    def advance(self, now: float) -> None:
        """Apply the hangover and window deadlines that fell at or before `now` (no audio needed)."""
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > now:
                return
            if self._command_sent():
                self._fire(GateEvent.COMMAND_ENDED)
                self._window_until = self._woke_at = None
                self._trim_held()
                if self._follow_up_until is not None:  # the answer asked while this hangover ran (a
                    self._fire(GateEvent.FOLLOW_UP)  # recording paused by its mute): the reply's window
                    self._window_until = self._follow_up_until
            elif self.state in (GateState.SENDING, GateState.HEARING):
                self._fire(GateEvent.HANGOVER_ENDED)
                self._trim_held()
            elif self.state is GateState.WINDOW:
                self._fire(GateEvent.WINDOW_ENDED)
                self._window_until = self._woke_at = self._follow_up_until = None

    def next_deadline(self) -> float | None:
        """When the next time-based change is due (hangover or command window end), or None."""
        if self.state in (GateState.SENDING, GateState.HEARING) and self._last_speech is not None:
            return self._last_speech + self.settings.hangover_s
        if self.state is GateState.WINDOW:
            return self._window_until
        return None

    @property
    def held_bytes(self) -> int:
        """Audio kept in memory and not sent (pre-roll, or an unwoken utterance): bounded by the settings."""
        return sum(len(chunk) for _, chunk in self._held)

    def rejected(self) -> None:
        """The listener's transcript gate ignored an utterance (not addressed to us): a command
        window that a false local wake opened closes now instead of after command_window_s. Only a
        silent window closes; speech being sent is left alone (it may be the real command, and its
        own transcript decides)."""
        if self.settings.mode is UploadMode.ON_DEVICE_WAKE and self.state is GateState.WINDOW:
            self._fire(GateEvent.REJECTED)
            self._window_until = self._woke_at = self._follow_up_until = None

    def command_heard(self) -> None:
        """The listener routed a command: the window the wake opened has served its purpose, and a
        later reset (the answer's mute) does not keep it open. Speech after an answer stays on the
        machine unless the answer invited a reply (`open_follow_up`), however the wake was timed."""
        self._command_heard = True

    def open_follow_up(self, until: float) -> None:
        """An answer asked the user something: speech before `until` goes up without a wake, as
        in a command window (a reset in between, the earcon's mute, keeps it). Other modes send
        speech anyway: nothing changes there."""
        if self.settings.mode is not UploadMode.ON_DEVICE_WAKE:
            return
        self._fire(GateEvent.FOLLOW_UP)
        if self.state is GateState.WINDOW:
            self._held.clear()
            self._window_until = until
            self._follow_up_until = until
        elif self.state is GateState.SENDING:
            # The command's hangover has not run out in audio time (a recording is not read while
            # the answer plays): the window opens when it does (or at a reset, for a live mic).
            self._follow_up_until = until

    def reset(self) -> None:
        """Forget held audio and go quiet (after a mute or a reconnect: the stream is not continuous).
        A command window the wake phrase alone opened stays open until it lapses: the wake chime
        mutes the microphone, and the command comes after it ("hey jarvis" ... chime ... "what time is it")."""
        window = self._window_until if self._awaiting_command() else None
        woke_at = self._woke_at
        self._start_quiet()
        if window is not None:
            self.state, self._window_until, self._woke_at = GateState.WINDOW, window, woke_at

    # ------------------------------------------------------------------ internals

    def _fire(self, event: GateEvent) -> None:
        target = TRANSITIONS.get((self.settings.mode, self.state, event))
        if target is None:
            raise IllegalTransition(f"{self.settings.mode.name}: {event.name} in state {self.state.name}")
        self.state = target

    def _awaiting_command(self) -> bool:
        """Woken by the phrase alone and no command sent yet."""
        return (self.settings.mode is UploadMode.ON_DEVICE_WAKE and self._window_until is not None
                and self._woke_at is not None and not self._command_heard
                and self._speech_since_wake < self.settings.command_min_s
                and self.state in (GateState.SENDING, GateState.WINDOW))

    def _command_sent(self) -> bool:
        return (
            self.settings.mode is UploadMode.ON_DEVICE_WAKE and self.state is GateState.SENDING
            and self._woke_at is not None and self._speech_since_wake >= self.settings.command_min_s
        )

    def _note_onset(self, start: float) -> None:
        if self.settings.mode is not UploadMode.ON_DEVICE_WAKE:
            return
        self._onsets.append(start)
        while self._onsets and self._onsets[0] < start - self.settings.hold_s:
            self._onsets.popleft()

    def _wake_onset(self, hit: KeywordHit) -> float | None:
        """Where the woken utterance starts (its pre-roll goes before that), or None: not a wake.

        A hit is a wake when the phrase starts an utterance: a speech run began at most
        max_wake_lead_s before the phrase ("hey computer") or up to vad_lag_s after it (the VAD
        notices speech late). "I bought a new computer" has no run starting near "computer".
        """
        if self.settings.mode is not UploadMode.ON_DEVICE_WAKE:
            return None
        if self.state in (GateState.SENDING, GateState.WINDOW):
            return hit.start_s  # already woken: a repeat only reopens the window
        if self.state is GateState.QUIET:
            return hit.start_s  # the VAD missed the speech: the hit itself marks the onset
        near = [o for o in self._onsets
                if hit.start_s - self.settings.max_wake_lead_s <= o <= hit.start_s + self.settings.vad_lag_s]
        return min([hit.start_s, *near]) if near else None

    def _release_preroll(self, onset: float) -> list[bytes]:
        """Held chunks from `preroll_s` before `onset` on; the hold is emptied."""
        cutoff = onset - self.settings.preroll_s - 1e-9
        chunks = [c for t, c in self._held if t >= cutoff - len(c) / (self.settings.sample_rate * self.settings.sample_width)]
        self._held.clear()
        return chunks

    def _hold(self, start: float, chunk: bytes) -> None:
        self._held.append((start, chunk))
        self._trim_held()

    def _trim_held(self) -> None:
        # Waiting for a wake, keep enough for a hit that arrives up to hold_s after its phrase began.
        waiting = self.settings.mode is UploadMode.ON_DEVICE_WAKE and self.state in (GateState.QUIET, GateState.HEARING)
        keep = self.settings.hold_s if waiting else self.settings.preroll_s
        if not self._held:
            return
        newest = self._held[-1][0]
        bytes_per_s = self._bytes_per_s
        # A chunk is dropped once it lies wholly before the span to keep.
        while self._held and self._held[0][0] + len(self._held[0][1]) / bytes_per_s < newest - keep + 1e-9:
            self._held.popleft()
