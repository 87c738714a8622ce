"""The device's own end of turn for an utterance the device heard the wake in, and the pause
inside it (issue 33): a sync follower fed the on-device VAD's verdict per chunk, on audio time.

- `ENDED`: `turn_end_s` of silence after its last speech, with a command's worth of speech after
  the wake phrase (`command_min_s`; less is the phrase alone): the command is over, route it.
- `PAUSED`: `pause_s` of silence (less than `turn_end_s`) after a command's worth of speech: it may
  be over. The route is sent provisionally on the audio so far; only read-only tools run on it and
  its answer is made ready, but nothing is said until `ENDED` confirms it.
- `RESUMED`: speech came back after `PAUSED`: the provisional route is withdrawn, and the whole
  utterance is routed at its end as any other.
- `DROPPED`: the turn ended as the phrase alone: nothing to route.

`benchmarks/end_of_turn.py` feeds it the same VAD verdicts to count the routes it withdraws.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TurnSignal(enum.Enum):
    PAUSED = "paused"
    RESUMED = "resumed"
    ENDED = "ended"
    DROPPED = "dropped"


@dataclass
class TurnFollower:
    """One woken turn, from the accepted wake (`began_at`, audio seconds) to its end."""

    began_at: float
    turn_end_s: float
    pause_s: float | None = None  # None (or >= turn_end_s): no provisional route
    command_min_s: float = 0.3
    speech_s: float = 0.0  # speech after the phrase
    last_speech: float = 0.0
    paused: bool = False  # PAUSED was said for the silence going on

    def __post_init__(self) -> None:
        self.last_speech = self.began_at

    def feed(self, speech: bool, now: float, chunk_s: float) -> TurnSignal | None:
        """The VAD's verdict on the chunk that ends at `now`; what it means for the turn, if anything."""
        if speech:
            self.speech_s += chunk_s
            self.last_speech = now
            if self.paused:
                self.paused = False
                return TurnSignal.RESUMED
        silence = now - self.last_speech
        # (1e-9: audio time is bytes / rate; 1.94 - 1.5 must count as the 0.44 it is)
        if silence >= self.turn_end_s - 1e-9:
            return TurnSignal.ENDED if self.speech_s >= self.command_min_s else TurnSignal.DROPPED
        if (self.pause_s is not None and not self.paused and not speech and silence >= self.pause_s - 1e-9
                and self.speech_s >= self.command_min_s):
            self.paused = True
            return TurnSignal.PAUSED
        return None
