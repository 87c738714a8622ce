"""The narrator: a fresh Realtime session per narration that reads a script verbatim.

`NarrationCore` (decisions.narration) decides (sync): which audio belongs to our response, when it is done, whether
the read matched the script. `Narrator` is the async shell: one session per attempt, audio
streamed to the speaker as it arrives. Audio plays as it arrives, so what the listener heard is
never read again: only an attempt that failed before its first audio is retried (once); a read
that strays from the script is logged and counted in `weak_matches`, not re-read.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI

from audio_io import SpeakerSink
from config.settings import Settings
from decisions.narration import (
    Finished, Interrupted, NarrationAction, NarrationCore, NarrationResult, Play, similarity,
)
from realtime_api.link import HandshakeFailed, open_configured
from realtime_api.sessions import narrator_session

log = logging.getLogger("handoff.narrator")


@dataclass
class Narrator:
    settings: Settings
    client: AsyncOpenAI
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    sessions_opened: int = 0
    weak_matches: int = 0  # reads whose transcript strayed from the script (played, not re-read)
    inexact_reads: int = 0  # reads that matched, but not word for word (a filler dropped or added)

    async def narrate(self, script: str, speaker: SpeakerSink) -> NarrationResult:
        """Read `script` aloud. Retries once on a new session only when the first attempt failed
        before any audio played (a drop, a refused or failed response): nothing is said twice."""
        narration_id = f"n{next(self._ids)}"
        last = NarrationResult(False, "", 0.0, 0, 0, "not started")
        for attempt in (1, 2):
            if attempt > 1:
                speaker.flush()  # the retry starts from the top; cut what is left of the failed read
            last = await self._attempt(script, narration_id, attempt, speaker)
            if last.ok or last.fatal:
                return last
            log.warning("narration %s attempt %d failed: %s", narration_id, attempt, last.error)
            if last.audio_bytes:
                break  # the listener heard part of it: reading it again from the top would repeat it
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
                weak = score < self.settings.narrator.min_similarity
                self.inexact_reads += score < 1.0
                if weak:  # already heard: counted and logged, never read again
                    self.weak_matches += 1
                    log.warning("narration %s strayed from its script (similarity %.2f): %r", narration_id, score, transcript)
                return NarrationResult(True, transcript, score, attempt, core.audio_bytes, weak=weak)
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
