"""The coordinator: who may speak, when the microphone is heard, and when the listener restarts.

- One narrator at a time (reader lock); narrations queue, answers to commands before notices.
- While narrating, mic upload to the listener is muted (the mic is still read and drained); the
  playback queue is flushed before a narration; unmute only after the audio actually played
  plus an echo margin.
- After narrations, the listener session is closed and a fresh one configured; mic audio captured
  meanwhile is buffered (bounded) and sent to the new session.
- Every state change goes through `PhaseMachine`, whose table below lists every legal transition.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import functools
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Protocol

import realtime_wire as wire
from main_agent import Listener
from realtime_link import HandshakeFailed
from reader_agent import NarrationResult, Narrator
from settings import Settings

log = logging.getLogger("handoff.coordinator")


# --- phases --------------------------------------------------------------------------------------


class Phase(enum.Enum):
    LISTENING = "listening"
    ROUTING = "routing"
    NARRATING = "narrating"
    RESTARTING = "restarting"


L, R, N, S = Phase.LISTENING, Phase.ROUTING, Phase.NARRATING, Phase.RESTARTING

# (phase, event) -> next phase. Anything not listed is a bug and raises.
TRANSITIONS: dict[tuple[Phase, str], Phase] = {
    (S, "listener_ready"): L,  # a fresh, configured listener session
    (N, "listener_ready"): N,  # it reconnected while we speak; it is restarted after anyway
    (L, "command_routed"): R,  # an addressed command went to the model
    (L, "narration_started"): N,  # a notice
    (R, "narration_started"): N,  # the answer to the command
    (S, "narration_started"): N,  # a message about the connection itself
    (N, "narrations_finished"): S,  # then a clean listener restart
    (L, "listener_lost"): S,  # drop or session expiry: reconnect at once
    (R, "listener_lost"): S,  # the command is routed again in the next session
    (S, "listener_lost"): S,
    (N, "listener_lost"): N,
    (L, "recycle"): S,  # before the 60-minute cap, at a quiet moment
}


class IllegalTransition(RuntimeError):
    pass


class PhaseMachine:
    def __init__(self, initial: Phase = Phase.RESTARTING, on_change: Callable[[Phase, Phase, str], None] | None = None):
        self.phase = initial
        self._on_change = on_change

    def fire(self, event: str, why: str = "") -> Phase:
        try:
            target = TRANSITIONS[(self.phase, event)]
        except KeyError:
            raise IllegalTransition(f"{event!r} is not allowed while {self.phase.value}") from None
        if target is not self.phase:
            log.info("state %s -> %s (%s%s)", self.phase.value, target.value, event, f": {why}" if why else "")
            old, self.phase = self.phase, target
            if self._on_change:
                self._on_change(old, target, event)
        return target


# --- muting --------------------------------------------------------------------------------------


class MuteHolders:
    """The mic upload is muted while anyone holds it; each holder removes itself in `finally`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._holders: set[str] = set()
        self._clock = clock
        self.history: deque[tuple[str, float, float]] = deque(maxlen=100)  # (holder, start, end), recent

    @property
    def muted(self) -> bool:
        return bool(self._holders)

    @contextlib.contextmanager
    def hold(self, holder: str) -> Iterator[None]:
        if holder in self._holders:
            raise RuntimeError(f"{holder} already holds the mute")
        self._holders.add(holder)
        start = self._clock()
        try:
            yield
        finally:
            self._holders.discard(holder)
            self.history.append((holder, start, self._clock()))


# --- the readable timeline -----------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineEntry:
    at: float
    kind: str  # heard | ignored | wake | command | tool | narrating | narrated | restarted | error | notice
    text: str


class Timeline:
    """What happened, in words; printed by the demo, asserted on by tests, logged always.
    Keeps the recent entries and a count of every kind, so it stays small however long it runs."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        printer: Callable[[TimelineEntry], None] | None = None,
        keep: int = 1000,
    ):
        self._clock = clock
        self._start = clock()
        self.entries: deque[TimelineEntry] = deque(maxlen=keep)
        self._counts: collections.Counter[str] = collections.Counter()
        self._printer = printer
        self._changed = asyncio.Event()

    def add(self, kind: str, text: str) -> None:
        entry = TimelineEntry(self._clock() - self._start, kind, text)
        self.entries.append(entry)
        self._counts[kind] += 1
        log.info("%s: %s", kind, text)
        if self._printer:
            self._printer(entry)
        self._changed.set()

    def count(self, kind: str) -> int:
        return self._counts[kind]

    async def wait_for(self, predicate: Callable[["Timeline"], bool], timeout: float) -> None:
        """Await a timeline state (no sleeping): returns as soon as `predicate` holds."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()


# --- collaborators (duck-typed so tests can inject small fakes) -----------------------------------


class Microphone(Protocol):
    def chunks(self) -> Any: ...


class Speaker(Protocol):
    def play(self, pcm: bytes) -> None: ...
    def flush(self) -> None: ...
    async def drained(self) -> None: ...


class Tools(Protocol):
    def session_tools(self) -> list[dict[str, Any]]: ...
    async def run(self, name: str, arguments_json: str, call_id: str) -> Any: ...


class Formatters(Protocol):
    def format(self, result: Any) -> Any: ...


class Notices(Protocol):
    async def wait_pending(self) -> None: ...
    def next_batch(self, now: float) -> Any: ...
    def ack(self, ids: list[int]) -> None: ...


ANSWER, NOTICE = 0, 1  # narration priorities: answers to commands first


@dataclass(order=True)
class NarrationRequest:
    priority: int
    seq: int
    script: str = field(compare=False)
    kind: str = field(compare=False)  # answer | fallback | error | notice | status
    on_done: Callable[[NarrationResult | None], None] | None = field(default=None, compare=False)


# --- the coordinator -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordinatorParts:
    """Everything the coordinator works with, built by the entry point (or a test)."""

    settings: Settings
    listener_factory: Callable[["Coordinator"], Listener]
    narrator: Narrator
    microphone: Microphone
    speaker: Speaker
    tools: Tools
    formatters: Formatters
    local_voice: Callable[[str], Awaitable[bytes]]  # speaks when the narrator cannot
    chime: bytes = b""
    notices: Notices | None = None


CONNECTION_LOST_MESSAGE = "I lost my connection for a moment. I'm listening again."
CANNOT_CONNECT_MESSAGE = "I can't reach OpenAI right now. I'll keep trying and tell you when I'm back."
RECONNECTED_MESSAGE = "I'm connected again."
ROUTING_FAILED_MESSAGE = "Sorry, I couldn't work out what to do with that. Please say it again."


class Coordinator:
    """Implements the listener's observer interface; owns every task it starts (one TaskGroup)."""

    def __init__(self, parts: CoordinatorParts, timeline: Timeline | None = None) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.timeline = timeline or Timeline()
        self.machine = PhaseMachine(on_change=self._phase_changed)
        self.mute = MuteHolders()
        self.listener = parts.listener_factory(self)
        self._reader_lock = asyncio.Lock()
        self._narrations: asyncio.PriorityQueue[NarrationRequest] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._pending_commands: deque[str] = deque()
        # call_ids already run: each runs exactly once. Recent ones suffice (ids are unique per
        # response and sessions are short-lived), and the bound keeps a days-long run small.
        self._executed_calls: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._command_active = False  # from routing until its narration is queued
        chunks_per_s = 1000 / max(1, self.settings.audio.chunk_ms)
        self._mic_buffer: deque[bytes] = deque(maxlen=max(1, int(self.settings.listener.pre_connect_buffer_s * chunks_per_s)))
        # Audio sent to the current session that it may not have heard yet (replayed after a drop).
        self._sent_audio: deque[bytes] = deque(maxlen=self._mic_buffer.maxlen)
        self._idle = asyncio.Event()
        self._first_session = asyncio.Event()
        self._uplink_wake = asyncio.Event()
        self._tg: asyncio.TaskGroup | None = None
        self._fatal: str | None = None
        self._connection_trouble = False
        self.stats = {"mic_chunks_sent": 0, "mic_chunks_muted": 0, "mic_chunks_buffered": 0}

    # -- running ----------------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until cancelled; returns 3 after a fatal error, 0 when a finite microphone (a WAV
        file) has ended and everything it said has been dealt with."""
        code = 0
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                listener_task = tg.create_task(self.listener.run(), name="listener")
                microphone_task = tg.create_task(self._read_microphone(), name="microphone")
                tg.create_task(self._uplink(), name="uplink")
                tg.create_task(self._narrate_forever(), name="narrator")
                tg.create_task(self._recycle_when_due(), name="recycle")
                if self.parts.notices is not None:
                    tg.create_task(self._feed_notices(), name="notices")
                await asyncio.wait({listener_task, microphone_task}, return_when=asyncio.FIRST_COMPLETED)
                if listener_task.done() or self._fatal:  # the listener returns only on a fatal error
                    code = 3
                    await self._speak_now(self._fatal or "A fatal error stopped me.")
                else:
                    self.timeline.add("microphone", "the input ended; finishing what it said")
                    await self._settle()
                raise _Stop()
        except* _Stop:
            pass
        finally:
            self._tg = None
        return code

    async def _settle(self) -> None:
        """Wait until nothing is heard, routed or narrated for a while (the VAD needs its silence)."""
        quiet_for = self.settings.listener.vad_silence_ms / 1000 + 1.0
        quiet_since: float | None = None
        while True:
            now = time.monotonic()
            if self._is_idle() and self.listener.quiet and not self._mic_buffer:
                quiet_since = quiet_since or now
                if now - quiet_since >= quiet_for:
                    return
            else:
                quiet_since = None
            await asyncio.sleep(0.05)

    @property
    def fatal_message(self) -> str | None:
        return self._fatal

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        assert self._tg is not None, "the coordinator is not running"
        self._tg.create_task(coro, name=name)  # owned by the TaskGroup: cancelled and awaited with it

    # -- phase bookkeeping ------------------------------------------------------------------------
    def _phase_changed(self, old: Phase, new: Phase, event: str) -> None:
        if new is Phase.LISTENING:
            self._idle.set()
        else:
            self._idle.clear()

    def _is_idle(self) -> bool:
        return (
            self.machine.phase is Phase.LISTENING
            and not self._command_active
            and not self._pending_commands
            and self._narrations.empty()
            and not self._reader_lock.locked()
        )

    # -- listener observer (sync: they only set state and spawn owned tasks) -----------------------
    def listener_ready(self) -> None:
        if self._connection_trouble:
            self._connection_trouble = False
            self._queue_narration(RECONNECTED_MESSAGE, "status", ANSWER)
        self._sent_audio.clear()
        self.timeline.add("listening", f"listener session {self.listener.sessions_opened} ready")
        self.machine.fire("listener_ready")
        self._first_session.set()
        self._uplink_wake.set()
        self._route_next()

    def listener_lost(
        self, closed: wire.Closed, expired: bool, interrupted_command: str | None, unheard_speech: bool
    ) -> None:
        if unheard_speech and self._sent_audio:
            # The session went away mid-utterance: what was sent since all was last heard goes to
            # the next session first, so the user's words are not lost.
            self._mic_buffer = deque([*self._sent_audio, *self._mic_buffer], maxlen=self._mic_buffer.maxlen)
            self.timeline.add("replaying", f"{len(self._sent_audio) * self.settings.audio.chunk_ms} ms of unheard speech")
        self._sent_audio.clear()
        if interrupted_command is not None:
            # Not run yet (tools run only on a completed response): route it again, first in line.
            self._pending_commands.appendleft(interrupted_command)
            self._command_active = False
        intentional = closed.code == 1000
        if expired:
            self.timeline.add("restarting", "listener session expired; reconnecting")
        elif not intentional:
            self.timeline.add("error", f"listener connection dropped (code {closed.code}); reconnecting")
            # Heard when nothing else will tell the user: a cut command or utterance is answered anyway.
            if interrupted_command is None and not unheard_speech and self.machine.phase is not Phase.NARRATING:
                self._queue_narration(CONNECTION_LOST_MESSAGE, "status", ANSWER)
        self.machine.fire("listener_lost", f"code {closed.code}")

    def listener_connect_failed(self, error: HandshakeFailed, attempt: int) -> None:
        self.timeline.add("error", f"listener could not connect (attempt {attempt}): {error}")
        if not self._connection_trouble:
            self._connection_trouble = True
            self._queue_narration(CANNOT_CONNECT_MESSAGE, "status", ANSWER)

    def listener_fatal(self, message: str) -> None:
        self._fatal = message
        self.timeline.add("error", f"fatal: {message}")

    def heard(self, transcript: str, decision: str) -> None:
        if self.listener.all_heard:
            self._sent_audio.clear()  # everything sent so far has been heard: nothing to replay
        kind = {"ignored": "ignored", "wake": "wake", "command": "heard"}[decision]
        self.timeline.add(kind, transcript)
        if decision == "wake" and self.parts.chime:
            self._spawn(self._play_chime(), "chime")

    def command_heard(self, text: str) -> None:
        self._pending_commands.append(text)
        self._route_next()

    def tools_requested(self, command: str, calls: tuple[wire.FunctionCall, ...]) -> None:
        fresh = [c for c in calls if c.call_id not in self._executed_calls]
        for call in calls:
            if call.call_id in self._executed_calls:
                log.warning("call %s (%s) was already run; not running it again", call.call_id, call.name)
        for call in fresh:
            self._executed_calls[call.call_id] = None
        while len(self._executed_calls) > 1000:
            self._executed_calls.popitem(last=False)
        if not fresh:
            self._command_done()
            return
        self._spawn(self._run_tools(command, fresh), f"tools:{fresh[0].call_id}")

    def text_answer(self, command: str, text: str) -> None:
        self.timeline.add("fallback", f"no tool call for {command!r}; narrating the model's text")
        self._queue_narration(text, "fallback", ANSWER)
        self._command_done()

    def routing_failed(self, command: str, reason: str) -> None:
        self.timeline.add("error", f"routing {command!r} failed: {reason}")
        self._queue_narration(ROUTING_FAILED_MESSAGE, "error", ANSWER)
        self._command_done()

    # -- commands ---------------------------------------------------------------------------------
    def _route_next(self) -> None:
        """Route the next queued command if the pipeline is free; one command at a time."""
        if self.machine.phase is not Phase.LISTENING or self._command_active or not self._pending_commands:
            return
        command = self._pending_commands.popleft()
        self._command_active = True
        self.machine.fire("command_routed", command)
        self.timeline.add("command", command)
        self._spawn(self._route(command), "route")

    async def _route(self, command: str) -> None:
        if not await self.listener.route(command):
            # The session vanished between the decision and the send: keep the command for the next one.
            self._pending_commands.appendleft(command)
            self._command_active = False

    def _command_done(self) -> None:
        self._command_active = False

    async def _run_tools(self, command: str, calls: list[wire.FunctionCall]) -> None:
        scripts: list[str] = []
        for call in calls:
            self.timeline.add("tool", f"{call.name}({call.arguments})")
            try:
                result = await self.parts.tools.run(call.name, call.arguments, call.call_id)
                speakable = self.parts.formatters.format(result)
            except Exception as exc:  # the registry should not raise; if it does, say so and go on
                log.exception("tool %s crashed", call.name)
                scripts.append(f"Sorry, the {call.name.replace('_', ' ')} tool failed.")
                self.timeline.add("error", f"tool {call.name} crashed: {exc.__class__.__name__}")
                continue
            log.info("tool %s finished ok=%s: %s", call.name, result.ok, speakable.full)
            await self.listener.send_tool_output(call, result.short_output())
            scripts.append(speakable.script)
        self._queue_narration(" ".join(scripts), "answer", ANSWER)
        self._command_done()

    # -- narration --------------------------------------------------------------------------------
    def _queue_narration(
        self, script: str, kind: str, priority: int, on_done: Callable[[NarrationResult | None], None] | None = None
    ) -> None:
        self._idle.clear()
        self._narrations.put_nowait(NarrationRequest(priority, next(self._seq), script, kind, on_done))

    async def _narrate_forever(self) -> None:
        while True:
            request = await self._narrations.get()
            async with self._reader_lock:
                self.machine.fire("narration_started", request.kind)
                await self._narrate(request)
                while not self._narrations.empty():  # back to back, one voice at a time
                    await self._narrate(self._narrations.get_nowait())
                self.machine.fire("narrations_finished")
            # A clean listener: the loop opens a fresh session and reports listener_ready.
            await self.listener.restart("after a narration")

    async def _narrate(self, request: NarrationRequest) -> None:
        speaker = self.parts.speaker
        self.timeline.add("narrating", request.script)
        result: NarrationResult | None = None
        with self.mute.hold("narration"):
            speaker.flush()  # nothing stale plays before or under this narration
            result = await self.parts.narrator.narrate(request.script, speaker)
            if not result.ok and result.audio_bytes == 0:
                self.timeline.add("error", f"narrator failed ({result.error}); using the local voice")
                speaker.play(await self.parts.local_voice(request.script))
            await speaker.drained()
            await asyncio.sleep(self.settings.narrator.echo_margin_s)  # the room's echo dies down
        self.timeline.add("narrated", f"{request.kind} (similarity {result.similarity:.2f}, attempts {result.attempts})")
        if request.on_done:
            request.on_done(result)

    async def _speak_now(self, text: str) -> None:
        """Last words before exiting: straight to the local voice, under the reader lock."""
        async with self._reader_lock:
            with self.mute.hold("final message"):
                self.parts.speaker.flush()
                self.parts.speaker.play(await self.parts.local_voice(text))
                await self.parts.speaker.drained()

    async def _play_chime(self) -> None:
        async with self._reader_lock:
            with self.mute.hold("chime"):
                self.parts.speaker.play(self.parts.chime)
                await self.parts.speaker.drained()
        self.timeline.add("chime", f"listening for a command for {self.settings.listener.wake_window_s:g} s")

    # -- microphone -------------------------------------------------------------------------------
    async def _read_microphone(self) -> None:
        """Read the mic until it ends. Muted chunks are read and dropped (the narrator's own
        voice must not reach the listener); the rest wait in a bounded buffer (oldest dropped)
        for the uplink. Reading starts once the first listener session exists."""
        await self._first_session.wait()
        try:
            async for chunk in self.parts.microphone.chunks():
                if self.mute.muted:
                    self.stats["mic_chunks_muted"] += 1
                    continue
                if not self.listener.ready:
                    self.stats["mic_chunks_buffered"] += 1
                self._mic_buffer.append(chunk)
                self._uplink_wake.set()
        except Exception as exc:  # a device that vanished: say so and stop, do not crash
            log.exception("the microphone failed")
            self._fatal = f"the microphone stopped working ({exc})"
            self.timeline.add("error", f"fatal: {self._fatal}")

    async def _uplink(self) -> None:
        """Send buffered mic audio whenever there is some and a configured session to take it;
        audio captured while the listener was reconnecting goes to the fresh session first."""
        while True:
            await self._uplink_wake.wait()
            self._uplink_wake.clear()
            while self._mic_buffer and self.listener.ready:
                chunk = self._mic_buffer[0]
                if not await self.listener.send_audio(chunk):
                    break  # the session went away mid-send; keep the rest for the next one
                self._mic_buffer.popleft()
                self.stats["mic_chunks_sent"] += 1
                self._sent_audio.append(chunk)

    # -- housekeeping -----------------------------------------------------------------------------
    async def _recycle_when_due(self) -> None:
        check_every = min(5.0, max(0.01, self.settings.listener.recycle_after_s / 10))
        while True:
            await asyncio.sleep(check_every)
            if (
                self._is_idle()
                and self.listener.ready
                and self.listener.quiet
                and self.listener.session_age_s >= self.settings.listener.recycle_after_s
            ):
                self.machine.fire("recycle", "session nearing its 60-minute limit")
                self.timeline.add("restarting", "recycling the listener session before its time limit")
                await self.listener.restart("recycle before the session limit")

    async def _feed_notices(self) -> None:
        notices = self.parts.notices
        assert notices is not None
        while True:
            await notices.wait_pending()
            while not self._is_idle():
                self._idle.clear()
                await self._idle.wait()
            batch = notices.next_batch(time.time())
            if batch is None:
                continue
            self.timeline.add("notice", batch.script)
            delivered = asyncio.Event()
            self._queue_narration(batch.script, "notice", NOTICE, functools.partial(self._notice_narrated, batch.ids, delivered))
            await delivered.wait()  # one batch at a time: the next waits for the next idle moment

    def _notice_narrated(self, ids: list[int], delivered: asyncio.Event, result: NarrationResult | None) -> None:
        # Narrated (by the narrator or the local voice): acknowledged, so never heard again.
        self.parts.notices.ack(ids)
        delivered.set()


class _Stop(Exception):
    """Ends the coordinator's TaskGroup after a fatal error."""
