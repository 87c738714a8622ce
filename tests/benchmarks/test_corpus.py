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


def test_every_voice_family_and_effect_speaks_repeatably(tmp_path):
    from benchmarks.corpus import FAMILY_VOICES, Effect, Family, family_of

    a, b = Corpus(tmp_path / "a"), Corpus(tmp_path / "b")
    for family, voices in FAMILY_VOICES.items():
        assert family_of(voices[0]) is family
        plain = a.speech("hey jarvis", voices[0], 150)
        assert len(plain) > 0.3 * 48000, family  # speech, trimmed of its silences
        assert b.speech("hey jarvis", voices[0], 150) == plain  # the same in a fresh cache
    assert family_of("en-us+f3") is Family.ESPEAK
    faster = a.speech("hey jarvis", "flite:slt", 200)
    assert len(faster) < len(a.speech("hey jarvis", "flite:slt", 130))  # the pace follows the words per minute
    effects = {a.speech("hey jarvis, what time is it", "flite:slt", 165, effect) for effect in Effect}
    assert len(effects) == len(Effect)  # every effect changes the sound


def test_the_wake_sets_take_turns_over_the_families_and_the_babble_is_streamed(tmp_path):
    from benchmarks.corpus import Family, babble_stream, family_of, near_miss_specs, ordinary_specs, wake_specs

    specs = wake_specs("hey jarvis", 9)
    assert [family_of(s.voice) for s in specs[:3]] == list(Family)
    assert all(s.addressed and s.parts[0].startswith("hey jarvis") for s in specs)
    assert sum(len(s.parts) == 2 and s.pause_s > 0 for s in specs) == 3  # phrase, pause, command
    assert not any(s.addressed for s in ordinary_specs(5) + near_miss_specs("alexa", 5))
    pieces = list(babble_stream(Corpus(tmp_path), 3.0))
    assert len(pieces) == 3 and all(len(p) == 48000 for p in pieces)


def test_every_family_says_the_phrase_with_a_pause_and_every_voice_at_several_speeds():
    """The pause variant and the speed once followed the family's or the voice's turn: every festival
    clip had the pause and no flite or espeak-ng clip; each flite voice spoke at one speed."""
    from collections import defaultdict

    from benchmarks.corpus import Family, family_of, near_miss_specs, wake_specs

    specs = wake_specs("hey jarvis", 100)
    paused = defaultdict(set)
    for s in specs:
        paused[family_of(s.voice)].add(s.pause_s > 0)
    assert all(paused[f] == {True, False} for f in Family)
    for made in (specs, near_miss_specs("hey jarvis", 100)):
        speeds = defaultdict(set)
        for s in made:
            speeds[s.voice].add(s.speed)
        assert all(len(v) >= 3 for v in speeds.values()), speeds
