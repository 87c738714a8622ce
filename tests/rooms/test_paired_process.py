"""A real `handoff satellite` process, paired with a hub: a plain Wyoming client (unpaired), a
client with a key of its own (the wrong key) and a replayed recording of a paired session each get
nothing and make nothing play; the paired hub's answer plays once."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from config.rooms import RoomSettings, SatelliteSpec
from rooms.link import SatelliteLink
from rooms.pairing import HubKeys, hub_keys
from tests.rooms.satellite_process import RATE, TIMEOUT, paired, satellite
from tests.rooms.test_pairing import hostile_tries, recording_proxy, replayed
from tests.support.pipeline_harness import fast_settings
from tests.support.rooms_harness import command_tone
from tests.support.satellites import free_port


async def _until(predicate) -> None:  # type: ignore[no-untyped-def]
    while not predicate():
        await asyncio.sleep(0.05)  # another process's file: nothing to await on


@pytest.mark.timeout(300)  # a process with its wake word engine, in real time: slow beside CPU hogs
async def test_a_paired_satellite_process_gives_strangers_and_a_replay_nothing(tmp_path: Path) -> None:
    port = free_port()
    process, _microphone, played, code = satellite(tmp_path, "kitchen", port)
    recorded: list[bytes] = []
    tone = command_tone(0)[: 2 * RATE // 2]  # 0.5 s the paired hub plays there
    try:
        (tmp_path / "ws").mkdir()
        settings = fast_settings("http://127.0.0.1:9", tmp_path / "ws", tmp_path / "state")
        await paired(settings, "kitchen", port, code)
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
        process.terminate()  # SIGTERM: a clean stop writes the WAV file's header
        process.wait(30)
    log = (tmp_path / "kitchen.log").read_text()
    assert process.returncode == 0, log
    assert all(b"info" not in got and b"satellite" not in got for got in strangers), strangers
    assert len(b"".join(recorded)) > len(tone) // 2  # the session carried the answer's audio
    assert len(answer) < 4096, len(answer)  # a handshake and its refusal, nothing else
    import wave

    with wave.open(str(played), "rb") as heard:
        frames = heard.getnframes()
    assert len(tone) // 2 * 9 // 10 <= frames <= len(tone) // 2 * 11 // 10, (frames, log)  # once, nothing else
