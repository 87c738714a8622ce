"""The on-device detectors on generated speech: Silero VAD, the pocketsphinx spotter, and the path with the gate."""

from __future__ import annotations

import pytest

from benchmarks.corpus import FRAME_BYTES, FRAME_S, Clip, Noise, active_rms, mix
from decisions.upload_gate import UploadGate, UploadGateSettings, UploadMode
from detectors.audio import Resampler, audioop
from detectors.keyword import KeywordSpotter, KeywordSpotterSettings, UnknownWakeWord
from detectors.pipeline import MicDetectors
from detectors.vad import SileroVad, VadSettings
from tests.detectors.fakes import OracleDetectors


def chunks(pcm: bytes, size: int = FRAME_BYTES) -> list[bytes]:
    return [pcm[i : i + size] for i in range(0, len(pcm) - size + 1, size)]


def speech_found(vad: SileroVad, clip_pcm: bytes, labels: list[bool]) -> float:
    verdicts = [vad.feed(c).is_speech for c in chunks(clip_pcm)]
    return sum(v for v, l in zip(verdicts, labels) if l) / sum(labels)


def test_vad_calls_silence_and_room_noise_silence(corpus, small_corpus):
    vad = SileroVad()
    assert not any(vad.feed(c).is_speech for c in chunks(bytes(FRAME_BYTES * 250)))
    level = active_rms(small_corpus[0][0].pcm)
    for kind in (Noise.FAN, Noise.HUM):
        room = mix(bytes(FRAME_BYTES * 250), corpus.noise(kind, 5.0), 10, speech_level=level)
        called = sum(vad.feed(c).is_speech for c in chunks(room))
        assert called <= 5, f"{kind.name}: {called} of 250 frames called speech"


def test_vad_finds_speech_clean_and_at_20_db(corpus, small_corpus):
    clip = small_corpus[0][0]
    assert speech_found(SileroVad(), clip.pcm, clip.speech_frames()) >= 0.7
    noisy = mix(clip.pcm, corpus.noise(Noise.FAN, 5.0), 20)
    assert speech_found(SileroVad(), noisy, clip.speech_frames()) >= 0.8


def test_silence_is_not_resampled_and_the_speech_after_it_resamples_to_the_same_bytes(small_corpus):
    """Issue 34: a chunk under the energy floor is not resampled for the models; the resampler's
    state moves on as if it had been, so the speech after it is heard exactly as before."""
    clip = bytes(FRAME_BYTES * 10) + small_corpus[0][0].pcm
    whole, skipping = Resampler(24000), Resampler(24000)
    quiet = [audioop.rms(c, 2) < VadSettings().energy_floor_rms for c in chunks(clip)]
    assert 10 <= sum(quiet) < len(quiet) - 10
    for chunk, is_quiet in zip(chunks(clip), quiet):
        resampled = whole(chunk)
        if is_quiet:
            skipping.skip(chunk)
        else:
            assert skipping(chunk) == resampled


def test_vad_takes_chunks_of_any_size(small_corpus):
    clip = small_corpus[0][0]
    odd = [clip.pcm[i : i + 334] for i in range(0, len(clip.pcm), 334)]  # 167 samples: 7 ms
    vad = SileroVad()
    assert sum(vad.feed(c).is_speech for c in odd) > 0


def test_while_speech_goes_on_silero_runs_on_every_other_window_and_the_verdicts_hold(corpus, small_corpus):
    """Silero is most of what listening costs where people talk (issue 34): inside speech it runs
    on half the windows, and the verdicts (onsets included) stay those of every window."""
    for clip in small_corpus[0][:3]:
        for pcm in (clip.pcm, mix(clip.pcm, corpus.noise(Noise.FAN, 5.0), 20)):
            every, half = SileroVad(VadSettings(speech_stride=1)), SileroVad()
            old = [every.feed(c).is_speech for c in chunks(pcm)]
            new = [half.feed(c).is_speech for c in chunks(pcm)]
            assert half.windows_run <= 0.65 * every.windows_run
            assert sum(a == b for a, b in zip(old, new)) >= 0.97 * len(old)
            assert new.index(True) == old.index(True)


def feed_spotter(spotter: KeywordSpotter, clip: Clip):
    spotter.reset()
    t = 0.0
    for chunk in chunks(clip.pcm):
        t += FRAME_S
        hit = spotter.feed(chunk, t)
        if hit is not None:
            return hit
    return None


def test_the_spotter_hears_the_wake_word_at_the_start_of_addressed_utterances(small_corpus):
    addressed, _ = small_corpus
    spotter = KeywordSpotter()
    hits = [feed_spotter(spotter, clip) for clip in addressed]
    found = [h for h, clip in zip(hits, addressed) if h is not None and abs(h.start_s - clip.wake_onset_s) <= 0.5]
    assert len(found) >= 5, [(c.text, h) for c, h in zip(addressed, hits)]
    for hit in found:
        assert hit.detected_s > hit.start_s  # reported after the phrase began, with when it began


def test_the_spotter_does_not_fire_on_the_wake_word_late_in_a_sentence(small_corpus):
    _, others = small_corpus
    late = next(c for c in others if c.text.startswith("I bought a new computer"))
    hit = feed_spotter(KeywordSpotter(), late)
    assert hit is None or hit.start_s - late.speech_spans[0][0] > UploadGateSettings().max_wake_lead_s


def test_a_wake_phrase_outside_the_dictionary_is_refused():
    with pytest.raises(UnknownWakeWord):
        KeywordSpotter(KeywordSpotterSettings(phrase="zorblaxian"))


def upload(detectors, clip: Clip, mode: UploadMode) -> tuple[list[int], float | None]:
    """Plays the clip through detectors and gate; returns the indexes of the chunks that went up
    and the clip time where the first one starts."""
    gate = UploadGate(UploadGateSettings(mode=mode))
    pieces = chunks(clip.pcm)
    index_of = {id(c): i for i, c in enumerate(pieces)}  # the gate returns the chunk objects it was given
    sent: list[int] = []
    for i, chunk in enumerate(pieces):
        t = (i + 1) * FRAME_S
        verdict = detectors.feed(chunk, t)
        sent.extend(index_of[id(out)] for out in gate.feed(chunk, t, verdict.is_speech, verdict.keyword_hit))
    assert sent == sorted(set(sent)), "chunks out of order or repeated"
    return sent, (sent[0] * FRAME_S if sent else None)


@pytest.mark.parametrize("mode", [UploadMode.SPEECH_ONLY, UploadMode.ON_DEVICE_WAKE])
def test_real_detectors_and_gate_keep_the_first_word(small_corpus, mode):
    clip = small_corpus[0][0]  # "computer what time is it"
    detectors = MicDetectors(SileroVad(), KeywordSpotter() if mode is UploadMode.ON_DEVICE_WAKE else None)
    sent, first = upload(detectors, clip, mode)
    assert sent, "nothing uploaded"
    assert first is not None and first <= clip.wake_onset_s - 0.3  # the pre-roll reaches before the onset


def test_oracle_detectors_wake_mode_uploads_addressed_and_drops_the_rest(small_corpus):
    addressed, others = small_corpus
    for clip in addressed:
        sent, first = upload(OracleDetectors(clip), clip, UploadMode.ON_DEVICE_WAKE)
        assert first is not None and first <= clip.wake_onset_s - 0.3, clip.text
    for clip in others:
        sent, _ = upload(OracleDetectors(clip), clip, UploadMode.ON_DEVICE_WAKE)
        assert sent == [], clip.text
