"""`UploadFilter.waiting_for_wake`: what it decides is on audio time only while it waits for a wake
(issue 34: then the microphone's reads may come in later, `QuietReads.unhurried`)."""

from __future__ import annotations

from benchmarks.corpus import FRAME_BYTES
from decisions.upload_gate import UploadGate, UploadGateSettings, UploadMode
from detectors.pipeline import UploadFilter
from tests.detectors.fakes import OracleDetectors


def test_it_waits_until_the_wake_and_not_while_the_woken_utterance_goes_up(small_corpus):
    clip = small_corpus[0][0]  # addressed: "computer what time is it"
    upload = UploadFilter(UploadGate(UploadGateSettings(mode=UploadMode.ON_DEVICE_WAKE)), OracleDetectors(clip),  # type: ignore[arg-type]
                          bytes_per_second=24000 * 2, turn_end_s=0.46)
    waiting = []
    for start in range(0, len(clip.pcm) - FRAME_BYTES + 1, FRAME_BYTES):
        sent = upload.feed(clip.pcm[start:start + FRAME_BYTES])
        waiting.append((bool(sent), upload.waiting_for_wake))
    first_sent = [s for s, _ in waiting].index(True)
    assert all(w for _, w in waiting[:first_sent])  # until the wake: every chunk held, waiting
    assert not any(w for _, w in waiting[first_sent:])  # from it on: the command and its turn


def test_never_when_everything_goes_up():
    upload = UploadFilter(UploadGate(UploadGateSettings(mode=UploadMode.CONTINUOUS)), None, bytes_per_second=24000 * 2)
    upload.feed(bytes(FRAME_BYTES))
    assert not upload.waiting_for_wake
