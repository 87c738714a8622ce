"""Rooms under test: the hub (rooms.hub) against the simulator, with satellites of both kinds on
127.0.0.1: `handoff satellite` in process (rooms.satellite.SatelliteServer, a push microphone
and a modelled speaker) and the reference wyoming-satellite (tests.support.satellites).

A command is a short tone whose pitch says which room and which command it is: the simulator's
transcriber (`ToneTranscriber`) reads the pitch back, so rooms speaking at the same moment can
never be given each other's words (a shared transcript queue could).
"""

from __future__ import annotations

import asyncio
import audioop
import contextlib
import dataclasses
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from audio_io import MemorySpeaker, PushMicrophone
from audio_io.echo_reference import RoomEcho
from audio_io.format import BYTES_PER_SECOND, SAMPLE_RATE, PcmConverter
from config.rooms import RoomSettings, SatelliteSpec
from config.settings import ConversationSettings, EchoSettings, Settings
from decisions.timeline import Timeline
from detectors.stop_word import StopDetector
from realtime_sim import SimServer
from realtime_sim.transcriber import Segment
from rooms.hub import Hub, hub
from rooms.pairing import SatelliteKeys
from rooms.satellite import SatelliteServer
from tests.support.pipeline_harness import fast_settings
from tests.support.room import RoomMicrophone, RoomSpeaker
from tests.support.sim import FAST

WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
BASE_HZ, STEP_HZ = 300.0, 150.0  # 150 Hz apart: two rooms' tones at once never sound like one
FRAME = SAMPLE_RATE // 50  # 20 ms


def pitch(index: int) -> float:
    return BASE_HZ + STEP_HZ * index


def command_tone(index: int, rate: int = SAMPLE_RATE) -> bytes:
    """0.6 s at this command's pitch, then silence enough for the simulator's VAD."""
    samples = array("h", (int(9000 * math.sin(2 * math.pi * pitch(index) * i / rate)) for i in range(int(0.6 * rate))))
    return samples.tobytes() + bytes(2 * rate // 2)


class ToneTranscriber:
    """The simulator's "recogniser" for tone commands: the loudest pitch of the segment's loud
    part (an FFT over its first quarter second), read back as its command ("computer, echo
    <room> <n>"). Constant time whatever the number of phrases (`benchmarks.rooms` runs 40)."""

    needs_audio = True

    def __init__(self, phrases: list[str]) -> None:
        self.phrases = phrases

    def transcribe(self, segment: Segment) -> str:
        samples = np.frombuffer(segment.pcm[: len(segment.pcm) // 2 * 2], dtype="<i2").astype(np.float32)
        frames = samples[: samples.size // FRAME * FRAME].reshape(-1, FRAME)
        loud = frames[np.sqrt((frames * frames).mean(axis=1)) > 1500].ravel()[: SAMPLE_RATE // 4]
        if loud.size < FRAME * 5:
            return "mm-hm"
        spectrum = np.abs(np.fft.rfft(loud * np.hanning(loud.size)))
        hz = float(np.fft.rfftfreq(loud.size, 1 / SAMPLE_RATE)[int(np.argmax(spectrum))])
        return self.phrases[min(len(self.phrases) - 1, max(0, round((hz - BASE_HZ) / STEP_HZ)))]

    def close(self) -> None:
        pass


class ToneGate:
    """The test satellite's "wake word and VAD": a tone opens it, `hangover_s` of quiet closes it."""

    def __init__(self, hangover_s: float = 0.4) -> None:
        self._hangover_s, self._quiet_s, self._open = hangover_s, 0.0, False

    def feed(self, chunk: bytes, woke_s: float | None = None) -> list[bytes]:
        if audioop.rms(chunk, 2) > 1500:
            self._open, self._quiet_s = True, 0.0
        elif self._open:
            self._quiet_s += len(chunk) / BYTES_PER_SECOND
            self._open = self._quiet_s < self._hangover_s
            return [chunk] if self._open else []
        return [chunk] if self._open else []

    def skip(self, chunk: bytes) -> None:
        pass

    def reset(self) -> None:
        self._open, self._quiet_s = False, 0.0


@dataclass
class HandoffSatellite:
    """`handoff satellite` in this process."""

    room: str
    server: SatelliteServer
    microphone: PushMicrophone
    speaker: MemorySpeaker
    task: asyncio.Task | None = None

    @property
    def spec(self) -> SatelliteSpec:
        assert self.server.port is not None
        return SatelliteSpec(self.room, "127.0.0.1", self.server.port, unauthenticated=self.server.keys is None)

    def say(self, pcm: bytes) -> None:
        self.microphone.feed(pcm)


def handoff_satellite(room: str, pace: float = 1.0, stop_detector: StopDetector | None = None,
                      keys: SatelliteKeys | None = None, echo_db: float | None = None) -> HandoffSatellite:
    """`keys`: paired (TLS); None: plain Wyoming (a room marked unauthenticated). `echo_db`: the
    room's speaker comes back into its microphone at this gain (`tests.support.room`), and the
    satellite hears it through its echo gate and canceller, as `handoff satellite` does."""
    if echo_db is None:
        microphone: PushMicrophone = PushMicrophone(chunk_ms=20, pace=pace)
        speaker: MemorySpeaker = MemorySpeaker(pace=pace)
        echo, played = None, speaker
    else:
        microphone = RoomMicrophone(pace)
        speaker = RoomSpeaker(microphone, gain_db=echo_db)
        echo = RoomEcho(speaker, microphone, EchoSettings(), lambda: asyncio.get_running_loop().time() * pace, pace)
        played = echo.speaker
    server = SatelliteServer(SatelliteSpec(room, "127.0.0.1", 0), room, microphone, played, ToneGate(), woken=True,
                             stop_detector=stop_detector, keys=keys, echo=echo)  # fmt: skip
    return HandoffSatellite(room, server, microphone, speaker)


@contextlib.asynccontextmanager
async def started(satellites: list[HandoffSatellite]) -> AsyncIterator[list[HandoffSatellite]]:
    try:
        for satellite in satellites:
            satellite.task = asyncio.create_task(satellite.server.run(), name=f"satellite {satellite.room}")
            await satellite.server.changes.wait_until(lambda s=satellite: s.server.port is not None, 10)
        yield satellites
    finally:
        for satellite in satellites:
            if satellite.task is not None:
                satellite.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await satellite.task


def hub_settings(sim: SimServer, tmp_path: Path, specs: list[SatelliteSpec], tasks_toml: str | None = None,
                 **rooms: object) -> Settings:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    tasks_config = None
    if tasks_toml is not None:
        tasks_config = tmp_path / "tasks.toml"
        tasks_config.write_text(tasks_toml)
    # No follow-up sound: a test's next command could start under it (and be muted, rightly).
    settings = fast_settings(sim.base_url, workspace.resolve(), tmp_path / "state", tasks_config, conversation=ConversationSettings(follow_up_s=0))
    return settings.replace(rooms=dataclasses.replace(
        RoomSettings(ping_s=1.0, reconnect_initial_s=0.1, reconnect_max_s=0.5), satellites=tuple(specs), **rooms))


@dataclass
class RunningHub:
    hub: Hub
    timelines: dict[str, Timeline]
    task: asyncio.Task = field(repr=False)

    def scripts(self, room: str) -> list[str]:
        return [e.text for e in self.timelines[room].entries if e.kind == "narrating"]


@contextlib.asynccontextmanager
async def running_hub(settings: Settings, stop_detectors: dict[str, StopDetector] | None = None) -> AsyncIterator[RunningHub]:
    """The hub running, every room's link connected. `stop_detectors`: what hears a stop in each room."""
    timelines = {s.room: Timeline() for s in settings.rooms.satellites}
    async with hub(settings, timelines, stop_detectors=stop_detectors) as the_hub:
        task = asyncio.create_task(the_hub.run(), name="hub under test")
        try:
            running = RunningHub(the_hub, timelines, task)
            for room in the_hub.rooms.values():
                await room.link.changes.wait_until(lambda r=room: r.link.connected, 30)
            yield running
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def tone_sim(phrases: list[str]) -> AsyncIterator[SimServer]:
    sim = SimServer(FAST, transcriber=ToneTranscriber(phrases))
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


def resampled(pcm: bytes, rate: int) -> bytes:
    return PcmConverter(SAMPLE_RATE, rate).convert(pcm)
