"""microWakeWord's features through `MicroFeatures` and probabilities through `MicroStream` are the
wheel's own, to the last bit."""

from __future__ import annotations

import random
import statistics

from benchmarks.corpus import FRAME_BYTES
from config.wake_phrases import MODEL_PHRASES
from detectors.audio import Resampler
from detectors.micro_stream import MicroFeatures, MicroStream, _sums_exactly
from tests.detectors.test_wake_model import said


def _models():
    from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

    model = MODEL_PHRASES["hey jarvis"].model
    return MicroWakeWord.from_builtin(Model(model)), MicroWakeWord.from_builtin(Model(model)), MicroWakeWordFeatures


def test_every_feature_and_probability_is_the_wheels_across_resets(corpus):
    wheel, ours, Features = _models()
    stream = MicroStream(ours)
    features, our_features = Features(), MicroFeatures()  # (one each across the utterances: reset as the spotter does)
    compared = woke = 0
    rng = random.Random(21)
    for text in ("hey jarvis, what time is it", "hey jarvis", "hey marvin", "the weather is nice today"):
        wheel.reset()
        ours.reset()
        stream.reset()
        features.reset()
        our_features.reset()
        resample = Resampler(24000)
        pcm = said(corpus, text)
        i = 0
        while i < len(pcm):  # chunks of 20 ms and of odd lengths: the frontend's buffer carries over
            size = FRAME_BYTES if rng.random() < 0.7 else 2 * rng.randrange(1, FRAME_BYTES)
            pcm16k = resample(pcm[i:i + size])
            i += size
            frames, rows = list(features.process_streaming(pcm16k)), list(our_features.process_streaming(pcm16k))
            assert len(frames) == len(rows) and all(frame.tolist() == [[row]] for frame, row in zip(frames, rows))
            for frame, row in zip(frames, rows):
                expected = wheel.process_streaming_prob(frame)
                got = stream.probability(row)
                assert got == expected and type(got) is type(expected), (text, compared)
                compared += 1
                woke += expected > wheel.probability_cutoff
    assert compared > 500 and woke > 0  # the phrase scored over the cutoff: high scores compared too


def test_the_stream_takes_the_wheels_arrays_too(corpus):
    wheel, ours, Features = _models()
    stream, features, resample = MicroStream(ours), Features(), Resampler(24000)
    pcm = said(corpus, "hey jarvis")
    for i in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
        for frame in features.process_streaming(resample(pcm[i:i + FRAME_BYTES])):
            assert stream.probability(frame) == wheel.process_streaming_prob(frame)


def test_the_float_mean_is_statistics_mean_on_the_models_scores():
    wheel, _, _ = _models()
    values = [(q - wheel.output_zero_point) * wheel.output_scale for q in range(256)]
    assert _sums_exactly(values, wheel.sliding_window_size)
    rng = random.Random(34)
    for _ in range(20000):
        window = [rng.choice(values) for _ in range(wheel.sliding_window_size)]
        assert sum(window) / len(window) == statistics.mean(window)


def test_scores_that_would_not_sum_exactly_keep_statistics_mean():
    assert not _sums_exactly([0.1, 0.3, 0.7], 5)
    assert _sums_exactly([0.0, 0.5, 0.25], 5)
