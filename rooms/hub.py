"""The hub: one assistant, a satellite in every room.

Each room is a `handoff.Coordinator` of its own (its own decision core, listener session,
reader lock, mute and stop), whose microphone and speaker are the satellite's
(`rooms.link.SatelliteLink`). Beside them, shared: the tools and the task manager (tasks, timers,
reminders), the cost meter, the narrator (its warm spare), a bound on how many rooms speak at
once (`MAX_REALTIME_SESSIONS`: a further room hears a short earcon and waits its turn), and the
notices, each routed to the room that started its task (`NOTICES_TO`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from audio_io import SpeakerSink, with_volume
from assembly.build import shared_parts
from assembly.detectors import build_stop_detector, upload_filter
from config.rooms import NoticesTo, SatelliteSpec
from config.settings import Settings
from decisions.arbitration import ArbitrationCore
from decisions.cost import RealtimeRole
from decisions.rooms import Announce, NoticeTargets
from decisions.timeline import Timeline, TimelineEntry, TimelineKind
from detectors.stop_word import StopDetector, StopHit
from handoff import Coordinator, CoordinatorParts
from main_agent import Listener
from reader_agent import NarrationCut, Narrator
from rooms.arbiter import Arbiter, similarity
from rooms.link import SatelliteLink
from rooms.pairing import hub_keys
from rooms.wire import PipelineStarted
from speech.local_voice import speak_locally
from speech.sounds import load_sounds
from tasks import TaskManager, TaskRecord
from tasks.records import Notice

if TYPE_CHECKING:  # the shared tools (assembly.build makes them)
    from tools.formatters import Speakable
    from tools.registry import ToolRegistry
    from tools.result import ToolResult

log = logging.getLogger("handoff.rooms")

ORIGIN_TOOLS = frozenset({"start_task", "set_timer", "set_reminder"})  # what they start is the room's


class RoomTools:
    """The shared tools as one room calls them: what a call starts is remembered as this room's."""

    def __init__(self, tools: ToolRegistry, room: str, targets: NoticeTargets) -> None:
        self._tools, self._room, self._targets = tools, room, targets

    def session_tools(self) -> list[dict[str, Any]]:
        return self._tools.session_tools()

    async def run(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        return self._note_origin(name, await self._tools.run(name, arguments_json, call_id))

    async def run_confirmed(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        """A call the room's user said yes to (a tool that cannot be undone)."""
        return self._note_origin(name, await self._tools.run_confirmed(name, arguments_json, call_id))

    def prepare(self, name: str, arguments_json: str) -> None:
        self._tools.prepare(name, arguments_json)

    def read_only_names(self) -> Set[str]:
        return self._tools.read_only_names()  # live views: MCP tools come and go

    def needs_yes_names(self) -> Set[str]:
        return self._tools.needs_yes_names()

    def question_for(self, name: str, arguments_json: str) -> str | None:
        return self._tools.question_for(name, arguments_json)

    def _note_origin(self, name: str, result: ToolResult) -> ToolResult:
        if name in ORIGIN_TOOLS and result.ok:
            for key in ("task", "timer"):
                started = result.data.get(key)
                if isinstance(started, dict) and isinstance(started.get("id"), int):
                    self._targets.started(started["id"], self._room)
        return result

    def format(self, result: ToolResult) -> Speakable:
        return self._tools.format(result)


class RoomNotices:
    """The shared notice queue as one room sees it: only what is for this room, acknowledged
    for good once every room it is for has heard it."""

    def __init__(self, manager: TaskManager, room: str, targets: NoticeTargets) -> None:
        self._queue, self._room, self._targets = manager.notices, room, targets

    def _for_me(self, notice: Notice) -> bool:
        return notice.id is not None and self._targets.wants(self._room, notice.id, notice.task_id)

    async def wait_pending(self) -> None:
        await self._queue.wait_pending(self._for_me)

    def next_batch(self, now: float) -> Any:
        return self._queue.next_batch(now, self._for_me)

    def ack(self, ids: list[int]) -> None:
        done = [i for i in ids if self._targets.heard_by(self._room, i, self._queue.task_of(i) or 0)]
        if done:
            self._queue.ack(done)


class BoundedNarrator:
    """The shared narrator as one room uses it: at most `slots` rooms speak at once; a room
    that must wait hears `waiting_sound` first."""

    def __init__(self, narrator: Narrator, slots: asyncio.Semaphore, waiting_sound: bytes) -> None:
        self._narrator, self._slots, self._waiting_sound = narrator, slots, waiting_sound
        self.waited = 0

    def __getattr__(self, name: str) -> Any:  # counters (weak_matches, ...) are the shared narrator's
        return getattr(self._narrator, name)

    async def narrate(self, script: str, speaker: SpeakerSink, cut: NarrationCut | None = None) -> Any:
        if self._slots.locked():
            self.waited += 1
            speaker.play(self._waiting_sound)
        async with self._slots:
            return await self._narrator.narrate(script, speaker, cut)


@dataclass
class Room:
    name: str
    link: SatelliteLink
    coordinator: Coordinator
    timeline: Timeline


class RoomLogNames(logging.Filter):
    """Names the room on each log line its tasks write ("[kitchen] heard: what time is it"): the
    room is the context of every task a room starts (`ROOM`, set for it in `Hub.run`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        room = ROOM.get()
        if room and not getattr(record, "room", ""):
            record.room = room
            record.msg = f"[{room}] {record.msg}"
        return True


# The room whose task is running, for the log. A context variable, not shared state: each room's
# tasks see their own value (a task copies its context when it is created).
ROOM: contextvars.ContextVar[str] = contextvars.ContextVar("handoff_room", default="")


class Hub:
    """Every room, run together: `await hub.run()` until a fatal error (exit code 3)."""

    def __init__(self, rooms: dict[str, Room], targets: NoticeTargets, notices: Any,
                 arbiter: Arbiter | None = None) -> None:  # fmt: skip
        self.rooms, self.targets, self._notices = rooms, targets, notices
        self.arbiter = arbiter  # with two rooms or more: one command heard in several is taken by one

    def say(self, text: str, room: str) -> str | None:
        """`handoff say --room ROOM|all TEXT`: said in that room (or every room) as a notice; None,
        or why not (one sentence)."""
        if room != "all" and room not in self.rooms:
            return f"There is no room {room!r} in SATELLITES (rooms: {', '.join(self.rooms)}, or all)."
        if not text.strip():
            return "The text is empty; give the words to say."
        self.targets.address(self._notices.announce(text.strip()), frozenset(self.rooms) if room == "all" else frozenset({room}))
        return None

    def announce(self, announce: Announce) -> None:
        """A satellite went away or came back: said in the other rooms (the log has it already)."""
        (self.targets.gone.discard if announce.reachable else self.targets.gone.add)(announce.room)
        others = frozenset(name for name in self.rooms if name != announce.room and self.rooms[name].link.connected)
        if others:
            self.targets.address(self._notices.announce(announce.text), others)

    async def run(self) -> int:
        """Until a room's coordinator returns (a fatal error: exit code 3); every satellite link
        and room is cancelled and awaited on the way out."""
        code = 0
        names = RoomLogNames()
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(names)
        try:
            async with asyncio.TaskGroup() as tg:
                runs = []
                if self.arbiter is not None:
                    tg.create_task(self.arbiter.run(), name="arbiter")
                for room in self.rooms.values():
                    token = ROOM.set(room.name)  # the tasks created now (and theirs) log as this room's
                    tg.create_task(room.link.run(), name=f"satellite {room.name}")
                    runs.append(tg.create_task(room.coordinator.run(), name=f"room {room.name}"))
                    ROOM.reset(token)
                done, _pending = await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED)
                code = next(iter(done)).result()
                raise _HubStop()
        except* _HubStop:
            pass
        finally:
            for handler in handlers:
                handler.removeFilter(names)
        return code


class _HubStop(Exception):
    """Ends the hub's TaskGroup."""


def _open_window(coordinator: Coordinator, started: PipelineStarted) -> None:
    """A satellite that heard the wake word itself sends the command alone: the next utterance
    is the command, as after "computer" said alone."""
    if started.woken:
        gate = coordinator.listener.gate
        gate.open_window(time.monotonic() + gate.window_s)  # the listener's clock
        coordinator.changes.notify()


def _tell_transcript(link: SatelliteLink, entry: TimelineEntry) -> None:
    """A wake-word satellite streams until it hears what was understood."""
    if entry.kind is TimelineKind.COMMAND:
        link.understood(entry.text)


@contextlib.asynccontextmanager
async def hub(
    settings: Settings,
    timelines: dict[str, Timeline] | None = None,
    on_task_change: Callable[[TaskRecord], None] | None = None,
    stop_detectors: dict[str, StopDetector] | None = None,
) -> AsyncIterator[Hub]:
    """Build the hub for `settings.rooms.satellites`; everything opened is closed on exit.
    `stop_detectors`: what hears "computer, stop" in each room (default: the on-device one)."""
    rooms_settings = settings.rooms
    names = tuple(s.room for s in rooms_settings.satellites)
    sounds = load_sounds(settings.audio)
    targets = NoticeTargets(names, to_all=rooms_settings.notices_to is NoticesTo.ALL,
                            fixed_room=rooms_settings.notices_room)  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        shared = await stack.enter_async_context(shared_parts(settings, on_task_change))
        narrator = await stack.enter_async_context(Narrator(
            settings, shared.client, on_usage=functools.partial(shared.cost.response_usage, RealtimeRole.NARRATOR),
            refusal=shared.refusal))
        slots = asyncio.Semaphore(rooms_settings.max_sessions)
        rooms: dict[str, Room] = {}
        arbiter = Arbiter(ArbitrationCore(similar=similarity)) if len(names) > 1 and rooms_settings.one_answer else None
        the_hub = Hub(rooms, targets, shared.task_manager.notices, arbiter)
        for spec in rooms_settings.satellites:
            rooms[spec.room] = _room(settings, spec, shared, narrator, slots, sounds, targets, the_hub,
                                     (timelines or {}).get(spec.room), (stop_detectors or {}).get(spec.room))  # fmt: skip
        if shared.control is not None:
            shared.control.on_announce = the_hub.say
        yield the_hub


def _room(settings: Settings, spec: SatelliteSpec, shared: Any, narrator: Narrator, slots: asyncio.Semaphore,
          sounds: Any, targets: NoticeTargets, the_hub: Hub, timeline: Timeline | None,
          stop: StopDetector | None) -> Room:
    timeline = timeline or Timeline(log_overheard=settings.log.overheard)
    link = SatelliteLink(spec, settings.rooms, settings.audio.chunk_ms, on_announce=the_hub.announce,
                         keys=hub_keys(settings))  # fmt: skip
    on_win: list[Callable[[PipelineStarted], None]] = []  # the room's coordinator, once it exists
    microphone: Any = link.microphone
    if the_hub.arbiter is not None:
        microphone = the_hub.arbiter.microphone(spec.room, link.microphone, lambda started: on_win[0](started),
                                                lambda: link.understood(""))  # fmt: skip
    if stop is None and settings.stop.enabled:
        stop = build_stop_detector(settings)  # one per room: "computer, stop" stops that room only
    tools = RoomTools(shared.tools, spec.room, targets)
    parts = CoordinatorParts(
        settings=settings,
        listener_factory=lambda on_event: Listener(settings, shared.client, tools.session_tools(), on_event,
                                                   refusal=shared.refusal),
        narrator=BoundedNarrator(narrator, slots, sounds.working),  # type: ignore[arg-type]
        microphone=microphone,
        speaker=with_volume(link.speaker, settings.audio.volume_percent),
        tools=tools,
        local_voice=speak_locally,
        chime=sounds.wake,
        follow_up_sound=sounds.done,
        working_sound=sounds.working,
        notices=RoomNotices(shared.task_manager, spec.room, targets),
        mic_filter=upload_filter(settings),
        cost=shared.cost,
        stop_detector=stop if settings.stop.enabled else None,
    )
    coordinator = Coordinator(parts, timeline)
    on_win.append(functools.partial(_open_window, coordinator))
    if the_hub.arbiter is not None:
        microphone.muted = lambda: coordinator.core.mute.muted
    link.on_pipeline = microphone.pipeline if the_hub.arbiter is not None else on_win[0]
    link.on_stop = lambda phrase: coordinator.heard_stop(StopHit(phrase, end_s=0.0))  # a satellite heard it
    timeline.on_add.append(functools.partial(_tell_transcript, link))
    return Room(spec.room, link, coordinator, timeline)
