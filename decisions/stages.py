"""The stages of one command, from the end of the user's speech to the last word of the answer.

Every command carries a `StageTimes`: the shell marks each stage with the monotonic clock as it
happens; history keeps the offsets (seconds after the end of speech), `handoff status` summarises
them (p50/p95), and the web page draws them as a bar. A stage that did not happen (no tool ran,
the transcript never came) is simply absent.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Stage(enum.StrEnum):
    END_OF_SPEECH = "end_of_speech"  # the server's (or the local VAD's) end of the utterance
    COMMIT = "commit"  # the audio item was committed
    TRANSCRIPT = "transcript"  # the input transcript arrived
    ROUTE_SENT = "route_sent"  # the routing response was asked for
    CALL_RECEIVED = "call_received"  # the first function call (or text) came back
    TOOL_DONE = "tool_done"  # the last tool finished
    FIRST_AUDIO = "first_audio"  # the narrator's first audio reached the speaker
    LAST_AUDIO = "last_audio"  # the narration's last audio played


# The order a command normally goes through; a bar is drawn in this order.
STAGE_ORDER: tuple[Stage, ...] = tuple(Stage)


@dataclass
class StageTimes:
    """Monotonic times of the stages one command reached. The first mark of a stage wins: a
    replayed or repeated event never moves a stage later."""

    times: dict[Stage, float] = field(default_factory=dict)

    def mark(self, stage: Stage, at: float) -> None:
        self.times.setdefault(stage, at)

    def offsets(self) -> dict[str, float]:
        """Seconds after the end of speech (or after the first stage seen, if that is missing),
        keyed by the stage's name, in stage order: what history keeps."""
        if not self.times:
            return {}
        origin = self.times.get(Stage.END_OF_SPEECH, min(self.times.values()))
        return {stage.value: round(self.times[stage] - origin, 4) for stage in STAGE_ORDER if stage in self.times}
