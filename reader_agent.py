"""The narrator: a fresh Realtime session per narration that reads a script verbatim.

`NarrationCore` decides (sync): which audio belongs to our response, when it is done, whether
the read matched the script. `Narrator` is the async shell: one session per attempt, audio
streamed to the speaker as it arrives, a drop or a badly deviating read retried once.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI

from audio_devices import SpeakerSink

import realtime_wire as wire
from realtime_link import HandshakeFailed, open_configured
from realtime_wire import ClientEvents
from settings import Settings

log = logging.getLogger("handoff.narrator")

READ_VERBATIM = (
    "You are a narrator. Read the user's message aloud exactly as written, word for word, "
    "in a calm, friendly voice. Do not add, drop, answer or comment on anything."
)


def narrator_session(settings: Settings) -> dict[str, Any]:
    """Audio out in the reader's voice; no tools, no input audio (turn detection off)."""
    return {
        "output_modalities": ["audio"],
        "instructions": READ_VERBATIM,
        "audio": {
            "input": {"turn_detection": None},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": settings.realtime.reader_voice},
        },
        "tools": [],
        "tool_choice": "none",
    }


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def similarity(script: str, transcript: str) -> float:
    """How closely the spoken transcript follows the script, 0..1, by words (case/punctuation ignored)."""
    a, b = _words(script), _words(transcript)
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio()


# --- the sync core -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Play:
    pcm: bytes


@dataclass(frozen=True)
class Finished:
    status: str
    transcript: str
    failure: str | None


@dataclass(frozen=True)
class Interrupted:
    reason: str
    fatal: bool = False


NarrationAction = Play | Finished | Interrupted


@dataclass
class NarrationCore:
    """One read of one script in one session."""

    script: str
    narration_id: str
    response_id: str | None = None
    transcript: str = ""
    audio_bytes: int = 0

    def start(self) -> dict[str, Any]:
        return ClientEvents.read_script(self.script, READ_VERBATIM, {"narration_id": self.narration_id})

    def _ours(self, metadata: dict[str, Any] | None) -> bool:
        return bool(metadata) and metadata.get("narration_id") == self.narration_id

    def feed(self, event: wire.ServerEvent) -> list[NarrationAction]:
        match event:
            case wire.ResponseCreated(response_id=rid, metadata=metadata) if self._ours(metadata):
                self.response_id = rid
            case wire.AudioDelta(response_id=rid, pcm=pcm) if rid == self.response_id:
                self.audio_bytes += len(pcm)
                return [Play(pcm)]
            case wire.AudioTranscriptDone(response_id=rid, transcript=text) if rid == self.response_id:
                self.transcript = text
            case wire.ResponseDone() if self._ours(event.metadata) or event.response_id == self.response_id:
                return [Finished(event.status, self.transcript or event.transcript, event.failure)]
            case wire.ServerError():
                if event.fatal:
                    return [Interrupted(f"{event.message} ({event.code})", fatal=True)]
                log.warning("narrator session error %s: %s", event.code, event.message)
            case wire.Closed(code=code):
                return [Interrupted(f"the narrator connection closed (code {code})")]
        return []


# --- the async shell -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NarrationResult:
    ok: bool
    transcript: str
    similarity: float
    attempts: int
    audio_bytes: int
    error: str | None = None
    fatal: bool = False


@dataclass
class Narrator:
    settings: Settings
    client: AsyncOpenAI
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    sessions_opened: int = 0

    async def narrate(self, script: str, speaker: SpeakerSink) -> NarrationResult:
        """Read `script` aloud. Retries once on a new session after a drop or a deviating read."""
        narration_id = f"n{next(self._ids)}"
        last = NarrationResult(False, "", 0.0, 0, 0, "not started")
        for attempt in (1, 2):
            if attempt > 1:
                speaker.flush()  # the retry starts from the top; cut what is left of the failed read
            last = await self._attempt(script, narration_id, attempt, speaker)
            if last.ok or last.fatal:
                return last
            log.warning("narration %s attempt %d failed: %s", narration_id, attempt, last.error)
        return last

    async def _attempt(self, script: str, narration_id: str, attempt: int, speaker: SpeakerSink) -> NarrationResult:
        core = NarrationCore(script, narration_id)
        try:
            link = await open_configured(self.client, self.settings, "narrator", narrator_session(self.settings))
        except HandshakeFailed as failure:
            return NarrationResult(False, "", 0.0, attempt, 0, str(failure), fatal=failure.fatal)
        self.sessions_opened += 1
        try:
            await link.send(core.start())
            outcome = await self._stream(link, core, speaker)
        finally:
            await link.close()  # a fresh session per narration: nothing carries over
        match outcome:
            case Finished(status="completed", transcript=transcript):
                score = similarity(script, transcript)
                log.info("narration %s read with similarity %.2f", narration_id, score)
                if score < self.settings.narrator.min_similarity:
                    return NarrationResult(
                        False, transcript, score, attempt, core.audio_bytes, f"the read deviated (similarity {score:.2f})"
                    )
                return NarrationResult(True, transcript, score, attempt, core.audio_bytes)
            case Finished(status=status, failure=failure):
                return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, f"response {status}: {failure}")
            case Interrupted(reason=reason, fatal=fatal):
                return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, reason, fatal=fatal)
        return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, "no outcome")

    async def _stream(self, link: Any, core: NarrationCore, speaker: SpeakerSink) -> NarrationAction:
        events = link.events()
        timeout = self.settings.narrator.response_timeout_s
        while True:
            try:
                async with asyncio.timeout(timeout):
                    event = await anext(events)
            except (TimeoutError, StopAsyncIteration):
                return Interrupted(f"the narrator produced nothing for {timeout:g} s")
            for action in core.feed(event):
                if isinstance(action, Play):
                    speaker.play(action.pcm)  # streamed as it arrives
                else:
                    return action
