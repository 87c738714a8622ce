"""The end-of-turn benchmark's model rows: an end-of-utterance model consulted once per pause after
`silence_ms` of the device VAD's silence, its verdict or the fallback silence ending the turn (a
scripted model here: the real one is measured only where it is installed)."""

from __future__ import annotations

from benchmarks.end_of_turn import MODEL_FALLBACK_MS, Clip, model_turns


def _flags(*spans: tuple[bool, int]) -> list[bool]:
    """20 ms VAD verdicts: (speech?, ms) spans in order."""
    return [speech for speech, ms in spans for _ in range(ms // 20)]


# 500 ms of silence, 600 ms of speech, a 400 ms pause, 400 ms of speech (ends at 1,900 ms), 2 s of silence
COMMAND = _flags((False, 500), (True, 600), (False, 400), (True, 400), (False, 2000))
CLIP = Clip(pcm=b"", speech_end_ms=1900, pause_ms=400, after_wake=False, pause_at_ms=1100)


class Scripted:
    """Says `inside` in the command's pause and `end` after its last word; 30 ms of CPU a decision."""

    def __init__(self, inside: float, end: float) -> None:
        self.inside, self.end, self.asked = inside, end, []

    def __call__(self, clip_index: int, clip: Clip, start_ms: int, now_ms: int) -> tuple[float, float]:
        self.asked.append((start_ms, now_ms))
        return (self.end if now_ms >= clip.speech_end_ms else self.inside), 30.0


def test_a_pause_the_model_calls_unfinished_waits_for_the_fallback_and_does_not_split():
    model, said = Scripted(inside=0.3, end=0.3), []
    turns, end = model_turns(COMMAND, 0, CLIP, model, 200, 0.5, said)
    assert turns == 1
    assert end == MODEL_FALLBACK_MS  # unfinished at the end too: the fallback silence ends it
    # asked once per pause, on the turn's audio from 500 ms before its first speech
    assert model.asked == [(0, 1300), (0, 2100)]
    assert said == [("inside", 0.3), ("end", 0.3)]


def test_a_finished_command_ends_at_the_models_verdict_sooner_than_the_fallback():
    turns, end = model_turns(COMMAND, 0, CLIP, Scripted(inside=0.3, end=0.9), 200, 0.5, [])
    assert turns == 1
    assert end == 200 + 30  # the silence it waited and the model's own time


def test_a_pause_the_model_calls_finished_splits_the_command():
    turns, end = model_turns(COMMAND, 0, CLIP, Scripted(inside=0.9, end=0.9), 200, 0.5, [])
    assert turns == 2
    assert end == 200 + 30


def test_the_provisional_replay_withdraws_the_route_sent_at_the_pause_and_acts_only_on_the_whole_command():
    from benchmarks.provisional_replay import Tally, replay

    tally = Tally()
    # the wake phrase ends 300 ms into the speech; the 400 ms pause inside is past a 140 ms point
    replay(COMMAND, 800, "set a timer", 0.14, 0.46, frozenset({"get_time"}), 1000, 0.05, tally)
    assert (tally.split, tally.sent, tally.withdrawn, tally.acted_early, tally.answers) == (0, 2, 1, 0, [1])
    assert 0 < tally.account.withdrawn_tokens < tally.account.routing_tokens
    off = Tally()
    replay(COMMAND, 800, "set a timer", None, 0.46, frozenset({"get_time"}), 1000, 0.05, off)
    assert (off.sent, off.withdrawn, off.answers, off.account.extra_tokens) == (0, 0, [1], 0)


def test_the_device_turn_is_timed_in_the_microphones_chunks():
    """--chunk-ms 40 (issue 34): each verdict stands for 40 ms, and the turn ends at the first chunk
    end at least TURN_END_MS after the last speech (460 ms rounds up to 480)."""
    from benchmarks.end_of_turn import device_turns

    flags = [speech for speech, ms in ((False, 520), (True, 600), (False, 400), (True, 400), (False, 2000))
             for _ in range(ms // 40)]
    clip = Clip(pcm=b"", speech_end_ms=1920, pause_ms=400, after_wake=False, pause_at_ms=1120)
    assert device_turns(flags, clip, 460, chunk_ms=40) == (1, 480)
    assert device_turns(flags, clip, 380, chunk_ms=40) == (2, 400)  # the 400 ms pause ends a turn (380 rounds up)
