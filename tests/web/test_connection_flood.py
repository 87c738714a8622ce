"""A flood of half-sent requests to the page (issue 27): at a small open-files limit it once took
every file descriptor: the listener's and narrator's connections failed with EMFILE and the log
grew by 181 MB in 70 s. Now the page holds at most its few dozen connections, each for seconds,
and a line that repeats is bounded: commands are answered through the flood."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import signal
from pathlib import Path

from realtime_sim import SimServer
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, wav_with_commands

FLOOD = 600  # connections kept open at once, over the daemon's 256 open files
DAEMON_NOFILE = 256
HALF_SENT = b"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished


async def _half_sent_forever(port: int, opened: list[int]) -> None:
    """One flooder: a half-sent request, held until the page closes it, then another."""
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)  # (a load generator's pace, not a wait for a state)
            continue
        opened[0] += 1
        try:
            writer.write(HALF_SENT)
            await reader.read()  # until the page lets go
        except OSError:
            pass
        finally:
            writer.close()
        await asyncio.sleep(0.05)


async def test_a_flood_of_half_sent_requests_leaves_commands_answered_and_the_log_bounded(tmp_path: Path,
                                                                                         sim: SimServer) -> None:
    port = free_port()
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port))
    for word in ("banana", "cherry"):
        sim.script.push_transcript(f"Computer, say {word}")
        sim.script.push_tool_call("echo", {"text": word})
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=2, lead_s=4.0, seconds_after=120)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (DAEMON_NOFILE, hard))  # the daemon inherits a small limit
    try:
        context = running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav"))
        daemon = await context.__aenter__()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    flooders: list[asyncio.Task[None]] = []
    try:
        await daemon.wait_line(r"web page on ")
        opened = [0]
        flooders = [asyncio.create_task(_half_sent_forever(port, opened)) for _ in range(FLOOD)]
        await daemon.wait_line(r"narrated: answer", count=2, timeout=90)
        await daemon.wait_line(r"listener session 3 ready", timeout=60)  # and a new session after the last answer
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=30) == 0, daemon.log[-5000:]
    finally:
        for flooder in flooders:
            flooder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*flooders, return_exceptions=True)
        await context.__aexit__(None, None, None)
    log = daemon.log
    print(f"{opened[0]} flood connections; the daemon's log: {len(daemon.lines)} lines, {len(log)} bytes")
    assert opened[0] >= FLOOD
    assert "out of system resource" not in log and "Too many open files" not in log, log[-3000:]
    assert len(log) < 200_000, len(log)
