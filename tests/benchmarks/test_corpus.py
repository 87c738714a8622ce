"""The corpus is deterministic and labelled."""

from __future__ import annotations

from benchmarks.corpus import FRAME_BYTES, Corpus, Noise, UtteranceSpec


def test_same_specs_give_the_same_audio_in_a_fresh_cache(tmp_path):
    spec = UtteranceSpec(("computer", "what time is it"), "en-us+f3", 160, True, pause_s=1.0)
    first = Corpus(tmp_path / "a").clips([spec])[0]
    again = Corpus(tmp_path / "b").clips([spec])[0]
    assert first.pcm == again.pcm
    assert Corpus(tmp_path / "a").noise(Noise.FAN, 2.0) == Corpus(tmp_path / "b").noise(Noise.FAN, 2.0)
    assert len(first.pcm) % 2 == 0


def test_labels_mark_the_onset_and_the_pause(tmp_path):
    spec = UtteranceSpec(("computer", "list the files"), "en-us", 160, True, pause_s=1.0)
    clip = Corpus(tmp_path).clips([spec])[0]
    assert clip.wake_onset_s == clip.speech_spans[0][0] >= 0.45  # after the 0.5 s lead-in (10 ms windows)
    assert len(clip.speech_spans) >= 2
    gap = clip.speech_spans[1][0] - clip.speech_spans[0][1]
    assert gap >= 0.9  # the pause before the command
    frames = clip.speech_frames()
    assert len(frames) == len(clip.pcm) // FRAME_BYTES and any(frames) and not all(frames)
