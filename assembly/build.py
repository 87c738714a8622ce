"""The one function that assembles the assistant from settings and audio devices (used by the
live command, the demo and the end-to-end tests alike)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import time
from datetime import date, datetime
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from openai import AsyncOpenAI

from assembly.detectors import build_stop_detector, upload_filter
from audio_io import MicrophoneSource, SpeakerSink, with_volume
from brain import Brain, warm_responses_sdk
from config.settings import Settings, SettingsError
from concurrency.changes import Changes
from decisions.cost import CostMeter, DayTotals, RealtimeRole
from decisions.timeline import Timeline
from detectors.stop_word import StopDetector
from handoff import Coordinator, CoordinatorParts
from hands.config import load_servers
from hands.link_types import LinkTiming
from hands.manager import CombinedNotices, Hands
from hands.routing import Routing, brain_picker
from main_agent import Listener
from reader_agent import Narrator
from realtime_api.link import Refusal, make_client
from speech.local_voice import speak_locally
from speech.sounds import load_sounds
from tasks import (
    TaskManager, TaskRecord, TaskSettings, TaskStore, load_task_config, register_task_tools, register_timer_tools,
)
from tasks.control import ControlServer
from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry
from web.cost_days import COST_DAYS_FILE, CostDays, saving

log = logging.getLogger("handoff")


@contextlib.asynccontextmanager
async def assistant(
    settings: Settings,
    microphone: MicrophoneSource,
    speaker: SpeakerSink,
    timeline: Timeline | None = None,
    on_task_change: Callable[[TaskRecord], None] | None = None,
    stop_detector: StopDetector | None = None,
) -> AsyncIterator[Coordinator]:
    """Build the whole assistant around the given audio devices. Everything opened here is
    closed on exit, whatever fails; run it with `await coordinator.run()`. `stop_detector`:
    what hears "computer, stop" while it talks (None: the on-device StopPhraseDetector, unless
    STOP_WHILE_TALKING=false)."""
    mic_filter = upload_filter(settings)
    if stop_detector is None and settings.stop.enabled:
        stop_detector = build_stop_detector(settings)
    sounds = load_sounds(settings.audio)  # a configured sound that cannot be used stops the start here
    speaker = with_volume(speaker, settings.audio.volume_percent)
    async with contextlib.AsyncExitStack() as stack:
        shared = await stack.enter_async_context(shared_parts(settings, on_task_change))
        client, cost, tools, task_manager = shared.client, shared.cost, shared.tools, shared.task_manager
        refusal = shared.refusal
        await microphone.start()
        stack.push_async_callback(microphone.close)
        await speaker.start()
        stack.push_async_callback(speaker.close)
        parts = CoordinatorParts(
            settings=settings,
            listener_factory=lambda on_event: Listener(settings, client, tools.session_tools(), on_event, refusal=refusal),
            narrator=await stack.enter_async_context(
                Narrator(settings, client, on_usage=functools.partial(cost.response_usage, RealtimeRole.NARRATOR),
                         refusal=refusal)),
            microphone=microphone,
            speaker=speaker,
            tools=tools,
            local_voice=speak_locally,
            chime=sounds.wake,
            follow_up_sound=sounds.done,  # "your turn again": a follow-up needs no wake phrase
            working_sound=sounds.working,
            notices=CombinedNotices(task_manager, shared.hands) if shared.hands.servers else task_manager,
            mic_filter=mic_filter,
            cost=cost,
            stop_detector=stop_detector if settings.stop.enabled else None,
        )
        coordinator = Coordinator(parts, timeline or Timeline(log_overheard=settings.log.overheard))
        if mic_filter is not None and (reads := getattr(microphone, "quiet_reads", None)) is not None:
            # While it only listens for a wake and nothing plays, a read with a sound may wait for
            # the next too (issue 34: a talking room's wake-ups of the loop; decided on audio time, the same).
            reads.unhurried = lambda: mic_filter.waiting_for_wake and not coordinator.core.narrating
        # What was built to start (models, schemas, the SDK: most of the heap) lives all day: out of
        # the collector's sight, its full passes do not walk it every few seconds while it listens
        # (issue 34, the listening cost; nothing it decides changes). Once per process: a frozen
        # object's cycles are never collected, and a process that builds many (the tests) would
        # pin each one's garbage.
        if gc.get_freeze_count() == 0:
            gc.freeze()
        yield coordinator


@dataclass(frozen=True)
class SharedParts:
    """What every room shares: the API client, the cost meter, the tools, the task manager."""

    client: AsyncOpenAI
    refusal: Refusal  # the account's first fatal refusal stops every connection attempt, in every room
    cost: CostMeter
    tools: ToolRegistry
    task_manager: TaskManager
    hands: Hands  # the MCP servers whose tools are in `tools`
    control: ControlServer | None = None  # its socket (the hub answers `handoff say --room` on it)


@contextlib.asynccontextmanager
async def shared_parts(
    settings: Settings, on_task_change: Callable[[TaskRecord], None] | None = None
) -> AsyncIterator[SharedParts]:
    """The API client, cost meter, tools and task manager (started, with its control socket);
    all closed on exit."""
    async with contextlib.AsyncExitStack() as stack:
        client = make_client(settings.realtime)
        stack.push_async_callback(client.close)
        warming = asyncio.create_task(_warmed(), name="warm the Responses SDK")  # the brain's first answer
        stack.callback(warming.cancel)
        cost = await stack.enter_async_context(cost_meter(settings))
        tools = build_listener_tools(settings, Brain(settings.brain, client, on_usage=cost.brain_usage))
        task_settings = TaskSettings.from_settings(settings)
        task_config = load_task_config(settings.tasks_config)
        store = TaskStore(task_settings.db_path)
        stack.callback(store.close)
        task_manager = TaskManager(task_config, store, task_settings, on_change=on_task_change)
        register_task_tools(tools, task_manager)
        register_timer_tools(tools, task_manager)
        await task_manager.start()
        # Leaving here is handoff stopping (a signal, the end of its input, a fatal error): the
        # tasks it stops are recorded as stopped by the shutdown and announced at the next start.
        stack.push_async_callback(functools.partial(task_manager.close, shutdown=True))
        control = ControlServer(task_manager, task_settings.control_path)  # `handoff tasks start` / `cancel`
        await control.start()
        stack.push_async_callback(control.close)
        routing = Routing(tools, brain_picker(client, settings.brain.model, settings.brain.timeout_s, cost.brain_usage),
                          mode=settings.mcp_routing)
        hands = await stack.enter_async_context(mcp_servers(settings, tools, routing))
        yield SharedParts(client, Refusal(), cost, tools, task_manager, hands, control)


async def _warmed() -> None:
    try:
        await warm_responses_sdk()
    except Exception as exc:  # (it only saves time: the first answer pays it instead)
        log.warning("the Responses SDK was not warmed up: %s", exc)


@contextlib.asynccontextmanager
async def cost_meter(settings: Settings) -> AsyncIterator[CostMeter]:
    """The cost meter on local days, starting from what earlier runs spent today (a restart
    resets neither today's cost nor the daily budget), its spending saved as it goes."""
    def clock() -> datetime:  # local days
        return datetime.now().astimezone()

    days = CostDays(settings.state_dir / COST_DAYS_FILE, run=f"{int(time.time())}-{os.getpid()}")
    today = clock().date()
    earlier = DayTotals(today, **{f"{part}_usd": usd for part, usd in days.earlier(today).items()})
    spent = Changes()
    meter = CostMeter(settings.cost, clock=clock, earlier=earlier, on_spend=spent.notify)

    def own_today() -> tuple[date, dict[str, float]]:
        own = meter.own_today()
        return own.day, own.parts()

    async with saving(days, own_today, spent):
        yield meter


@contextlib.asynccontextmanager
async def mcp_servers(settings: Settings, tools: ToolRegistry, routing: Routing | None = None) -> AsyncIterator[Hands]:
    """The MCP servers of MCP_CONFIG, started (their tools in `tools`), stopped on exit. A file
    with any problem stops the start with every problem said."""
    servers, problems = load_servers(settings.mcp_config, settings.mcp_config_named)
    if problems:
        raise SettingsError(*problems)
    hands = Hands(servers, tools, LinkTiming(answer_wait_s=settings.mcp_answer_wait_s), routing=routing)
    try:
        await hands.start()
        yield hands
    finally:
        await hands.close()
