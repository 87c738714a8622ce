"""Issue 27's Wyoming defects one by one, each through the hub's link or `handoff satellite`'s
server on 127.0.0.1: a bad frame is dropped and counted (never a crash), a link being stopped
stops, a satellite that closes at once is retried with backoff, a peer that never reads is
dropped, a stray connection does not take the satellite from its hub, and the satellite's
microphone does not cross the network while the hub's voice plays there."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping
from wyoming.satellite import RunSatellite

from audio_io.format import BYTES_PER_SECOND
from config.rooms import RoomSettings
from rooms import satellite as satellite_module
from tests.rooms.test_hostile_wyoming import _until_type, hub_client
from tests.rooms.test_link import linked
from tests.support.rooms_harness import command_tone, handoff_satellite, started

TIMEOUT = 20.0  # safety net only


def frame(header: dict, payload: bytes = b"") -> bytes:
    if payload:
        header = {**header, "payload_length": len(payload)}
    return json.dumps(header).encode() + b"\n" + payload


def chunk(rate: object = 16000, width: object = 2, channels: object = 1, pcm: bytes = bytes(640)) -> bytes:
    return frame({"type": "audio-chunk", "data": {"rate": rate, "width": width, "channels": channels}}, pcm)


# -- the hub -------------------------------------------------------------------------------------


async def test_a_chunk_of_broken_frames_or_a_fractional_rate_is_dropped_and_the_hub_reads_on() -> None:
    pong = asyncio.Event()

    async def satellite(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(chunk(pcm=bytes(3)) + chunk(channels=2, pcm=bytes(2)) + chunk(rate=16000.5) + chunk(rate="16000"))
        await async_write_event(Ping(text="after").event(), writer)
        while (event := await async_read_event(reader)) is not None:
            if event.type == "pong" and event.data.get("text") == "after":
                pong.set()
        writer.close()

    async with linked(satellite, RoomSettings()) as link:
        await asyncio.wait_for(pong.wait(), TIMEOUT)  # the old hub died of the first (audioop.error)
        assert link.unusable == 4 and link.connections == 1 and link.connected


async def test_a_link_being_stopped_stops_even_when_a_write_fails_at_that_moment() -> None:
    """The hub ignored SIGTERM: a child's error outranked the stop in a TaskGroup, and the link
    went on reconnecting. Here the write fails exactly as the stop comes."""

    async def satellite(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async with linked(satellite, RoomSettings(reconnect_initial_s=0.001, reconnect_max_s=0.001)) as link:
        async def write_fails_when_stopped(_client: object) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise ConnectionResetError("the write failed as the stop came") from None
            return ""

        link._write = write_fails_when_stopped  # type: ignore[method-assign]
        await link.changes.wait_until(lambda: link.connected, TIMEOUT)
        task = next(t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "SatelliteLink.run")
        await link.changes.wait_until(lambda: link.connections >= 1, TIMEOUT)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5.0)
        assert done, "the link went on after it was stopped"
        assert task.cancelled()


async def test_a_satellite_that_closes_at_once_is_tried_again_with_backoff() -> None:
    async def bad_and_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"[1]\n")
        writer.close()

    started_at = time.monotonic()
    async with linked(bad_and_gone, RoomSettings(reconnect_initial_s=0.05, reconnect_max_s=0.4)) as link:
        await link.changes.wait_until(lambda: link.connections >= 5, TIMEOUT)
        elapsed = time.monotonic() - started_at
    assert elapsed >= 0.05 + 0.1 + 0.2 + 0.4, elapsed  # the old hub: 9,178 connections in 14 s


async def test_a_satellite_that_floods_pings_and_never_reads_is_dropped() -> None:
    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ping = frame({"type": "ping", "data": {"text": "x" * 2000}})
        try:
            while True:
                writer.write(ping * 100)
                await writer.drain()
        except (ConnectionError, OSError):
            writer.close()

    async with linked(flood, RoomSettings(reconnect_initial_s=10.0, ping_s=60.0)) as link:
        await link.changes.wait_until(lambda: link.core.state.value == "reconnecting", TIMEOUT)
        assert "stopped reading" in link.status().last_error


# -- handoff satellite ----------------------------------------------------------------------------

BAD_FRAMES = {
    "no type": (frame({"data": {}}), True),
    "a list, not an object": (b"[1, 2]\n", False),
    "data_length as a string": (b'{"type": "describe", "data_length": "12"}\n', False),
    "data as a list": (frame({"type": "audio-chunk", "data": [16000, 2, 1]}, bytes(4)), True),
    "odd-length audio": (chunk(pcm=bytes(3)), True),
    "a fractional rate": (chunk(rate=16000.5), True),
    "width 3, 5 channels": (chunk(width=3, channels=5), True),
    "truncated": (frame({"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1},
                         "payload_length": 640}) + bytes(10), False),  # fmt: skip
}


@pytest.mark.parametrize("case", list(BAD_FRAMES))
async def test_a_malformed_frame_does_not_kill_handoff_satellite(case: str) -> None:
    raw, framing_kept = BAD_FRAMES[case]
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        port = kitchen.server.port
        assert port is not None
        async with hub_client(port) as (reader, writer):
            await async_write_event(Describe().event(), writer)
            await _until_type(reader, "info")
            writer.write(raw)
            if framing_kept:  # the same connection goes on
                await async_write_event(Describe().event(), writer)
                await _until_type(reader, "info")
                assert kitchen.server.counts.unusable == 1
            else:  # the satellite ends it (after a cut, at its end)
                writer.write_eof()
                await asyncio.wait_for(reader.read(), TIMEOUT)
        async with hub_client(port) as (reader, writer):  # and a hub is served after it
            await async_write_event(Describe().event(), writer)
            await _until_type(reader, "info")
        assert kitchen.task is not None and not kitchen.task.done()


async def test_while_the_hub_plays_the_satellite_sends_no_microphone_audio() -> None:
    """Any client that says run-satellite and plays something got the raw room. Now only what
    passed the wake word is sent; during playback the satellite's own detector hears the mic."""
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        assert kitchen.server.port is not None
        async with hub_client(kitchen.server.port) as (reader, writer):
            await async_write_event(RunSatellite().event(), writer)
            await kitchen.server.changes.wait_until(lambda: kitchen.server.hub_connected, TIMEOUT)
            await async_write_event(AudioStart(rate=24000, width=2, channels=1).event(), writer)
            await async_write_event(AudioChunk(rate=24000, width=2, channels=1, audio=bytes(3 * BYTES_PER_SECOND)).event(), writer)
            await kitchen.server.changes.wait_until(lambda: kitchen.server._playing, TIMEOUT)
            kitchen.say(command_tone(0))  # loud, as a voice in the room: it would open the wake gate
            await kitchen.microphone.emitted()
            kitchen.say(bytes(2 * 480))  # one more chunk: the tone's last chunk was handled before it
            await kitchen.microphone.emitted()
            assert kitchen.server._playing
            await async_write_event(Describe().event(), writer)
            sent = [e.type for e in await _until_type(reader, "info")]
    assert "audio-chunk" not in sent and "run-pipeline" not in sent, sent


async def test_a_stray_connection_does_not_take_the_satellite_from_its_hub() -> None:
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        port = kitchen.server.port
        assert port is not None
        async with hub_client(port) as (reader, writer):
            await async_write_event(RunSatellite().event(), writer)
            await kitchen.server.changes.wait_until(lambda: kitchen.server.hub_connected, TIMEOUT)
            stray_reader, stray = await asyncio.open_connection("127.0.0.1", port)
            stray.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            assert await asyncio.wait_for(stray_reader.read(), TIMEOUT) == b""  # closed by the satellite
            stray.close()
            assert kitchen.server.hub_connected and kitchen.server.counts.refused == 1
            await async_write_event(Describe().event(), writer)  # the hub is still served
            await _until_type(reader, "info")
        assert kitchen.server.counts.connections == 1


async def test_a_hub_that_never_reads_is_dropped() -> None:
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        assert kitchen.server.port is not None
        async with hub_client(kitchen.server.port) as (_reader, writer):
            await async_write_event(Describe().event(), writer)
            await kitchen.server.changes.wait_until(lambda: kitchen.server.counts.connections == 1, TIMEOUT)
            describe = frame({"type": "describe"})
            try:
                while kitchen.server._writer is not None:
                    writer.write(describe * 200)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            assert kitchen.server._writer is None
            assert len(kitchen.server._outbox) == 0


async def test_a_burst_of_audio_is_bounded_ahead_of_the_speaker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(satellite_module, "MAX_AHEAD_S", 5.0)  # (120 s by default: the same rule, quicker)
    async with started([handoff_satellite("kitchen")]) as (kitchen,):
        assert kitchen.server.port is not None
        async with hub_client(kitchen.server.port) as (reader, writer):
            await async_write_event(AudioStart(rate=24000, width=2, channels=1).event(), writer)
            second = AudioChunk(rate=24000, width=2, channels=1, audio=bytes(BYTES_PER_SECOND)).event()
            for _ in range(20):
                await async_write_event(second, writer)
            await async_write_event(Describe().event(), writer)
            await _until_type(reader, "info")
    queued_s = kitchen.server._stream_bytes / BYTES_PER_SECOND
    assert queued_s <= 6.0 and kitchen.server.counts.dropped_audio_s >= 14.0, (queued_s, kitchen.server.counts)
