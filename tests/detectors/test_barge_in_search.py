"""The stop phrase's own pocketsphinx search for the wake phrase as a second way a barge-in wakes
(`BargeInDetector(search_wakes=True)`, `StopSettings.barge_in_search_wakes`; issue 32, session 23)."""

from __future__ import annotations

import dataclasses

from benchmarks.corpus import _silence
from detectors.barge_in import BargeInDetector
from detectors.stop_phrase import StopPhraseDetector, StopPhraseSettings
from detectors.stop_word import StopHit
from tests.detectors.test_barge_in import Scripted

CHUNK = 960  # 20 ms of pcm16 at 24 kHz


class SearchSpotted(Scripted):
    """A stop detector whose wake phrase search spots the phrase at the given times (start, end)."""

    def __init__(self, spots: dict[float, tuple[float, float]]) -> None:
        super().__init__({})
        self.spots = {round(t, 2): spot for t, spot in spots.items()}
        self.wake_spotted: tuple[float, float] | None = None

    def feed(self, chunk: bytes, at: float):  # type: ignore[no-untyped-def]
        self.wake_spotted = self.spots.get(round(at, 2))
        return None


def test_the_searchs_wake_phrase_is_a_command_hit_where_the_model_heard_nothing():
    detector = BargeInDetector(SearchSpotted({1.8: (1.1, 1.7)}), Scripted({}), "hey jarvis", search_wakes=True)
    assert detector.feed(b"", 1.78) is None
    hit = detector.feed(b"", 1.8)
    assert hit is not None and hit.command and hit.phrase == "hey jarvis"
    assert (hit.start_s, hit.wake_end_s, hit.end_s) == (1.1, 1.7, 1.8)  # the hold keeps from the phrase's start
    assert detector.search_woke == 1


def test_without_the_option_the_searchs_wake_phrase_wakes_nothing():
    detector = BargeInDetector(SearchSpotted({1.8: (1.1, 1.7)}), Scripted({}), "hey jarvis")
    assert detector.feed(b"", 1.8) is None and detector.search_woke == 0


def test_the_models_wake_and_the_stop_phrase_come_first():
    from decisions.upload_gate import KeywordHit

    model = KeywordHit("hey jarvis", start_s=1.0, detected_s=1.8)
    detector = BargeInDetector(SearchSpotted({1.8: (1.1, 1.7)}), Scripted({1.8: model}), "hey jarvis", search_wakes=True)
    hit = detector.feed(b"", 1.8)
    assert hit is not None and hit.command and hit.start_s == 1.0  # the model's, as before
    assert detector.search_woke == 0
    stop = StopHit("hey jarvis stop", end_s=2.4, stop_word="stop")

    class Both(SearchSpotted):
        def feed(self, chunk: bytes, at: float):  # type: ignore[no-untyped-def]
            super().feed(chunk, at)
            return stop if round(at, 2) == 2.4 else None

    detector = BargeInDetector(Both({2.4: (1.5, 2.0)}), Scripted({}), "hey jarvis", search_wakes=True)
    assert detector.feed(b"", 2.4) is stop  # "hey jarvis, stop" is the stop phrase, not a command


def test_the_stop_phrase_detector_says_where_its_search_heard_the_wake_phrase_on_the_callers_clock(corpus):
    pcm = _silence(1.0) + corpus.speech("hey jarvis", "flite:slt", 150) + _silence(1.0)
    detector = StopPhraseDetector(StopPhraseSettings(wake_phrase="hey jarvis"))
    clock = 100.0  # the caller's clock runs ahead of the audio fed
    spotted = []
    for i in range(0, len(pcm), CHUNK):
        detector.feed(pcm[i:i + CHUNK], clock + (i + CHUNK) / 48000)
        if detector.wake_spotted is not None:
            spotted.append((detector.wake_spotted, clock + (i + CHUNK) / 48000))
    assert len(spotted) == 1
    (start, end), at = spotted[0]
    assert clock + 0.9 <= start < end <= at <= clock + 1.0 + len(pcm) / 48000
    detector.feed(bytes(CHUNK), clock + 10.0)
    assert detector.wake_spotted is None  # only for the feed that heard it


def test_a_voice_the_wake_model_misses_wakes_the_barge_in_through_the_stop_phrases_search(corpus):
    """flite awb at 200 wpm: the barge-in wake model does not wake on "hey jarvis, what time is it"
    even alone (PERFORMANCE.md, "Barge-in: whose losses are the wake model's"); the search does."""
    from assembly.detectors import build_stop_detector
    from config.settings import Settings, StopSettings

    pcm = _silence(1.5) + corpus.speech("hey jarvis, what time is it", "flite:awb", 200) + _silence(1.0)
    woke = {}
    for search in (False, True):
        detector = build_stop_detector(Settings(stop=dataclasses.replace(StopSettings(), barge_in_search_wakes=search)))
        assert isinstance(detector, BargeInDetector) and detector.search_wakes is search
        hits = [hit for i in range(0, len(pcm), CHUNK) if (hit := detector.feed(pcm[i:i + CHUNK], (i + CHUNK) / 48000))]
        woke[search] = [hit.command for hit in hits]
    assert woke == {False: [], True: [True]}


def test_by_default_the_search_wakes_a_barge_in_on_a_voice_the_wake_model_misses(corpus):
    """Switched on in session 24, once a check on the canceller's output kept the narration's leak
    out (PERFORMANCE.md, "Barge-in: the canceller's leak explained")."""
    from assembly.detectors import build_stop_detector
    from config.settings import Settings

    pcm = _silence(1.5) + corpus.speech("hey jarvis, what time is it", "flite:awb", 200) + _silence(1.0)
    detector = build_stop_detector(Settings())
    assert detector is not None
    hits = [hit for i in range(0, len(pcm), CHUNK) if (hit := detector.feed(pcm[i:i + CHUNK], (i + CHUNK) / 48000))]
    assert [hit.command for hit in hits] == [True]
