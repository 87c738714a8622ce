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
import enum
import functools
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from audio_io import BYTES_PER_SECOND, AudioDeviceError, MicrophoneSource, SpeakerSink
from concurrency.changes import Changes
from config.settings import Settings
from decisions.errors import IllegalTransition
from decisions.listener_core import SessionEnd
from decisions.mute import MuteHolders
from decisions.narration import NarrationResult
from decisions.timeline import Timeline
from main_agent import Listener
from realtime_api import wire
from realtime_api.link import HandshakeFailed
from reader_agent import Narrator

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
    (N, "narrations_finished_listening"): L,  # only status messages were said: the listener carries on
    (L, "listener_lost"): S,  # drop or session expiry: reconnect at once
    (R, "listener_lost"): S,  # the command is routed again in the next session
    (S, "listener_lost"): S,
    (N, "listener_lost"): N,
    (L, "recycle"): S,  # before the 60-minute cap, at a quiet moment
}


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


# --- collaborators (duck-typed so tests can inject small fakes) -----------------------------------


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
    microphone: MicrophoneSource
    speaker: SpeakerSink
    tools: Tools
    formatters: Formatters
    local_voice: Callable[[str], Awaitable[bytes]]  # speaks when the narrator cannot
    chime: bytes = b""
    notices: Notices | None = None


CONNECTION_LOST_MESSAGE = "I lost my connection for a moment. I'm listening again."
CANNOT_CONNECT_MESSAGE = "I can't reach OpenAI right now. I'll keep trying and tell you when I'm back."
RECONNECTED_MESSAGE = "I'm connected again."
ROUTING_FAILED_MESSAGE = "Sorry, I couldn't work out what to do with that. Please say it again."
# Narration kinds after which the listener is restarted clean (status messages about the
# connection itself are not: the listener is reconnecting anyway).
RESTART_AFTER = frozenset({"answer", "fallback", "error", "notice"})
RECHECK_IDLE_S = 1.0  # the notice feeder re-checks this often even without a change (wake windows lapse silently)


class Coordinator:
    """Implements the listener's observer interface; owns every task it starts (one TaskGroup)."""

    def __init__(self, parts: CoordinatorParts, timeline: Timeline | None = None) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.timeline = timeline or Timeline()
        self.machine = PhaseMachine(on_change=self._phase_changed)
        self._changed = Changes()  # anything the idle and backpressure tests read has changed
        self.mute = MuteHolders(on_change=self._changed.notify)
        self.listener = parts.listener_factory(self)
        self._reader_lock = asyncio.Lock()
        self._narrations: asyncio.PriorityQueue[NarrationRequest] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._pending_commands: deque[str] = deque()
        # call_ids already run: each runs exactly once. Recent ones suffice (ids are unique per
        # response and sessions are short-lived), and the bound keeps a days-long run small.
        self._executed_calls: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._active_route = 0  # the command being routed (0 = none), until its narration is queued
        self._awaiting_response = 0  # the route whose model response has not come yet (0 = none)
        self._routes = itertools.count(1)
        chunks_per_s = 1000 / max(1, self.settings.audio.chunk_ms)
        self._mic_buffer: deque[bytes] = deque(maxlen=max(1, int(self.settings.listener.pre_connect_buffer_s * chunks_per_s)))
        # Audio sent to the current session, with where each chunk starts (ms of session audio), so
        # what a lost session never transcribed can be sent again to the next one.
        self._sent_audio: deque[tuple[int, bytes]] = deque(maxlen=self._mic_buffer.maxlen)
        self._sent_bytes = 0
        self._first_session = asyncio.Event()
        self._uplink_wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._tg: asyncio.TaskGroup | None = None
        self._fatal: str | None = None
        self._trouble_announced = False
        self.stats = {"mic_chunks_sent": 0, "mic_chunks_muted": 0, "mic_chunks_buffered": 0}

    # -- running ----------------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until cancelled; returns 3 after a fatal error, 0 when a finite microphone (a WAV
        file) has ended and everything it said has been dealt with."""
        code = 0
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                listener_task = tg.create_task(self._run_listener(), name="listener")
                microphone_task = tg.create_task(self._read_microphone(), name="microphone")
                stop_task = tg.create_task(self._stop.wait(), name="stop")
                tg.create_task(self._uplink(), name="uplink")
                tg.create_task(self._narrate_forever(), name="narrator")
                tg.create_task(self._recycle_when_due(), name="recycle")
                if self.parts.notices is not None:
                    tg.create_task(self._feed_notices(), name="notices")
                await asyncio.wait({listener_task, microphone_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
                if self._fatal is not None:
                    code = 3
                    await self._speak_now(self._fatal)
                else:
                    self.timeline.add("microphone", "the input ended; finishing what it said")
                    await self._settle()
                raise _Stop()
        except* _Stop:
            pass
        finally:
            self._tg = None
        return code

    @property
    def fatal_message(self) -> str | None:
        return self._fatal

    def _fail(self, message: str) -> None:
        """Something retrying cannot fix: stop, saying why once (the first reason wins)."""
        if self._fatal is None:
            self._fatal = message
            self.timeline.add("error", f"fatal: {message}")
        self._stop.set()

    async def _run_listener(self) -> None:
        await self.listener.run()  # returns only after a fatal error, reported via listener_fatal
        self._fail(self._fatal or "the listener stopped")

    async def _settle(self) -> None:
        """Wait until nothing is heard, routed or narrated for a while (the VAD needs its silence)."""
        quiet_for = self.settings.listener.vad_silence_ms / 1000 + 1.0
        quiet_since: float | None = None
        while True:
            now = time.monotonic()
            if self._is_idle() and not self._mic_buffer:
                quiet_since = quiet_since or now
                if now - quiet_since >= quiet_for:
                    return
            else:
                quiet_since = None
            await asyncio.sleep(0.05)

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        assert self._tg is not None, "the coordinator is not running"
        self._tg.create_task(coro, name=name)  # owned by the TaskGroup: cancelled and awaited with it

    # -- idleness ---------------------------------------------------------------------------------
    def _phase_changed(self, old: Phase, new: Phase, event: str) -> None:
        self._changed.notify()

    def _is_idle(self) -> bool:
        """Nothing heard, said, routed or about to be: the moment a notice may speak."""
        return (
            self.machine.phase is Phase.LISTENING
            and not self._active_route
            and not self._pending_commands
            and self._narrations.empty()
            and not self._reader_lock.locked()
            and self.listener.quiet  # nobody mid-sentence, no transcript pending
            and not self.listener.gate.window_open_at(time.monotonic())  # nor a command about to come
        )

    async def _wait_until_idle(self) -> None:
        while not self._is_idle():
            await self._changed.wait(RECHECK_IDLE_S)

    # -- listener observer (sync: they only set state and spawn owned tasks) -----------------------
    def listener_ready(self) -> None:
        self._sent_audio.clear()
        self._sent_bytes = 0
        self._changed.notify()
        self.timeline.add("listening", f"listener session {self.listener.sessions_opened} ready")
        self.machine.fire("listener_ready")
        if self._trouble_announced:
            self._spawn(self._confirm_reconnected(self.listener.sessions_opened), "reconnected?")
        self._first_session.set()
        self._uplink_wake.set()
        self._route_next()

    async def _confirm_reconnected(self, session: int) -> None:
        """Say we are back only once a session has proved healthy, not on every flap."""
        await asyncio.sleep(self.settings.reconnect.healthy_after_s)
        if self._trouble_announced and self.listener.ready and self.listener.sessions_opened == session:
            self._trouble_announced = False
            self._queue_narration(RECONNECTED_MESSAGE, "status", ANSWER)

    def listener_lost(self, end: SessionEnd) -> None:
        if end.replay_from_ms is not None:
            # The session went away before transcribing what was said: that audio goes to the
            # next session first, so the user's words are not lost (and nothing heard is re-sent).
            unheard = [chunk for start, chunk in self._sent_audio if start + self.settings.audio.chunk_ms > end.replay_from_ms]
            self._mic_buffer = deque([*unheard, *self._mic_buffer], maxlen=self._mic_buffer.maxlen)
            self.timeline.add("replaying", f"{len(unheard) * self.settings.audio.chunk_ms} ms of speech the session never transcribed")
        self._sent_audio.clear()
        if end.interrupted_command is not None:
            # Not run yet (tools run only on a completed response): route it again, first in line.
            self._pending_commands.appendleft(end.interrupted_command)
            self._active_route = self._awaiting_response = 0
        if end.expired:
            self.timeline.add("restarting", "listener session expired; reconnecting")
        elif not end.by_us:
            self.timeline.add("error", f"listener connection dropped (code {end.closed.code}); reconnecting")
            # Said once, for a good session that dropped, and only when nothing else will tell the
            # user: a cut command, replayed speech or a running tool is answered anyway. Sessions
            # that die young count as failed attempts and are announced after a few of those.
            quiet_loss = not (end.interrupted_command or end.replay_from_ms is not None or self._active_route)
            if end.healthy and quiet_loss and self.machine.phase is not Phase.NARRATING:
                self._queue_narration(CONNECTION_LOST_MESSAGE, "status", ANSWER)
        self.machine.fire("listener_lost", f"code {end.closed.code}")

    def listener_connect_failed(self, error: HandshakeFailed, attempt: int) -> None:
        self.timeline.add("error", f"listener connection attempt {attempt} failed: {error}")
        if attempt == self.settings.reconnect.announce_after_failures and not self._trouble_announced:
            self._trouble_announced = True
            self._queue_narration(CANNOT_CONNECT_MESSAGE, "status", ANSWER)

    def listener_fatal(self, message: str) -> None:
        self._fail(message)

    def heard(self, transcript: str, decision: str) -> None:
        kind = {"ignored": "ignored", "wake": "wake", "command": "heard"}[decision]
        self.timeline.add(kind, transcript)
        self._changed.notify()
        if decision == "wake" and self.parts.chime:
            self._spawn(self._play_chime(), "chime")

    def command_heard(self, text: str) -> None:
        self._pending_commands.append(text)
        self._route_next()

    def tools_requested(self, command: str, calls: tuple[wire.FunctionCall, ...], session: int) -> None:
        self._awaiting_response = 0
        fresh = [c for c in calls if c.call_id not in self._executed_calls]
        if len(fresh) < len(calls):
            log.warning("ignoring %d call(s) that already ran", len(calls) - len(fresh))
        if not fresh:
            self.routing_failed(command, "the model repeated a call that already ran")
            return
        for call in fresh:
            self._executed_calls[call.call_id] = None
        while len(self._executed_calls) > 1000:
            self._executed_calls.popitem(last=False)
        self._spawn(self._run_tools(command, fresh, session, self._active_route), f"tools:{fresh[0].call_id}")

    def text_answer(self, command: str, text: str) -> None:
        self._awaiting_response = 0
        self.timeline.add("fallback", f"no tool call for {command!r}; narrating the model's text")
        self._queue_narration(text, "fallback", ANSWER)
        self._command_done(self._active_route)

    def routing_failed(self, command: str, reason: str) -> None:
        self._awaiting_response = 0
        self.timeline.add("error", f"routing {command!r} failed: {reason}")
        self._queue_narration(ROUTING_FAILED_MESSAGE, "error", ANSWER)
        self._command_done(self._active_route)

    # -- commands ---------------------------------------------------------------------------------
    def _route_next(self) -> None:
        """Route the next queued command if the pipeline is free; one command at a time."""
        if self.machine.phase is not Phase.LISTENING or self._active_route or not self._pending_commands:
            return
        command = self._pending_commands.popleft()
        self._active_route = route = next(self._routes)
        self.machine.fire("command_routed", command)
        self.timeline.add("command", command)
        self._spawn(self._route(command, route), "route")

    async def _route(self, command: str, route: int) -> None:
        # A watchdog: a route whose response never comes (lost by the server) must not leave the
        # assistant routing forever. It stops watching once the response arrived, however long
        # the tool it asked for then takes, or once a lost session handed the command back.
        self._awaiting_response = route
        if not await self.listener.route(command):
            # The session vanished between the decision and the send: keep the command for the next one.
            self._pending_commands.appendleft(command)
            self._active_route = self._awaiting_response = 0
            return
        timeout = self.settings.listener.route_timeout_s
        await asyncio.sleep(timeout)
        if self._awaiting_response == route:
            self.listener.abandon_route()  # given up: not to be routed again after the restart
            self.routing_failed(command, f"no answer from the model in {timeout:g} s")
            await self.listener.restart("the model did not answer a command")

    def _command_done(self, route: int) -> None:
        if self._active_route == route:  # a late finisher must not end a newer command
            self._active_route = 0
        self._changed.notify()

    async def _run_tools(self, command: str, calls: list[wire.FunctionCall], session: int, route: int) -> None:
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
            await self.listener.send_tool_output(call, result.short_output(), session)
            scripts.append(speakable.script)
        self._queue_narration(" ".join(scripts), "answer", ANSWER)
        self._command_done(route)

    # -- narration --------------------------------------------------------------------------------
    def _queue_narration(
        self, script: str, kind: str, priority: int, on_done: Callable[[NarrationResult | None], None] | None = None
    ) -> None:
        self._narrations.put_nowait(NarrationRequest(priority, next(self._seq), script, kind, on_done))
        self._changed.notify()

    async def _narrate_forever(self) -> None:
        while True:
            request = await self._narrations.get()
            kinds = {request.kind}
            async with self._reader_lock:
                self.machine.fire("narration_started", request.kind)
                try:
                    await self._narrate(request)
                    while not self._narrations.empty():  # back to back, one voice at a time
                        following = self._narrations.get_nowait()
                        kinds.add(following.kind)
                        await self._narrate(following)
                except AudioDeviceError as exc:
                    self._fail(f"the speaker stopped working ({exc})")
                    return
                if kinds & RESTART_AFTER or not self.listener.ready:
                    self.machine.fire("narrations_finished")
                else:
                    self.machine.fire("narrations_finished_listening")
            self._changed.notify()
            if kinds & RESTART_AFTER:
                # A clean listener: the loop opens a fresh session and reports listener_ready.
                await self.listener.restart("after a narration")
            else:
                self._route_next()

    async def _narrate(self, request: NarrationRequest) -> None:
        speaker = self.parts.speaker
        self.timeline.add("narrating", request.script)
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
                try:
                    self.parts.speaker.flush()
                    self.parts.speaker.play(await self.parts.local_voice(text))
                    await self.parts.speaker.drained()
                except AudioDeviceError:
                    log.warning("could not say the final message: the speaker does not work")

    async def _play_chime(self) -> None:
        async with self._reader_lock:
            with self.mute.hold("chime"):
                try:
                    self.parts.speaker.play(self.parts.chime)
                    await self.parts.speaker.drained()
                except AudioDeviceError as exc:
                    self._fail(f"the speaker stopped working ({exc})")
                    return
                await asyncio.sleep(self.settings.narrator.echo_margin_s)  # its echo is no command
        self.timeline.add("chime", f"listening for a command for {self.settings.listener.wake_window_s:g} s")
        self._changed.notify()

    # -- microphone -------------------------------------------------------------------------------
    async def _read_microphone(self) -> None:
        """Read the mic until it ends. A live mic's chunks are read and dropped while muted (the
        narrator's own voice must not reach the listener); the rest wait in a bounded buffer
        (oldest dropped) for the uplink. A file is not a room: it is not read at all while muted
        or while no session can take it, so nothing in it is lost. Reading starts once the first
        listener session exists."""
        await self._first_session.wait()
        live = self.parts.microphone.live
        try:
            async for chunk in self.parts.microphone.chunks():
                if live and self.mute.muted:
                    self.stats["mic_chunks_muted"] += 1
                    continue
                while not live and (self.mute.muted or not self.listener.ready or self._buffer_full()):
                    await self._changed.wait(RECHECK_IDLE_S)
                if not self.listener.ready:
                    self.stats["mic_chunks_buffered"] += 1
                self._mic_buffer.append(chunk)
                self._uplink_wake.set()
        except Exception as exc:  # a device that vanished: say so and stop, do not crash
            log.exception("the microphone failed")
            self._fail(f"the microphone stopped working ({exc})")

    def _buffer_full(self) -> bool:
        return len(self._mic_buffer) >= (self._mic_buffer.maxlen or 0) - 1

    async def _uplink(self) -> None:
        """Send buffered mic audio whenever there is some and a configured session to take it;
        audio captured while the listener was reconnecting goes to the fresh session first."""
        while True:
            await self._uplink_wake.wait()
            self._uplink_wake.clear()
            while self._mic_buffer and self.listener.ready:
                buffer = self._mic_buffer
                chunk = buffer[0]
                if not await self.listener.send_audio(chunk):
                    break  # the session went away mid-send; keep the rest for the next one
                if buffer is not self._mic_buffer:
                    break  # a lost session's replay replaced the buffer meanwhile: start again from it
                was_full = self._buffer_full()
                buffer.popleft()
                if was_full:
                    self._changed.notify()  # room again: a file reader may be waiting for it
                self.stats["mic_chunks_sent"] += 1
                # Session time from a byte count, so odd chunk sizes do not drift.
                self._sent_audio.append((self._sent_bytes * 1000 // BYTES_PER_SECOND, chunk))
                self._sent_bytes += len(chunk)

    # -- housekeeping -----------------------------------------------------------------------------
    async def _recycle_when_due(self) -> None:
        check_every = min(5.0, max(0.01, self.settings.listener.recycle_after_s / 10))
        while True:
            await asyncio.sleep(check_every)
            if (
                self._is_idle()
                and self.listener.ready
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
            await self._wait_until_idle()
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
    """Ends the coordinator's TaskGroup (fatal error, or a finite microphone has ended)."""
