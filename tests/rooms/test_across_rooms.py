"""Across rooms: `handoff say --room`, timers from any room, a gone room's timer heard elsewhere."""

from __future__ import annotations

import asyncio
from pathlib import Path

from concurrency.changes import wait_for
from decisions.rooms import NoticeTargets
from tasks.config import TaskSettings
from tasks.control import ask
from tests.support.rooms_harness import command_tone, handoff_satellite, hub_settings, running_hub, started, tone_sim

TIMEOUT = 120.0  # safety net only


async def test_say_with_a_room_is_said_there_and_all_is_said_everywhere(tmp_path: Path) -> None:
    async with tone_sim([]) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            settings = hub_settings(sim, tmp_path, [kitchen.spec, office.spec])
            async with running_hub(settings) as running:
                path = TaskSettings.from_settings(settings).control_path
                said = await asyncio.to_thread(ask, path, {"op": "announce", "text": "Dinner is ready.", "room": "office"}, 10)
                await wait_for(running.timelines["office"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                everywhere = await asyncio.to_thread(ask, path, {"op": "announce", "text": "Lights out.", "room": "all"}, 10)
                for room in ("kitchen", "office"):
                    await wait_for(running.timelines[room], lambda t: "Lights out." in " ".join(
                        e.text for e in t.entries if e.kind == "narrating"), TIMEOUT)  # fmt: skip
                nowhere = await asyncio.to_thread(ask, path, {"op": "announce", "text": "Hello.", "room": "garage"}, 10)
                kitchen_heard, office_heard = running.scripts("kitchen"), running.scripts("office")
    assert said == {"ok": True} and everywhere == {"ok": True}
    assert not nowhere["ok"] and "garage" in nowhere["error"]
    assert not any("Dinner" in script for script in kitchen_heard), kitchen_heard
    assert any("Dinner" in script for script in office_heard), office_heard


async def test_a_timer_set_in_the_kitchen_is_listed_and_cancelled_from_the_office(tmp_path: Path) -> None:
    phrases = ["computer, set a timer for ten minutes", "computer, set a timer for twenty minutes",
               "computer, how much time is left on my timers", "computer, cancel all timers"]
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            async with running_hub(hub_settings(sim, tmp_path, [kitchen.spec, office.spec])) as running:
                for n, (satellite, room) in enumerate([(kitchen, "kitchen"), (kitchen, "kitchen"), (office, "office"),
                                                       (office, "office")]):  # fmt: skip
                    done = running.timelines[room].count("narrated")
                    satellite.say(command_tone(n))
                    await wait_for(running.timelines[room], lambda t, d=done: t.count("narrated") > d, TIMEOUT)
                    await wait_for(running.timelines[room], lambda t, d=done: t.count("listening") > d + 1, TIMEOUT)
                office_heard = running.scripts("office")
    listed, cancelled = office_heard
    assert "ten-minute timer" in listed and "twenty-minute timer" in listed, listed  # both, set in the kitchen
    assert cancelled.startswith("I cancelled") and "ten-minute" in cancelled and "twenty-minute" in cancelled, cancelled


def test_a_timer_whose_room_is_gone_rings_in_every_room_still_there() -> None:
    targets = NoticeTargets(("kitchen", "office", "bedroom"))
    targets.started(7, "kitchen")
    assert targets.targets(1, 7) == {"kitchen"}
    targets.gone.add("kitchen")
    targets.gone.add("bedroom")
    assert targets.targets(1, 7) == {"office"}
    targets.gone.update({"office"})  # every room gone: every room (it is said where one comes back)
    assert targets.targets(1, 7) == {"kitchen", "office", "bedroom"}
