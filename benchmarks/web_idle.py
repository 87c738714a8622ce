"""What the web page costs an idle daemon (issue 22: nothing when nobody looks).

Two `handoff run` daemons hear the same quiet WAV in real time against one simulator, side by
side in the same run (so both see the same machine): one with WEB_PORT=0 (no page), one with
the page on and nobody looking. After both are listening, each one's CPU time (utime + stime
from /proc) is read over the same window; the result is each one's % of a core and the
difference. A third daemon with one event stream open (a page looking at it) shows what a
looker costs. Rounds are repeated and the medians reported.

Run: nice .venv/bin/python -m benchmarks.web_idle [--seconds 60] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
from pathlib import Path
from typing import AsyncIterator

import aiohttp

from realtime_sim import SimServer
from tests.support.daemon import Daemon, daemon_env, running_daemon
from tests.web.support import free_port, wav_with_commands

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@contextlib.asynccontextmanager
async def daemon(folder: Path, sim: SimServer, port: int, seconds: float) -> AsyncIterator[Daemon]:
    folder.mkdir()
    env = daemon_env(folder, sim.base_url, WEB_PORT=str(port))
    wav = wav_with_commands(folder / "quiet.wav", utterances=0, lead_s=0.5, seconds_after=seconds + 60)
    async with running_daemon(folder, env, "--input-wav", str(wav), "--output-wav", str(folder / "out.wav")) as running:
        yield running


async def watch(port: int, stop: asyncio.Event, state_dir: Path) -> None:
    """A page looking: one event stream, read until told to stop (with the page's token)."""
    token = (state_dir / "web-token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as client, client.get(f"http://127.0.0.1:{port}/events", headers=headers) as response:
        response.raise_for_status()
        reader = asyncio.ensure_future(response.content.read())
        await stop.wait()
        reader.cancel()


async def one_round(seconds: float) -> dict[str, float]:
    sim = SimServer()
    await sim.start()
    try:
        with tempfile.TemporaryDirectory(prefix="web-idle-") as tmp:
            root = Path(tmp)
            looked_port = free_port()
            async with (
                daemon(root / "off", sim, 0, seconds) as off,
                daemon(root / "on", sim, free_port(), seconds) as on,
                daemon(root / "looked", sim, looked_port, seconds) as looked,
            ):
                for running in (off, on, looked):
                    await running.wait_line(r"listener session 1 ready", timeout=120)
                stop = asyncio.Event()
                looker = asyncio.create_task(watch(looked_port, stop, root / "looked" / "state"))
                await asyncio.sleep(2.0)  # past the start's own work
                pids = {"off": off.process.pid, "on": on.process.pid, "looked": looked.process.pid}
                before = {name: cpu_seconds(pid) for name, pid in pids.items()}
                await asyncio.sleep(seconds)  # the measured window: the same for all three
                after = {name: cpu_seconds(pid) for name, pid in pids.items()}
                stop.set()
                await looker
                return {name: 100 * (after[name] - before[name]) / seconds for name in pids}
    finally:
        await sim.stop()


async def main(seconds: float, rounds: int) -> None:
    results = [await one_round(seconds) for _ in range(rounds)]
    median = {name: statistics.median(r[name] for r in results) for name in results[0]}
    print(f"idle daemon CPU, % of one core, median of {rounds} round(s) of {seconds:g} s (quiet WAV in real time, continuous upload)")
    print("| daemon | % of a core | vs page off |")
    print("|---|---|---|")
    for name, label in (("off", "WEB_PORT=0 (no page)"), ("on", "page on, nobody looking"), ("looked", "page on, one page open")):
        print(f"| {label} | {median[name]:.2f} | {median[name] - median['off']:+.2f} |")
    for index, result in enumerate(results, 1):
        print(f"round {index}: " + ", ".join(f"{name} {value:.2f} %" for name, value in result.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round of 15 s")
    args = parser.parse_args()
    asyncio.run(main(15.0, 1) if args.quick else main(args.seconds, args.rounds))
