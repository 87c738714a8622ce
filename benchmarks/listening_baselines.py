"""The baselines of `benchmarks.listener_upload_pipeline --listening` (issue 34): listening as it
was before each session's cuts, patched in for one row and measured beside today's in the same run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any, Callable, Iterator
from unittest import mock

from audio_io import PushMicrophone, QuietReads
from benchmarks.listening_session16 import as_in_session16
from benchmarks.listening_session18 import as_in_session18
from benchmarks.listening_session19 import as_in_session19
from benchmarks.listening_session20 import as_in_session20


# The benchmark's microphone, made as `MICROPHONE(chunk_ms=, pace=, read_ms=, quiet=)` (what baselines swap).
MICROPHONE: Callable[..., PushMicrophone] = PushMicrophone


@contextlib.contextmanager
def _microphone(make: Callable[..., PushMicrophone]) -> Iterator[None]:
    with mock.patch(f"{__name__}.MICROPHONE", make):
        yield


@contextlib.contextmanager
def detectors_before_issue_34() -> Iterator[None]:
    """The detectors as they were before issue 34's cuts: Silero on every window of speech,
    openWakeWord started at once on every candidate (the baseline, measured in the same run)."""
    import detectors.pipeline as pipeline
    from detectors.vad import SileroVad, VadSettings
    from detectors.wake_confirm import ConfirmSettings

    with mock.patch.object(pipeline, "SileroVad", lambda: SileroVad(VadSettings(speech_stride=1))), \
            mock.patch.object(pipeline, "ConfirmSettings", lambda: ConfirmSettings(start_after_s=0)):
        yield


@contextlib.contextmanager
def spotter_tail_before() -> Iterator[None]:
    """The detectors as they were before the spotter's short tail (issue 34, 2026-11-26, session 10):
    the spotter heard a second after every run of speech, whatever it was."""
    import detectors.pipeline as pipeline

    class FullTail(pipeline.MicDetectors):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs, short_tail_s=None)

    with mock.patch.object(pipeline, "MicDetectors", FullTail):
        yield


@contextlib.contextmanager
def read_a_chunk_at_a_time() -> Iterator[None]:
    """The microphone read a chunk at a time, whatever `read_ms` asks (before issue 34, session 11)."""
    with _microphone(lambda chunk_ms, pace, read_ms, quiet: PushMicrophone(chunk_ms=chunk_ms, pace=pace)):
        yield


@contextlib.contextmanager
def every_read_at_once() -> Iterator[None]:
    """Every read of the microphone handed on at once, a silent room's too (before issue 34, session 18)."""
    with _microphone(lambda chunk_ms, pace, read_ms, quiet: PushMicrophone(chunk_ms=chunk_ms, pace=pace, read_ms=read_ms)):
        yield


@contextlib.contextmanager
def two_quiet_reads() -> Iterator[None]:
    """A silent room's reads two at a time (`AudioSettings.quiet_read_ms` 80: session 18's first cut)."""
    from config.settings import AudioSettings

    two = QuietReads.of(dataclasses.replace(AudioSettings(), quiet_read_ms=80))  # (the settings' own rule, not restated)
    with _microphone(lambda chunk_ms, pace, read_ms, quiet: PushMicrophone(chunk_ms=chunk_ms, pace=pace, read_ms=read_ms, quiet=two)):
        yield


@contextlib.contextmanager
def as_in_session16_with_every_read() -> Iterator[None]:
    """Session 16's per-chunk code and every read handed on at once."""
    with as_in_session16(), every_read_at_once():
        yield


@contextlib.contextmanager
def before_session_11() -> Iterator[None]:
    """Listening as it was before issue 34's session 11: the microphone read a chunk at a time, its
    pacer's every wait an `asyncio.timeout` around an Event, silence resampled for the VAD."""
    from audio_io.memory import Pacer
    from detectors.audio import Resampler

    async def wait_for_chunk(self: Pacer, index: int, hold: object = None) -> bool:
        delay = self._t0 + index * self._chunk_s / self._pace - asyncio.get_running_loop().time() if self._pace > 0 else 0.0
        if delay <= 0:
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await asyncio.Event().wait()
        return not self._stopped

    with read_a_chunk_at_a_time(), mock.patch.object(Pacer, "wait_for_chunk", wait_for_chunk), \
            mock.patch.object(Resampler, "skip", Resampler.__call__):
        yield


@contextlib.contextmanager
def quiet_path_switched() -> Iterator[None]:
    """The VAD's quiet path (`VadSettings.quiet_margin`, the far field) on if the shipped VAD has it off, else off."""
    import detectors.pipeline as pipeline
    from benchmarks.listener_upload import quiet_path
    from detectors.vad import SileroVad, VadSettings

    with mock.patch.object(pipeline, "SileroVad", lambda: SileroVad(quiet_path(VadSettings().quiet_margin <= 0))):
        yield


@contextlib.contextmanager
def quiet_threshold_08() -> Iterator[None]:
    """The VAD's quiet path judging the amplified stream at Silero 0.8, as before issue 34's session 23 (0.6)."""
    import detectors.pipeline as pipeline
    from detectors.vad import SileroVad, VadSettings

    with mock.patch.object(pipeline, "SileroVad", lambda: SileroVad(dataclasses.replace(VadSettings(), quiet_threshold=0.8))):
        yield


@contextlib.contextmanager
def wheel_inference() -> Iterator[None]:
    """microWakeWord's probabilities from the wheel's own `process_streaming_prob` (before issue 34,
    session 13's `MicroStream`)."""
    import detectors.micro_stream as micro_stream

    class Wheel:
        def __init__(self, model: Any) -> None:
            self.probability, self.reset = model.process_streaming_prob, lambda: None

    with mock.patch.object(micro_stream, "MicroStream", Wheel):
        yield


@contextlib.contextmanager
def a_frame_per_chunk() -> Iterator[None]:
    """The uplink sends every chunk as its own append frame (before issue 34, session 13)."""
    import handoff

    with mock.patch.object(handoff, "FRAME_MS", 0):
        yield


@contextlib.contextmanager
def before_session_13() -> Iterator[None]:
    """Listening as in session 12: microWakeWord through the wheel's call, a frame per chunk."""
    with wheel_inference(), a_frame_per_chunk():
        yield


@contextlib.contextmanager
def before_session_14() -> Iterator[None]:
    """Listening as in session 13: the heap built at start left in the collector's sight (no `gc.freeze`)."""
    import gc

    import assembly.build as build

    gc.unfreeze()  # an earlier row's freeze would otherwise carry into this one
    with mock.patch.object(build.gc, "freeze", lambda: None):
        yield
    gc.unfreeze()


@contextlib.contextmanager
def canceller_latency_every_chunk() -> Iterator[None]:
    """The echo canceller reads the devices' latency on every chunk, idle or not, and twice on a
    chunk it runs on (before issue 34, session 15)."""
    from audio_io.echo_cancel import EchoCanceller

    def active(self: EchoCanceller, at: float) -> float | None:
        if at - self._last_played_end > self._idle_s + self._delay():
            return None
        return self._delay()

    with mock.patch.object(EchoCanceller, "_active", active):
        yield


@contextlib.contextmanager
def _canceller_with(**changes: Any) -> Iterator[None]:
    """Every echo canceller the assistant builds made with these `EchoSettings` changed."""
    import audio_io.echo_reference as echo_reference

    build = echo_reference.build_canceller
    with mock.patch.object(echo_reference, "build_canceller",
                           lambda settings, *args: build(dataclasses.replace(settings, **changes), *args)):
        yield


def canceller_idle_2s() -> contextlib.AbstractContextManager[None]:
    """The echo canceller runs 2 s after every sound played, not the echo's tail (before issue 34, session 15)."""
    return _canceller_with(cancel_idle_s=2.0)


def canceller_measured_in_session22() -> contextlib.AbstractContextManager[None]:
    """The echo canceller measured for issue 34's session 22 and not switched on: speexdsp on 20 ms
    frames, the shadow filter only while the main one looks misadjusted. (A candidate, not a
    baseline: the ratio is today's code to it.)"""
    return _canceller_with(cancel_frame_ms=20, cancel_shadow_always=False)


@contextlib.contextmanager
def before_session_15() -> Iterator[None]:
    """Listening as in session 14: the canceller ran 2 s after every sound and read the devices' latency on every chunk."""
    with canceller_latency_every_chunk(), canceller_idle_2s():
        yield


@contextlib.contextmanager
def todays_code() -> Iterator[None]:
    """Nothing patched: today's code in both rows, so a ratio shows what the rows' order and the
    machine alone do (an A/A check of the same-run ratios)."""
    yield


@contextlib.contextmanager
def unverified() -> Iterator[None]:
    """The two wake models alone (`WAKE_VERIFY=false`, the shipped rule before session 24)."""
    import detectors.pipeline as pipeline

    build = pipeline.build_wake_spotter
    with mock.patch.object(pipeline, "build_wake_spotter",
                           lambda upload, *a, **k: build(dataclasses.replace(upload, wake_verify=False), *a, **k)):
        yield


BASELINES = {"issue34": ("detectors before issue 34's cuts", detectors_before_issue_34),
             "tail": ("detectors before the spotter's short tail", spotter_tail_before),
             "read": ("read a chunk at a time", read_a_chunk_at_a_time),
             "session10": ("as in session 10 (read a chunk at a time, silence resampled)", before_session_11),
             "quiet": ("the VAD's quiet path switched (on if shipped off)", quiet_path_switched),
             "wheel": ("microWakeWord through the wheel's own call", wheel_inference),
             "frames": ("an append frame per chunk", a_frame_per_chunk),
             "session12": ("as in session 12 (the wheel's microWakeWord call, a frame per chunk)", before_session_13),
             "session13": ("as in session 13 (the heap built at start not frozen)", before_session_14),
             "latency": ("the canceller reading the devices' latency on every chunk", canceller_latency_every_chunk),
             "idle2s": ("the canceller running 2 s after every sound", canceller_idle_2s),
             "session14": ("as in session 14 (the canceller 2 s after every sound, the devices' latency read on every chunk)",
                           before_session_15),
             "session16": ("as in session 16 (the detectors' and gate's per-chunk code before session 17; every read at once)",
                           as_in_session16_with_every_read),
             "session17": ("as in session 17 (every read handed on at once, a silent room's too)", every_read_at_once),
             "quiet80": ("a silent room's reads two at a time (quiet_read_ms 80)", two_quiet_reads),
             "session18": ("as in session 18 (the echo gate's `_learn` looping over every delay)", as_in_session18),
             "session19": ("as in session 19 (a read with a sound in it handed on at once, whoever listens)", as_in_session19),
             "session20": ("as in session 20 (microWakeWord's features an ndarray per frame, `np.round`)", as_in_session20),
             "aec22": ("the echo canceller on 20 ms frames, its shadow on demand (session 22's candidate, not shipped)",
                       canceller_measured_in_session22),
             "quiet08": ("the quiet path at Silero 0.8 (before session 23)", quiet_threshold_08),
             "unverified": ("the two wake models alone (WAKE_VERIFY=false, before session 24)", unverified),
             "today": ("today's code (an A/A check)", todays_code)}
# Baselines that only a new interpreter can give (what a library reads once, when it loads): the
# environment each measurement's process starts with; both rows then run in fresh processes.
FRESH_PROCESS_BASELINES = {
    # A limit set by the user is left alone by detectors/vad.py, so a high one restores OpenMP's default.
    "openmp": ("Silero on OpenMP's threads (before session 12)", {"OMP_THREAD_LIMIT": "1024"}),
}
