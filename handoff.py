"""The coordinator's async shell: it carries out what `decisions.coordinator.CoordinatorCore`
decides, and reports back what happened.

- One narrator at a time (the reader lock); answers to commands before notices.
- While narrating, mic upload to the listener is muted (the mic is still read and drained); the
  playback queue is flushed before a narration; unmute once the audio actually played. From
  then on the echo gate (`audio_io.echo`) decides, chunk by chunk, what of the room's sound is the
  narrator's echo (dropped) and what is the user (kept, from its first word): no fixed margin.
- After narrations, the mic switches to a fresh listener session (opened while the tool ran); the
  old one is retired, closed once what it heard is transcribed. Mic audio captured while no
  session can take it is buffered (bounded) and sent to the new session.
- While a narration plays, the on-device stop detector hears the (muted) mic: "stop" cuts it at once.

Every task is owned by one TaskGroup. Nothing here polls: each loop waits for a change (one
`Changes` primitive) or for the core's next deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Protocol

from audio_io import BYTES_PER_SECOND, AudioDeviceError, MicrophoneSource, SpeakerSink
from audio_io.cut import CutSpeaker
from audio_io.held import HeldSpeaker
from audio_io.echo_reference import RoomEcho
from concurrency.changes import Changes
from config.settings import Settings
from decisions.coordinator import (
    AbandonRoute, AckNotices, Action, AudioHeard, ChimeFinished, ConfirmHeard, Earcon, ChimeStarted, CoordinatorCore, CoordinatorEvent, CoordinatorTimings,
    CutNarration, DeviceFailed, FetchNotices, InputEnded, NarrationDone, NarrationRequest, NarrationsFinished,
    NoticeBatchFetched, NoticesPending, Phase, PlayChime, RestartListener, RouteNotSent, RouteSent, RouteWithdrawn, SendRoute,
    StartTools, ToolDone, ToolNeedsYes, ToolStarted, TurnEnded, TurnPaused, SpeechResumed, WithdrawRoute, PrepareNarration,
    DropNarration, SetPause, PrepareTools, ReadAheadBilled, Stop, StopHeard, Tick, ToolsFinished, UtteranceRejected,
    OpenFollowUp, CommandTaken,
)
from decisions.cost import CostMeter
from decisions.errors import IllegalTransition
from decisions.listener_core import Fatal, ListenerEvent
from decisions.events import NarratorFailed, ToolOutcome
from realtime_api.wire import FunctionCall
from decisions.timeline import Timeline
from decisions.uplink import FRAME_MS, Uplink, placed_in_stream
from main_agent import Listener
from detectors.barge_in import Held
from detectors.barge_in_ear import BargeInEar
from detectors.stop_word import StopDetector, StopHit, StopTiming
from reader_agent import NarrationCut, Narrator

log = logging.getLogger("handoff.coordinator")

WORKING_SOUND_GAP_S = 0.7  # between ticks of the working sound


# --- collaborators (duck-typed so tests can inject small fakes) -----------------------------------


class Tools(Protocol):
    def session_tools(self) -> list[dict[str, Any]]: ...
    async def run(self, name: str, arguments_json: str, call_id: str) -> Any: ...
    async def run_confirmed(self, name: str, arguments_json: str, call_id: str) -> Any: ...  # after a spoken yes
    def prepare(self, name: str, arguments_json: str) -> None: ...  # a held call: what it may do first
    def format(self, result: Any) -> Any: ...


class MicFilter(Protocol):
    """What of the microphone goes up (detectors.pipeline.UploadFilter); without one, all of it."""

    def feed(self, chunk: bytes, woke_s: float | None = None) -> list[bytes]: ...  # woke_s: a barge-in's wake ended in it
    def skip(self, chunk: bytes) -> None: ...
    def reset(self) -> None: ...
    def rejected(self) -> None: ...  # the transcript gate ignored what was sent
    def command_heard(self) -> None: ...  # a command was routed: its wake's window closes with the answer
    def take_wake(self) -> float | None: ...  # a wake the device heard since last asked: the phrase's length (s)
    vouches: bool  # ... that may route its command before the transcript (a shipped model heard it)
    def take_turn(self) -> bytes | None: ...  # a woken utterance the device heard end: its audio
    def take_pause(self) -> bytes | None: ...  # ... or pause inside it, maybe its end: its audio so far
    def take_resumed(self) -> bool: ...  # ... and speech came back after that pause
    def set_pause(self, seconds: float) -> None: ...  # that pause, from the next turn on
    def follow_up(self, seconds: float) -> None: ...  # an answer asked something: the next utterance goes up


class Notices(Protocol):
    async def wait_pending(self) -> None: ...
    def next_batch(self, now: float) -> Any: ...
    def ack(self, ids: list[int]) -> None: ...


@dataclass(frozen=True)
class CoordinatorParts:
    """Everything the coordinator works with, built by the entry point (or a test)."""

    settings: Settings
    listener_factory: Callable[[Callable[[ListenerEvent], None]], Listener]
    narrator: Narrator
    microphone: MicrophoneSource
    speaker: SpeakerSink
    tools: Tools
    local_voice: Callable[[str], Awaitable[bytes]]  # speaks when the narrator cannot
    chime: bytes = b""  # after the wake phrase alone
    follow_up_sound: bytes = b""  # after an answer: a follow-up needs no wake phrase for a moment
    working_sound: bytes = b""  # one tick of the sound that plays while an answer is late
    notices: Notices | None = None
    mic_filter: MicFilter | None = None  # None: every chunk goes up (the continuous stream)
    cost: CostMeter | None = None  # what the API reports it used, priced; None: not counted
    stop_detector: StopDetector | None = None  # "computer, stop" while it talks; None: off


@dataclass(frozen=True)
class _ReadAhead:
    """A provisional route's answer, read by the narrator into a held speaker ahead of its turn end."""
    task: asyncio.Task[Any]  # the narration, reading into `speaker`
    speaker: HeldSpeaker
    cut: NarrationCut


class Coordinator:
    def __init__(self, parts: CoordinatorParts, timeline: Timeline | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.timeline = timeline or Timeline()
        self._clock = clock
        self.changes = Changes()  # the core's state, the mute or the uplink's room changed
        self._uplink_wake = Changes()  # audio to send (50 times a second: kept off `changes`)
        self.listener = parts.listener_factory(self._feed)
        chunks = int(self.settings.listener.pre_connect_buffer_s * 1000 / max(1, self.settings.audio.chunk_ms))
        self.core = CoordinatorCore(
            CoordinatorTimings.from_settings(self.settings, chime=bool(parts.chime)), self.listener.gate, self.timeline,
            Uplink(chunks, BYTES_PER_SECOND, FRAME_MS), clock, on_mute_change=self.changes.notify, cost=parts.cost,
            read_only_tools=getattr(parts.tools, "read_only_names", frozenset)(),  # live (MCP tools come and go); a fake: none
            needs_yes_tools=getattr(parts.tools, "needs_yes_names", frozenset)(),  # those that cannot be undone: a spoken yes first
            ask_about=getattr(parts.tools, "question_for", lambda name, arguments: None),
        )
        self.room_echo = self._room_echo()  # a room's echo gate and canceller (None: a file, no room)
        self.echo = self.room_echo.gate if self.room_echo is not None else None
        self.canceller = self.room_echo.canceller if self.room_echo is not None else None
        self.speaker = self.room_echo.speaker if self.room_echo is not None else parts.speaker
        self._reader_lock = asyncio.Lock()
        self._cut: tuple[NarrationCut, CutSpeaker] | None = None  # the narration being read, to cut it
        # Answers of provisional routes, read ahead into a held speaker, by command id (issue 33).
        self._prepared: dict[int, _ReadAhead] = {}
        self._ear = BargeInEar(parts.stop_detector, self.canceller, self.echo) if parts.stop_detector is not None else None
        # One per "computer, stop" that cut a narration, the latest ones (a daemon runs for days).
        self.stop_timings: deque[StopTiming] = deque(maxlen=100)
        self._tg: asyncio.TaskGroup | None = None
        self._exit: asyncio.Future[Stop] | None = None
        self.bugs = 0  # unexpected exceptions caught at a boundary that must keep running
        self.illegal_transitions = 0  # events the core's table refused (bugs; the daemon carries on)

    # -- what callers read --------------------------------------------------------------------------
    @property
    def fatal_message(self) -> str | None:
        return self.core.fatal_message

    @property
    def phase(self) -> Phase:
        return self.core.phase

    # -- running ------------------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until cancelled; returns 3 after a fatal error, 0 when a finite microphone (a WAV
        file) has ended and everything it said has been dealt with."""
        self._exit = asyncio.get_running_loop().create_future()
        stop: Stop | None = None
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self._run_listener(), name="listener")
                tg.create_task(self._read_microphone(), name="microphone")
                tg.create_task(self._uplink(), name="uplink")
                tg.create_task(self._narrate_forever(), name="narrator")
                tg.create_task(self._keep_time(), name="clock")
                if self.parts.notices is not None:
                    tg.create_task(self._watch_notices(), name="notices")
                if self.parts.working_sound:
                    tg.create_task(self._play_working_sound(), name="working sound")
                stop = await self._exit
                if stop.message is not None:
                    await self._speak_now(stop.message)
                raise _Stop()
        except* _Stop:
            pass
        finally:
            self._tg = None
            self.core.settle_commands()  # an answer whose words never came is kept as it is
        assert stop is not None
        return stop.exit_code

    def _feed(self, event: CoordinatorEvent) -> None:
        """The one way events reach the core; its actions are carried out at once."""
        revision = self.core.revision
        try:
            actions = self.core.handle(event)
        except IllegalTransition:  # a bug: nothing moved; logged and counted, the daemon carries on
            self.illegal_transitions += 1
            log.exception("the coordinator refused %s (%d so far); carrying on", type(event).__name__,
                          self.illegal_transitions)
            self.changes.notify()  # whoever waits on the state looks again
            return
        if self.core.revision != revision:
            self.changes.notify()
            self._uplink_wake.notify()
        for action in actions:
            self._carry_out(action)

    def _carry_out(self, action: Action) -> None:
        match action:
            case SendRoute(route=route, command=command, item=item, audio=audio, provisional=provisional):
                self._spawn(self._send_route(route, command, item, audio, provisional), "route")
            case WithdrawRoute():
                self._spawn(self.listener.withdraw_provisional(), "withdraw route")
            case PrepareNarration(command_id=command_id, script=script):
                held, cut = HeldSpeaker(self._clock), NarrationCut()
                assert self._tg is not None
                task = self._tg.create_task(self.parts.narrator.narrate(script, held, cut), name="prepared narration")
                self._prepared[command_id] = _ReadAhead(task, held, cut)
            case DropNarration(command_id=command_id):
                if (prepared := self._prepared.pop(command_id, None)) is not None:
                    prepared.speaker.drop()
                    prepared.cut.cut(billed=lambda usage: self._feed(ReadAheadBilled(usage)))  # its tokens bought nothing
            case SetPause(seconds=seconds):
                if self.parts.mic_filter is not None:
                    self.parts.mic_filter.set_pause(seconds)
            case StartTools(route=route, calls=calls, session=session, command_id=command_id, confirmed=confirmed):
                self._spawn(self._run_tools(route, calls, session, command_id, confirmed), f"tools:{calls[0].call_id}")
                # Its answer ends in a fresh listener session: open it while the tool runs, so
                # the mic switches to it the moment the narration's mute lifts.
                self._spawn(self.listener.warm_up(), "warm listener")
            case PrepareTools(calls=calls):
                for call in calls:
                    self.parts.tools.prepare(call.name, call.arguments)
            case AbandonRoute():
                self.listener.abandon_route()
            case RestartListener(reason=reason):
                # A file paused mid-utterance goes on after the narration, and a room's speaker who
                # began after the mute lifted was not cut off: that utterance goes whole to the
                # next session. One the mute cut off is a fragment: dropped.
                keep = not self.parts.microphone.live or self.core.speech_began_unmuted
                self._spawn(self.listener.restart(reason, keep_in_progress=keep), "restart")
            case PlayChime(earcon=earcon):
                self._spawn(self._play_chime(earcon), "chime")
            case CutNarration():
                self._cut_narration()
            case FetchNotices():
                self._spawn(self._fetch_notices(), "fetch notices")
            case ConfirmHeard(sent=sent):
                self._spawn(self._confirm_heard(sent), "confirm heard")
            case UtteranceRejected():
                if self.parts.mic_filter is not None:
                    self.parts.mic_filter.rejected()
            case OpenFollowUp(seconds=seconds):
                if self.parts.mic_filter is not None:
                    self.parts.mic_filter.follow_up(seconds)
            case CommandTaken():
                if self.parts.mic_filter is not None:
                    self.parts.mic_filter.command_heard()
            case AckNotices(ids=ids):
                assert self.parts.notices is not None
                self.parts.notices.ack(list(ids))
            case Stop():
                if self._exit is not None and not self._exit.done():
                    self._exit.set_result(action)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        assert self._tg is not None, "the coordinator is not running"
        self._tg.create_task(coro, name=name)  # owned by the TaskGroup: cancelled and awaited with it

    async def _confirm_heard(self, sent: int) -> None:
        self._feed(AudioHeard(sent if await self.listener.heard_all_sent() else None))

    async def _keep_time(self) -> None:
        """Wake the core at its next deadline, or on any change, whichever comes first."""
        while True:
            now = self._clock()
            deadline = self.core.next_deadline(now)
            await self.changes.wait(None if deadline is None else max(0.0, deadline - now))
            self._feed(Tick())

    async def _run_listener(self) -> None:
        await self.listener.run()  # returns only after a fatal error, already reported
        self._feed(Fatal("the listener stopped"))

    # -- commands -----------------------------------------------------------------------------------
    async def _send_route(self, route: int, command: str, item: str | None, audio: bytes | None,
                          provisional: bool = False) -> None:  # fmt: skip
        if audio is not None:  # inline, at the device's own end of turn (or a pause that may be it)
            carried = await self.listener.route_inline(audio, provisional)
            self._feed(RouteWithdrawn(route) if carried is None else RouteSent(route, carried) if carried else RouteNotSent(route))
            return
        if item is not None:  # by its audio, at the commit
            sent = await self.listener.route_audio(item)
            self._feed(RouteWithdrawn(route) if sent is None else RouteSent(route) if sent else RouteNotSent(route))
            return
        sent = await self.listener.route(command)
        self._feed(RouteSent(route) if sent else RouteNotSent(route))

    async def _run_tools(self, route: int, calls: tuple[Any, ...], session: int, command: int,
                         confirmed: bool = False) -> None:  # fmt: skip
        """Each call once; the core logs and keeps what it may of them (a command whose words are
        not known yet may turn out overheard: only the tool's name is kept then). `confirmed`:
        the user said yes to these calls (the only way a tool that cannot be undone runs)."""
        scripts: list[str] = []
        for call in calls:
            self._feed(ToolStarted(command, call.name, call.arguments))
            try:
                run = self.parts.tools.run_confirmed if confirmed else self.parts.tools.run
                result = await run(call.name, call.arguments, call.call_id)
                speakable = self.parts.tools.format(result)
            except Exception as exc:  # a bug in a tool: logged with its traceback, counted, and said
                self.bugs += 1
                log.exception("tool %s crashed", call.name)
                scripts.append(f"Sorry, the {call.name.replace('_', ' ')} tool failed.")
                self._feed(ToolDone(command, call.name, ToolOutcome.CRASHED, exc.__class__.__name__))
                continue
            self._feed(ToolDone(command, call.name, ToolOutcome.OK if result.ok else ToolOutcome.FAILED,
                                result.short_output()))
            asked = result.data if isinstance(result.data, dict) and result.data.get("needs_yes") else None
            if asked is not None and not confirmed:  # (a tool the brain picked: asked once these are done)
                yes_call = FunctionCall(f"{call.call_id}-yes", str(asked["tool"]), json.dumps(asked["arguments"]), call.item_id)
                self._feed(ToolNeedsYes(command, yes_call, str(asked["question"])))
            await self.listener.send_tool_output(call, result.short_output(), session)
            scripts.append(speakable.script)
        self._feed(ToolsFinished(route, tuple(scripts)))

    # -- narration ----------------------------------------------------------------------------------
    async def _narrate_forever(self) -> None:
        while True:
            await self.changes.wait_until(lambda: self.core.narration_waiting)
            async with self._reader_lock:
                said = 0
                try:
                    while (request := self._next_narration()) is not None:  # back to back, one voice
                        said += 1
                        summary, first_audio_at, stopped_after_s, ready_after_s = await self._narrate(request)
                        self._feed(NarrationDone(request, summary, first_audio_at, stopped_after_s, ready_after_s))
                except AudioDeviceError as exc:
                    self._feed(DeviceFailed(f"the speaker stopped working ({exc})"))
                    return
                # While this waited for the voice (a chime, the working sound), the narration may
                # have become one that must wait (someone started talking): then nothing was said.
                if said:
                    self._feed(NarrationsFinished())

    def _next_narration(self) -> NarrationRequest | None:
        request = self.core.next_narration()
        if request is not None:
            self.changes.notify()
            if self.core.restart_owed:  # the next listener session gets ready while this is said
                self._spawn(self.listener.warm_up(), "warm listener")
        return request

    async def _narrate(self, request: NarrationRequest) -> tuple[str, float | None, float | None, float | None]:
        speaker = CutSpeaker(self.speaker, self._clock)
        prepared = self._prepared.pop(request.command.id, None) if request.command is not None else None
        cut = NarrationCut() if prepared is None else prepared.cut
        with self.core.mute.hold("narration"):
            speaker.flush()  # nothing stale plays before or under this narration
            self._cut = (cut, speaker)  # from here until the mute lifts, "computer, stop" cuts it
            try:
                asked = self._clock() if prepared is None else prepared.speaker.made_at
                if prepared is not None:  # read ahead (a provisional route): what came plays now
                    prepared.speaker.release(speaker)
                    result = await prepared.task
                else:
                    result = await self.parts.narrator.narrate(request.script, speaker, cut)
                first = speaker.first_write_at if prepared is None else prepared.speaker.first_at
                ready_after_s = None if first is None else first - asked
                narrator_done_at = self._clock()
                if result.fatal:  # no credit, a refused key: retrying cannot help
                    self._feed(Fatal(result.error or "OpenAI refused the narrator"))
                elif not result.ok and result.audio_bytes == 0 and not cut.requested:
                    self.timeline.emit(NarratorFailed(result.error or "no audio"))
                    speaker.play(await self.parts.local_voice(request.script))
                # Its echo's tail is the echo gate's, not a fixed margin. (A stop while the rest
                # plays flushes it: this returns at once.)
                await speaker.drained()
                self._narration_stopped(speaker, narrator_done_at)
            finally:
                self._cut = None
        if cut.requested:
            seconds = result.audio_bytes / BYTES_PER_SECOND
            return f"stopped after {seconds:.1f} s of audio", speaker.first_write_at, seconds, ready_after_s
        return f"similarity {result.similarity:.2f}, attempts {result.attempts}", speaker.first_write_at, None, ready_after_s

    # -- "computer, stop" -----------------------------------------------------------------------------
    def _listen_for_stop(self, raw: bytes, gated: bytes, heard: bytes, offset: int) -> list[Held]:
        """Per chunk: while a narration plays, "stop" or the wake phrase cuts it (`BargeInEar`; a
        barge-in held until it is a command). Returns what goes up."""
        if self._ear is None:
            return [Held(offset, gated, 0.0)]
        cut, pieces = self._ear.hear(offset, raw, gated, heard, self.core.narrating, self.core.mute.muted)
        if cut is not None:
            self.heard_stop(cut)
        return pieces

    def heard_stop(self, hit: StopHit) -> None:
        """"Computer, stop" was heard: by this room's detector, or by a satellite's own (whose
        microphone does not leave it while the answer plays)."""
        self.stop_timings.append(StopTiming(hit, heard_at=self._clock()))
        self._feed(StopHeard(hit.phrase))  # while narrating: CutNarration comes back at once

    def _cut_narration(self) -> None:
        """Cut the narration being read: the speaker is flushed now (sync), the narrator stops
        playing and cancels its response; the narration worker then lets go of the voice."""
        timing = self.stop_timings[-1] if self.stop_timings else None
        if self._cut is not None:
            cut, speaker = self._cut
            cut.cut()
            speaker.cut()
            if timing is not None:
                timing.flushed_at = self._clock()
        # else: between the worker taking the request and reading it; it sees the cut state

    def _narration_stopped(self, speaker: CutSpeaker, narrator_done_at: float) -> None:
        """After a cut narration: how fast the cut was, in the log and `stop_timings`."""
        if not speaker.cut_done or not self.stop_timings:
            return
        timing = self.stop_timings[-1]
        timing.last_write_at, timing.writes_after_cut, timing.done_at = (
            speaker.last_write_at, speaker.writes_after_cut, narrator_done_at)
        log.info(
            "stop: %r cut the narration %.1f ms after the hit; %d late chunk(s) of it dropped",
            timing.hit.phrase, timing.cut_ms or 0.0, timing.writes_after_cut,
        )

    async def _speak_now(self, text: str) -> None:
        """Last words before exiting: straight to the local voice, under the reader lock."""
        async with self._reader_lock:
            with self.core.mute.hold("final message"):
                try:
                    self.speaker.flush()
                    self.speaker.play(await self.parts.local_voice(text))
                    await self.speaker.drained()
                except AudioDeviceError:
                    log.warning("could not say the final message: the speaker does not work")

    async def _play_chime(self, earcon: Earcon) -> None:
        sound = self.parts.chime if earcon is Earcon.WAKE else self.parts.follow_up_sound
        async with self._reader_lock:
            self._feed(ChimeStarted())
            try:
                with self.core.mute.hold("chime"):
                    self.speaker.play(sound)
                    await self.speaker.drained()  # its echo is the echo gate's
            except AudioDeviceError as exc:
                self._feed(DeviceFailed(f"the speaker stopped working ({exc})"))
            finally:
                self._feed(ChimeFinished(earcon))

    async def _play_working_sound(self) -> None:
        """Soft ticks while a command's answer is late, never under a narration. Not muted: a
        tick is no speech (the on-device VAD keeps it home), and the user may speak meanwhile."""
        core, speaker = self.core, self.speaker
        while True:
            await self.changes.wait_until(lambda: core.working_sound_on)
            async with self._reader_lock:
                if core.working_sound_on:
                    try:
                        speaker.play(self.parts.working_sound)
                        await speaker.drained()
                    except AudioDeviceError as exc:
                        self._feed(DeviceFailed(f"the speaker stopped working ({exc})"))
                        return
            await self.changes.wait(WORKING_SOUND_GAP_S)  # the rhythm of the ticks; a change ends it early

    # -- microphone -----------------------------------------------------------------------------------
    async def _read_microphone(self) -> None:
        """Read the mic until it ends. A live mic's chunks are read and dropped while muted (the
        narrator's own voice must not reach the listener); the rest wait in a bounded buffer
        (oldest dropped) for the uplink. A file is not a room: it is not read at all while muted
        or while no session can take it, so nothing in it is lost. Reading starts once the first
        listener session exists."""
        core, microphone = self.core, self.parts.microphone
        await self.changes.wait_until(lambda: core.session > 0)
        mutes_seen, read = core.mute.releases, 0  # read: bytes so far, where each chunk lies in its stream
        try:
            async for raw in microphone.chunks():
                raw_start, read = read, read + len(raw)
                gated, heard = self._through_echo_gate(raw)  # every chunk, muted or not: the gate learns the room
                for piece in self._listen_for_stop(raw, gated, heard, raw_start):  # "stop": nothing uploaded; a barge-in held
                    mutes_seen = await self._take_chunk(piece.chunk, piece.offset, mutes_seen, piece.released, piece.woke_s)
        except AudioDeviceError as exc:  # a device that vanished: say so and stop
            log.error("the microphone failed: %s", exc)
            self._feed(DeviceFailed(f"the microphone stopped working ({exc})"))
            return
        self._feed(InputEnded())

    async def _take_chunk(self, chunk: bytes, chunk_start: int, mutes_seen: int, released: bool = False, woke_s: float | None = None) -> int:
        """A chunk on its way up: dropped while muted, else filtered into the uplink. A room's mute
        is judged by capture time: a busy machine sees the audio's end late, or reads the mic late
        (`RoomEcho.unmuted`, `RoomEcho.played_over`; a barge-in the ear `released` goes up, woken)."""
        core, microphone, mic_filter = self.core, self.parts.microphone, self.parts.mic_filter
        if microphone.live and core.mute.muted:
            self._drop_muted([chunk] if self.room_echo is None else self.room_echo.muted(chunk_start, chunk))
            return mutes_seen
        if self.room_echo is not None and self.room_echo.holding_muted:  # the mute lifted (only a live mic holds)
            dropped, late = self.room_echo.unmuted()
            self._drop_muted(dropped)
            for start, piece in late:  # read while muted, captured after the audio ended: the user's
                mutes_seen = await self._take_chunk(piece, start, mutes_seen)
        if self.room_echo is not None and self.room_echo.played_over(chunk_start, chunk, released):
            self._drop_muted([chunk])
            return mutes_seen
        if not microphone.live:
            await self.changes.wait_until(lambda: not (core.mute.muted or not core.listener_up or core.uplink.full))
        if mic_filter is None:
            pieces = [chunk]
        else:
            if core.mute.releases != mutes_seen:
                mutes_seen = core.mute.releases
                if microphone.live:  # what came before the mute is another utterance; a file was
                    mic_filter.reset()  # paused by it instead: its utterance goes on, and its end is sent
            pieces = mic_filter.feed(chunk, woke_s)
            if (phrase_s := mic_filter.take_wake()) is not None and mic_filter.vouches:
                self.listener.local_wake(phrase_s)  # its utterance may be routed at its commit
            if mic_filter.take_resumed():
                self._feed(SpeechResumed())  # the user went on after a pause: its provisional route goes
            if (paused := mic_filter.take_pause()) is not None:
                self._feed(TurnPaused(paused))  # maybe the end: routed provisionally, said only at the end
            if (turn := mic_filter.take_turn()) is not None:
                self._feed(TurnEnded(turn))  # ... or now, inline (the device's own end of turn)
        if core.uploads_paused:  # today's budget is spent: nothing leaves the machine
            pieces = []
        for start, piece in placed_in_stream(pieces, chunk, chunk_start):
            core.uplink.take(piece, session_ready=core.listener_up, at_ms=start * 1000 // BYTES_PER_SECOND)
        if pieces:
            self._uplink_wake.notify()
        return mutes_seen

    def _drop_muted(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.core.uplink.dropped_while_muted()
            if self.parts.mic_filter is not None:
                self.parts.mic_filter.skip(chunk)

    def _room_echo(self) -> RoomEcho | None:
        """A room (a live mic) gets an echo gate and a canceller, on one clock (the loop's times
        the mic's pace). A file, or an unpaced test microphone, is no room."""
        microphone, pace, clock = self.parts.microphone, self.parts.microphone.pace, self._clock
        if not microphone.live or pace <= 0:
            return None
        return RoomEcho(self.parts.speaker, microphone, self.settings.echo, lambda: clock() * pace, pace)

    def _through_echo_gate(self, chunk: bytes) -> tuple[bytes, bytes]:
        """The chunk after the gate (itself, or silence where it is the narrator's echo alone: the
        session's audio stays continuous) and after the canceller (for the stop detector)."""
        if self.room_echo is None:
            return chunk, chunk
        passed, heard = self.room_echo.hear(chunk)
        if passed:
            return chunk, heard
        self.core.uplink.dropped_as_echo()
        return bytes(len(chunk)), heard

    async def _uplink(self) -> None:
        """Send buffered mic audio whenever there is some and a configured session to take it;
        audio captured while the listener was reconnecting goes to the fresh session first."""
        core = self.core
        while True:
            await self._uplink_wake.wait_until(lambda: not core.uplink.empty and core.listener_up)
            while core.listener_up and (next_chunk := core.uplink.next_chunk()) is not None:
                token, chunk, at_ms = next_chunk
                session = core.session
                if not await self.listener.send_audio(chunk, at_ms):
                    # The session is going away; the rest waits for the next one. Wait for its
                    # end (or this loop would spin without letting the listener see it close),
                    # by state, not by the next wake-up: the next session may be up already,
                    # and with no more audio coming nothing would wake this loop again.
                    await self._uplink_wake.wait_until(lambda: core.session != session or not core.listener_up)
                    break
                if core.cost is not None:
                    core.cost.uploaded(len(chunk) / BYTES_PER_SECOND)
                if core.uplink.sent(token) or (core.uplink.empty and core.finishing):
                    self.changes.notify()  # room for a waiting file reader; or the input may be done

    # -- notices --------------------------------------------------------------------------------------
    async def _watch_notices(self) -> None:
        notices = self.parts.notices
        assert notices is not None
        while True:
            await self.changes.wait_until(lambda: self.core.notices_settled)  # one batch at a time
            await notices.wait_pending()
            self._feed(NoticesPending())

    async def _fetch_notices(self) -> None:
        assert self.parts.notices is not None
        batch = self.parts.notices.next_batch(time.time())
        self._feed(NoticeBatchFetched(tuple(batch.ids), batch.script) if batch else NoticeBatchFetched((), ""))


class _Stop(Exception):
    """Ends the coordinator's TaskGroup (a Stop action)."""
