"""The shipped wake-word model (microWakeWord "hey jarvis") behind the spotter interface, on flite speech."""

from __future__ import annotations

import pytest

from benchmarks.corpus import FRAME_BYTES, FRAME_S, Corpus, Effect, Noise, _silence, with_floor
from config.settings import UploadMode, UploadSettings
from config.wake_phrases import MODEL_PHRASES
from decisions.upload_gate import UploadGate, UploadGateSettings
from detectors.pipeline import MicDetectors, build_upload_filter, build_wake_spotter
from detectors.vad import SileroVad
from detectors.wake_confirm import ConfirmSettings
from detectors.wake_model import ModelSpotter, ModelSpotterSettings

JARVIS = MODEL_PHRASES["hey jarvis"]


def said(corpus: Corpus, text: str, voice: str = "flite:slt", effect: Effect = Effect.NONE) -> bytes:
    floor = corpus.noise(Noise.FAN, 5.0, seed=5)
    return with_floor(_silence(0.5) + corpus.speech(text, voice, 165, effect) + _silence(0.8), floor)


def two_models(refractory_s: float = 3.0) -> ModelSpotter:
    return ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(), refractory_s=refractory_s))


def hits(spotter, pcm: bytes, start: float = 0.0) -> list:
    found = []
    for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
        hit = spotter.feed(pcm[i : i + FRAME_BYTES], start + (i // FRAME_BYTES + 1) * FRAME_S)
        if hit is not None:
            found.append(hit)
    return found


@pytest.mark.parametrize("voice", ["flite:slt", "flite:kal16", "festival:cmu_us_slt_arctic_hts"])
def test_the_model_hears_the_phrase_once_near_where_it_was_said(corpus, voice):
    pcm = said(corpus, "hey jarvis, what time is it", voice)
    [hit] = hits(ModelSpotter(ModelSpotterSettings(JARVIS)), pcm)
    assert hit.phrase == "hey jarvis"
    assert 0.5 < hit.detected_s < 0.5 + 1.6  # at the end of the phrase, not of the command
    assert hit.start_s == pytest.approx(hit.detected_s - JARVIS.spoken_s)


def test_ordinary_speech_and_near_misses_do_not_wake_it(corpus):
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS))
    for text in ("the weather is nice today", "did you see the game last night", "hey marvin", "a jar of peas"):
        spotter.reset()
        assert hits(spotter, said(corpus, text)) == [], text


def test_a_wake_is_not_heard_again_within_the_refractory_period_even_after_a_reset(corpus):
    pcm = said(corpus, "hey jarvis")
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, refractory_s=3.0))
    seconds = len(pcm) / 48000
    assert len(hits(spotter, pcm)) == 1
    spotter.reset()  # the pipeline resets at every speech onset: the refractory period must survive it
    assert hits(spotter, pcm, start=seconds) == []  # said again at once: within 3 s of the first
    spotter.reset()
    assert len(hits(spotter, pcm, start=seconds + 5.0)) == 1  # after the refractory period


def test_a_lower_cutoff_is_used_and_the_best_score_is_reported(corpus):
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, cutoff=0.5))
    assert spotter.cutoff == 0.5 and spotter.model_cutoff == pytest.approx(0.97)
    hits(spotter, said(corpus, "put the kettle on please"))
    best = spotter.take_best()
    assert best is not None and 0 <= best.probability < 0.5
    assert spotter.take_best() is None  # forgotten once taken


@pytest.mark.parametrize("voice, effect", [("flite:awb", Effect.PITCH), ("flite:kal16", Effect.PHONE)])
def test_two_models_hear_a_voice_that_microwakeword_alone_misses_at_its_cutoff(corpus, voice, effect):
    pcm = said(corpus, "hey jarvis, what time is it", voice, effect)
    assert hits(ModelSpotter(ModelSpotterSettings(JARVIS)), pcm) == []  # 0.87 and 0.67 against 0.97
    [hit] = hits(two_models(), pcm)
    assert 0.5 < hit.detected_s < 0.5 + 2.0  # asked 0.4 s after the candidate, still before the command ends
    assert hit.start_s < hit.detected_s - JARVIS.spoken_s  # timed from the candidate: the upload keeps "hey"


def test_two_models_must_agree_so_a_near_miss_microwakeword_takes_for_the_phrase_does_not_wake(corpus):
    pcm = said(corpus, "hey travis", "flite:slt", Effect.TEMPO)
    assert hits(ModelSpotter(ModelSpotterSettings(JARVIS)), pcm)  # microWakeWord alone: 0.996
    assert hits(two_models(), pcm) == []


def test_two_models_ignore_ordinary_speech_and_keep_the_refractory_period(corpus):
    spotter = two_models(refractory_s=3.0)
    for text in ("the weather is nice today", "hey marvin", "a jar of peas"):
        spotter.reset()
        assert hits(spotter, said(corpus, text)) == [], text
    pcm = said(corpus, "hey jarvis, what time is it", "flite:awb", Effect.PITCH)
    spotter.reset()
    assert len(hits(spotter, pcm, start=100.0)) == 1
    spotter.reset()
    assert hits(spotter, pcm, start=100.0 + len(pcm) / 48000) == []  # within 3 s of the first
    spotter.reset()
    assert len(hits(spotter, pcm, start=110.0)) == 1


def test_settings_choose_the_model_for_a_phrase_that_has_one_and_pocketsphinx_otherwise():
    default = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), "hey jarvis")
    # microWakeWord alone at its own cutoff: the second model's single check missed clean flite
    # commands that run straight on ("hey jarvis, now read ...", "hey jarvis, ask the brain ...").
    assert isinstance(default, ModelSpotter) and default.settings.confirm is None
    wake = UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_cutoff=0.8, wake_refractory_s=2.0)
    spotter = build_wake_spotter(wake, "Hey, Jarvis")
    assert isinstance(spotter, ModelSpotter) and spotter.cutoff == 0.8 and spotter.settings.refractory_s == 2.0
    assert spotter.settings.confirm is None  # WAKE_CUTOFF set: microWakeWord alone, as `handoff wake-test` measures
    assert isinstance(build_wake_spotter(wake, "ok nabu"), ModelSpotter)
    # openWakeWord's "okay nabu" and "hey mycroft" hear far less than microWakeWord's: no second opinion
    assert build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), "hey mycroft").settings.confirm is None

    from detectors.keyword import KeywordSpotter

    assert isinstance(build_wake_spotter(wake, "computer"), KeywordSpotter)
    upload = build_upload_filter(wake, "hey jarvis", 8.0, 48000)
    assert isinstance(upload.detectors.spotter, ModelSpotter)


def test_without_pyopen_wakeword_microwakeword_decides_alone_at_its_own_cutoff(monkeypatch):
    import detectors.pipeline

    monkeypatch.setattr(detectors.pipeline, "confirm_available", lambda: False)  # armv7l: no wheel
    spotter = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), "hey jarvis")
    assert isinstance(spotter, ModelSpotter) and spotter.settings.confirm is None
    assert spotter.cutoff == pytest.approx(0.97)


def test_through_the_vad_and_the_gate_the_phrase_and_command_go_up_from_their_first_word(corpus):
    """Nothing is sent before the wake; the upload starts at least the pre-roll before the phrase."""
    ordinary = said(corpus, "the weather is nice today")
    command = said(corpus, "hey jarvis, what time is it")
    stream = ordinary + command
    gate = UploadGate(UploadGateSettings(mode=UploadMode.ON_DEVICE_WAKE))
    detectors = MicDetectors(SileroVad(), two_models())  # the default: the wake is confirmed 0.4 s after the candidate
    chunks = [stream[i : i + FRAME_BYTES] for i in range(0, len(stream) - FRAME_BYTES + 1, FRAME_BYTES)]
    start_of = {id(chunk): n * FRAME_S for n, chunk in enumerate(chunks)}
    sent_at = []
    for n, chunk in enumerate(chunks):
        now = (n + 1) * FRAME_S
        verdict = detectors.feed(chunk, now)
        sent_at += [start_of[id(piece)] for piece in gate.feed(chunk, now, verdict.is_speech, verdict.keyword_hit)]
    command_starts = len(ordinary) / 48000 + 0.5
    assert sent_at, "the command was not sent"
    assert command_starts - 0.6 < sent_at[0] <= command_starts  # its pre-roll went first: "hey" is kept
    assert sent_at[-1] > command_starts + 1.5  # and the command after the phrase


def test_through_the_vad_a_phrase_followed_by_a_pause_is_confirmed_before_the_spotter_stops_listening(corpus):
    """The second model is asked half a second after the phrase: the VAD's tail must still be feeding it."""
    floor = corpus.noise(Noise.FAN, 5.0, seed=5)
    phrase = corpus.speech("hey jarvis", "flite:kal16", 165, Effect.PITCH)  # microWakeWord alone: 0.83
    stream = with_floor(_silence(0.5) + phrase + _silence(3.0), floor)
    detectors = MicDetectors(SileroVad(), two_models())
    found = [verdict.keyword_hit for n in range(len(stream) // FRAME_BYTES)
             if (verdict := detectors.feed(stream[n * FRAME_BYTES : (n + 1) * FRAME_BYTES], (n + 1) * FRAME_S)).keyword_hit]
    [hit] = found
    assert hit.detected_s < 0.5 + len(phrase) / 48000 + 1.0


@pytest.mark.parametrize("phrase", list(MODEL_PHRASES))
def test_every_phrase_with_a_model_can_also_stop_the_narrator(phrase):
    """"<phrase>, stop" is heard by pocketsphinx, whose dictionary lacks "nabu" and "mycroft"."""
    import dataclasses

    from assembly.build import build_stop_detector
    from config.settings import ListenerSettings, Settings

    settings = Settings(listener=dataclasses.replace(ListenerSettings(), wake_phrase=phrase))
    assert build_stop_detector(settings) is not None


def test_a_clock_that_starts_again_starts_without_a_refractory_period(corpus):
    pcm = said(corpus, "hey jarvis")
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, refractory_s=3.0))
    assert len(hits(spotter, pcm)) == 1
    spotter.reset()
    assert len(hits(spotter, pcm, start=0.0)) == 1  # another recording, timed from zero again
