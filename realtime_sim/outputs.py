"""What a session core asks its shell to do, and the outbox its parts write into.

The core and its parts (input buffer, conversation, responses, faults) never do I/O: they append
outputs to one `Outbox`, and the core hands them to the shell (`server.py`) after each input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from realtime_sim.ids import IdFactory
from realtime_sim.transcriber import Segment


@dataclass(frozen=True)
class Send:
    """Send this server event (a protocol event; recorded in `ConnectionRecord.sent`)."""

    event: dict[str, Any]


@dataclass(frozen=True)
class SendRaw:
    """Send this text frame as-is: injected junk that is not a protocol event."""

    text: str


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


@dataclass(frozen=True)
class Drop:
    """Cut the TCP connection without a close frame (the client sees 1006)."""


@dataclass(frozen=True)
class Stall:
    """Hold back every frame after this one for `seconds`."""

    seconds: float


@dataclass(frozen=True)
class Synthesize:
    """Produce speech for `text` and hand it back with `SessionCore.speech_ready(response_id, pcm)`."""

    response_id: str
    text: str


@dataclass(frozen=True)
class Transcribe:
    """Find the words of a committed segment no test scripted, and hand them back with
    `SessionCore.transcript_ready(item_id, text)` (a cue sheet, or the offline recogniser)."""

    item_id: str
    segment: Segment


Output = Send | SendRaw | Close | Drop | Stall | Synthesize | Transcribe


@dataclass(frozen=True)
class PumpResult:
    outputs: list[Output]
    pause_s: float  # how long to wait before pumping again (audio pacing)


class Outbox:
    """The outputs of one call into the core, in order; once closed, protocol events are dropped.

    `after_sent` sees the type of every event sent (the core's faults strike after events)."""

    def __init__(self, ids: IdFactory) -> None:
        self._ids = ids
        self._out: list[Output] = []
        self.closed = False
        self.after_sent: Callable[[str], None] = lambda _type: None

    def send(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        stamped = {"type": event["type"], "event_id": self._ids.event(), **event}
        self._out.append(Send(stamped))
        self.after_sent(event["type"])

    def error(
        self,
        code: str | None,
        message: str,
        *,
        param: str | None = None,
        client_event_id: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        self.send(
            {
                "type": "error",
                "error": {"type": error_type, "code": code, "message": message, "param": param, "event_id": client_event_id},
            }
        )

    def add(self, output: SendRaw | Stall | Synthesize | Transcribe) -> None:
        """An output that is not a protocol event (raw frames, pauses, requests to the shell)."""
        self._out.append(output)

    def lose_last_sent(self) -> None:
        """The last event sent is lost on the way (a drop took it with the connection)."""
        for i in range(len(self._out) - 1, -1, -1):
            if isinstance(self._out[i], Send):
                del self._out[i]
                return

    def close(self, output: Close | Drop) -> None:
        self._out.append(output)
        self.closed = True

    def take(self) -> list[Output]:
        out, self._out = self._out, []
        return out
