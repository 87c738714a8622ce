"""The third opinion on a wake (`detectors.wake_verify`): asked once per wake about to be accepted,
with the audio before it, and a refusal drops the wake."""

from __future__ import annotations

import pytest

from benchmarks.corpus import _silence

from detectors.wake_confirm import ConfirmSettings
from detectors.wake_model import REFUSED_S, ModelSpotter, ModelSpotterSettings
from detectors.wake_verify import VERIFY_S, WakeVerifier, verifier_available
from tests.detectors.test_wake_model import JARVIS, hits, said, two_models


class FakeVerifier:
    def __init__(self, verdict: bool) -> None:
        self.verdict = verdict
        self.asked: list[bytes] = []

    def accepts(self, pcm16k: bytes) -> bool:
        self.asked.append(pcm16k)
        return self.verdict


@pytest.mark.parametrize("verdict", [True, False])
def test_the_verifier_is_asked_once_per_wake_with_the_audio_before_it_and_its_refusal_drops_the_wake(corpus, verdict):
    spotter = two_models()
    spotter.verifier = FakeVerifier(verdict)
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    found = hits(spotter, pcm)
    assert len(found) == (1 if verdict else 0)
    [heard] = spotter.verifier.asked  # once, not per chunk (a refusal keeps it quiet for REFUSED_S)
    assert len(heard) == int(VERIFY_S * 16000) * 2  # the last VERIFY_S of 16 kHz pcm16, the phrase in it


def test_a_refused_wake_starts_no_refractory_period_so_the_phrase_said_again_is_heard(corpus):
    spotter = two_models(refractory_s=5.0)
    spotter.verifier = FakeVerifier(False)
    pcm = said(corpus, "hey jarvis, what time is it", "flite:slt")
    assert hits(spotter, pcm) == []
    spotter.verifier.verdict = True
    spotter.reset()
    assert len(hits(spotter, pcm, start=len(pcm) / 48000 + REFUSED_S)) == 1  # well within the 5 s a wake would hold


def test_the_verify_setting_builds_the_shipped_verifier():
    assert verifier_available(JARVIS.model)
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(verify=True)))
    assert isinstance(spotter.verifier, WakeVerifier)
    assert two_models().verifier is None
