"""The microphone reader's side of "stop" and of barge-in, one for every room: the coordinator's
own microphone and a satellite's (`handoff satellite`) hear the same way, so a narration's own
"hey jarvis" that cannot stop the hub's room cannot stop a satellite's either.

While the assistant's voice plays, the stop listener hears the canceller's output (without a
canceller: the microphone where the echo gate heard the user), the preroll's hits judged by the
gate in front (`detectors.barge_in.stop_listener`); a wake phrase alone holds what follows until it
is a command (`CommandHold`). Pure; one call per chunk.
"""

from __future__ import annotations

from typing import Protocol

from detectors.barge_in import CommandHold, Held, Margined, StopAfterWake, stop_listener
from detectors.stop_word import StopDetector, StopHit


class Passing(Protocol):
    passed: bool  # the canceller's own gate (behind it) let the last chunk through
    far: bytes  # what it was given as played for that chunk, lined up with it (b"": it did not run)


class BargeInEar:
    def __init__(self, detector: StopDetector, canceller: Passing | None, gate: Margined | None) -> None:
        self._raw = b""  # the microphone chunk being heard
        self.listener = stop_listener(detector, canceller, gate, echo=lambda: (self._raw, canceller.far if canceller else b""))
        self.hold = CommandHold(check=StopAfterWake.for_detector(detector))  # a barge-in, until it is no "stop"
        self._canceller = canceller

    def hear(self, offset: int, raw: bytes, gated: bytes, heard: bytes, playing: bool, muted: bool,
             answerable: bool = True) -> tuple[StopHit | None, list[Held]]:
        """One chunk at `offset` in the microphone's stream: `raw`, after the gate (`gated`:
        silence where it is the echo alone) and after the canceller (`heard`). `playing`: the
        assistant's voice plays; `muted`: nothing goes up now; `answerable`: a hit can be acted on
        (a satellite with no hub: not). Returns the hit that cuts the voice now (None: none, or
        a barge-in already being held), and what goes up (a held barge-in: cancelled)."""
        hold, cancelled = self.hold, self._canceller is not None
        self._raw = raw
        passed = self._canceller.passed if self._canceller is not None else gated == raw  # the gate behind it, or the gate
        hit = self.listener.hear(heard if cancelled else raw, passed, playing or hold.holding)
        piece = Held(offset, heard if hold.holding else gated, self.listener.clock)
        if playing and not hold.holding:
            hold.remember(Held(offset, heard, piece.end_s))
        cut = None
        if hit is not None and answerable:
            cut = None if hold.holding else hit
            hold.hit(hit)
        return cut, hold.take(piece, muted=muted)
