"""The device's own end of turn (END_OF_TURN=device, issue 20): the upload filter hands over a
woken utterance's audio once its VAD has heard `turn_end_s` of silence after it; never the wake
phrase alone, never an unwoken utterance."""

from __future__ import annotations

from speech.local_voice import tone
from tests.support.scripted_wake import ScriptedWake, scripted_wake_filter

CHUNK = 960  # 20 ms
SILENCE_MS = 48


def run(pcm: bytes, woken: bool, turn_end_s: float = 0.45):
    wake = ScriptedWake()
    if woken:
        wake.wake_next()
    upload = scripted_wake_filter(wake, turn_end_s=turn_end_s)
    sent, turns, wakes = 0, [], []
    for index in range(0, len(pcm), CHUNK):
        sent += len(upload.feed(pcm[index:index + CHUNK]))
        if (turn := upload.take_turn()) is not None:
            turns.append(((index + CHUNK) / 48, len(turn)))
        if (phrase := upload.take_wake()) is not None:
            wakes.append(phrase)
    return sent, turns, wakes


def test_a_woken_command_ends_its_turn_after_the_silence_with_its_audio():
    speech = tone([190.0, 230.0, 210.0], 0.3)  # 0.9 s
    pcm = bytes(500 * SILENCE_MS) + speech + bytes(1500 * SILENCE_MS)
    _, turns, wakes = run(pcm, woken=True)
    assert len(wakes) == 1 and 0.2 <= wakes[0] <= 0.24  # the phrase, as long as the spotter says
    ((at_ms, size),) = turns
    assert 1400 + 450 <= at_ms <= 1400 + 450 + 40  # the turn end, to a chunk or two
    assert size >= len(speech)  # the utterance from its pre-roll


def test_the_turn_ends_after_the_silence_set_to_the_chunk_not_a_chunk_later():
    # Silence is counted in 20 ms chunks of audio time: 0.44 s is 22 of them, never 23 (a float
    # difference of two audio times once fell a hair short of it).
    pcm = bytes(600 * SILENCE_MS) + tone([190.0, 230.0, 210.0], 0.3) + bytes(1500 * SILENCE_MS)
    ends = {turn_end_s: run(pcm, woken=True, turn_end_s=turn_end_s)[1][0][0] for turn_end_s in (0.44, 0.45, 0.46)}
    assert ends[0.46] - ends[0.44] == 20  # a setting between two chunks is rounded up
    assert ends[0.45] == ends[0.46]


def test_a_pause_shorter_than_the_turn_end_does_not_end_it():
    part = tone([190.0, 230.0], 0.3)
    pcm = bytes(500 * SILENCE_MS) + part + bytes(400 * SILENCE_MS) + part + bytes(1500 * SILENCE_MS)
    _, turns, _ = run(pcm, woken=True)
    assert len(turns) == 1 and turns[0][0] > 500 + 600 + 400 + 600


def test_the_wake_phrase_alone_and_unwoken_speech_end_no_turn():
    phrase = tone([190.0, 230.0], 0.12)  # 0.24 s: the hit at 0.2 s, no command after it
    assert run(bytes(500 * SILENCE_MS) + phrase + bytes(1500 * SILENCE_MS), woken=True)[1] == []
    sent, turns, wakes = run(bytes(500 * SILENCE_MS) + tone([190.0], 1.0) + bytes(1500 * SILENCE_MS), woken=False)
    assert (sent, turns, wakes) == (0, [], [])
