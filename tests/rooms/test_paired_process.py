"""A real `handoff satellite` process, paired with a hub: a plain Wyoming client (unpaired), a
client with a key of its own (the wrong key) and a replayed recording of a paired session each get
nothing and make nothing play; the paired hub's answer plays once. The room answers again after
its satellite process is killed and started again with the same key files, and after its hub
restarts (a new hub from the same state: its keys, its pairing)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import wave
from pathlib import Path

import pytest

from concurrency.changes import wait_for
from config.rooms import RoomSettings, SatelliteSpec
from decisions.timeline import Timeline
from rooms.hub import Hub, hub
from rooms.link import SatelliteLink
from rooms.pairing import HubKeys, hub_keys
from tests.rooms.satellite_process import RATE, TIMEOUT, SatelliteProcess, paired, satellite, start
from tests.rooms.test_pairing import hostile_tries, recording_proxy, replayed
from tests.support.pipeline_harness import fast_settings
from tests.support.rooms_harness import command_tone
from tests.support.satellites import free_port, spoken, with_rooms
from tests.support.sim import running_sim


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    while not predicate():
        await asyncio.sleep(0.05)  # another process's file: nothing to await on


@pytest.mark.timeout(300)  # a process with its wake word engine, in real time: slow beside CPU hogs
async def test_a_paired_satellite_process_gives_strangers_and_a_replay_nothing(tmp_path: Path) -> None:
    port = free_port()
    kitchen, code = satellite(tmp_path, "kitchen", port)
    played = kitchen.played
    recorded: list[bytes] = []
    tone = command_tone(0)[: 2 * RATE // 2]  # 0.5 s the paired hub plays there
    try:
        (tmp_path / "ws").mkdir()
        settings = fast_settings("http://127.0.0.1:9", tmp_path / "ws", tmp_path / "state")
        await paired(settings, "kitchen", kitchen, port, code)
        strangers = await hostile_tries(port, HubKeys(tmp_path / "stranger"))  # unpaired, and the wrong key
        proxy = await recording_proxy(port, recorded)
        spec = SatelliteSpec("kitchen", "127.0.0.1", proxy.sockets[0].getsockname()[1])
        link = SatelliteLink(spec, RoomSettings(), keys=hub_keys(settings))
        linking = asyncio.create_task(link.run())
        try:
            await link.changes.wait_until(lambda: link.connected, TIMEOUT)
            link.speaker.play(tone)
            await link.speaker.drained()
            async with asyncio.timeout(TIMEOUT):  # played there, in real time
                await _until(lambda: played.stat().st_size >= 44 + len(tone) * 9 // 10)
        finally:
            linking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await linking
            proxy.close()
        answer = await replayed(port, recorded)  # the paired session, sent again
    finally:
        returncode = kitchen.stop()
    log = (tmp_path / "kitchen.log").read_text()
    assert returncode == 0, log
    assert all(b"info" not in got and b"satellite" not in got for got in strangers), strangers
    assert len(b"".join(recorded)) > len(tone) // 2  # the session carried the answer's audio
    assert len(answer) < 4096, len(answer)  # a handshake and its refusal, nothing else
    with wave.open(str(played), "rb") as heard:
        frames = heard.getnframes()
    assert len(tone) // 2 * 9 // 10 <= frames <= len(tone) // 2 * 11 // 10, (frames, log)  # once, nothing else


async def _answered(the_hub: Hub, timeline: Timeline, satellite: SatelliteProcess, command: bytes, n: int) -> int:
    """The room's `n`th command of this hub said into `satellite`: answered (the bytes sent there)."""
    link = the_hub.rooms["kitchen"].link
    await wait_for(timeline, lambda t: t.count("listening") >= n, TIMEOUT)  # its listener session ready
    await link.changes.wait_until(lambda: link.connected, TIMEOUT)
    before = link.speaker.played_bytes
    satellite.microphone.say(command)
    await wait_for(timeline, lambda t: t.count("narrated") >= n, TIMEOUT)
    return link.speaker.played_bytes - before


@pytest.mark.timeout(400)  # two processes with their wake word engine, in real time: slow beside CPU hogs
async def test_a_paired_room_answers_again_after_its_satellite_process_restarts_and_after_its_hub_does(tmp_path: Path) -> None:
    command = await spoken("computer, what time is it", rate=RATE)
    port = free_port()
    first, code = satellite(tmp_path, "kitchen", port)
    second: SatelliteProcess | None = None
    timelines = [Timeline(), Timeline()]  # the first hub's kitchen, the restarted hub's
    try:
        async with running_sim() as sim:
            (tmp_path / "ws").mkdir()
            settings = with_rooms(fast_settings(sim.base_url, (tmp_path / "ws").resolve(), tmp_path / "state"), [])
            settings = settings.replace(rooms=dataclasses.replace(settings.rooms, satellites=(
                SatelliteSpec("kitchen", "127.0.0.1", port),), reconnect_initial_s=0.1))
            await paired(settings, "kitchen", first, port, code)
            for _ in range(2):
                sim.script.push_transcript("computer, what time is it")
            async with hub(settings, {"kitchen": timelines[0]}) as first_hub:
                running = asyncio.create_task(first_hub.run())
                try:
                    link = first_hub.rooms["kitchen"].link
                    await link.changes.wait_until(lambda: link.connected, TIMEOUT)  # paired: TLS, both keys pinned
                    killed = first.kill()  # the satellite's machine loses power, and boots again
                    await link.changes.wait_until(lambda: not link.connected, TIMEOUT)
                    second = start(tmp_path, "kitchen", port, run=1)  # the same key files, the same port
                    after_restart = await _answered(first_hub, timelines[0], second, command, 1)
                    connections = link.connections
                finally:
                    running.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await running
            async with hub(settings, {"kitchen": timelines[1]}) as second_hub:  # the hub restarts: its keys from its state
                running = asyncio.create_task(second_hub.run())
                try:
                    from_new_hub = await _answered(second_hub, timelines[1], second, command, 1)
                finally:
                    running.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await running
    finally:
        returncode = second.stop() if second is not None else None
        first.kill()
    log = (tmp_path / "kitchen.log").read_text()
    assert killed == -signal.SIGKILL and returncode == 0, log
    assert connections == 2, log  # the first hub reached the restarted satellite
    assert [t.count("command") for t in timelines] == [1, 1] and [t.count("tool") for t in timelines] == [1, 1], log
    assert after_restart > 0 and from_new_hub > 0
    with wave.open(str(second.played), "rb") as heard:  # what the restarted satellite played: both answers
        played = 2 * heard.getnframes()
    assert after_restart + from_new_hub // 2 <= played <= (after_restart + from_new_hub) * 11 // 10, (
        played, after_restart, from_new_hub, log)
