"""A real `handoff satellite` process for the rooms tests: its microphone a named pipe kept full
of silence (and what `say` queues), its speaker a WAV file; paired with a hub as a person would,
and started again with the same key files after a kill."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import queue
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from rooms.pairing import SatelliteKeys, hub_keys, pair_with

TIMEOUT = 120.0  # a safety net only: the tests await events
REPO = Path(__file__).resolve().parents[2]
RATE = 24000
PIECE = 2 * RATE // 50  # 20 ms


class PipeMicrophone:
    """A WAV "file" for `--input-wav` that is a named pipe: silence, and what `say` queues."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._said: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name=f"pipe {path.name}", daemon=True)
        self._thread.start()

    def say(self, pcm: bytes) -> None:
        for start in range(0, len(pcm), PIECE):
            self._said.put(pcm[start : start + PIECE].ljust(PIECE, b"\0"))

    def _write(self) -> None:
        header = b"RIFF" + struct.pack("<I", 0x7FFFFFF0) + b"WAVEfmt " + struct.pack(
            "<IHHIIHH", 16, 1, 1, RATE, 2 * RATE, 2, 16) + b"data" + struct.pack("<I", 0x7FFFFFC0)
        with contextlib.suppress(BrokenPipeError, OSError), open(self.path, "wb", buffering=0) as pipe:
            with contextlib.suppress(OSError):  # 85 ms of audio, not 64 KB (1.4 s): what is said is heard soon
                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 4096)
            pipe.write(header)  # (opening waited for the satellite to open its end)
            while True:  # blocks while the pipe is full: the satellite reads in real time
                try:
                    pipe.write(self._said.get_nowait())
                except queue.Empty:
                    pipe.write(bytes(PIECE))


@dataclass
class SatelliteProcess:
    """One run of `handoff satellite`: `listening` is set once it waits for its hub (its log says
    so), so nothing polls its port."""

    process: subprocess.Popen[bytes]
    microphone: PipeMicrophone
    played: Path  # its speaker (a clean stop writes the WAV header)
    listening: asyncio.Event
    logging: threading.Thread  # copies its stderr to {room}.log until it exits

    async def started(self) -> None:
        async with asyncio.timeout(TIMEOUT):
            await self.listening.wait()

    def stop(self) -> int:
        """SIGTERM (a clean stop writes the WAV file's header); its exit status, its log all written."""
        self.process.terminate()
        return self.ended()

    def kill(self) -> int:
        self.process.kill()
        return self.ended()

    def ended(self) -> int:
        code = self.process.wait(30)
        self.logging.join(30)
        return code


def keys(tmp_path: Path, room: str) -> str:
    """`handoff satellite pair` on that machine: its keys made, the code it shows."""
    return SatelliteKeys(tmp_path / f"{room}-state" / "rooms" / "satellite").open_window()


def start(tmp_path: Path, room: str, port: int, run: int = 0) -> SatelliteProcess:
    """Starts `handoff satellite` with the keys `keys` made (again after a kill: `run` numbers its
    microphone and speaker files; its log goes on in {room}.log)."""
    microphone = PipeMicrophone(tmp_path / f"{room}-{run}.wav")
    played = tmp_path / f"{room}-played{f'-{run}' if run else ''}.wav"
    process = subprocess.Popen(
        [sys.executable, "-m", "commands.cli", "satellite", "--name", room, "--listen", f"tcp://127.0.0.1:{port}",
         "--input-wav", str(microphone.path), "--output-wav", str(played)], cwd=REPO,
        # espeak-ng's "computer": pocketsphinx's phrase (the shipped models hear flite's voices, not this one).
        env={**os.environ, "WAKE_PHRASE": "computer", "HANDOFF_STATE_DIR": str(tmp_path / f"{room}-state")},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    listening = asyncio.Event()
    loop = asyncio.get_running_loop()

    def tee() -> None:  # its log to {room}.log, and the moment it listens
        assert process.stderr is not None
        with open(tmp_path / f"{room}.log", "ab") as log:
            for line in process.stderr:
                log.write(line)
                log.flush()
                if b"waiting for its hub" in line:
                    with contextlib.suppress(RuntimeError):  # (the test is over: its loop is closed)
                        loop.call_soon_threadsafe(listening.set)

    logging = threading.Thread(target=tee, name=f"log {room}", daemon=True)
    logging.start()
    return SatelliteProcess(process, microphone, played, listening, logging)


def satellite(tmp_path: Path, room: str, port: int) -> tuple[SatelliteProcess, str]:
    code = keys(tmp_path, room)
    return start(tmp_path, room, port), code


async def paired(settings, room: str, satellite: SatelliteProcess, port: int, code: str) -> None:  # type: ignore[no-untyped-def]
    await satellite.started()
    await pair_with("127.0.0.1", port, room, hub_keys(settings), code)  # `handoff rooms pair`
