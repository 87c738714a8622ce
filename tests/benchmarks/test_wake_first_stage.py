"""`benchmarks/wake_first_stage.py`: watching the first stage changes nothing it decides, and tells where a
command went (issue 34, session 23)."""

from __future__ import annotations

from benchmarks.corpus import Corpus, Noise, _silence, with_floor
from benchmarks.neural_corpus import at_peak
from benchmarks.wake_first_stage import spans, story, watch
from benchmarks.wake_choice import judges_for
from detectors.wake_test import heard_in


def test_runs_of_chunk_end_times_are_spans():
    assert spans([0.84, 0.86, 0.88, 1.5, 1.52]) == "0.82-0.88, 1.48-1.52" and spans([]) == "none"


def test_a_watched_judge_hears_what_an_unwatched_one_does_and_says_where_each_clip_went(tmp_path):
    corpus = Corpus(tmp_path)
    floor = corpus.noise(Noise.FAN, 10.0, seed=5)
    near = with_floor(_silence(1.0) + corpus.speech("hey jarvis, what time is it", "flite:slt", 165) + _silence(1.0), floor)
    far = with_floor(_silence(3.0) + at_peak(corpus.speech("hey jarvis", "flite:kal16", 165), -60.0) + _silence(1.0), floor)
    plain, watched = (judges_for("hey jarvis", ["shipped"])["shipped"] for _ in range(2))
    seen = watch(watched)
    for pcm in (near, far):
        assert heard_in(watched, pcm) == heard_in(plain, pcm)
    told = "\n".join(story(seen, "", ((0.0, 0.0), (0.0, 0.0))))
    assert seen.speech == [] and seen.fed == [] and "speech none" in told  # (the far one: never past the VAD)
    heard_in(watched, near)
    assert seen.loud > 0 and seen.speech and seen.fed and seen.hits and seen.accepted == 1
