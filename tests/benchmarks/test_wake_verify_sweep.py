"""A verifier's rule swept offline (`benchmarks.wake_verify_sweep`, issue 34, session 24): what `wake_verify_asks`
records of an ask judges it as the verifier would, under any thresholds."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from benchmarks.wake_verify_asks import rule_inputs
from benchmarks.wake_verify_grid import Rule, accepted
from detectors.wake_verify import VERIFY_S, WakeVerifier, Weights

PHRASE = "hey jarvis"


def _weights(seed: int, delay_s: float) -> Weights:
    rng = np.random.default_rng(seed)
    return Weights(np.zeros(1536), np.ones(1536), 0.02 * rng.normal(size=1536), 0.0, 0.5, delay_s=delay_s)


def _asks() -> list[bytes]:
    """What a grid blend is handed at a wake: speech-like noise, near or across the room, with or without a pause
    after the wake (its last 280 ms silent)."""
    rng = np.random.default_rng(1)
    length = int((VERIFY_S + 0.28) * 16000)
    handed = []
    for seed, gain, paused in itertools.product(range(2), (4000.0, 40.0), (False, True)):
        samples = np.random.default_rng(seed).normal(size=length) * gain * (1 + np.sin(np.arange(length) / 800.0 + rng.random()))
        if paused:
            samples[-int(0.28 * 16000):] = 0
        handed.append(np.clip(samples, -32768, 32767).astype(np.int16).tobytes())
    return handed


def test_an_ask_s_recorded_inputs_judge_it_as_the_verifier_does_at_every_threshold():
    early, blend0, main, blend1 = (_weights(seed, delay) for seed, delay in enumerate((0.0, 0.12, 0.2, 0.28)))
    grid = dataclasses.replace(main, blend=(blend0, blend1), early=early, quiet_peak_dbfs=-30.0, quiet_threshold=0.5,
                               early_after_quiet_db=20.0)
    verifier = WakeVerifier(PHRASE, grid)
    verdicts, levels = [], []
    for pcm in _asks():
        verifier.weights = grid
        verifier.accepts(pcm)
        assert verifier.last_score is not None
        inputs = rule_inputs(verifier, pcm)
        ask = (verifier.last_score, inputs["level"], inputs["early"], inputs["quiet_db"])
        levels.append(inputs["level"])
        mean = [verifier.last_score + d for d in (-0.001, 0.001)]  # (either side of each score)
        at_wake = [inputs["early"] + d for d in (-0.001, 0.001)]
        for threshold, quiet, early_threshold in itertools.product(mean, mean, (*at_wake, None)):
            rule = Rule(threshold, -30.0, quiet, early_threshold, 20.0)
            verifier.weights = dataclasses.replace(grid, threshold=threshold, quiet_threshold=quiet, early=dataclasses.replace(
                early, threshold=early_threshold if early_threshold is not None else 2.0))
            verdict = verifier.accepts(pcm)
            assert accepted(ask, rule) == verdict, (ask, rule)
            verdicts.append(verdict)
    assert True in verdicts and False in verdicts
    assert min(levels) < -30.0 < max(levels)  # (the quiet threshold judged some asks)
