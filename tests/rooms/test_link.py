"""rooms.link against satellites that misbehave: the hub reconnects, never crashes."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from config.rooms import RoomSettings, SatelliteSpec
from decisions.rooms import LinkState
from rooms.link import SatelliteLink

TIMEOUT = 30.0  # safety net only


@pytest.mark.parametrize(("line", "why"), [(b"this is not json\n", "closed"), (b"{}\n", "not Wyoming"),
                                          (b"[1, 2]\n", "not Wyoming")])
async def test_a_satellite_that_sends_garbage_is_dropped_and_tried_again(line: bytes, why: str) -> None:
    connections = 0

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.write(line)
        await writer.drain()
        await reader.read()  # until the hub lets go
        writer.close()

    server = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    link = SatelliteLink(SatelliteSpec("kitchen", "127.0.0.1", port), RoomSettings(reconnect_initial_s=0.01, reconnect_max_s=0.02))
    task = asyncio.create_task(link.run())
    try:
        await link.changes.wait_until(lambda: link.connections >= 2, TIMEOUT)
        assert why in link.status().last_error
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        server.close()


async def test_a_public_address_behind_a_name_is_refused_at_connect() -> None:
    link = SatelliteLink(SatelliteSpec("kitchen", "8.8.8.8", 10700), RoomSettings(reconnect_initial_s=10.0))
    task = asyncio.create_task(link.run())
    try:
        await link.changes.wait_until(lambda: link.core.failures >= 1, TIMEOUT)
        assert "not on the home network" in link.status().last_error
        assert link.connections == 0 and link.core.state is LinkState.NEVER
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
