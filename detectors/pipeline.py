"""The detector path for one microphone stream: VAD on every chunk, the keyword spotter on speech only.

    detectors = MicDetectors(SileroVad(), spotter)    # build_wake_spotter(...); None unless ON_DEVICE_WAKE
    verdict = detectors.feed(chunk, now)                          # now: clock time at the chunk's end
    for piece in gate.feed(chunk, now, verdict.is_speech, verdict.keyword_hit): send(piece)

The spotter costs more than the VAD, so it hears only speech: at each VAD onset it is reset and
given the last `preroll_s` of audio first (the wake word's first syllable comes before the VAD
notices it), then every chunk until `tail_s` after the last speech. A spotter that says when it
is `listening` (a candidate's window open: `ModelSpotter`) is fed only `short_tail_s` after a run
of speech longer than `word_s` (too long to be the "hey" of "hey, <pause> jarvis"; gaps shorter
than `bridge_s` do not end a run), and on while its window is open: a talking room's spotter heard
a second of silence after every sentence (issue 34).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from typing import Protocol

from config.settings import UploadMode, UploadSettings
from config.wake_phrases import model_for
from decisions.upload_gate import GateState, KeywordHit, UploadGate, UploadGateSettings
from detectors.turn_pause import TurnFollower, TurnSignal
from detectors.vad import SileroVad
from detectors.wake_confirm import STRICT, ConfirmSettings, confirm_available


class WakeSpotter(Protocol):
    """`detectors.wake_model.ModelSpotter` (a shipped model) or `detectors.keyword.KeywordSpotter`
    (pocketsphinx, any dictionary phrase): pcm16 24 kHz chunks with the clock time at each end."""

    def feed(self, chunk: bytes, end_time: float) -> KeywordHit | None: ...

    def reset(self) -> None: ...


@dataclass(frozen=True)
class Verdict:
    is_speech: bool
    probability: float
    keyword_hit: KeywordHit | None = None


_WAITING = (GateState.QUIET, GateState.HEARING)  # the gate's states before a wake
_SILENCE = Verdict(False, 0.0)  # a chunk nobody heard a voice or a wake in (one object: it is most chunks)


class MicDetectors:
    def __init__(
        self, vad: SileroVad, spotter: WakeSpotter | None = None, preroll_s: float = 0.4, tail_s: float = 1.0,
        short_tail_s: float | None = 0.3, word_s: float = 0.6, bridge_s: float = 0.15,
    ) -> None:
        # tail_s: the second model may agree up to a second after microWakeWord's candidate
        # (`detectors.wake_confirm`), so a phrase followed by a pause must still be fed that long.
        # short_tail_s: after a run longer than `word_s`, a spotter with no window open (its
        # `listening`) stops this long after the speech (microWakeWord's 5-score average has
        # settled by then); a short run keeps `tail_s`, for the pause rule's "hey" (its pause is at
        # least `bridge_s`: shorter gaps, between a sentence's words, do not end a run). None: `tail_s` always.
        self.vad = vad
        self.spotter = spotter
        self._preroll_s = preroll_s
        self._tail_s = tail_s
        self._short_tail_s = short_tail_s if hasattr(spotter, "listening") else None
        self._word_s, self._bridge_s = word_s, bridge_s
        self._run_start: float | None = None  # where the current run of speech began (the spotter's tail)
        self._last_speech = float("-inf")  # the end of the last chunk of speech
        self._recent: deque[tuple[float, bytes]] = deque()  # (end time, chunk), the spotter's pre-roll
        self._spotting_until: float | None = None  # the spotter is fed until this time
        self._run: list[float] | None = None  # the VAD's current speech run [start, end]
        self._last_run: tuple[float, float] | None = None  # the run before it
        # Asked of every chunk, so looked up once (a silent room's cost is per-chunk Python: issue 34).
        self._bytes_per_s = vad.settings.input_rate * 2

    def reset(self) -> None:
        """After a gap in the stream (mute, reconnect)."""
        self.vad.reset()
        if self.spotter is not None:
            self.spotter.reset()
        self._recent.clear()
        self._spotting_until = None
        self._run = self._last_run = None
        self._run_start, self._last_speech = None, float("-inf")

    def feed(self, chunk: bytes, now: float) -> Verdict:
        vad = self.vad.feed(chunk)
        hit = None
        if self.spotter is not None:
            hit = self._spot(chunk, now, vad.is_speech)
        if hit is None and not vad.is_speech and vad.probability == 0.0:
            return _SILENCE
        return Verdict(vad.is_speech, vad.probability, hit)

    def _spot(self, chunk: bytes, now: float, is_speech: bool) -> KeywordHit | None:
        assert self.spotter is not None
        chunk_s = len(chunk) / self._bytes_per_s
        spotting = self._spotting_until is not None and now <= self._spotting_until
        if not (is_speech or spotting):  # the spotter sleeps: keep the pre-roll it gets at the next onset
            self._spotting_until = None
            recent = self._recent
            recent.append((now, chunk))
            while recent and now - recent[0][0] > self._preroll_s:
                recent.popleft()
            if self._run is not None:  # (the pause rule's: a run of speech ended)
                self._last_run, self._run = (self._run[0], self._run[1]), None
            return None
        hit = None
        if is_speech and not spotting:
            self.spotter.reset()
            for end, old in self._recent:
                hit = hit or self.spotter.feed(old, end)
            self._recent.clear()
        if is_speech:
            self._spotting_until = now + self._tail(now, chunk_s)
        if self._short_tail_s is not None and getattr(self.spotter, "listening", False):
            self._spotting_until = max(self._spotting_until or now, now + self._short_tail_s)  # its window is open
        hit = self.spotter.feed(chunk, now) or hit
        return self._pause_rule(now, chunk_s, is_speech) or hit

    def _tail(self, now: float, chunk_s: float) -> float:
        """How long after this chunk of speech the spotter goes on hearing, unless its window is open."""
        if self._run_start is None or now - chunk_s - self._last_speech > self._bridge_s:
            self._run_start = now - chunk_s
        self._last_speech = now
        if self._short_tail_s is None or now - self._run_start <= self._word_s:
            return self._tail_s
        return self._short_tail_s

    def _pause_rule(self, now: float, chunk_s: float, is_speech: bool) -> KeywordHit | None:
        """Tell a spotter that listens for "hey, <pause> jarvis" when a short run, a pause and
        speech again came (`ModelSpotter.pause_heard`)."""
        pause_heard = getattr(self.spotter, "pause_heard", None)
        if pause_heard is None:
            return None
        if not is_speech:
            if self._run is not None:
                self._last_run, self._run = (self._run[0], self._run[1]), None
            return None
        if self._run is not None:
            self._run[1] = now
            return None
        self._run = [now - chunk_s, now]
        if self._last_run is None:
            return None
        hit: KeywordHit | None = pause_heard(self._last_run[0], self._last_run[1], now - chunk_s)  # (ModelSpotter's)
        return hit


class UploadFilter:
    """What of one microphone stream goes to the listener: the detectors' verdicts through the
    upload gate. It runs on audio time (the bytes it has seen), not the wall clock, so a WAV read
    at full speed is gated as the same room would be live, and no timer is needed: muted chunks
    that a live mic still delivers advance the clock through `skip`."""

    def __init__(self, gate: UploadGate, detectors: MicDetectors | None, bytes_per_second: int,
                 turn_end_s: float | None = None, command_min_s: float = 0.3, max_turn_s: float = 15.0,
                 pause_s: float | None = None, vouches: bool = True) -> None:
        """`turn_end_s`: end a turn the device heard the wake in after this much silence, on the
        device (`take_turn`); None: the server's VAD ends every turn. `pause_s`: a silence that
        shorter inside it may be its end (`take_pause`, then `take_resumed` if speech comes back:
        detectors.turn_pause); None: no provisional route. `vouches`: whether its wakes may route
        a command before its transcript (see `build_upload_filter`)."""
        self.gate = gate
        self.vouches = vouches
        self.detectors = detectors  # None: everything is sent (CONTINUOUS)
        self._bytes_per_second = bytes_per_second
        self._audio_bytes = 0
        self.chunks_held = 0  # read but not sent: silence, or speech never addressed to us
        self.speech = False  # the VAD's verdict on the latest chunk (`handoff wake-test` cuts tries by it)
        self._turn_end_s, self._command_min_s, self._max_turn_s = turn_end_s, command_min_s, max_turn_s
        self._pause_s = pause_s
        self._wake_s: float | None = None  # the accepted wake not yet taken (its phrase's length)
        self._turn: bytearray | None = None  # the woken utterance sent so far (its pre-roll on)
        self._follower: TurnFollower | None = None
        self._ended_turn: bytes | None = None
        self._paused_turn: bytes | None = None  # its audio up to a pause that may be its end
        self._resumed = False  # speech came back after that pause

    def feed(self, chunk: bytes, woke_s: float | None = None) -> list[bytes]:
        """`woke_s`: a wake phrase this long ended in `chunk`, heard by another detector (a
        barge-in's, `detectors.barge_in.Held.woke_s`): taken as this filter's own wake."""
        now = self._advance(chunk)
        if self.detectors is None:
            return self.gate.feed(chunk, now, True)
        verdict = self.detectors.feed(chunk, now)
        self.speech = verdict.is_speech
        hit = verdict.keyword_hit
        if hit is None and woke_s is not None:
            hit = KeywordHit("", start_s=now - woke_s, detected_s=now)
        sent = self.gate.feed(chunk, now, verdict.is_speech, hit)
        self.chunks_held += not sent
        if self.gate.accepted_wake is not None:
            hit, self.gate.accepted_wake = self.gate.accepted_wake, None
            self._wake_s = max(0.0, hit.detected_s - hit.start_s)
            if self._turn_end_s is not None:  # a turn begins: its audio, for the route at its end
                self._turn = bytearray()
                self._follower = TurnFollower(now, self._turn_end_s, self._pause_s, self._command_min_s)
        if self._turn is not None:
            self._follow_turn(sent, verdict.is_speech, now, len(chunk) / self._bytes_per_second)
        return sent

    def _follow_turn(self, sent: list[bytes], speech: bool, now: float, chunk_s: float) -> None:
        """The device's own end of turn: `turn_end_s` of silence after the woken utterance's last
        speech, with a command's worth of speech after the phrase (else it was the phrase alone)."""
        assert self._turn is not None and self._follower is not None
        for piece in sent:
            self._turn += piece
        signal = self._follower.feed(speech, now, chunk_s)
        if signal is TurnSignal.PAUSED:
            self._paused_turn = bytes(self._turn)
        elif signal is TurnSignal.RESUMED:
            self._paused_turn, self._resumed = None, True
        if signal in (TurnSignal.ENDED, TurnSignal.DROPPED) or len(self._turn) > self._max_turn_s * self._bytes_per_second:
            if signal is TurnSignal.ENDED:  # (speech after the phrase was recognised)
                self._ended_turn = bytes(self._turn)
            elif self._follower.paused:  # (a provisional route whose turn will not be routed)
                self._resumed = True
            self._turn = self._follower = self._paused_turn = None

    @property
    def waiting_for_wake(self) -> bool:
        """Listening for a wake only, no one woken and no turn followed: what it decides now is
        decided on audio time, so its chunks may come in later (`QuietReads.unhurried`)."""
        return (self.detectors is not None and self._turn is None and self.gate.settings.mode is UploadMode.ON_DEVICE_WAKE
                and self.gate.state in _WAITING)

    def take_turn(self) -> bytes | None:
        """A woken utterance the device heard end (see `turn_end_s`): its audio, sent so far."""
        turn, self._ended_turn = self._ended_turn, None
        return turn

    def set_pause(self, seconds: float) -> None:
        """Move the pause that routes provisionally (decisions.pause_point), from the next turn on;
        a filter built without one routes only at the turn end and stays so."""
        if self._pause_s is not None:
            self._pause_s = seconds

    def take_pause(self) -> bytes | None:
        """A woken utterance paused `pause_s` after a command's worth of speech: its audio so far
        (its route is provisional: `take_resumed` or `take_turn` says how the pause ended)."""
        turn, self._paused_turn = self._paused_turn, None
        return turn

    def take_resumed(self) -> bool:
        """Whether the turn went on after the pause `take_pause` reported (or was dropped): its
        provisional route is withdrawn."""
        resumed, self._resumed = self._resumed, False
        return resumed

    def skip(self, chunk: bytes) -> None:
        """A chunk that is not listened to (the mic is muted while the narrator speaks)."""
        self.gate.advance(self._advance(chunk))

    def take_wake(self) -> float | None:
        """The wake phrase the gate accepted since last asked (its length, s), or None: the
        utterance now going up began with it, so it may be routed at its commit."""
        wake, self._wake_s = self._wake_s, None
        return wake

    def rejected(self) -> None:
        """The listener ignored what was sent (a false local wake): close its command window now."""
        self.gate.rejected()

    def command_heard(self) -> None:
        """The listener routed a command: its wake's window does not outlive the answer's mute."""
        self.gate.command_heard()

    def follow_up(self, seconds: float) -> None:
        """An answer asked the user something: the next utterance within `seconds` (of audio
        listened to) goes up without an on-device wake."""
        self.gate.open_follow_up(self._audio_bytes / self._bytes_per_second + seconds)

    def reset(self) -> None:
        """After a gap in what was listened to (a mute): start from quiet."""
        self.gate.reset()
        self._resumed = self._turn is not None and self._follower is not None and self._follower.paused
        self._turn = self._ended_turn = self._paused_turn = self._follower = None
        if self.detectors is not None:
            self.detectors.reset()

    def restart(self) -> None:
        """Another stream from its start (`handoff wake-test` and the benchmarks judge one try at a
        time, each as the assistant would hear it alone): a fresh gate, audio time from zero."""
        self.gate = UploadGate(self.gate.settings)
        self._audio_bytes = 0
        self.reset()
        if self.detectors is not None:
            self.detectors.vad.restart()  # (session 19: else a verdict depended on the recordings before it)
        self._wake_s = None

    def _advance(self, chunk: bytes) -> float:
        self._audio_bytes += len(chunk)
        return self._audio_bytes / self._bytes_per_second


def build_upload_filter(upload: UploadSettings, wake_phrase: str, window_s: float, bytes_per_second: int,
                        turn_end_s: float | None = None, pause_s: float | None = None) -> UploadFilter:
    """The filter the settings ask for. Raises UnknownWakeWord (one sentence) when the on-device
    spotter has no pronunciation for a word of the wake phrase."""
    gate = UploadGate(UploadGateSettings(
        mode=upload.mode,
        preroll_s=upload.preroll_ms / 1000,
        hangover_s=upload.hangover_ms / 1000,
        command_window_s=window_s,
    ))
    if upload.mode is UploadMode.CONTINUOUS:
        return UploadFilter(gate, None, bytes_per_second)
    spotter = build_wake_spotter(upload, wake_phrase) if upload.mode is UploadMode.ON_DEVICE_WAKE else None
    # Pocketsphinx (a phrase with no model) wakes on sound-alikes ("the commuter train" for
    # "computer"): its wake opens the upload, but only the transcript may make a command of it. So
    # no route before the transcript (at the commit, at the device's end of turn, at a pause): the
    # second opinion comes before anything is answered, at the cost of the transcript's wait.
    vouches = spotter is None or model_for(wake_phrase) is not None
    if not vouches:
        turn_end_s = pause_s = None
    return UploadFilter(gate, MicDetectors(SileroVad(), spotter), bytes_per_second, turn_end_s, pause_s=pause_s,
                        vouches=vouches)


def build_wake_spotter(upload: UploadSettings, wake_phrase: str, alone_cutoff: float | None = None) -> WakeSpotter:
    """The phrase's shipped model when it has one; else pocketsphinx's keyphrase search (only
    when HANDOFF_UPLOAD_MODE=wake_word is asked for: it cannot tell sound-alikes apart).
    `alone_cutoff`: see `ModelSpotterSettings` (the barge-in detector's)."""
    model = model_for(wake_phrase)
    if model is not None:
        from detectors.wake_model import ModelSpotter, ModelSpotterSettings  # numpy + TFLite

        # WAKE_CUTOFF empty: two models must agree (for a phrase where that was measured to help);
        # a number: microWakeWord alone at that cutoff (what `handoff wake-test` measures and suggests).
        rule = STRICT if upload.wake_strict else ConfirmSettings()  # WAKE_STRICT: both models for every wake
        rule = replace(rule, verify=upload.wake_verify)  # WAKE_VERIFY: a third opinion (detectors.wake_verify)
        confirm = rule if upload.wake_cutoff is None and model.confirmed and confirm_available() else None
        return ModelSpotter(ModelSpotterSettings(model, cutoff=upload.wake_cutoff, confirm=confirm, alone_cutoff=alone_cutoff,
                                                 refractory_s=upload.wake_refractory_s))
    from detectors.keyword import KeywordSpotter, KeywordSpotterSettings  # pocketsphinx

    return KeywordSpotter(KeywordSpotterSettings(phrase=wake_phrase))
