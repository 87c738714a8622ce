"""Two `handoff satellite` processes in adjacent rooms (issue 31): one person says "computer,
what time is it" in the kitchen, and the office next door hears it too, a little quieter and
later. Each satellite's own wake word (pocketsphinx) and VAD pick the command out; the hub answers
once, in the kitchen, runs the tool once, and the office plays nothing.

The two processes start at their own moments, so their microphones are named pipes this test
keeps full of silence: a sound written to both at once reaches both rooms together (a pipe's
buffer later), as one voice reaches two rooms."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import wave
from pathlib import Path

import pytest

from audio_io.format import audioop
from concurrency.changes import wait_for
from config.rooms import SatelliteSpec
from decisions.timeline import Timeline
from rooms.hub import hub
from tests.rooms.satellite_process import RATE, TIMEOUT, paired, satellite
from tests.support.pipeline_harness import fast_settings
from tests.support.satellites import free_port, spoken, with_rooms
from tests.support.sim import running_sim


@pytest.mark.timeout(400)  # three processes and two wake word engines in real time: slow beside CPU hogs
async def test_two_satellite_processes_next_door_answer_once_in_the_nearer_room(tmp_path: Path) -> None:
    command = await spoken("computer, what time is it", rate=RATE)
    next_door = bytes(2 * RATE * 15 // 1000) + audioop.mul(command, 2, 10 ** (-4 / 20))  # 4 dB quieter, 15 ms later
    ports = {"kitchen": free_port(), "office": free_port()}
    rooms = {room: satellite(tmp_path, room, port) for room, port in ports.items()}
    timelines = {room: Timeline() for room in rooms}
    try:
        async with running_sim() as sim:
            (tmp_path / "ws").mkdir()
            settings = fast_settings(sim.base_url, (tmp_path / "ws").resolve(), tmp_path / "state")
            settings = with_rooms(settings, [])
            settings = settings.replace(rooms=dataclasses.replace(settings.rooms, satellites=tuple(
                SatelliteSpec(room, "127.0.0.1", port) for room, port in ports.items())))
            for room, (process, code) in rooms.items():
                await paired(settings, room, process, ports[room], code)
            sim.script.push_transcript("computer, what time is it")
            async with hub(settings, timelines) as the_hub:
                task = asyncio.create_task(the_hub.run())
                try:
                    for room in rooms:
                        await wait_for(timelines[room], lambda t: t.count("listening") >= 1, TIMEOUT)
                    rooms["kitchen"][0].microphone.say(command)
                    rooms["office"][0].microphone.say(next_door)
                    await wait_for(timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                    await wait_for(timelines["kitchen"], lambda t: t.count("listening") >= 2, TIMEOUT)
                    verdicts = list(the_hub.arbiter.verdicts)
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
    finally:
        for process, _ in rooms.values():
            process.process.terminate()  # SIGTERM: a clean stop writes the WAV file's header
        returncodes = [process.ended() for process, _ in rooms.values()]
    logs = {room: (tmp_path / f"{room}.log").read_text() for room in rooms}
    assert returncodes == [0, 0], logs
    # One verdict, or (a satellite behind real time) the kitchen's and then the office's, heard late.
    assert {v.winner for v in verdicts} == {"kitchen"} and set().union(*(v.losers for v in verdicts)) == {"office"}, (
        verdicts, logs)
    assert [e.text for e in timelines["kitchen"].entries if e.kind == "command"] == ["what time is it"]
    assert timelines["kitchen"].count("tool") == 1 and timelines["office"].count("tool") == 0
    assert timelines["office"].count("command") == 0 and timelines["office"].count("narrating") == 0
    with wave.open(str(rooms["office"][0].played), "rb") as office, wave.open(str(rooms["kitchen"][0].played), "rb") as kitchen:
        office_audio = office.readframes(office.getnframes())
        assert kitchen.getnframes() / kitchen.getframerate() > 0.5  # the kitchen heard its answer
    assert not any(office_audio), "the office played something"
