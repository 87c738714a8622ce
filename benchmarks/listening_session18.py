"""Listening's code as it was in session 18 (the baseline `--baseline session18` of
`benchmarks.listener_upload_pipeline`, measured in the same run): the echo gate's `_learn` visiting
every candidate delay in a loop and looking up the module's names on each."""

# The old method, copied as it was (the name prefixed), patched onto today's class.

from __future__ import annotations

import bisect
import contextlib
import math
from typing import Iterator
from unittest import mock

from audio_io.echo import _REESTIMATE_EVERY, _SILENT_ENERGY, _TRACKED_SLOTS, EchoSuppressor


def echo_learn(self: EchoSuppressor, slot: int, energy: float) -> None:
    log_energy = math.log10(max(energy, _SILENT_ENERGY))
    references = self._span(slot - self._max_delay, slot)  # [max_delay - delay]: the reference `delay` slots back
    for delay in range(self._max_delay + 1):
        reference = references[self._max_delay - delay]
        if reference < self._loud:
            continue
        ratio = log_energy - math.log10(reference)
        ratios, ordered = self._ratios[delay], self._ordered[delay]
        ratios.append(ratio)
        bisect.insort(ordered, ratio)
        self._sums[delay] += ratio
        self._squares[delay] += ratio * ratio
        if len(ratios) > _TRACKED_SLOTS:
            old = ratios.popleft()
            del ordered[bisect.bisect_left(ordered, old)]
            self._sums[delay] -= old
            self._squares[delay] -= old * old
    self._since_estimate += 1
    if self._since_estimate >= _REESTIMATE_EVERY:
        self._since_estimate = 0
        self._estimate()


@contextlib.contextmanager
def as_in_session18() -> Iterator[None]:
    """Session 18's `EchoSuppressor._learn` patched in."""
    with mock.patch.object(EchoSuppressor, "_learn", echo_learn):
        yield
