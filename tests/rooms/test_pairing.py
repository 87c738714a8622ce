"""Paired satellites: `handoff satellite` and the hub authenticate each other (pinned keys, TLS
1.3). A client that is not the paired hub (plain Wyoming, TLS with another key, a replayed
recording of a paired session) gets nothing and makes nothing play; a paired hub works after
either side restarts."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.event import async_write_event
from wyoming.info import Describe
from wyoming.satellite import RunSatellite

from concurrency.changes import wait_for
from rooms.keys import LINK_NAME, hub_context
from rooms.pairing import HubKeys, PairingError, SatelliteKeys, hub_keys, pair_with
from tests.support.rooms_harness import command_tone, handoff_satellite, hub_settings, running_hub, started, tone_sim

TIMEOUT = 60.0  # safety net only


async def paired(tmp_path: Path, settings) -> tuple[SatelliteKeys, HubKeys]:  # type: ignore[no-untyped-def]
    return SatelliteKeys(tmp_path / "satellite-keys", "kitchen"), hub_keys(settings)


async def hostile_tries(port: int, stranger: HubKeys) -> list[bytes]:
    """What an outsider gets: as a plain Wyoming hub, and with TLS and a key of its own."""
    got: list[bytes] = []
    audio = AudioChunk(rate=22050, width=2, channels=1, audio=command_tone(3)).event()
    for context in (None, hub_context(stranger.identity, None)):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                           server_hostname=LINK_NAME if context else None)  # fmt: skip
            for event in (Describe().event(), RunSatellite().event(), AudioStart(rate=22050, width=2, channels=1).event(), audio):
                await async_write_event(event, writer)
            async with asyncio.timeout(5):
                got.append(await reader.read())
            writer.close()
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            got.append(exc.__class__.__name__.encode())
    return got


async def recording_proxy(port: int, recorded: list[bytes]) -> asyncio.Server:
    """Relays a connection to the satellite, keeping what the hub sent."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if keep:
                        recorded.append(data)
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))

    return await asyncio.start_server(relay, "127.0.0.1", 0)


async def replayed(port: int, recorded: list[bytes]) -> bytes:
    """What the satellite answers to a recorded session sent again as it was."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with contextlib.suppress(OSError, ConnectionError):
        for data in recorded:
            writer.write(data)
            await writer.drain()
    answer = bytearray()
    async with asyncio.timeout(30):
        with contextlib.suppress(ConnectionResetError):  # a refusal may end in a reset: what came before it counts
            while data := await reader.read(65536):
                answer += data
    writer.close()
    return bytes(answer)


async def test_a_paired_satellite_answers_only_its_hub(tmp_path: Path) -> None:
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        settings = hub_settings(sim, tmp_path, [])
        satellite_keys, keys = await paired(tmp_path, settings)
        async with started([handoff_satellite("kitchen", keys=satellite_keys)]) as (kitchen,):
            # Not paired yet: the hub says what to do, and nothing connects.
            settings = hub_settings(sim, tmp_path, [kitchen.spec])
            with pytest.raises(PairingError, match="refused the code"):
                await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", keys, "0000-0000-0000")  # no window open
            code = satellite_keys.open_window()
            with pytest.raises(PairingError, match="refused the code"):
                await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", keys, "ABCD-EFGH-JKMN")  # a wrong code
            fingerprint = await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", keys, code)
            assert len(fingerprint) == 19 and kitchen.server.counts.pairings == 1
            async with running_hub(settings) as running:
                # Strangers while the paired hub is connected: nothing for them, and it stays.
                outsider = await hostile_tries(kitchen.spec.port, HubKeys(tmp_path / "stranger"))
                kitchen.say(command_tone(0))
                await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                await kitchen.server.changes.wait_until(lambda: bool(kitchen.server.counts.streams), TIMEOUT)
                assert running.scripts("kitchen") == ["kitchen one"]
                assert running.hub.rooms["kitchen"].link.connections == 1  # kept its hub throughout
    assert kitchen.server.counts.connections == 1  # only the hub reached the Wyoming side
    assert len(kitchen.server.counts.streams) == 1  # the answer, nothing the strangers sent
    assert all(b"info" not in got and b"satellite" not in got for got in outsider), outsider


async def test_a_replayed_recording_of_a_paired_session_gets_nothing(tmp_path: Path) -> None:
    recorded: list[bytes] = []
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        settings = hub_settings(sim, tmp_path, [])
        satellite_keys, keys = await paired(tmp_path, settings)
        async with started([handoff_satellite("kitchen", keys=satellite_keys)]) as (kitchen,):
            await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", keys, satellite_keys.open_window())
            proxy = await recording_proxy(kitchen.spec.port, recorded)
            spec = kitchen.spec.__class__("kitchen", "127.0.0.1", proxy.sockets[0].getsockname()[1])
            async with running_hub(hub_settings(sim, tmp_path, [spec])) as running:
                kitchen.say(command_tone(0))
                await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
            proxy.close()
            await kitchen.server.changes.wait_until(lambda: not kitchen.server.hub_connected, TIMEOUT)
            streams, connections = len(kitchen.server.counts.streams), kitchen.server.counts.connections
            # The hub's side of that session, sent again as it was.
            answer = await replayed(kitchen.spec.port, recorded)
    assert len(b"".join(recorded)) > 10000  # a whole session: describe, run-satellite, a command's audio
    assert kitchen.server.counts.connections == connections and len(kitchen.server.counts.streams) == streams
    assert len(answer) < 4096, len(answer)  # a handshake and its refusal, nothing else


async def test_a_paired_hub_works_after_either_side_restarts(tmp_path: Path) -> None:
    async with tone_sim(["computer, echo kitchen one", "computer, echo kitchen two", "computer, echo kitchen three"]) as sim:
        settings = hub_settings(sim, tmp_path, [])
        satellite_keys, keys = await paired(tmp_path, settings)
        async with started([handoff_satellite("kitchen", keys=satellite_keys)]) as (first,):
            port = first.spec.port
            await pair_with("127.0.0.1", port, "kitchen", keys, satellite_keys.open_window())
        settings = hub_settings(sim, tmp_path, [first.spec])
        heard: list[str] = []
        for n, restarted in enumerate(("satellite", "hub", "both")):
            satellite = handoff_satellite("kitchen", keys=satellite_keys)
            satellite.server.listen = satellite.server.listen.__class__("kitchen", "127.0.0.1", port)  # the same port again
            async with started([satellite]):
                async with running_hub(settings) as running:  # a new hub each time: its keys from the state directory
                    satellite.say(command_tone(n))
                    await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                    heard += running.scripts("kitchen")
    assert heard == ["kitchen one", "kitchen two", "kitchen three"]


def test_check_and_status_say_what_each_room_exposes(tmp_path: Path) -> None:
    from commands.checks import Severity, room_findings
    from config.rooms import RoomSettings, SatelliteSpec
    from config.settings import Settings
    from rooms.keys import exposure

    specs = (SatelliteSpec("kitchen", "10.0.0.5"), SatelliteSpec("pi", "10.0.0.6", unauthenticated=True))
    settings = Settings(state_dir=tmp_path).replace(rooms=RoomSettings(satellites=specs))
    findings = room_findings(settings)
    assert [(f.severity, f.message.split(" satellite ")[0]) for f in findings] == [
        (Severity.PROBLEM, "the kitchen"), (Severity.WARNING, "the pi")]
    assert "handoff rooms pair kitchen CODE" in findings[0].message and "hear its audio" in findings[1].message
    HubKeys(tmp_path).pin("kitchen", HubKeys(tmp_path / "other").identity.cert_pem)
    assert [f.severity for f in room_findings(settings)] == [Severity.WARNING]
    assert exposure(specs[0]).startswith("paired") and exposure(specs[1]).startswith("unauthenticated")


async def test_a_satellite_keeps_its_hub_until_a_newly_paired_hub_connects(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir(), (tmp_path / "new").mkdir()
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        old_settings = hub_settings(sim, tmp_path / "old", [])
        satellite_keys, old_keys = await paired(tmp_path, old_settings)
        async with started([handoff_satellite("kitchen", keys=satellite_keys)]) as (kitchen,):
            await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", old_keys, satellite_keys.open_window())
            async with running_hub(hub_settings(sim, tmp_path / "old", [kitchen.spec])) as old:
                new_settings = hub_settings(sim, tmp_path / "new", [kitchen.spec])
                await pair_with("127.0.0.1", kitchen.spec.port, "kitchen", hub_keys(new_settings), satellite_keys.open_window())
                old_link = old.hub.rooms["kitchen"].link
                assert old_link.connected and kitchen.server.hub_connected  # paired elsewhere, not yet replaced
                async with running_hub(new_settings) as new:
                    await old_link.changes.wait_until(lambda: "do not know each other's keys" in old_link.status().last_error, TIMEOUT)
                    kitchen.say(command_tone(0))
                    await wait_for(new.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                    old_heard = old.timelines["kitchen"].count("command")
    assert old_heard == 0 and not old_link.connected
