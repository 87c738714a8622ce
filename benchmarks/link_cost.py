"""What pairing and encryption cost a room, measured apart from everything else:

- CPU to carry one room's audio for a second over the link, both ways (the satellite's
  microphone up as 24 kHz audio-chunk events, an answer down at 22.05 kHz), through TLS 1.3 with
  pinned keys and through plain TCP, on loopback in one process (both ends' CPU);
- a paired connection's set-up (the TLS handshake with both certificates), and making a key.

    .venv/bin/python -m benchmarks.link_cost
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from wyoming.audio import AudioChunk
from wyoming.event import async_read_event, async_write_event

from rooms.keys import LINK_NAME, SatelliteContexts, hub_context, identity

AUDIO_S = 20.0  # seconds of audio carried each way per measurement
UP_RATE, DOWN_RATE = 24000, 22050


async def _carry(paired: bool, folder: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to carry AUDIO_S of audio both ways."""
    sat_id, hub_id = identity(folder / "sat", "satellite"), identity(folder / "hub", "hub")
    contexts = SatelliteContexts(sat_id, hub_id.cert_pem)
    done = asyncio.Event()

    async def satellite(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up = AudioChunk(rate=UP_RATE, width=2, channels=1, audio=bytes(2 * UP_RATE // 50)).event()  # 20 ms
        for _ in range(int(AUDIO_S * 50)):
            await async_write_event(up, writer)
        count = 0
        while count < int(AUDIO_S * 20) and (await async_read_event(reader)) is not None:
            count += 1
        done.set()
        writer.close()

    server = await asyncio.start_server(satellite, "127.0.0.1", 0, ssl=contexts.listening if paired else None)
    port = server.sockets[0].getsockname()[1]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=hub_context(hub_id, sat_id.cert_pem) if paired else None,
                                                   server_hostname=LINK_NAME if paired else None)  # fmt: skip
    down = AudioChunk(rate=DOWN_RATE, width=2, channels=1, audio=bytes(2 * DOWN_RATE // 20)).event()  # 50 ms
    for _ in range(int(AUDIO_S * 50)):
        await async_read_event(reader)
    for _ in range(int(AUDIO_S * 20)):
        await async_write_event(down, writer)
    await done.wait()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    writer.close()
    server.close()
    return cpu, wall


async def _handshakes(folder: Path, count: int = 30) -> float:
    sat_id, hub_id = identity(folder / "sat", "satellite"), identity(folder / "hub", "hub")
    contexts = SatelliteContexts(sat_id, hub_id.cert_pem)

    async def satellite(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(satellite, "127.0.0.1", 0, ssl=contexts.listening)
    port = server.sockets[0].getsockname()[1]
    client = hub_context(hub_id, sat_id.cert_pem)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=LINK_NAME)
        times.append(time.perf_counter() - start)
        writer.close()
    server.close()
    return statistics.median(times)


def _keygen(folder: Path) -> tuple[float, float]:
    start = time.perf_counter()
    for i in range(10):
        identity(folder / f"k{i}", "bench")
    ours = (time.perf_counter() - start) / 10
    start = time.perf_counter()
    for i in range(10):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-subj", "/CN=bench", "-days", "36500", "-keyout", str(folder / f"o{i}.key"),
                        "-out", str(folder / f"o{i}.pem")], check=True, capture_output=True)  # fmt: skip
    return ours, (time.perf_counter() - start) / 10


def link_cost() -> str:
    folder = Path(tempfile.mkdtemp(prefix="handoff-link-cost-"))
    plain = min((asyncio.run(_carry(False, folder)) for _ in range(3)), key=lambda r: r[0])
    tls = min((asyncio.run(_carry(True, folder)) for _ in range(3)), key=lambda r: r[0])
    handshake = asyncio.run(_handshakes(folder))
    ours, openssl = _keygen(folder)
    per_room = lambda cpu: 100 * cpu / AUDIO_S  # noqa: E731  % of a core for one room streaming both ways
    return "\n".join([
        "| link | CPU per room streaming both ways (% of a core, both ends) | vs plain |",
        "|---|---|---|",
        f"| plain Wyoming | {per_room(plain[0]):.2f} | 1.00 |",
        f"| paired (TLS 1.3, pinned keys) | {per_room(tls[0]):.2f} | {tls[0] / plain[0]:.2f} |",
        "",
        f"paired connection set-up (TLS handshake, both certificates), median of 30: {1000 * handshake:.1f} ms; "
        f"a key and certificate: {1000 * ours:.1f} ms with `cryptography`, {1000 * openssl:.1f} ms with the openssl command",
    ])


if __name__ == "__main__":
    print(link_cost())
