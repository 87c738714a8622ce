"""Rooms end to end: `handoff satellite` and wyoming-satellite on 127.0.0.1 against the hub on
the simulator. Commands are tones whose pitch the simulator reads back (tests.support.rooms_harness)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from audio_io.format import audioop
from concurrency.changes import wait_for
from decisions.timeline import TimelineKind
from detectors.stop_word import StopHit
from tests.support.rooms_harness import (
    WORDS, command_tone, handoff_satellite, hub_settings, resampled, running_hub, started, tone_sim,
)
from tests.support.room import RoomMicrophone
from tests.support.satellites import RealSatellite

TIMEOUT = 120.0  # safety net only


async def test_handoff_satellite_is_answered_on_itself(tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO")
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        async with started([handoff_satellite("kitchen")]) as (kitchen,):
            async with running_hub(hub_settings(sim, tmp_path, [kitchen.spec])) as running:
                kitchen.say(command_tone(0))
                await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                await kitchen.server.changes.wait_until(lambda: bool(kitchen.server.counts.streams), TIMEOUT)
                assert running.scripts("kitchen") == ["kitchen one"]
    assert kitchen.server.counts.commands == 1
    assert kitchen.server.counts.overlaps == 0
    assert "[kitchen] command: echo kitchen one" in caplog.messages  # the log names the room
    assert len(kitchen.speaker.played) >= 0.5 * 48000  # at least half a second of the answer


async def test_three_rooms_ten_commands_each_every_answer_in_its_own_room(tmp_path: Path) -> None:
    rooms = ("kitchen", "office", "bedroom")
    phrases = [f"computer, echo {room} {word}" for room in rooms for word in WORDS]
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as ours:
            real = RealSatellite("bedroom", tmp_path / "bedroom")
            real.start()
            try:
                specs = [s.spec for s in ours] + [real.spec]
                async with running_hub(hub_settings(sim, tmp_path, specs, max_sessions=3)) as running:
                    async def speak(index: int) -> None:
                        room = rooms[index]
                        timeline = running.timelines[room]
                        for n in range(len(WORDS)):
                            tone = command_tone(index * len(WORDS) + n)
                            if room == "bedroom":
                                real.say(resampled(tone, 16000), name=f"{n:02d}")
                            else:
                                ours[index].say(tone)
                            await wait_for(timeline, lambda t, n=n: t.count("narrated") >= n + 1, TIMEOUT)
                            await wait_for(timeline, lambda t, n=n: t.count("listening") >= n + 2, TIMEOUT)

                    # All three start at the same moment; after that they drift apart.
                    await asyncio.gather(*(speak(i) for i in range(3)))
                    for index, room in enumerate(rooms):
                        assert running.scripts(room) == [f"{room} {word}" for word in WORDS], (room, running.scripts(room))
                    sent = {room: r.link.speaker.played_bytes for room, r in running.hub.rooms.items()}
            finally:
                real.kill()
    for satellite in ours:
        assert satellite.server.counts.overlaps == 0
        # Everything the hub sent this room's speaker, and nothing else, played there.
        assert sum(satellite.server.counts.streams) == sent[satellite.room]
    assert real.played(), "the bedroom's wyoming-satellite played nothing"


TASKS = """
[tasks.backup]
description = "Copy the documents"
spoken = "the backup"
argv = ["sh", "-c", "sleep 0.5; echo copied 3 files"]
cwd = "."
timeout_s = 60
"""


async def test_a_task_started_in_the_kitchen_is_announced_in_the_kitchen_only(tmp_path: Path) -> None:
    phrases = ["computer, start the backup task", "computer, echo office one"]
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            settings = hub_settings(sim, tmp_path, [kitchen.spec, office.spec], tasks_toml=TASKS)
            async with running_hub(settings) as running:
                kitchen_timeline, office_timeline = running.timelines["kitchen"], running.timelines["office"]
                kitchen.say(command_tone(0))
                await wait_for(kitchen_timeline, lambda t: t.count("notice") >= 1 and t.count("narrated") >= 2, TIMEOUT)
                office.say(command_tone(1))  # the office is in use meanwhile, and hears its own answer only
                await wait_for(office_timeline, lambda t: t.count("narrated") >= 1, TIMEOUT)
                kitchen_scripts, office_scripts = running.scripts("kitchen"), running.scripts("office")
    assert any("backup" in script for script in kitchen_scripts[1:]), kitchen_scripts
    assert office_scripts == ["office one"], office_scripts
    assert office_timeline.count("notice") == 0


async def test_status_lists_each_satellite_and_history_names_the_room(tmp_path: Path) -> None:
    from commands.rooms import serve_hub
    from commands.run import status_files
    from commands.status import describe, format_entry
    from service.health import ListenerHealth
    from service.history import HISTORY_FILE, read_history
    from service.notify import SystemdNotifier
    from service.runtime import ServiceRuntime
    from service.status import STATUS_FILE, Liveness, read_status
    from decisions.timeline import Timeline, TimelineKind

    async with tone_sim(["computer, echo kitchen one"]) as sim:
        async with started([handoff_satellite("kitchen")]) as (kitchen,):
            settings = hub_settings(sim, tmp_path, [kitchen.spec])
            settings.state_dir.mkdir(parents=True, exist_ok=True)
            runtime = ServiceRuntime(Timeline(), SystemdNotifier(), ListenerHealth(60.0), None, status_files(settings))
            serving = asyncio.create_task(serve_hub(settings, runtime))
            try:
                await kitchen.server.changes.wait_until(lambda: kitchen.server.hub_connected, TIMEOUT)
                kitchen.say(command_tone(0))
                await kitchen.server.changes.wait_until(lambda: bool(kitchen.server.counts.streams), TIMEOUT)
                await runtime.changes.wait_until(
                    lambda: (s := read_status(settings.state_dir / STATUS_FILE)) is not None and s.narrations >= 1, TIMEOUT)
            finally:
                serving.cancel()
                try:
                    await serving
                except asyncio.CancelledError:
                    pass
    status = read_status(settings.state_dir / STATUS_FILE)
    assert status is not None
    assert [s["room"] for s in status.satellites] == ["kitchen"]
    assert status.last_command is not None and status.last_command["room"] == "kitchen"
    text = describe(status, Liveness.RUNNING, status.updated_at)
    assert "satellite kitchen (tcp://127.0.0.1:" in text and "last command in the kitchen" in text, text
    entries = read_history(settings.state_dir / HISTORY_FILE)
    assert [(e.room, e.heard) for e in entries] == [("kitchen", "echo kitchen one")]
    assert "kitchen" in format_entry(entries[0])


async def test_computer_stop_in_one_room_stops_that_room_only(tmp_path: Path) -> None:
    import dataclasses

    from config.settings import StopSettings
    from tests.support.stop_detectors import LoudStopDetector

    long = "the quick brown fox jumps over the lazy dog and runs far away into the woods"
    phrases = [f"computer, echo kitchen {long}", f"computer, echo office {long}"]
    # Each satellite's own detector hears it (its microphone stays there while the answer plays).
    detectors = {"kitchen": LoudStopDetector(), "office": LoudStopDetector()}
    satellites = [handoff_satellite(room, stop_detector=detectors[room]) for room in ("kitchen", "office")]
    async with tone_sim(phrases) as sim:
        async with started(satellites) as (kitchen, office):
            settings = hub_settings(sim, tmp_path, [kitchen.spec, office.spec])
            settings = settings.replace(stop=dataclasses.replace(StopSettings(), enabled=True))
            hub_detectors = {"kitchen": LoudStopDetector(), "office": LoudStopDetector()}
            async with running_hub(settings, stop_detectors=hub_detectors) as running:
                timelines = running.timelines
                for satellite in (kitchen, office):
                    await satellite.server.changes.wait_until(lambda s=satellite: s.server.hub_connected, TIMEOUT)
                kitchen.say(command_tone(0))
                office.say(command_tone(1))
                for satellite in (kitchen, office):
                    await satellite.server.changes.wait_until(lambda s=satellite: s.server._playing, TIMEOUT)
                kitchen.say(command_tone(5)[: 2 * 24000 * 3 // 10])  # a loud 0.3 s: "computer, stop"
                await wait_for(timelines["kitchen"], lambda t: t.count("stopped") >= 1, TIMEOUT)
                await wait_for(timelines["office"], lambda t: t.count("narrated") >= 1, TIMEOUT)
    assert detectors["kitchen"].hits and not detectors["office"].hits
    assert kitchen.server.counts.stops == 1 and office.server.counts.stops == 0
    assert timelines["office"].count("stopped") == 0
    office_said = [e.text for e in timelines["office"].entries if e.kind == "narrated"]
    assert "stopped after" not in office_said[0], office_said


async def test_a_command_said_over_the_answer_in_a_satellite_room_cuts_it_and_is_answered(tmp_path: Path) -> None:
    """A barge-in at `handoff satellite`: its own detector hears the wake phrase over the hub's
    voice (a `command` hit), the answer is cut, and what the user said is held there and then
    sent as a command, wake phrase and all, through the satellite's own wake word."""
    import dataclasses

    from config.settings import StopSettings
    from tests.support.stop_detectors import LoudStopDetector

    long = "the quick brown fox jumps over the lazy dog and runs far away into the woods"
    phrases = [f"computer, echo kitchen {long}", "computer, echo kitchen what time is it"]
    detector = LoudStopDetector(phrase="hey jarvis", command=True)  # the wake phrase alone, over the answer
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen", stop_detector=detector)]) as (kitchen,):
            settings = hub_settings(sim, tmp_path, [kitchen.spec])
            settings = settings.replace(stop=dataclasses.replace(StopSettings(), enabled=True))
            async with running_hub(settings, stop_detectors={"kitchen": LoudStopDetector()}) as running:
                timelines = running.timelines
                await kitchen.server.changes.wait_until(lambda: kitchen.server.hub_connected, TIMEOUT)
                kitchen.say(command_tone(0))
                await kitchen.server.changes.wait_until(lambda: kitchen.server._playing, TIMEOUT)
                kitchen.say(command_tone(1))  # "hey jarvis, what time is it", over the answer
                await wait_for(timelines["kitchen"], lambda t: t.count("closed") >= 2, TIMEOUT)
    assert len(detector.hits) == 1 and kitchen.server.counts.stops == 1
    assert kitchen.server.counts.barge_ins == 1 and kitchen.server.counts.commands == 2
    timeline = timelines["kitchen"]
    assert [e.text for e in timeline.entries if e.kind is TimelineKind.COMMAND] == [
        f"echo kitchen {long}", "echo kitchen what time is it"]
    closed = [e.text for e in timeline.entries if e.kind is TimelineKind.CLOSED]
    assert closed[0].startswith("command 1 stopped") and closed[1].startswith("command 2 said"), closed


class AnythingIsStop:
    """A stop detector that takes whatever it is fed for "computer, stop": what stops the room is
    then only what its listener lets it hear, and which of its hits that listener lets stand."""

    def __init__(self) -> None:
        self.fed = 0

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        self.fed += 1
        return StopHit("computer stop", end_s=at, detected_s=at, start_s=at - 0.5)  # "computer, stop" takes half a second

    def reset(self) -> None:
        pass


async def test_the_hubs_voice_coming_back_into_a_satellites_microphone_never_stops_it(tmp_path: Path) -> None:
    """`handoff satellite` hears the hub's voice as the hub hears its own (`BargeInEar`): through
    its echo gate and canceller, a hit standing only when the microphone held more than the echo.
    Its detector here would stop on anything: the echo alone does not get a hit past the listener,
    the user's voice over it does."""
    import dataclasses

    from config.settings import StopSettings

    long = " ".join(["the quick brown fox jumps over the lazy dog"] * 4)
    phrases = [f"computer, echo kitchen {long}"]
    detector = AnythingIsStop()
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen", stop_detector=detector, echo_db=-6.0)]) as (kitchen,):
            settings = hub_settings(sim, tmp_path, [kitchen.spec])
            settings = settings.replace(stop=dataclasses.replace(StopSettings(), enabled=True))
            async with running_hub(settings) as running:
                await kitchen.server.changes.wait_until(lambda: kitchen.server.hub_connected, TIMEOUT)
                playing = asyncio.Event()
                kitchen.speaker.after_play = lambda _end: playing.set()  # type: ignore[attr-defined]
                kitchen.say(command_tone(0))
                await asyncio.wait_for(playing.wait(), TIMEOUT)
                microphone = kitchen.microphone
                assert isinstance(microphone, RoomMicrophone)
                said_at = microphone.room_time() + 3.0  # three seconds into the answer: "computer, stop"
                microphone.say_at(command_tone(5)[: 2 * 24000 * 6 // 10], said_at)
                await wait_for(running.timelines["kitchen"], lambda t: t.count("stopped") >= 1, TIMEOUT)
    echo_before = [h for h in microphone.heard if h.at < said_at and audioop.rms(h.echo, 2) >= 300]
    assert len(echo_before) >= 100  # two seconds and more of the hub's voice at the microphone, heard by its detector
    assert detector.fed >= 1 and kitchen.server.counts.stops == 1


async def test_with_one_session_allowed_the_second_room_hears_the_earcon_and_waits_its_turn(tmp_path: Path) -> None:
    long = "the quick brown fox jumps over the lazy dog"
    phrases = [f"computer, echo kitchen {long}", f"computer, echo office {long}"]
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            async with running_hub(hub_settings(sim, tmp_path, [kitchen.spec, office.spec], max_sessions=1)) as running:
                for room in ("kitchen", "office"):  # both listening: the two commands go on together
                    await wait_for(running.timelines[room], lambda t: t.count("listening") >= 1, TIMEOUT)
                kitchen.say(command_tone(0))
                office.say(command_tone(1))
                for room in ("kitchen", "office"):
                    await wait_for(running.timelines[room], lambda t: t.count("narrated") >= 1, TIMEOUT)
                waited = {name: room.coordinator.parts.narrator.waited for name, room in running.hub.rooms.items()}
                narrated_at = {room: next(e.at for e in running.timelines[room].entries if e.kind == "narrated")
                               for room in ("kitchen", "office")}
    assert sorted(waited.values()) == [0, 1], waited  # exactly one room waited
    first = min(narrated_at, key=narrated_at.get)
    assert waited[first] == 0
    for satellite in (kitchen, office):
        assert satellite.server.counts.overlaps == 0
