"""What the stop detector hears while the narrator talks (`EchoGatedStopFeed`): the raw mic around
the user's voice over the echo, nothing where the echo gate heard only the narrator."""

from __future__ import annotations

from detectors.stop_word import EchoGatedStopFeed, StopListener
from speech.local_voice import tone

LOUD = tone([300.0], 0.02, volume=0.3)  # a chunk of voice
QUIET = tone([300.0], 0.02, volume=0.002)  # a gap between a narrator's words: no echo expected there


def test_the_echo_alone_is_silence_and_the_gaps_between_its_words_open_nothing():
    feed = EchoGatedStopFeed(hangover_s=0.6)
    at = 0.0
    for passed, chunk in [(False, LOUD)] * 5 + [(True, QUIET)] * 5 + [(False, LOUD)] * 5 + [(True, LOUD)] * 2 + [(False, LOUD)] * 5:
        at += 0.02
        heard = feed(chunk, passed, at)
        # what the gate passed is heard as it is; echo is not heard (two loud passes are no voice yet)
        assert heard == (chunk if passed else None)


def test_a_voice_over_the_echo_is_heard_whole_for_the_hangover_then_silence_again():
    feed = EchoGatedStopFeed(hangover_s=0.1, onset=3, window=5)
    heard = [feed(LOUD, passed, 0.02 * i) for i, passed in enumerate([True, True, True, False, False, False, False, False, False], 1)]
    # three passes open it: the chunks the gate dropped (the user's consonants, mixed with echo)
    # are heard raw for 100 ms after the last pass, then the echo is not heard again
    assert heard == [LOUD] * 3 + [LOUD] * 5 + [None]
    feed.reset()
    assert feed(LOUD, False, 1.0) is None and feed(LOUD, True, 1.02) == LOUD and feed(LOUD, False, 1.04) is None


class CountingDetector:
    """Records what it is fed (and at what mic time) and each reset; fires on the fourth chunk."""

    def __init__(self) -> None:
        self.fed: list[float] = []
        self.resets = 0

    def feed(self, chunk: bytes, at: float):
        self.fed.append(round(at, 2))
        return "hit" if len(self.fed) == 4 else None

    def reset(self) -> None:
        self.resets += 1


def test_the_listener_feeds_only_while_narrating_and_starts_afresh_after_each_gap():
    detector = CountingDetector()
    listener = StopListener(detector, EchoGatedStopFeed(hangover_s=0.0))
    assert listener.hear(LOUD, passed=True, narrating=False) is None  # not narrating: nothing heard
    assert detector.fed == [] and detector.resets == 0  # (nothing to reset either)
    assert listener.hear(LOUD, passed=True, narrating=True) is None
    assert listener.hear(LOUD, passed=False, narrating=True) is None  # echo alone: a gap, reset
    assert detector.resets == 1
    assert listener.hear(LOUD, passed=False, narrating=True) is None  # another: nothing new to reset
    assert detector.resets == 1
    assert [listener.hear(LOUD, passed=True, narrating=True) for _ in range(3)] == [None, None, "hit"]
    # The detector's clock is the microphone's, counted over every chunk read, fed or not.
    assert detector.fed == [0.04, 0.1, 0.12, 0.14]
    listener.hear(LOUD, passed=True, narrating=False)  # the narration ended: reset
    assert detector.resets == 2
