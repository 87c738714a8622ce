"""The blend moved onto openWakeWord's frame grid, judged offline with the verifier's whole rule
(`benchmarks.wake_verify_grid`, issue 34, session 22)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.wake_verify_grid import Rule, accepted, write
from detectors.wake_verify import Weights, _sharing


def test_an_ask_is_judged_by_the_blend_at_its_level_and_by_the_wake_s_window_only_after_a_pause():
    rule = Rule(threshold=0.7, quiet_peak_dbfs=-30.0, quiet_threshold=0.4, early_threshold=0.6, early_after_quiet_db=20.0)
    # (blend mean, level of its window, score at the wake, dB the audio after the wake is under it)
    assert accepted((0.72, -20.0, 0.0, 0.0), rule)
    assert not accepted((0.5, -20.0, 0.0, 0.0), rule)
    assert accepted((0.5, -40.0, 0.0, 0.0), rule)  # across the room: the quiet threshold
    assert accepted((0.1, -20.0, 0.65, 25.0), rule)  # a pause after the name: the window at the wake decides
    assert not accepted((0.1, -20.0, 0.65, 10.0), rule)  # speech goes on after it: the blend alone
    assert not accepted((0.1, -20.0, 0.65, 25.0), Rule(0.7, -30.0, 0.4, None, 20.0))  # no pause rule


def test_written_weights_keep_each_window_s_weights_at_its_new_delay_and_read_them_in_one_pass(tmp_path: Path):
    def weights(seed: int, delay_s: float) -> Weights:
        rng = np.random.default_rng(seed)
        return Weights(rng.normal(size=3), np.ones(3), rng.normal(size=3), 0.1 * seed, 0.5, delay_s=delay_s)

    main = weights(0, 0.2)
    blended = Weights(main.mean, main.scale, main.coef, 0.0, 0.68, delay_s=0.2, quiet_peak_dbfs=-30.0, quiet_threshold=0.4,
                      blend=(weights(1, 0.1), weights(2, 0.3)), early=weights(3, 0.0), early_after_quiet_db=20.0, ask_threshold=0.5)
    blended.save(tmp_path / "s21.npz")
    write(str(tmp_path / "s21.npz"), "0.2=main,0.12=blend0,0.28=blend1", str(tmp_path / "grid.npz"), Rule(0.66, -33.0, 0.5, 0.7, 15.0))
    grid = Weights.load(tmp_path / "grid.npz")
    assert [w.delay_s for w in grid.blend] == [0.12, 0.28] and grid.longest_delay_s == 0.28
    assert [w.coef.tolist() for w in (grid, *grid.blend)] == [w.coef.tolist() for w in (blended, *blended.blend)]
    assert (grid.threshold, grid.quiet_peak_dbfs, grid.quiet_threshold, grid.early_after_quiet_db, grid.ask_threshold) == (0.66, -33.0, 0.5, 15.0, 0.5)
    assert grid.early is not None and grid.early.threshold == 0.7 and grid.early.coef.tolist() == blended.early.coef.tolist()  # type: ignore[union-attr]
    assert len(_sharing((grid, *grid.blend))) == 1 and len(_sharing((blended, *blended.blend))) == 3
