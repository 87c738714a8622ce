"""rooms.link against satellites that misbehave: the hub reconnects, never crashes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Awaitable, Callable

import pytest
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Info
from wyoming.pipeline import PipelineStage, RunPipeline

from config.rooms import RoomSettings, SatelliteSpec
from decisions.rooms import LinkState
from rooms.link import SatelliteLink

TIMEOUT = 30.0  # safety net only
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def linked(satellite: Handler | None, settings: RoomSettings, host: str = "127.0.0.1") -> AsyncIterator[SatelliteLink]:
    """A link running against `satellite` (a fake served on loopback), or against `host` alone."""
    server = await asyncio.start_server(satellite, "127.0.0.1", 0) if satellite else None
    port = server.sockets[0].getsockname()[1] if server else 10700
    link = SatelliteLink(SatelliteSpec("kitchen", host, port, unauthenticated=True), settings)
    task = asyncio.create_task(link.run())
    try:
        yield link
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if server:
            server.close()


@pytest.mark.parametrize(("line", "why"), [(b"this is not json\n", "not Wyoming"), (b"[1, 2]\n", "not Wyoming"),
                                          (b'{"type": "x", "payload_length": 8000000000}\n', "not Wyoming")])
async def test_a_satellite_that_sends_garbage_is_dropped_and_tried_again(line: bytes, why: str) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(line)
        await writer.drain()
        await reader.read()  # until the hub lets go
        writer.close()

    async with linked(garbage, RoomSettings(reconnect_initial_s=0.01, reconnect_max_s=0.02)) as link:
        await link.changes.wait_until(lambda: link.connections >= 2, TIMEOUT)
        assert why in link.status().last_error


async def test_a_public_address_behind_a_name_is_refused_at_connect() -> None:
    async with linked(None, RoomSettings(reconnect_initial_s=10.0), host="8.8.8.8") as link:
        await link.changes.wait_until(lambda: link.core.failures >= 1, TIMEOUT)
        assert "not on the home network" in link.status().last_error
        assert link.connections == 0 and link.core.state is LinkState.NEVER


async def test_a_satellite_that_woke_for_nothing_is_told_to_stop_streaming() -> None:
    received: list[str] = []
    got_transcript = asyncio.Event()

    async def woke(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await async_write_event(RunPipeline(start_stage=PipelineStage.ASR, end_stage=PipelineStage.TTS).event(), writer)
        while (event := await async_read_event(reader)) is not None:
            received.append(event.type)
            if event.type == "describe":
                await async_write_event(Info().event(), writer)
            if event.type == "transcript":
                got_transcript.set()
        writer.close()

    async with linked(woke, RoomSettings(ping_s=0.05, pipeline_timeout_s=0.2)):
        await asyncio.wait_for(got_transcript.wait(), TIMEOUT)
        assert received.count("transcript") == 1


async def test_a_hub_too_busy_to_read_does_not_call_its_satellite_gone() -> None:
    """A beat the hub's own loop was late for (CPU hogs) judges nothing: what the satellite sent
    meanwhile is still unread. Here every look at the clock finds the hub 10 s late."""
    late = asyncio.Event()
    looks = 0

    def busy_clock() -> float:
        nonlocal looks
        looks += 1
        if looks == 20:
            late.set()
        return 10.0 * looks

    link = SatelliteLink(SatelliteSpec("kitchen", "127.0.0.1", 1), RoomSettings(ping_s=0.01), clock=busy_clock)
    keeping = asyncio.create_task(link._keep_alive(None))  # type: ignore[arg-type]  # (never written to: not connected)
    try:
        looked = asyncio.create_task(late.wait())
        await asyncio.wait([looked, keeping], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert late.is_set() and not keeping.done(), keeping.result() if keeping.done() else "not looked"
        looked.cancel()
    finally:
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping


async def test_a_flush_ends_the_wait_for_a_satellite_to_play_what_it_was_sent() -> None:
    """The hub's speaker for a room waits as long as the satellite plays what it was sent; a stop
    flushes it, and the wait must end then (the room's next command is let in at once)."""
    from rooms.link import SatelliteSpeaker

    sent: list[object] = []
    speaker = SatelliteSpeaker(sent.append, 24000, clock=lambda: 0.0)  # time stands still: only a flush ends it
    speaker.play(bytes(2 * 24000 * 60))  # a minute of the answer
    draining = asyncio.create_task(speaker.drained())
    await asyncio.sleep(0)  # it is waiting now
    assert not draining.done()
    speaker.flush()
    async with asyncio.timeout(TIMEOUT):
        await draining
