"""The hub with the reference satellite: wyoming-satellite 1.0.0 on 127.0.0.1, always streaming
(no wake service: the hub's on-device VAD and its transcript wake gate decide, as for its own
microphone), a microphone we speak espeak-ng speech into, a speaker that writes to files."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from pathlib import Path

from concurrency.changes import wait_for
from config.rooms import SatelliteSpec
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


async def test_a_command_spoken_into_handoff_satellite_with_its_own_wake_word_is_answered_there(tmp_path: Path) -> None:
    """`handoff satellite` as its own process, paired with the hub by its code: its WAV
    microphone says "computer, what time is it" (espeak-ng) after 4 s of quiet, its on-device
    wake word (pocketsphinx) and VAD pick the command out, the hub answers over TLS, the
    satellite writes what it played to a WAV file."""
    from rooms.pairing import PairingError, SatelliteKeys, hub_keys, pair_with

    import subprocess
    import sys
    import wave

    from tests.support.satellites import free_port

    command = await spoken("computer, what time is it", rate=24000)
    mic, out = tmp_path / "mic.wav", tmp_path / "played.wav"
    with wave.open(str(mic), "wb") as file:
        file.setnchannels(1), file.setsampwidth(2), file.setframerate(24000)
        file.writeframes(bytes(2 * 24000 * 4) + command)
    port = free_port()
    code = SatelliteKeys(tmp_path / "satellite-state" / "rooms" / "satellite").open_window()  # `handoff satellite pair`
    satellite = subprocess.Popen(
        [sys.executable, "-m", "commands.cli", "satellite", "--name", "kitchen", "--listen", f"tcp://127.0.0.1:{port}",
         "--input-wav", str(mic), "--output-wav", str(out)], cwd=Path(__file__).resolve().parents[2],
        # espeak-ng's "computer": pocketsphinx's phrase (the shipped models hear flite's voices, not this one).
        env={**os.environ, "WAKE_PHRASE": "computer", "HANDOFF_STATE_DIR": str(tmp_path / "satellite-state")},
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "satellite.log", "wb"))
    try:
        async with running_sim() as sim:
            (tmp_path / "ws").mkdir()
            settings = fast_settings(sim.base_url, (tmp_path / "ws").resolve(), tmp_path / "state")
            settings = with_rooms(settings, [])
            settings = settings.replace(rooms=dataclasses.replace(settings.rooms, satellites=(SatelliteSpec("kitchen", "127.0.0.1", port),)))
            async with asyncio.timeout(TIMEOUT):
                while True:  # until the process listens
                    try:
                        await pair_with("127.0.0.1", port, "kitchen", hub_keys(settings), code)  # `handoff rooms pair`
                        break
                    except PairingError as exc:
                        if "refused the code" in str(exc):
                            raise
                        await asyncio.sleep(0.2)  # another process starting: nothing to await on
            timeline = Timeline()
            sim.script.push_transcript("computer, what time is it")
            async with hub(settings, {"kitchen": timeline}) as the_hub:
                task = asyncio.create_task(the_hub.run())
                try:
                    await wait_for(timeline, lambda t: t.count("narrated") >= 1, TIMEOUT)
                    # What it played reaches the file as it plays (real time): let the answer finish.
                    await wait_for(timeline, lambda t: t.count("listening") >= 2, TIMEOUT)
                    woken = the_hub.rooms["kitchen"].link.last_command_at is not None  # run-pipeline came
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
    finally:
        satellite.terminate()  # SIGTERM: a clean stop writes the WAV file's header
        satellite.wait(30)
    assert satellite.returncode == 0, (tmp_path / "satellite.log").read_text()
    assert woken, "the satellite's own wake word never started a pipeline"
    assert [e.text for e in timeline.entries if e.kind == "command"] == ["what time is it"]
    with wave.open(str(out), "rb") as file:
        played_s = file.getnframes() / file.getframerate()
    assert played_s > 0.5, played_s
