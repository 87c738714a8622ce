"""The third opinion on a wake (`detectors.wake_verify`): asked once per wake about to be accepted,
with the audio before it, and a refusal drops the wake."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.corpus import Effect, _silence

from config.settings import SettingsError, UploadMode, UploadSettings, load_settings
from config.wake_phrases import MODEL_PHRASES
from detectors.pipeline import build_wake_spotter
from detectors.wake_confirm import ConfirmSettings
from detectors.wake_model import REFUSED_S, ModelSpotter, ModelSpotterSettings
from detectors.wake_verify import VERIFY_S, WEIGHTS_DIR, WakeVerifier, verifier_available
from tests.detectors.test_wake_model import JARVIS, hits, said, two_models

# The verifier shipped until session 24 (one threshold, asked on the shipped spotter's wakes): the plain
# weights some tests build variants of.
BEFORE_S24 = WEIGHTS_DIR / "candidates" / "hey_jarvis_before_s24.npz"


class FakeVerifier:
    def __init__(self, verdict: bool, delay_s: float = 0.0) -> None:
        self.verdict = verdict
        self.delay_s = delay_s
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


@pytest.mark.parametrize("verdict", [True, False])
def test_a_verifier_with_a_delay_hears_the_audio_after_the_wake_and_the_wake_comes_that_much_later(corpus, verdict):
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    at_once, late = two_models(), two_models()
    at_once.verifier, late.verifier = FakeVerifier(True), FakeVerifier(verdict, delay_s=0.3)
    [now] = hits(at_once, pcm)
    found = hits(late, pcm)
    [early], [heard] = at_once.verifier.asked, late.verifier.asked
    shift = int(0.3 * 16000) * 2
    assert heard[:-shift] == early and heard[-shift:] not in early  # what the wake's verifier heard, and 0.3 s after it
    if verdict:
        [hit] = found
        assert hit.start_s == now.start_s and abs(hit.detected_s - now.detected_s - 0.3) <= 0.021  # (within a 20 ms chunk)
    else:
        assert found == []


def test_a_delayed_wake_at_a_low_alone_cutoff_starts_where_microwakeword_peaked_while_it_waited(corpus):
    """At 0.5 microWakeWord wakes alone before the phrase's end (`verified_alone_cutoff`); while the wake
    waits for its verifier's audio, its start follows the peak, so the upload gate finds the utterance's
    onset where it would with the model's own cutoff (session 17: far commands were otherwise dropped)."""
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    at_peak, early, waiting = (ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(), alone_cutoff=a)) for a in (None, 0.5, 0.5))
    at_peak.verifier, early.verifier, waiting.verifier = FakeVerifier(True), FakeVerifier(True), FakeVerifier(True, delay_s=0.3)
    [peaked], [before], [hit] = hits(at_peak, pcm), hits(early, pcm), hits(waiting, pcm)
    assert before.start_s < peaked.start_s  # (the low cutoff's wake came before the peak)
    assert hit.start_s == peaked.start_s


class SecondThoughts(FakeVerifier):
    """Refuses its first ask, accepts the rest."""

    def accepts(self, pcm16k: bytes) -> bool:
        self.asked.append(pcm16k)
        return len(self.asked) > 1


@pytest.mark.parametrize("reask", [None, 0.97])
@pytest.mark.parametrize("delay_s", [0.0, 0.3])
def test_a_wake_refused_before_the_phrase_s_end_is_asked_again_when_microwakeword_passes_the_reask_cutoff(corpus, reask, delay_s):
    """At a low alone cutoff (0.5) microWakeWord wakes before the phrase's end and the verifier, asked then,
    may refuse what it accepts once the phrase is whole (issue 34, session 23): with `reask_cutoff` the wake is
    asked about once more when microWakeWord passes it within REFUSED_S (or passed it while the wake waited
    for its verifier's audio), on the audio up to then (and its delay after)."""
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(reask_cutoff=reask), alone_cutoff=0.5))
    spotter.verifier = SecondThoughts(True, delay_s=delay_s)
    found = hits(spotter, pcm)
    if reask is None:
        assert len(spotter.verifier.asked) == 1 and found == []
        return
    first, second = spotter.verifier.asked
    [hit] = found
    assert first != second and second[-len(first) // 2:] not in first  # (the second heard audio after the first)
    at_peak = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings()))
    at_peak.verifier = FakeVerifier(True, delay_s=delay_s)
    [peaked] = hits(at_peak, pcm)
    assert hit.detected_s - REFUSED_S < peaked.detected_s <= hit.detected_s  # (the model's own cutoff's wake, or just after)


def test_a_wake_is_asked_about_again_once_at_most(corpus):
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    spotter = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(reask_cutoff=0.5), alone_cutoff=0.3))
    spotter.verifier = FakeVerifier(False)
    assert hits(spotter, pcm) == [] and len(spotter.verifier.asked) == 2


def test_weights_trained_on_a_laxer_spotter_make_the_models_wake_at_its_cutoffs(corpus, tmp_path):
    """`Weights.ask_*` (session 17): the spotter asks the verifier about what the spotter its weights were
    trained on woke to; here microWakeWord alone above 0.5 wakes before it reaches its own 0.97."""
    import dataclasses

    from detectors.wake_verify import Weights

    plain = Weights.load(BEFORE_S24)  # (weights trained on the shipped spotter: no ask_* of their own)
    laxer = dataclasses.replace(plain, ask_threshold=0.5, ask_pause_threshold=0.7, ask_alone_cutoff=0.5)
    laxer.save(tmp_path / "laxer.npz")
    pcm = _silence(2.0) + said(corpus, "hey jarvis, what time is it", "flite:slt")
    found = []
    for weights in (plain, Weights.load(tmp_path / "laxer.npz")):
        spotter = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(verify=True)))
        verifier = WakeVerifier("hey_jarvis", weights)
        verifier.accepts = lambda pcm16k: True  # type: ignore[method-assign]
        spotter.use_verifier(verifier)
        [hit] = hits(spotter, pcm)
        found.append(hit.detected_s)
    assert found[1] < found[0]


def test_late_weights_with_early_ones_accept_what_either_window_accepts_and_keep_both_in_their_file(tmp_path):
    import numpy as np

    from detectors.wake_verify import Weights

    zeros = np.zeros(3)
    Weights(zeros, np.ones(3), zeros, 0.0, 0.5, delay_s=0.2, early=Weights(zeros, np.ones(3), zeros, 0.0, 0.9)).save(tmp_path / "w.npz")
    loaded = Weights.load(tmp_path / "w.npz")
    assert (loaded.threshold, loaded.delay_s, loaded.early and loaded.early.threshold) == (0.5, 0.2, 0.9)
    verifier = WakeVerifier("hey_jarvis", loaded)
    wake, after = b"\1\0" * int(VERIFY_S * 16000), b"\2\0" * int(0.2 * 16000)
    late_window = (wake + after)[-len(wake) :]
    for late_score, early_score, verdict in ((0.6, 0.0, True), (0.1, 0.95, True), (0.1, 0.8, False)):
        def score(pcm: bytes, weights: Weights | None = None) -> float:
            assert pcm == (late_window if weights is None else wake)  # the late window, and the one ending at the wake
            return late_score if weights is None else early_score

        verifier.score = score  # type: ignore[method-assign]
        assert verifier.accepts(wake + after) is verdict


def test_blended_weights_judge_the_mean_of_each_window_ending_at_its_own_delay_and_keep_them_in_their_file(tmp_path):
    import numpy as np

    from detectors.wake_verify import Weights

    zeros = np.zeros(3)
    blend = (Weights(zeros, np.ones(3), zeros, 0.0, 0.0, delay_s=0.1), Weights(zeros, np.ones(3), zeros, 0.0, 0.0, delay_s=0.3))
    Weights(zeros, np.ones(3), zeros, 0.0, 0.6, delay_s=0.2, blend=blend).save(tmp_path / "w.npz")
    loaded = Weights.load(tmp_path / "w.npz")
    assert [w.delay_s for w in loaded.blend] == [0.1, 0.3]
    verifier = WakeVerifier("hey_jarvis", loaded)
    assert verifier.delay_s == 0.3  # the spotter waits for the last window's audio
    # each 100 ms after the wake marked by its own sample value, so a window says where it ends
    heard = b"\0\0" * int(VERIFY_S * 16000) + b"".join(bytes([k, 0]) * 1600 for k in (1, 2, 3))
    ends = {}

    def score(pcm: bytes, weights: Weights | None = None) -> float:
        assert len(pcm) == int(VERIFY_S * 16000) * 2
        delay = pcm[-2]  # 1, 2, 3: the window ends 100, 200, 300 ms after the wake
        ends[delay] = weights
        return {1: 0.9, 2: 0.3, 3: 0.6}[delay] if weights is None or weights.delay_s == delay / 10 else -1.0

    verifier.score = score  # type: ignore[method-assign]
    assert verifier.accepts(heard) is True and verifier.last_score == pytest.approx(0.6)  # (0.3 + 0.9 + 0.6) / 3, not the 0.3 alone
    assert ends == {2: None, 1: loaded.blend[0], 3: loaded.blend[1]}


def test_blended_windows_whole_frames_apart_are_read_in_one_pass_and_score_as_read_one_by_one(corpus):
    """Session 22: windows ending 120 / 200 / 280 ms after the wake lie on openWakeWord's 80 ms frame grid, so one
    embedding pass over the audio up to the last serves all three (a blend 100 ms apart read three times)."""
    import numpy as np

    from detectors.audio import Resampler
    from detectors.wake_verify import Weights

    rng = np.random.default_rng(1)

    def weights(delay_s: float) -> Weights:
        return Weights(np.zeros(WINDOWS_FEATURES), np.ones(WINDOWS_FEATURES), rng.normal(size=WINDOWS_FEATURES) * 0.002, 0.0, 0.5,
                       delay_s=delay_s)

    blended = dataclasses.replace(weights(0.2), blend=(weights(0.12), weights(0.28)))
    pcm = Resampler(24000)(_silence(1.0) + said(corpus, "hey jarvis, what time is it"))
    heard = pcm[-(int(VERIFY_S * 16000) + int(0.28 * 16000)) * 2 :]
    verifier = WakeVerifier("hey_jarvis", blended)
    read, reads = verifier._read, []

    def counted(piece: bytes, extra_frames: int = 0) -> np.ndarray:
        reads.append(len(piece))
        return read(piece, extra_frames) if extra_frames else read(piece)

    verifier._read = counted  # type: ignore[method-assign]
    verifier.accepts(heard)
    assert len(reads) == 1
    one_by_one = [verifier.score(heard[: len(heard) - int(back * 16000) * 2][-int(VERIFY_S * 16000) * 2 :], w)
                  for back, w in ((0.08, blended), (0.16, blended.blend[0]), (0.0, blended.blend[1]))]
    assert len(reads) == 4 and all(0.01 < score < 0.99 for score in one_by_one) and len(set(one_by_one)) == 3  # (scores that say something)
    assert verifier.last_score == pytest.approx(sum(one_by_one) / 3, abs=1e-6)


WINDOWS_FEATURES = 16 * 96  # a window's features: 16 embeddings of 96


def test_early_weights_with_a_quiet_tail_rule_are_asked_only_when_a_pause_follows_the_wake(tmp_path):
    import numpy as np

    from detectors.wake_verify import Weights

    zeros = np.zeros(3)
    Weights(zeros, np.ones(3), zeros, 0.0, 0.5, delay_s=0.3, early=Weights(zeros, np.ones(3), zeros, 0.0, 0.9),
            early_after_quiet_db=20.0).save(tmp_path / "w.npz")
    verifier = WakeVerifier("hey_jarvis", Weights.load(tmp_path / "w.npz"))
    assert verifier.weights.early_after_quiet_db == 20.0
    verifier.score = lambda pcm, weights=None: 0.1 if weights is None else 0.95  # type: ignore[method-assign]
    name = b"\0\x40" * int(VERIFY_S * 16000)  # peaks at -6 dBFS
    for after, verdict in ((b"\0\x40", False), (b"\x00\x04", True), (b"\0\0", True)):  # speech on; 24 dB under; silence
        assert verifier.accepts(name + after * int(0.3 * 16000)) is verdict


def test_a_refused_wake_starts_no_refractory_period_so_the_phrase_said_again_is_heard(corpus):
    spotter = two_models(refractory_s=5.0)
    spotter.verifier = FakeVerifier(False)
    pcm = said(corpus, "hey jarvis, what time is it", "flite:slt")
    assert hits(spotter, pcm) == []
    spotter.verifier.verdict = True
    spotter.reset()
    assert len(hits(spotter, pcm, start=len(pcm) / 48000 + REFUSED_S)) == 1  # well within the 5 s a wake would hold


def test_wake_verify_builds_the_shipped_verifier_into_the_spotter_the_assistant_runs():
    assert load_settings(environ={}, dotenv_path=None).upload.wake_verify  # on by default since session 24
    assert not load_settings(environ={"WAKE_VERIFY": "false"}, dotenv_path=None).upload.wake_verify
    with pytest.raises(SettingsError, match="WAKE_VERIFY"):
        load_settings(environ={"WAKE_VERIFY": "maybe"}, dotenv_path=None)
    assert verifier_available(JARVIS.model)
    for strict in (False, True):
        spotter = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_strict=strict, wake_verify=True), "hey jarvis")
        assert isinstance(spotter, ModelSpotter) and isinstance(spotter.verifier, WakeVerifier)
        assert spotter.settings.confirm is not None and spotter.settings.confirm.frames == (2 if strict else 1)
    assert isinstance(build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), "hey jarvis").verifier, WakeVerifier)
    assert build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE, wake_verify=False), "hey jarvis").verifier is None
    # a phrase with no trained weights: no third opinion (and no error)
    assert not verifier_available("hey_mycroft")
    assert ModelSpotter(ModelSpotterSettings(MODEL_PHRASES["hey mycroft"], confirm=ConfirmSettings(verify=True))).verifier is None


def test_the_barge_in_detector_while_it_talks_is_built_without_the_verifier():
    """`WAKE_VERIFY` is the upload path's: the barge-in detector's wake model keeps its own rule (a verifier's
    wait after the wake and relaxed cutoffs would delay the cut and change what the echo wakes)."""
    from assembly.detectors import build_stop_detector, upload_filter
    from detectors.barge_in import BargeInDetector

    settings = load_settings(environ={"WAKE_VERIFY": "true"}, dotenv_path=None)
    detector = build_stop_detector(settings)
    assert isinstance(detector, BargeInDetector) and isinstance(detector.wake, ModelSpotter)
    assert detector.wake.verifier is None
    assert detector.wake.settings.confirm is not None and not detector.wake.settings.confirm.verify
    upload = upload_filter(dataclasses.replace(settings, upload=dataclasses.replace(settings.upload, mode=UploadMode.ON_DEVICE_WAKE)))
    assert upload.detectors is not None and isinstance(upload.detectors.spotter, ModelSpotter)
    assert isinstance(upload.detectors.spotter.verifier, WakeVerifier)  # the upload path keeps it


def test_the_verifier_reads_the_windows_a_three_second_start_would_for_less_audio(corpus, monkeypatch):
    """Its padding is trimmed to what its windows need, on the same frame grid (the weights were
    fitted on these figures): the windows it scores are the same as with openWakeWord's 3 s start."""
    import numpy as np

    from detectors import wake_verify
    from detectors.audio import Resampler

    read = wake_verify.EmbeddingReader()
    pcm = Resampler(24000)(said(corpus, "hey jarvis, what time is it"))
    for length in (int(VERIFY_S * 16000), 20000):
        piece = pcm[-length * 2:]
        trimmed = wake_verify.windows(read(piece))
        monkeypatch.setattr(wake_verify, "PADDED_SAMPLES", 3 * 16000)
        assert np.array_equal(wake_verify.windows(read(piece)), trimmed)
        monkeypatch.undo()


def test_the_shipped_verifier_refuses_a_sound_alike_both_models_wake_on_and_keeps_the_phrase(corpus):
    """Neither line is in its training (benchmarks/wake_verifier_train.py); retrained weights may
    need other examples (docs/PERFORMANCE.md, "Near misses: a third opinion")."""
    verified = ModelSpotter(ModelSpotterSettings(JARVIS, confirm=ConfirmSettings(verify=True)))
    near = _silence(2.0) + said(corpus, "hey travis", "flite:slt", Effect.PITCH)  # ("hey jarvie": kept since session 12)
    assert len(hits(two_models(), near)) == 1
    assert hits(verified, near) == []
    for voice in ("flite:awb", "festival:cmu_us_slt_arctic_hts"):
        verified.reset()
        phrase = _silence(2.0) + said(corpus, "hey jarvis, what time is it", voice, Effect.PITCH)
        assert len(hits(verified, phrase)) == 1, voice  # (a clock that starts again: no refractory period)


def test_weights_with_a_lift_read_a_quiet_wake_raised_to_their_peak_and_keep_the_lift_in_their_file(tmp_path):
    """A far command (peaks at -42 dBFS) is read as loud as one said near (session 14); weights
    without a lift (the files before it) read the audio as heard."""
    import dataclasses

    import numpy as np

    from detectors.wake_verify import MAX_LIFT, Weights, lifted, weights_path

    rng = np.random.default_rng(3)
    near = (rng.normal(size=16000) * 3000).clip(-32768, 32767).astype(np.int16)
    far = (near / 40).astype(np.int16)
    peak = np.abs(np.frombuffer(lifted(far.tobytes(), -12.0), dtype=np.int16).astype(np.int32)).max()
    assert abs(20 * np.log10(peak / 32767) + 12.0) < 0.1
    assert lifted(near.tobytes(), -30.0) == near.tobytes()  # louder than the lift's peak: as it is
    faint = (near / 1000).astype(np.int16)
    assert np.abs(np.frombuffer(lifted(faint.tobytes(), -12.0), dtype=np.int16)).max() <= np.abs(faint).max() * MAX_LIFT + 1
    shipped = Weights.load(weights_path("hey_jarvis"))
    with_lift = dataclasses.replace(shipped, lift_peak_dbfs=-12.0)
    with_lift.save(tmp_path / "w.npz")
    dataclasses.replace(shipped, lift_peak_dbfs=None).save(tmp_path / "old.npz")
    assert Weights.load(tmp_path / "w.npz").lift_peak_dbfs == -12.0 and Weights.load(tmp_path / "old.npz").lift_peak_dbfs is None
    read: list[bytes] = []

    def reader(pcm: bytes) -> np.ndarray:
        read.append(pcm)
        return np.zeros((0, 96), dtype=np.float32)

    for weights in (with_lift, dataclasses.replace(shipped, lift_peak_dbfs=None)):
        verifier = WakeVerifier("hey_jarvis", weights)
        verifier._read = reader  # type: ignore[assignment]
        assert verifier.score(far.tobytes()) == 0.0
    assert read == [lifted(far.tobytes(), -12.0), far.tobytes()]


def test_weights_with_a_quiet_threshold_judge_audio_under_its_level_against_it_and_louder_audio_as_before(tmp_path):
    import dataclasses

    import numpy as np

    from detectors.wake_verify import Weights

    shipped = Weights.load(BEFORE_S24)  # (weights with one threshold at every level)
    tied = dataclasses.replace(shipped, threshold=0.9, quiet_peak_dbfs=-30.0, quiet_threshold=0.3)
    tied.save(tmp_path / "tied.npz")
    assert Weights.load(tmp_path / "tied.npz").quiet_threshold == 0.3 and shipped.quiet_threshold is None
    near = (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16).tobytes()  # peaks at -12 dBFS
    far = (np.sin(np.arange(16000) / 5) * 300).astype(np.int16).tobytes()  # -41 dBFS
    verdicts = []
    for weights in (tied, shipped):
        verifier = WakeVerifier("hey_jarvis", Weights.load(tmp_path / "tied.npz") if weights is tied else weights)
        verifier.score = lambda pcm: 0.6  # type: ignore[method-assign]  # between the thresholds
        verdicts.append((verifier.accepts(near), verifier.accepts(far)))
    assert verdicts == [(False, True), (True, True)]
