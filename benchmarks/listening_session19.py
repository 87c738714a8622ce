"""Listening's code as it was in session 19 (the baseline `--baseline session19` of
`benchmarks.listener_upload_pipeline`, measured in the same run): a read with a sound in it always
handed on at once, whoever listens (no `QuietReads.unhurried`)."""

# The old method, copied as it was (the name prefixed), patched onto today's class.

from __future__ import annotations

import contextlib
from typing import Iterator
from unittest import mock

from audio_io.format import SAMPLE_WIDTH, audioop
from audio_io.quiet_reads import QuietReads


def quiet_hold(self: QuietReads, pcm: bytes | bytearray, seconds: float, chunks: int = 1) -> bool:
    step = max(4, len(pcm) // chunks // 4 * 4)
    sound = any(audioop.rms(pcm[i:i + step], SAMPLE_WIDTH) >= self._rms for i in range(0, len(pcm), step))
    if sound and audioop.rms(pcm, SAMPLE_WIDTH) >= self._rms:
        self._quiet_s, self._held = 0.0, 0
        return False
    quiet_before = self._quiet_s
    self._quiet_s += seconds
    if sound or quiet_before + 1e-9 < self._after_s or self._held + 1 >= self._reads:
        self._held = 0
        return False
    self._held += 1
    return True


@contextlib.contextmanager
def as_in_session19() -> Iterator[None]:
    """Session 19's `QuietReads.hold` patched in (it never asks `unhurried`)."""
    with mock.patch.object(QuietReads, "hold", quiet_hold):
        yield
