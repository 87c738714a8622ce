"""The one function that assembles the assistant from settings and audio devices (used by the
live command, the demo and the end-to-end tests alike)."""

from __future__ import annotations

import contextlib
from typing import AsyncIterator

from audio_io import MicrophoneSource, SpeakerSink
from brain import Brain
from config.settings import Settings
from decisions.timeline import Timeline
from handoff import Coordinator, CoordinatorParts
from main_agent import Listener
from reader_agent import Narrator
from realtime_api.link import make_client
from speech.local_voice import chime, speak_locally
from tasks import TaskManager, TaskSettings, TaskStore, load_task_config, register_task_tools
from tools.builtin import build_listener_tools


@contextlib.asynccontextmanager
async def assistant(
    settings: Settings,
    microphone: MicrophoneSource,
    speaker: SpeakerSink,
    timeline: Timeline | None = None,
) -> AsyncIterator[Coordinator]:
    """Build the whole assistant around the given audio devices. Everything opened here is
    closed on exit, whatever fails; run it with `await coordinator.run()`."""
    async with contextlib.AsyncExitStack() as stack:
        client = make_client(settings.realtime)
        stack.push_async_callback(client.close)
        tools = build_listener_tools(settings, Brain(settings.brain, client))
        task_settings = TaskSettings.from_settings(settings)
        task_config = load_task_config(settings.tasks_config)
        store = TaskStore(task_settings.db_path)
        stack.callback(store.close)
        task_manager = TaskManager(task_config, store, task_settings)
        register_task_tools(tools, task_manager)
        await task_manager.start()
        stack.push_async_callback(task_manager.close)
        await microphone.start()
        stack.push_async_callback(microphone.close)
        await speaker.start()
        stack.push_async_callback(speaker.close)
        parts = CoordinatorParts(
            settings=settings,
            listener_factory=lambda on_event: Listener(settings, client, tools.session_tools(), on_event),
            narrator=await stack.enter_async_context(Narrator(settings, client)),
            microphone=microphone,
            speaker=speaker,
            tools=tools,
            local_voice=speak_locally,
            chime=chime(),
            notices=task_manager,
        )
        yield Coordinator(parts, timeline)
