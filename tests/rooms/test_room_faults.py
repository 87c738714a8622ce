"""A satellite killed mid-command and restarted: reconnected within 5 s, its next command works,
and the other rooms never notice."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from concurrency.changes import wait_for
from tests.support.rooms_harness import (
    command_tone, handoff_satellite, hub_settings, resampled, running_hub, started, tone_sim,
)
from tests.support.satellites import RealSatellite

TIMEOUT = 120.0  # safety net only


async def test_a_satellite_killed_mid_command_comes_back_and_the_others_never_notice(tmp_path: Path) -> None:
    phrases = ["computer, echo bedroom one", "computer, echo bedroom two"] + [f"computer, echo kitchen {n}" for n in range(4)]
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen")]) as (kitchen,):
            bedroom = RealSatellite("bedroom", tmp_path / "bedroom")
            bedroom.start()
            try:
                settings = hub_settings(sim, tmp_path, [kitchen.spec, bedroom.spec])
                # The shipped reconnect policy, not the tests' fast one: the 5 s is the user's.
                settings = settings.replace(rooms=dataclasses.replace(settings.rooms, reconnect_initial_s=0.25, reconnect_max_s=4.0))
                async with running_hub(settings) as running:
                    link = running.hub.rooms["bedroom"].link
                    bedroom_timeline, kitchen_timeline = running.timelines["bedroom"], running.timelines["kitchen"]

                    async def kitchen_talks() -> None:
                        for n in range(4):
                            kitchen.say(command_tone(2 + n))
                            await wait_for(kitchen_timeline, lambda t, n=n: t.count("narrated") >= n + 1, TIMEOUT)
                            await wait_for(kitchen_timeline, lambda t, n=n: t.count("listening") >= n + 2, TIMEOUT)

                    talking = asyncio.create_task(kitchen_talks())
                    bedroom.say(resampled(command_tone(0), 16000))
                    await wait_for(bedroom_timeline, lambda t: t.count("command") >= 1, TIMEOUT)
                    bedroom.kill()  # mid-command: routed, not yet answered
                    killed_at = time.monotonic()
                    await link.changes.wait_until(lambda: not link.connected, TIMEOUT)
                    bedroom.start()
                    await link.changes.wait_until(lambda: link.connected, TIMEOUT)
                    reconnected_s = time.monotonic() - killed_at
                    await wait_for(bedroom_timeline, lambda t: t.count("listening") >= 2, TIMEOUT)
                    played_before = len(bedroom.played())
                    bedroom.say(resampled(command_tone(1), 16000), name="1")
                    await wait_for(bedroom_timeline, lambda t: "bedroom two" in [e.text for e in t.entries if e.kind == "narrating"], TIMEOUT)
                    await asyncio.wait_for(_until(lambda: len(bedroom.played()) > played_before), TIMEOUT)
                    await talking
                    kitchen_scripts = running.scripts("kitchen")
            finally:
                bedroom.kill()
    print(f"reconnected {reconnected_s:.2f} s after the kill")
    assert reconnected_s < 5.0, reconnected_s
    assert kitchen_scripts == [f"kitchen {n}" for n in range(4)], kitchen_scripts  # nothing about the bedroom
    assert kitchen.server.counts.overlaps == 0


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.05)  # another process's files: nothing to await on


async def test_a_satellite_gone_for_long_is_announced_once_in_the_other_rooms_and_again_when_back(tmp_path: Path) -> None:
    async with tone_sim([]) as sim:
        kitchen, office = handoff_satellite("kitchen"), handoff_satellite("office")
        async with started([kitchen, office]):
            settings = hub_settings(sim, tmp_path, [kitchen.spec, office.spec], announce_after_s=0.5)
            async with running_hub(settings) as running:
                link = running.hub.rooms["kitchen"].link
                assert kitchen.task is not None
                kitchen.task.cancel()  # the kitchen's satellite goes away (its port closes)
                await wait_for(running.timelines["office"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                async with started([handoff_satellite("kitchen")]) as (back,):  # back, on a new port: tell the link
                    link.spec = back.spec
                    await link.changes.wait_until(lambda: link.connected, TIMEOUT)
                    await wait_for(running.timelines["office"], lambda t: t.count("narrated") >= 2, TIMEOUT)
                office_heard, kitchen_heard = running.scripts("office"), running.scripts("kitchen")
    assert office_heard == ["The kitchen satellite is unreachable.", "The kitchen satellite is back."], office_heard
    assert kitchen_heard == [], kitchen_heard  # not told about itself
