"""The benchmark of WebRTC's noise suppression and gain control in front of the wake path: each
condition's processor runs over the clips as one stream, and hands each clip back as long as it was."""

from __future__ import annotations

import numpy as np

from benchmarks.webrtc_extras import CONDITIONS, Processed
from benchmarks.corpus import RATE


def noise(seconds: float, seed: int) -> bytes:
    return (np.random.default_rng(seed).normal(0, 2000, int(RATE * seconds))).astype(np.int16).tobytes()


def level(pcm: bytes) -> float:
    return float(np.sqrt(np.mean(np.frombuffer(pcm, dtype=np.int16).astype(np.float64) ** 2)))


def test_as_heard_is_the_clip_itself() -> None:
    clip = noise(0.5, 1)
    assert Processed(CONDITIONS["as heard"]).clip(clip) == clip


def test_clips_of_any_length_come_back_as_long_and_processed() -> None:
    suppressed = Processed(CONDITIONS["noise suppression"])
    clips = [noise(seconds, seed) for seed, seconds in enumerate((0.7333, 1.01, 2.0))]
    out = [suppressed.clip(clip) for clip in clips]
    assert [len(o) for o in out] == [len(c) for c in clips]
    # (a clip's last part frame goes through with the next clip: the stream is one)
    assert level(out[2]) < level(clips[2]) / 2  # steady noise, suppressed
    assert suppressed.cpu_s > 0
