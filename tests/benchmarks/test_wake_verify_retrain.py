"""The grid blend's training (`benchmarks.wake_verify_retrain`, issue 34, session 23): its collections read what the
verifier reads, its sentences and draws are none of the benchmark's, and what it writes is a grid blend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from benchmarks.corpus import NEAR_MISS_LINES, ORDINARY, WAKE_COMMANDS, Corpus
from benchmarks.neural_corpus import EXTRA_NEAR_MISSES, NeuralCorpus, neural_wake_specs
from benchmarks.wake_verifier_train import RELAXED, TRAIN_NEAR, TrainCorpus
from benchmarks.wake_verify_late import EXTRA_TRAIN_NEAR, HARD_NEAR
from benchmarks.wake_verify_retrain import GRID_DRAWS, GRID_NEAR, GRID_S, GridRecorder, grid_specs, pcm_between, train
from detectors.wake_verify import VERIFY_S, EmbeddingReader, WakeVerifier, Weights, _sharing

PHRASE = "hey jarvis"


def _weights(seed: int, delay_s: float, features: int = 1536) -> Weights:
    rng = np.random.default_rng(seed)
    return Weights(np.zeros(features), np.ones(features), 0.01 * rng.normal(size=features), 0.0, 0.5, delay_s=delay_s)


def test_each_ask_is_read_as_the_grid_blend_reads_it_the_window_at_the_wake_as_the_pause_rule_does():
    stream = (np.random.default_rng(0).normal(size=16000 * 5) * 3000).astype(np.int16).tobytes()
    recorder = GridRecorder.__new__(GridRecorder)  # (no spotter: the stream and the asks' ends given)
    recorder.stream, recorder.positions, recorder.tails = bytearray(stream), [40000, 70000], []
    rows, peaks = recorder.windows(EmbeddingReader())
    members = [_weights(seed, delay) for seed, delay in enumerate(GRID_S)]
    early, blend0, main, blend1 = members
    verifier = WakeVerifier(PHRASE, dataclasses.replace(main, blend=(blend0, blend1), early=early))
    for ask, end in enumerate(recorder.positions):
        last = end + int(GRID_S[-1] * 16000)
        handed = pcm_between(stream, last - int((VERIFY_S + GRID_S[-1]) * 16000), last)  # what the spotter hands it
        by_verifier = verifier._scores(handed)  # (main, blend0, blend1)
        assert by_verifier == [float(w.scores(rows[ask][GRID_S.index(w.delay_s)]).max()) for w in (main, blend0, blend1)]
        assert verifier.score(verifier._ending_at(handed, 0.0), early) == float(early.scores(rows[ask][0]).max())
    assert peaks.shape == (2, len(GRID_S)) and len(recorder.tails) == 2


def test_a_stream_that_stops_is_read_as_silence_after_its_end_and_nothing_before_its_start():
    stream = bytes(range(1, 21))  # ten samples
    assert pcm_between(stream, -3, 2) == stream[:4]
    assert pcm_between(stream, 8, 12) == stream[16:] + b"\0" * 4
    assert pcm_between(stream, 12, 14) == b"\0" * 4


def test_the_grid_training_says_none_of_the_benchmarks_sentences_under_none_of_its_draws(tmp_path: Path):
    tested_near = set(NEAR_MISS_LINES[PHRASE]) | set(EXTRA_NEAR_MISSES[PHRASE])
    said = {s.text for draw in GRID_DRAWS for s in grid_specs(draw)}
    assert not any(line in text for text in said for line in tested_near | set(WAKE_COMMANDS) | set(ORDINARY))
    assert not set(GRID_NEAR) & (tested_near | set(TRAIN_NEAR) | set(EXTRA_TRAIN_NEAR) | set(HARD_NEAR))  # new ones only
    assert min(GRID_DRAWS) >= 60  # the benchmark's draws (judged on, or kept for judging) are under 60
    benchmark = {tuple(NeuralCorpus(tmp_path, Corpus(tmp_path), draw=d).drawn_scales(s.take).values())
                 for d in range(60) for s in neural_wake_specs(PHRASE)}
    trained = {tuple(TrainCorpus(tmp_path, Corpus(tmp_path), draw=d).drawn_scales(s.take).values()) for d in GRID_DRAWS for s in grid_specs(d)}
    assert not benchmark & trained


def test_training_writes_a_blend_on_the_grid_whose_rule_keeps_the_addressed_clips_it_was_asked_to(tmp_path: Path):
    rng = np.random.default_rng(5)
    clips = 80
    labels = np.array([True, False] * (clips // 2))
    rows = rng.normal(size=(clips, len(GRID_S), 4, 6)).astype(np.float32)
    rows += np.where(labels, 0.8, -0.8)[:, None, None, None]  # separable enough at every window
    meta = [f"{'addressed' if label else 'near'}|plain|clip {i}" for i, label in enumerate(labels)]
    np.savez(tmp_path / "c.npz", rows=rows, clip=np.arange(clips), peaks=np.full((clips, len(GRID_S)), -10.0), tails=np.full((clips, 1), -12.0),
             labels=labels, names=np.array([f"c{i}" for i in range(clips)]), meta=np.array(meta), delays=np.array(GRID_S))
    train(str(tmp_path / "w.npz"), [str(tmp_path / "c.npz")], recall=0.95)
    weights = Weights.load(tmp_path / "w.npz")
    assert weights.delay_s == 0.2 and [w.delay_s for w in weights.blend] == [0.12, 0.28] and weights.longest_delay_s == 0.28
    assert len(_sharing((weights, *weights.blend))) == 1  # one embedding pass
    assert (weights.ask_threshold, weights.ask_pause_threshold, weights.ask_alone_cutoff) == (RELAXED, 0.7, RELAXED)
    assert weights.quiet_peak_dbfs == -30.0
    members = (weights, *weights.blend)
    means = [np.mean([w.scores(rows[i, GRID_S.index(w.delay_s)]).max() for w in members]) for i in range(clips)]
    heard = sum(m >= weights.threshold for m, label in zip(means, labels) if label)
    assert heard >= 0.95 * labels.sum() and sum(m >= weights.threshold for m, label in zip(means, labels) if not label) <= 2
