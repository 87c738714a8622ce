"""Satellites for the rooms tests: the reference `wyoming-satellite` (its own virtualenv,
`.venv-satellite`, built by `scripts/setup.sh --dev`) as a subprocess on 127.0.0.1, with a
microphone a test speaks into and a speaker whose every stream lands in a file."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import AsyncIterator

from audio_io.format import PcmConverter
from config.rooms import RoomSettings, SatelliteSpec
from config.settings import Settings, UploadMode, UploadSettings
from speech.synth import SpeechSynthesizer

REPO = Path(__file__).resolve().parents[2]
SATELLITE_PYTHON = REPO / ".venv-satellite" / "bin" / "python"
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def spoken(text: str, rate: int = 16000) -> bytes:
    """`text` said by espeak-ng, pcm16 mono at `rate`, with a little silence after it."""
    synth = SpeechSynthesizer(use_espeak=True)
    try:
        pcm = await synth.synthesize(text)
    finally:
        synth.close()
    return PcmConverter(24000, rate).convert(pcm) + bytes(2 * rate)


@dataclasses.dataclass
class RealSatellite:
    """wyoming-satellite 1.0.0, always streaming (no wake service: the hub's detection decides),
    on 127.0.0.1:`port`."""

    room: str
    folder: Path
    port: int = dataclasses.field(default_factory=free_port)
    process: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        (self.folder / "mic").mkdir(parents=True, exist_ok=True)
        (self.folder / "snd").mkdir(parents=True, exist_ok=True)

    @property
    def spec(self) -> SatelliteSpec:
        return SatelliteSpec(self.room, "127.0.0.1", self.port, unauthenticated=True)  # plain Wyoming

    def start(self) -> None:
        mic = f"{sys.executable} {HERE / 'satellite_mic.py'} {self.folder / 'mic'}"
        snd = f"{sys.executable} {HERE / 'satellite_snd.py'} {self.folder / 'snd'}"
        self.process = subprocess.Popen(
            [str(SATELLITE_PYTHON), "-m", "wyoming_satellite", "--name", self.room, "--area", self.room,
             "--uri", f"tcp://127.0.0.1:{self.port}", "--mic-command", mic, "--snd-command", snd,
             "--no-zeroconf"],
            stdout=subprocess.DEVNULL, stderr=open(self.folder / "satellite.log", "ab"), start_new_session=True,
        )

    def kill(self) -> None:
        """As a power cut would: the whole process group, at once."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def say(self, pcm16k: bytes, name: str = "0") -> None:
        part = self.folder / "mic" / f"{name}.part"
        part.write_bytes(pcm16k)
        part.rename(part.with_suffix(".raw"))

    def played(self) -> list[Path]:
        return sorted((self.folder / "snd").glob("played-*.raw"))


@contextlib.contextmanager
def real_satellites(tmp_path: Path, *rooms: str):
    satellites = [RealSatellite(room, tmp_path / room) for room in rooms]
    try:
        for satellite in satellites:
            satellite.start()
        yield satellites
    finally:
        for satellite in satellites:
            satellite.kill()


def with_rooms(settings: Settings, satellites: list, **rooms: object) -> Settings:
    """Settings for a hub of these satellites: speech-only upload (the real on-device VAD)."""
    return settings.replace(
        rooms=dataclasses.replace(RoomSettings(ping_s=1.0, reconnect_max_s=0.5), satellites=tuple(s.spec for s in satellites), **rooms),
        upload=UploadSettings(mode=UploadMode.SPEECH_ONLY),
    )
