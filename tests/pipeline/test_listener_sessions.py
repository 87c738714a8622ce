"""The listener's shell moving its sessions by their table (decisions.listener_session), with
fake links: what a restart does when its session closes under it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

import pytest

import main_agent
from config.settings import ReconnectSettings, Settings
from decisions.listener_core import SessionEnd, SessionReady
from decisions.listener_session import Current
from realtime_api import wire


class HeldLink:
    """A session whose sends can be held (a slow socket) and which the test can drop."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.hold_sends = False
        self.sending = asyncio.Event()  # a held send has begun
        self.release = asyncio.Event()
        self.dropped = asyncio.Event()
        self.closed_by_us = False

    async def events(self) -> AsyncIterator[wire.Closed]:
        await self.dropped.wait()
        yield wire.Closed(1006, "")

    async def send(self, event: dict[str, Any]) -> bool:
        self.sent.append(event)
        if self.hold_sends:
            self.sending.set()
            await self.release.wait()
        return True

    async def close(self) -> None:
        self.closed_by_us = True
        self.dropped.set()


async def test_a_session_dropped_while_it_hands_over_leaves_the_next_one_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    links: list[HeldLink] = []

    async def open_held(*args: object, **kwargs: object) -> HeldLink:
        links.append(HeldLink())
        return links[-1]

    monkeypatch.setattr(main_agent, "open_configured", open_held)
    opened = {1: asyncio.Event(), 2: asyncio.Event()}
    ends: list[SessionEnd] = []

    def report(event: object) -> None:
        if isinstance(event, SessionReady) and event.session in opened:
            opened[event.session].set()
        elif isinstance(event, SessionEnd):
            ends.append(event)

    settings = Settings(reconnect=ReconnectSettings(initial_s=0.01, max_s=0.05, jitter_s=0.0))
    listener = main_agent.Listener(settings, None, [], report)
    running = asyncio.create_task(listener.run())
    try:
        await asyncio.wait_for(opened[1].wait(), 5)
        first = links[0]
        first.hold_sends = True
        restarting = asyncio.create_task(listener.restart("the narration ended", keep_in_progress=True))
        await asyncio.wait_for(first.sending.wait(), 5)  # the restart clears the old buffer, slowly
        assert not listener.ready and listener.sessions.current is Current.CLOSING  # no audio goes to it meanwhile
        first.dropped.set()  # ... and the server drops it meanwhile: the next session opens at once
        await asyncio.wait_for(opened[2].wait(), 5)
        first.release.set()
        await asyncio.wait_for(restarting, 5)
        # The restart that lost its session leaves the next one alone: it takes the microphone.
        assert listener.ready and listener.sessions.current is Current.OPEN
        assert await listener.send_audio(b"\0" * 960)
        assert [e["type"] for e in links[1].sent] == ["input_audio_buffer.append"]
        assert [e.closed.reason for e in ends] == ["handed over"] and listener.retiring == 0
        assert listener.illegal_moves == 0
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
