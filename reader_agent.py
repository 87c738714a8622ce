"""The narrator: a fresh Realtime session per narration that reads a script verbatim.

`NarrationCore` (decisions.narration) decides (sync): which audio belongs to our response, when it is done, whether
the read matched the script. `Narrator` is the async shell: one session per attempt, audio
streamed to the speaker as it arrives. Audio plays as it arrives, so what the listener heard is
never read again: only an attempt that failed before its first audio is retried (once); a read
that strays from the script is logged and counted in `weak_matches`, not re-read.

Warm sessions (`NarratorSettings.warm`, on by default; needs `async with Narrator(...)` or
`start()`/`close()`): one spare session is kept connected and configured, never used before, so
a narration costs one `response.create` instead of a connect and a `session.update` first (two
round trips). It is replaced in the background after use, after it dies, and before the server's
60-minute cap (`warm_max_age_s`); a narration that finds none ready starts cold, and says why in
a WARNING. Without `start()` every narration starts cold, as with `warm = False`.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from openai import AsyncOpenAI

from audio_io import SpeakerSink
from concurrency.changes import Changes
from config.settings import Settings
from decisions.narration import (
    Finished, Interrupted, NarrationAction, NarrationCore, NarrationResult, Play, Stopped, bounded, similarity,
)
from realtime_api import wire
from realtime_api.wire import ClientEvents
from realtime_api.fatal import fatal_message
from realtime_api.link import HandshakeFailed, RealtimeLink, Refusal, open_configured
from realtime_api.sessions import narrator_session

log = logging.getLogger("handoff.narrator")


class SpareState(enum.Enum):
    """Where the warm session stands."""

    OFF = "off"  # not warming: warm = False, not started, or stopped by a fatal refusal
    OPENING = "opening"  # being connected and configured
    READY = "ready"  # connected, configured, unused
    NONE = "none"  # none ready and none being opened (backing off after a failure)


@dataclass(eq=False)
class _Spare:
    """A warm session: connected, configured, never used."""

    link: RealtimeLink
    born: float
    watcher: asyncio.Task[None] | None = None  # reads its events while idle, so a drop is seen
    lost: str | None = None  # why it became unusable (closed, expired); None while usable or once taken


class NarrationCut:
    """Cuts one narration mid-way ("computer, stop"). `cut()` is sync and immediate: the
    narrator's wait for its session's next event ends at once, it plays nothing more, sends
    `response.cancel` for a response still running and closes the session; no retry follows.
    `cut(billed)`: `billed` also hears what the narration used, once the server says (issue 33:
    an answer read ahead, then dropped)."""

    def __init__(self) -> None:
        self.requested = False
        self._waiting: asyncio.Timeout | None = None  # the narrator's wait for its next event
        self._usage: wire.Usage | None = None
        self._billed: Callable[[wire.Usage], object] | None = None

    def cut(self, billed: Callable[[wire.Usage], object] | None = None) -> None:
        if billed is not None:
            self._billed = billed
            if self._usage is not None:  # (it was over already)
                billed(self._usage)
        if self.requested:
            return
        self.requested = True
        if self._waiting is not None and not self._waiting.expired():
            self._waiting.reschedule(asyncio.get_running_loop().time())  # ends the wait now

    def used(self, usage: wire.Usage) -> None:
        """What the narration's response used (the narrator says, finished or cancelled)."""
        self._usage = usage
        if self._billed is not None:
            self._billed(usage)


@dataclass
class Narrator:
    settings: Settings
    client: AsyncOpenAI
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    sessions_opened: int = 0
    weak_matches: int = 0  # reads whose transcript strayed from the script (played, not re-read)
    inexact_reads: int = 0  # reads that matched, but not word for word (a filler dropped or added)
    warm_starts: int = 0  # attempts that used a warm session
    cold_starts: int = 0  # attempts that had to connect first
    clock: Callable[[], float] = time.monotonic
    # Hears the usage each narration response reported (response.done), finished or not: the cost meter.
    on_usage: Callable[[wire.Usage], object] | None = None
    # Shared with the listener: after the account's first fatal refusal no session is opened.
    refusal: Refusal = field(default_factory=Refusal)
    _group: asyncio.TaskGroup | None = field(default=None, init=False, repr=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)  # ours, in _group
    _changes: Changes = field(default_factory=Changes, init=False, repr=False)
    _spare: _Spare | None = field(default=None, init=False, repr=False)
    _opening: bool = field(default=False, init=False, repr=False)  # a spare is being connected
    _warming: bool = field(default=False, init=False, repr=False)  # the keeper runs
    _cold_reason: str = field(default="no warm session was ready yet", init=False, repr=False)

    # -- lifecycle: the warm spare --------------------------------------------------------------

    async def start(self) -> None:
        """Start keeping a warm session (when `settings.narrator.warm`). Pair with `close()`, in
        the same task (the background tasks live in a TaskGroup: a bug in them is not hidden)."""
        if self._group is not None:
            raise RuntimeError("the narrator is already started")
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        if self.settings.narrator.warm:
            self._warming = self._opening = True  # from now: a narration waits for the first spare
            self._spawn(self._keep_warm(), "narrator warm keeper")

    async def close(self) -> None:
        """Stop warming and close the spare; every background task has ended when this returns."""
        group, self._group = self._group, None
        if group is None:
            return
        for task in list(self._tasks):
            task.cancel()
        try:
            await group.__aexit__(None, None, None)
        finally:
            spare, self._spare = self._spare, None
            if spare is not None:
                await spare.link.close()

    @property
    def spare_state(self) -> SpareState:
        if self._spare is not None:
            return SpareState.READY
        if self._opening:
            return SpareState.OPENING
        return SpareState.NONE if self._warming else SpareState.OFF

    async def wait_spare(self, state: SpareState, timeout: float) -> None:
        """Return once `spare_state` is `state` (TimeoutError after `timeout` s)."""
        await self._changes.wait_until(lambda: self.spare_state is state, timeout)

    async def __aenter__(self) -> Narrator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _spawn(self, work: Any, name: str) -> asyncio.Task[None]:
        assert self._group is not None
        task = self._group.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _backoff_s(self, failures: int) -> float:
        policy = self.settings.reconnect
        return min(policy.initial_s * 2.0 ** (failures - 1), policy.max_s)

    async def _keep_warm(self) -> None:
        """Keep one spare ready: open one whenever there is none. Failed attempts and spares that
        die young back off as reconnects do; a fatal refusal stops warming (narrations start
        cold and report it themselves)."""
        try:
            await self._keep_warm_forever()
        finally:
            self._warming = False
            self._changes.notify()

    async def _keep_warm_forever(self) -> None:
        failures = 0
        while True:
            if failures:
                await asyncio.sleep(self._backoff_s(failures))
            self._opening = True
            try:
                link = await open_configured(
                    self.client, self.settings, "narrator (warm)", narrator_session(self.settings), self.refusal
                )
            except HandshakeFailed as failure:
                self._cold_reason = f"warming one failed: {failure}"
                log.warning("could not warm a narrator session (%s); narrations start cold until one connects", failure)
                if failure.fatal:
                    return
                failures += 1
                continue
            finally:
                self._opening = False
                self._changes.notify()
            self.sessions_opened += 1
            spare = _Spare(link, born=self.clock())
            spare.watcher = self._spawn(self._watch(spare), "narrator warm watcher")
            self._spare = spare
            self._changes.notify()
            await self._changes.wait_until(lambda: self._spare is not spare)
            died_young = spare.lost is not None and self.clock() - spare.born < self.settings.reconnect.healthy_after_s
            failures = failures + 1 if died_young else 0

    async def _watch(self, spare: _Spare) -> None:
        """Read the idle spare's events, so a drop or an expiry is noticed before a narration needs
        it; retire it at `warm_max_age_s`. Cancelled when a narration takes it."""
        limit = self.settings.narrator.warm_max_age_s
        try:
            async with asyncio.timeout(max(0.0, spare.born + limit - self.clock())):
                async for event in spare.link.events():
                    verdict = event.verdict if isinstance(event, (wire.Closed, wire.ServerError)) else None
                    if verdict is not None and verdict.fatal:  # the account is refused: nothing is reopened
                        self.refusal.refuse(fatal_message(verdict))
                        spare.lost = f"the warm narrator session was refused: {verdict.detail}"
                        log.error("%s", spare.lost)
                        break
                    if isinstance(event, wire.Closed):
                        spare.lost = f"the warm narrator session closed (code {event.code})"
                        log.warning("%s; replacing it", spare.lost)
                        break
                    if isinstance(event, wire.ServerError):  # an expiry notice comes before its close
                        log.info("warm narrator session error %s: %s", event.code, event.message)
        except TimeoutError:
            spare.lost = f"the warm narrator session reached {limit:g} s unused"
            log.info("%s; replacing it before the server's 60-minute cap", spare.lost)
        self._cold_reason = spare.lost or "the warm session ended"
        if self._spare is spare:
            self._spare = None
            self._changes.notify()
        await spare.link.close()

    async def _take_spare(self) -> tuple[RealtimeLink, asyncio.Task[None]] | None:
        """The warm session, if one is ready (or being opened: waiting for it is never slower than
        connecting anew), and its watcher, cancelled: the caller may send at once, and awaits the
        watcher's end before its first read (recv is cancel-safe). None means start cold, with
        the reason logged."""
        if self._group is None or not self.settings.narrator.warm:
            return None
        if self._spare is None and self._opening:
            await self._changes.wait_until(lambda: self._spare is not None or not self._opening)
        spare = self._spare
        if spare is None:
            log.warning("no warm narrator session (%s); starting one cold", self._cold_reason)
            return None
        self._spare = None
        self._opening = True  # the keeper opens the next one now, while this one reads
        self._changes.notify()
        assert spare.watcher is not None
        spare.watcher.cancel()  # not awaited here: the response.create goes out first
        if spare.link.closed is not None:  # died between the watcher's last read and now
            log.warning("the warm narrator session was lost (code %d); starting one cold", spare.link.closed.code)
            await asyncio.wait([spare.watcher])
            await spare.link.close()
            return None
        return spare.link, spare.watcher

    async def narrate(self, script: str, speaker: SpeakerSink, cut: NarrationCut | None = None) -> NarrationResult:
        """Read `script` aloud. Retries once on a new session only when the first attempt failed
        before any audio played (a drop, a refused or failed response): nothing is said twice.
        `cut`: the user may stop it mid-way (then `stopped` is set and nothing is retried)."""
        narration_id = f"n{next(self._ids)}"
        script = bounded(script)  # however it was made, one narration is a few sentences, not a book
        cut = cut or NarrationCut()
        last = NarrationResult(False, "", 0.0, 0, 0, "not started")
        for attempt in (1, 2):
            if attempt > 1:
                speaker.flush()  # the retry starts from the top; cut what is left of the failed read
            last = await self._attempt(script, narration_id, attempt, speaker, cut)
            if last.ok or last.fatal or last.stopped:
                return last
            log.warning("narration %s attempt %d failed: %s", narration_id, attempt, last.error)
            if last.audio_bytes:
                break  # the listener heard part of it: reading it again from the top would repeat it
        return last

    async def _attempt(
        self, script: str, narration_id: str, attempt: int, speaker: SpeakerSink, cut: NarrationCut
    ) -> NarrationResult:
        core = NarrationCore(script, narration_id)
        if cut.requested:  # stopped before it began: no session is taken or opened
            return NarrationResult(False, "", 0.0, attempt, 0, "stopped", stopped=True)
        taken = await self._take_spare()
        watcher: asyncio.Task[None] | None = None
        if taken is not None:
            link, watcher = taken
            self.warm_starts += 1
        else:
            try:
                link = await open_configured(self.client, self.settings, "narrator", narrator_session(self.settings), self.refusal)
            except HandshakeFailed as refused:
                return NarrationResult(False, "", 0.0, attempt, 0, str(refused), fatal=refused.fatal)
            self.sessions_opened += 1
            self.cold_starts += 1
        drained = False  # the cut response's end is awaited in the background, then the session closed
        try:
            outcome: NarrationAction = Stopped()
            if not cut.requested:
                await link.send(core.start())
                if watcher is not None:  # the spare's reader stops before ours starts (while the request travels)
                    await asyncio.wait([watcher])
                outcome = await self._stream(link, core, speaker, cut)
            if isinstance(outcome, Stopped) and core.response_id is not None:
                # The server may still be generating it (audio comes faster than it plays): stop
                # that too. A response that ended meanwhile gets a harmless error; the close follows.
                await link.send(ClientEvents.cancel_response(core.response_id))
                if self._group is not None:  # its usage comes with its end: billed, then closed, meanwhile
                    self._spawn(self._bill_cancelled(link, core, cut), "narration billed")
                    drained = True
        finally:
            if watcher is not None and not watcher.done():  # cut before the send: still winding down
                await asyncio.wait([watcher])
            if not drained:
                await link.close()  # a fresh session per narration: nothing carries over
        if isinstance(outcome, Finished):
            self._bill(outcome.usage, cut)
        match outcome:
            case Stopped():
                log.info("narration %s stopped by the user after %d bytes of audio", narration_id, core.audio_bytes)
                return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, "stopped", stopped=True)
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
                if fatal:
                    self.refusal.refuse(reason)
                return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, reason, fatal=fatal)
        return NarrationResult(False, "", 0.0, attempt, core.audio_bytes, "no outcome")

    def _bill(self, usage: wire.Usage, cut: NarrationCut) -> None:
        if self.on_usage is not None:
            self.on_usage(usage)
        cut.used(usage)

    async def _bill_cancelled(self, link: Any, core: NarrationCore, cut: NarrationCut) -> None:
        """A cut narration's response, cancelled: what it used comes with its `response.done`
        (bounded by the response timeout), then its session is closed."""
        try:
            async with asyncio.timeout(self.settings.narrator.response_timeout_s):
                async for event in link.events():
                    finished = [a for a in core.feed(event) if isinstance(a, Finished)]
                    if finished:
                        self._bill(finished[0].usage, cut)
                        return
        except TimeoutError:
            log.info("a cut narration's response did not end in time: its usage is not counted")
        finally:
            await link.close()

    async def _stream(self, link: Any, core: NarrationCore, speaker: SpeakerSink, cut: NarrationCut) -> NarrationAction:
        events = link.events()
        timeout = self.settings.narrator.response_timeout_s
        while not cut.requested:
            try:
                async with asyncio.timeout(timeout) as waiting:
                    cut._waiting = waiting  # cut() ends this wait at once
                    try:
                        event = await anext(events)
                    finally:
                        cut._waiting = None
            except (TimeoutError, StopAsyncIteration):
                if cut.requested:
                    break
                return Interrupted(f"the narrator produced nothing for {timeout:g} s")
            for action in core.feed(event):
                if isinstance(action, Play):
                    speaker.play(action.pcm)  # streamed as it arrives
                else:
                    return action
        return Stopped()
