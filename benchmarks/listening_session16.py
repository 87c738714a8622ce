"""Listening's per-chunk code as it was in session 16, before issue 34's session-17 cuts (the
baseline `--baseline session16` of `benchmarks.listener_upload_pipeline`, measured in the same run):
the VAD's quiet chunks, the spotter's glue and the upload gate with the settings looked up on every
chunk, a new verdict for every chunk, the gate's deadlines asked while quiet."""

# The old methods, copied as they were (the names prefixed), patched onto today's classes.

from __future__ import annotations

import contextlib
import math
from typing import Iterator
from unittest import mock

from audio_io.format import audioop
from decisions.upload_gate import GateEvent, GateState, KeywordHit, UploadGate
from config.settings import UploadMode
from detectors.audio import SAMPLE_WIDTH, Resampler
from detectors.pipeline import MicDetectors, Verdict
from detectors.vad import SileroVad, VadVerdict


def vad_feed(self, chunk: bytes) -> VadVerdict:
    if not chunk:
        return self._verdict()
    rms = audioop.rms(chunk, SAMPLE_WIDTH)
    quiet = rms < self.settings.energy_floor_rms
    self._since_loud_s = self._since_loud_s + len(chunk) / (self.settings.input_rate * SAMPLE_WIDTH) if quiet else 0.0
    if quiet:
        was_open = self._open_s > 0
        gain = self._far_speech(rms, len(chunk) // SAMPLE_WIDTH)
        if gain is None:
            self._resample.skip(chunk)  # silence: nothing reads it at 16 kHz (issue 34: the silent room's cost)
            self._remember(chunk)
        else:
            pcm16k = self._resample(chunk)
            if not was_open and self._quiet_recent:  # Silero hears what came just before, too
                pcm16k = Resampler(self.settings.input_rate)(b"".join(self._quiet_recent)) + pcm16k
            self._quiet_recent.clear()
            self._recent_bytes = 0
            verdict = self._run_model(audioop.mul(pcm16k, SAMPLE_WIDTH, gain))
            return VadVerdict(verdict.probability, verdict.probability >= max(self.settings.threshold,
                                                                              self.settings.quiet_threshold))
    if quiet or not self._voice_like(pcm16k := self._resample(chunk)):
        # Not a voice: skip the model, keeping its state (a reset costs it a few windows of
        # ramp-up at the next word, measured as 14 % of speech frames lost).
        self._pending = b""
        self._webrtc_pending = b"" if quiet else self._webrtc_pending
        self._probability = 0.0
        return self._verdict()
    return self._run_model(pcm16k)


def vad_far_speech(self, chunk_rms: int, samples: int) -> float | None:
    """A chunk under the energy floor: the gain to amplify it by, when it stands out of the room's noise; else None."""
    settings = self.settings
    rms = self._windowed(chunk_rms, samples) if settings.quiet_window_s > 0 and settings.quiet_margin > 0 else chunk_rms
    if rms is None:  # (not yet a whole window since a reset)
        return None
    noise = self._noise_rms
    # The room's noise: follows quieter chunks down at once, louder ones up slowly (10 s).
    self._noise_rms = float(rms) if noise is None or rms < noise else noise + (rms - noise) * 0.002
    if settings.quiet_margin <= 0 or noise is None:
        return None
    self._loudest.append(chunk_rms)
    if self._since_loud_s < settings.quiet_after_loud_s:  # the fading tail of near speech, not far speech
        self._open_s = 0.0
        return None
    if rms >= settings.quiet_floor_rms and rms >= noise * settings.quiet_margin:
        self._open_s = settings.quiet_hold_s + samples / settings.input_rate
    if self._open_s <= 0:
        return None
    self._open_s -= samples / settings.input_rate  # (Silero hears the quiet stream whole while it is open)
    return min(settings.max_gain, settings.quiet_target_rms / max(1, max(self._loudest)))


def vad_remember(self, chunk: bytes) -> None:
    """Keep the last `quiet_preroll_s` of quiet audio the path did not hear (for when it opens)."""
    if self.settings.quiet_preroll_s <= 0 or self.settings.quiet_margin <= 0:
        return
    self._quiet_recent.append(chunk)
    self._recent_bytes += len(chunk)
    while self._recent_bytes - len(self._quiet_recent[0]) >= self.settings.quiet_preroll_s * self.settings.input_rate * SAMPLE_WIDTH:
        self._recent_bytes -= len(self._quiet_recent.popleft())


def vad_windowed(self, rms: int, samples: int) -> int | None:
    """The RMS of the last `quiet_window_s` of audio under the floor, this chunk's included
    (None until that much has been heard)."""
    energy = float(rms) * rms * samples
    self._window.append((samples, energy))
    self._window_samples += samples
    self._window_energy += energy
    needed = self.settings.quiet_window_s * self.settings.input_rate
    while self._window_samples - self._window[0][0] >= needed:
        old_samples, old_energy = self._window.popleft()
        self._window_samples -= old_samples
        self._window_energy -= old_energy
    if self._window_samples < needed:
        return None
    return int(math.sqrt(max(0.0, self._window_energy) / self._window_samples))


def detectors_feed(self, chunk: bytes, now: float) -> Verdict:
    vad = self.vad.feed(chunk)
    hit = None
    if self.spotter is not None:
        hit = self._spot(chunk, now, vad.is_speech)
    return Verdict(vad.is_speech, vad.probability, hit)


def detectors_spot(self, chunk: bytes, now: float, is_speech: bool) -> KeywordHit | None:
    assert self.spotter is not None
    hit = None
    spotting = self._spotting_until is not None and now <= self._spotting_until
    if is_speech and not spotting:
        self.spotter.reset()
        for end, old in self._recent:
            hit = hit or self.spotter.feed(old, end)
        self._recent.clear()
        spotting = True
    if is_speech:
        self._spotting_until = now + self._tail(now, len(chunk) / (self.vad.settings.input_rate * 2))
    if spotting and self._short_tail_s is not None and getattr(self.spotter, "listening", False):
        self._spotting_until = max(self._spotting_until or now, now + self._short_tail_s)  # its window is open
    if spotting:
        hit = self.spotter.feed(chunk, now) or hit
    else:
        self._spotting_until = None
        self._recent.append((now, chunk))
        while self._recent and now - self._recent[0][0] > self._preroll_s:
            self._recent.popleft()
    return self._pause_rule(now, len(chunk) / (self.vad.settings.input_rate * 2), is_speech) or hit


def gate_feed(self, chunk: bytes, now: float, is_speech: bool, keyword_hit: KeywordHit | None = None) -> list[bytes]:
    if self.state is GateState.STREAMING:
        return [chunk]
    start = now - len(chunk) / (self.settings.sample_rate * self.settings.sample_width)
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


def gate_trim_held(self) -> None:
    # Waiting for a wake, keep enough for a hit that arrives up to hold_s after its phrase began.
    waiting = self.settings.mode is UploadMode.ON_DEVICE_WAKE and self.state in (GateState.QUIET, GateState.HEARING)
    keep = self.settings.hold_s if waiting else self.settings.preroll_s
    if not self._held:
        return
    newest = self._held[-1][0]
    bytes_per_s = self.settings.sample_rate * self.settings.sample_width
    # A chunk is dropped once it lies wholly before the span to keep.
    while self._held and self._held[0][0] + len(self._held[0][1]) / bytes_per_s < newest - keep + 1e-9:
        self._held.popleft()


@contextlib.contextmanager
def as_in_session16() -> Iterator[None]:
    with mock.patch.object(SileroVad, "feed", vad_feed), \
            mock.patch.object(SileroVad, "_far_speech", vad_far_speech), \
            mock.patch.object(SileroVad, "_remember", vad_remember), \
            mock.patch.object(SileroVad, "_windowed", vad_windowed), \
            mock.patch.object(MicDetectors, "feed", detectors_feed), \
            mock.patch.object(MicDetectors, "_spot", detectors_spot), \
            mock.patch.object(UploadGate, "feed", gate_feed), \
            mock.patch.object(UploadGate, "_trim_held", gate_trim_held):
        yield
