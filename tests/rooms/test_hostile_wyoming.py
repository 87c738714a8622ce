"""Hostile Wyoming peers (issue 27): the hub and `handoff satellite` read every frame through
rooms.wire.read, so nothing a peer sends crashes them, grows their memory without bound, or takes
the room from its hub. A seeded fuzz of 10,000 mutated frames each, then the cases one by one."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import AsyncIterator

from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping

from concurrency.changes import wait_for
from tests.support.rooms_harness import (
    command_tone, handoff_satellite, hub_settings, running_hub, started, tone_sim,
)
from tests.support.wyoming_fuzz import Sender, frames

TIMEOUT = 60.0  # safety net only
SEED, FRAMES = 27, 10_000
MEMORY_BOUND = 150 * 1024 * 1024  # growth of this process's RSS over a fuzz (the old hub grew by GB)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _discard(reader: asyncio.StreamReader, pongs: asyncio.Queue[str] | None = None) -> None:
    """Read what the other side sends (so it never stalls), noting the pongs."""
    with contextlib.suppress(ConnectionError, OSError):
        while (event := await async_read_event(reader)) is not None:
            if pongs is not None and event.type == "pong":
                pongs.put_nowait((event.data or {}).get("text") or "")


async def test_the_hub_survives_10000_mutated_frames_and_the_other_room_keeps_answering(tmp_path: Path) -> None:
    fuzz = list(frames(SEED, FRAMES))
    go, finished = asyncio.Event(), asyncio.Event()
    sender = Sender(fuzz)
    pongs: asyncio.Queue[str] = asyncio.Queue()

    async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        listening = asyncio.create_task(_discard(reader, pongs))
        try:
            await go.wait()
            if await sender.send(writer):  # everything sent: a ping whose pong says the hub read it all
                await async_write_event(Ping(text="the end").event(), writer)
                finished.set()
                await listening
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            listening.cancel()

    server = await asyncio.start_server(hostile, "127.0.0.1", 0)
    try:
        async with tone_sim(["computer, echo kitchen one", "computer, echo kitchen two"]) as sim:
            async with started([handoff_satellite("kitchen")]) as (kitchen,):
                from config.rooms import SatelliteSpec

                attic = SatelliteSpec("attic", "127.0.0.1", server.sockets[0].getsockname()[1], unauthenticated=True)
                settings = hub_settings(sim, tmp_path, [kitchen.spec, attic], reconnect_initial_s=0.001,
                                        reconnect_max_s=0.005)  # fmt: skip
                async with running_hub(settings) as running:
                    before = rss_bytes()
                    go.set()
                    kitchen.say(command_tone(0))  # the kitchen is answered while the attic is hostile
                    await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                    await asyncio.wait_for(finished.wait(), TIMEOUT)
                    while await asyncio.wait_for(pongs.get(), TIMEOUT) != "the end":
                        pass
                    grown = rss_bytes() - before
                    await wait_for(running.timelines["kitchen"], lambda t: t.count("listening") >= 2, TIMEOUT)
                    kitchen.say(command_tone(1))  # and after it
                    await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 2, TIMEOUT)
                    link = running.hub.rooms["attic"].link
                    assert not running.task.done()  # no exception escaped
                    assert running.scripts("kitchen") == ["kitchen one", "kitchen two"]
    finally:
        server.close()
    breaks = sum(f.breaks for f in fuzz)
    print(f"{FRAMES} frames, {breaks} lost the framing, {link.unusable} unusable; {link.connections} connections; "
          f"RSS +{grown / 1e6:.1f} MB")  # fmt: skip
    assert link.unusable > FRAMES // 3
    assert breaks + 1 <= link.connections <= breaks + 5  # one per lost framing (a slow machine: a silence or two)
    assert grown < MEMORY_BOUND, grown


@contextlib.asynccontextmanager
async def hub_client(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()


async def _until_type(reader: asyncio.StreamReader, kind: str) -> list[Event]:
    """Every event up to and including the first of `kind`."""
    seen: list[Event] = []
    while True:
        event = await asyncio.wait_for(async_read_event(reader), TIMEOUT)
        assert event is not None, f"closed before {kind}: {[e.type for e in seen]}"
        seen.append(event)
        if event.type == kind:
            return seen


async def test_the_satellite_survives_10000_mutated_frames_and_still_serves_a_hub() -> None:
    fuzz = list(frames(SEED + 1, FRAMES))
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        port = kitchen.server.port
        assert port is not None
        before = rss_bytes()
        sender = Sender(fuzz)
        while not sender.done:  # a connection per lost framing; each begins as a hub would
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            listening = asyncio.create_task(_discard(reader))
            try:
                await async_write_event(Describe().event(), writer)
                await sender.send(writer)
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()
                listening.cancel()
        async with hub_client(port) as (reader, writer):  # a hub after all that: answered
            await async_write_event(Describe().event(), writer)
            info = (await _until_type(reader, "info"))[-1]
        grown = rss_bytes() - before
        assert kitchen.task is not None and not kitchen.task.done()  # no exception escaped
    assert info.data["satellite"]["name"] == "kitchen"
    print(f"satellite: {kitchen.server.counts.unusable} unusable frames; RSS +{grown / 1e6:.1f} MB")
    assert kitchen.server.counts.unusable > FRAMES // 3
    assert grown < MEMORY_BOUND, grown
