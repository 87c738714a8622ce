"""The wake verifier's training (`benchmarks.wake_verifier_train`): disjoint from the benchmark it is
judged on, and a logistic regression that learns and keeps the recall it is asked for."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.corpus import NEAR_MISS_LINES, ORDINARY, WAKE_COMMANDS, Corpus
from benchmarks.neural_corpus import EXTRA_NEAR_MISSES, SOX_EFFECTS, NeuralCorpus, Variant, neural_wake_specs
from benchmarks.wake_verifier_train import (
    PHRASE, TRAIN_COMMANDS, TRAIN_EFFECTS, TRAIN_EFFECTS_2, TRAIN_NEAR, TRAIN_ORDINARY, Sample, TrainCorpus, base_specs, fit,
    TRAIN_VARIANTS_2, neural_specs, pause_specs, train,
)
from benchmarks.wake_verify_late import (
    EXTRA_TRAIN_NEAR, FAR_ROOM_3, FAR_ROOMS, HARD_DRAWS, HARD_NEAR, TRAIN_DRAWS, extra_specs, hard_specs, noisy_specs,
)


def test_the_training_sentences_and_renderings_are_none_of_the_benchmarks(tmp_path):
    tested_near = set(NEAR_MISS_LINES[PHRASE]) | set(EXTRA_NEAR_MISSES[PHRASE])
    trained = neural_specs() + neural_specs(TRAIN_VARIANTS_2, first_take=1000) + pause_specs() + extra_specs()  # (session 16's: the late verifier)
    noisy = [s for k in range(len(TRAIN_DRAWS)) for s in noisy_specs(10000 + 3000 * k)]  # (session 19's, in the training draws)
    noisy += [s for k in range(len(HARD_DRAWS)) for s in hard_specs(20000 + 3000 * k, k)]  # (session 20's, in its own training draws)
    trained += noisy
    said = {s.text for s in trained} | {s.text for s in base_specs()}
    assert not any(line in text for text in said for line in tested_near | set(WAKE_COMMANDS) | set(ORDINARY))
    assert (set(TRAIN_NEAR) | set(EXTRA_TRAIN_NEAR) | set(HARD_NEAR)) & tested_near == set() and set(TRAIN_ORDINARY) & set(ORDINARY) == set()
    assert set(TRAIN_COMMANDS) & set(WAKE_COMMANDS) == set()
    assert all(effects[v] != SOX_EFFECTS[v] for effects in (TRAIN_EFFECTS, TRAIN_EFFECTS_2) for v in effects)
    assert all(room not in (SOX_EFFECTS[Variant.FAR], TRAIN_EFFECTS[Variant.FAR]) for room in FAR_ROOMS + (FAR_ROOM_3,))  # (session 18's far rooms)
    assert FAR_ROOM_3 not in FAR_ROOMS and not set(TRAIN_DRAWS + HARD_DRAWS) & set(range(20))  # (the benchmark's draws 0-19 are judged on)
    drawn = [NeuralCorpus(tmp_path, Corpus(tmp_path), draw=draw) for draw in range(20)]  # the benchmark's draws 0-19
    test_scales = {tuple(c.drawn_scales(s.take).values()) for c in drawn for s in neural_wake_specs(PHRASE)}
    train_scales = {tuple(TrainCorpus.scales(None, s.take).values()) for s in trained}  # type: ignore[arg-type]
    train_scales |= {tuple(TrainCorpus(tmp_path, Corpus(tmp_path), draw=draw).drawn_scales(s.take).values()) for draw in TRAIN_DRAWS + HARD_DRAWS for s in noisy}
    assert test_scales & train_scales == set()


@pytest.mark.parametrize("features", [4, 80])  # fewer and more features than samples (the Woodbury step)
def test_the_regression_separates_what_is_separable(features):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, features))
    y = x[:, 0] + 0.5 * x[:, 1] > 0
    coef, intercept = fit(x, y, l2=0.1)
    assert np.mean((x @ coef + intercept > 0) == y) > 0.95


@pytest.mark.parametrize("features", [4, 80])
def test_negatives_counted_more_often_push_the_overlap_towards_refusing(features):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(60, features))
    y = x[:, 0] + rng.normal(size=60) > 0  # overlapping classes: where the boundary lies is a matter of weight
    l2 = 30.0  # (strong enough that 80 features cannot simply separate 60 samples)
    plain = fit(x, y, l2=l2)
    weighted = fit(x, y, l2=l2, negative_weight=4.0)

    def accepted(model: tuple) -> int:
        coef, intercept = model
        return int(np.sum(x @ coef + intercept > 0))

    assert accepted(weighted) < accepted(plain)


def test_training_picks_a_threshold_that_keeps_the_recall_asked_for_on_unseen_clips():
    rng = np.random.default_rng(2)
    samples = [Sample(rng.normal(loc=1.0 if label else -1.0, size=(4, 6)), label, f"clip{i}")
               for i, label in enumerate([True, False] * 40)]
    weights, (kept, positives, refused, negatives) = train(samples, l2=1.0, recall=0.95)
    assert positives == negatives == 40 and kept >= 38
    assert refused > 30  # the two clouds barely overlap
    assert weights.scores(np.ones((1, 6)))[0] > weights.threshold > weights.scores(-np.ones((1, 6)))[0]


def test_late_weights_are_trained_on_the_window_200_ms_after_each_wake_and_carry_the_cutoffs_they_were_asked_at(tmp_path):
    from benchmarks.wake_verifier_train import RELAXED
    from benchmarks.wake_verify_late import DELAYS_S, train_late
    from detectors.wake_verify import Weights

    rng = np.random.default_rng(3)
    labels = np.array([True, False] * 30)
    rows = rng.normal(size=(len(labels), len(DELAYS_S), 4, 6))  # (asks, delays, positions, features): noise but at 200 ms
    rows[:, DELAYS_S.index(0.2)] += np.where(labels, 1.0, -1.0)[:, None, None]
    np.savez(tmp_path / "asks.npz", rows=rows, clip=np.arange(len(labels)), labels=labels, names=np.array([f"c{i}" for i in range(len(labels))]))
    train_late(str(tmp_path / "w.npz"), [str(tmp_path / "asks.npz")], 0.8, (-30.0, 0.5))
    weights = Weights.load(tmp_path / "w.npz")
    assert (weights.delay_s, weights.threshold, weights.quiet_peak_dbfs, weights.quiet_threshold) == (0.2, 0.8, -30.0, 0.5)
    assert (weights.ask_threshold, weights.ask_pause_threshold, weights.ask_alone_cutoff) == (RELAXED, 0.7, RELAXED)
    late = rows[:, DELAYS_S.index(0.2)]
    assert np.mean([(weights.scores(r).max() >= 0.5) == label for r, label in zip(late, labels)]) > 0.9
