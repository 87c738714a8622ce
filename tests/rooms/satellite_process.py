"""A real `handoff satellite` process for the rooms tests: its microphone a named pipe kept full
of silence (and what `say` queues), its speaker a WAV file; paired with a hub as a person would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path

from rooms.pairing import PairingError, SatelliteKeys, hub_keys, pair_with

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
            pipe.write(header)  # (opening waited for the satellite to open its end)
            while True:  # blocks while the pipe is full: the satellite reads in real time
                try:
                    pipe.write(self._said.get_nowait())
                except queue.Empty:
                    pipe.write(bytes(PIECE))


def satellite(tmp_path: Path, room: str, port: int) -> tuple[subprocess.Popen[bytes], PipeMicrophone, Path, str]:
    state = tmp_path / f"{room}-state"
    code = SatelliteKeys(state / "rooms" / "satellite").open_window()  # `handoff satellite pair`
    microphone, played = PipeMicrophone(tmp_path / f"{room}.wav"), tmp_path / f"{room}-played.wav"
    process = subprocess.Popen(
        [sys.executable, "-m", "commands.cli", "satellite", "--name", room, "--listen", f"tcp://127.0.0.1:{port}",
         "--input-wav", str(microphone.path), "--output-wav", str(played)], cwd=REPO,
        # espeak-ng's "computer": pocketsphinx's phrase (the shipped models hear flite's voices, not this one).
        env={**os.environ, "WAKE_PHRASE": "computer", "HANDOFF_STATE_DIR": str(state)},
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{room}.log", "wb"))  # fmt: skip
    return process, microphone, played, code


async def paired(settings, room: str, port: int, code: str) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(TIMEOUT):
        while True:  # until the process listens
            try:
                await pair_with("127.0.0.1", port, room, hub_keys(settings), code)  # `handoff rooms pair`
                return
            except PairingError as exc:
                if "refused the code" in str(exc):
                    raise
                await asyncio.sleep(0.2)  # another process starting: nothing to await on
