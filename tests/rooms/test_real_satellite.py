"""The hub with the reference satellite: wyoming-satellite 1.0.0 on 127.0.0.1, always streaming
(no wake service: the hub's on-device VAD and its transcript wake gate decide, as for its own
microphone), a microphone we speak espeak-ng speech into, a speaker that writes to files."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from concurrency.changes import wait_for
from decisions.timeline import Timeline
from rooms.hub import hub
from tests.support.pipeline_harness import fast_settings
from tests.support.satellites import real_satellites, spoken, with_rooms
from tests.support.sim import running_sim

TIMEOUT = 60.0  # a safety net only: the test awaits events


async def wait_until(predicate, timeout: float = TIMEOUT) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)  # files written by another process: nothing to await on


async def test_a_command_spoken_into_wyoming_satellite_is_answered_on_that_satellite(tmp_path: Path) -> None:
    command = await spoken("computer, what time is it")
    async with running_sim() as sim:
        with real_satellites(tmp_path, "kitchen") as (kitchen,):
            (tmp_path / "ws").mkdir()
            settings = with_rooms(fast_settings(sim.base_url, (tmp_path / "ws").resolve(), tmp_path / "state"), [kitchen])
            timeline = Timeline()
            async with hub(settings, {"kitchen": timeline}) as the_hub:
                task = asyncio.create_task(the_hub.run())
                try:
                    link = the_hub.rooms["kitchen"].link
                    await wait_for(timeline, lambda t: t.count("listening") >= 1, TIMEOUT)
                    await wait_until(lambda: link.connected)
                    sim.script.push_transcript("computer, what time is it")
                    kitchen.say(command)
                    await wait_for(timeline, lambda t: t.count("narrated") >= 1, TIMEOUT)
                    await wait_until(lambda: bool(kitchen.played()))
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
    heard = [e.text for e in timeline.entries if e.kind == "command"]
    assert heard == ["what time is it"], heard
    played = kitchen.played()
    answer = max(played, key=lambda p: p.stat().st_size)
    # 22.05 kHz pcm16 (the satellite's speaker rate): at least half a second of an answer.
    assert answer.stat().st_size > 22050, [p.stat().st_size for p in played]
