"""Rooms: how the hub scales with satellites.

    .venv/bin/python -m benchmarks.rooms [--quick] [--commands N] [--rooms 1,2,4,8]

For each N, N simulated satellites (`handoff satellite`'s server, in this process, real-time
microphones and speakers) on 127.0.0.1 connect to one hub, run in a child process so its CPU time
is its own; the simulator runs here too. First every room sits idle for `IDLE_S` (hub CPU per
second with N idle rooms), then each satellite says a command every few seconds (its next one
2-4 s after its answer began), `--commands` each, all rooms at once and interleaved.

Measured per command at the satellite: from the end of speech (the command's last sample left its
microphone) to the first audio of the answer arriving there. Reported as the median and p90 and
as ratios to N = 1 in the same run; the hub's CPU (user + system seconds per second of wall clock)
idle and active, and per active room. The concurrent-session bound (MAX_REALTIME_SESSIONS, 2 by
default) is raised to N here, so no room waits its turn: the bound would measure the bound.

The simulator is its perfect model (transcripts right after the commit, no network delay): what
is left of the latency is the path through the hub. The working sound is off (its tick would be
the first audio of a late answer), and so is the follow-up sound. Figures are printed, never
asserted (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import multiprocessing
import random
import statistics
import tempfile
import time
from pathlib import Path

from config.rooms import RoomSettings, SatelliteSpec
from config.settings import ConversationSettings, Settings
from realtime_sim import SimConfig, SimServer
from tests.support.pipeline_harness import fast_settings
from rooms.pairing import HubKeys, SatelliteKeys, pair_with
from tests.support.rooms_harness import ToneTranscriber, command_tone, handoff_satellite, started
from benchmarks.link_cost import link_cost

IDLE_S = 5.0
TONE_S = 0.6  # command_tone's sound, before its silence


def _hub_process(settings: Settings, conn) -> None:  # type: ignore[no-untyped-def]
    """The hub, alone in its process: answers "cpu" with its CPU seconds so far, stops on "stop"."""
    from rooms.hub import hub

    async def main() -> None:
        async with hub(settings) as the_hub:
            running = asyncio.create_task(the_hub.run())
            loop = asyncio.get_running_loop()
            stop = loop.create_future()

            def on_message() -> None:
                message = conn.recv()
                if message == "stop":
                    stop.set_result(None)
                elif message == "merged":  # episodes where one room's wake silenced another's
                    conn.send(the_hub.arbiter.core.contested if the_hub.arbiter is not None else 0)
                else:
                    conn.send(time.process_time())

            loop.add_reader(conn.fileno(), on_message)
            conn.send("ready")
            await stop
            loop.remove_reader(conn.fileno())
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    asyncio.run(main())


@dataclasses.dataclass
class Run:
    rooms: int
    latencies_s: list[float]
    idle_cpu: float  # hub CPU seconds per second, all rooms idle
    active_cpu: float  # ... while commands run
    lost: int
    paired: bool = False  # TLS with pinned keys (else plain Wyoming)
    merged: int = 0  # arbitration episodes in which a room lost (here: none should, every room says its own command)
    one_answer: bool = True  # the arbitration between rooms on (the shipped way)
    rooms_cpu: float = 0.0  # this process (the satellites' detectors and the simulator) while commands run


async def _cpu(conn) -> float:  # type: ignore[no-untyped-def]
    conn.send("cpu")
    return await asyncio.to_thread(conn.recv)


async def measure(n: int, commands: int, seed: int, paired: bool = False, one_answer: bool = True) -> Run:
    rooms = [f"room{i}" for i in range(n)]
    phrases = [f"computer, echo {room} number {k}" for room in rooms for k in range(commands)]
    sim = SimServer(SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=seed, realistic=False),
                    transcriber=ToneTranscriber(phrases))  # fmt: skip
    await sim.start()
    tmp = Path(tempfile.mkdtemp(prefix="handoff-rooms-bench-"))
    (tmp / "workspace").mkdir()
    try:
        keys = {room: SatelliteKeys(tmp / f"keys-{room}", room) if paired else None for room in rooms}
        async with started([handoff_satellite(room, keys=keys[room]) for room in rooms]) as satellites:
            settings = fast_settings(sim.base_url, (tmp / "workspace").resolve(), tmp / "state",
                                     conversation=ConversationSettings(follow_up_s=0, working_sound_after_s=600.0))  # fmt: skip
            for s in satellites:  # `handoff satellite pair` there, `handoff rooms pair` here
                if keys[s.room] is not None:
                    await pair_with("127.0.0.1", s.spec.port, s.room, HubKeys(settings.state_dir), keys[s.room].open_window())
            settings = settings.replace(rooms=RoomSettings(satellites=tuple(s.spec
                                                                            for s in satellites), max_sessions=n,
                                                           one_answer=one_answer))  # fmt: skip
            parent, child = multiprocessing.get_context("spawn").Pipe()
            process = multiprocessing.get_context("spawn").Process(target=_hub_process, args=(settings, child))
            process.start()
            try:
                assert await asyncio.to_thread(parent.recv) == "ready"
                for s in satellites:
                    await s.server.changes.wait_until(lambda s=s: s.server.hub_connected, 60)
                cpu0, t0 = await _cpu(parent), time.monotonic()
                await asyncio.sleep(IDLE_S)
                cpu1, t1 = await _cpu(parent), time.monotonic()
                idle = (cpu1 - cpu0) / (t1 - t0)
                rng = random.Random(seed)
                latencies: list[float] = []
                lost = 0

                async def talk(index: int) -> None:
                    nonlocal lost
                    satellite = satellites[index]
                    await asyncio.sleep(rng.uniform(0, 2.0))
                    for k in range(commands):
                        before = len(satellite.server.counts.stream_starts)
                        satellite.say(command_tone(index * commands + k))
                        end_of_speech = time.monotonic() + TONE_S
                        try:
                            await satellite.server.changes.wait_until(
                                lambda: len(satellite.server.counts.stream_starts) > before, 60)
                        except TimeoutError:
                            lost += 1
                            continue
                        latencies.append(satellite.server.counts.stream_starts[before] - end_of_speech)
                        await asyncio.sleep(rng.uniform(2.0, 4.0))  # a few seconds, then the next

                own1 = time.process_time()
                await asyncio.gather(*(talk(i) for i in range(n)))
                cpu2, t2 = await _cpu(parent), time.monotonic()
                rooms_cpu = (time.process_time() - own1) / (t2 - t1)
                active = (cpu2 - cpu1) / (t2 - t1)
                parent.send("merged")
                merged = await asyncio.to_thread(parent.recv)
            finally:
                parent.send("stop")
                await asyncio.to_thread(process.join, 30)
                if process.is_alive():
                    process.kill()
        return Run(n, latencies, idle, active, lost, paired, merged, one_answer, rooms_cpu)
    finally:
        await sim.stop()


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] if ordered else float("nan")


def report(runs: list[Run]) -> str:
    lines = ["| link | satellites | commands | lost | latency median (s) | p90 (s) | latency vs N=1 | hub CPU idle (% of a core) "
             "| hub CPU active (% of a core) | active CPU vs N=1 | satellites + simulator CPU (% of a core) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        base = next(r for r in runs if r.paired == run.paired)  # N=1 of the same kind of link
        base_latency = statistics.median(base.latencies_s) if base.latencies_s else float("nan")
        median = statistics.median(run.latencies_s) if run.latencies_s else float("nan")
        lines.append(
            f"| {'paired (TLS)' if run.paired else 'plain'}{'' if run.one_answer else ', no arbitration'} | {run.rooms} | {len(run.latencies_s)} | {run.lost} | {median:.3f} | {_p90(run.latencies_s):.3f} "
            f"| {median / base_latency:.2f} | {100 * run.idle_cpu:.2f} | {100 * run.active_cpu:.1f} "
            f"| {run.active_cpu / base.active_cpu:.2f} | {100 * run.rooms_cpu:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 1 and 2, two commands each")
    parser.add_argument("--commands", type=int, default=6, help="commands per satellite")
    parser.add_argument("--rooms", default="1,2,4,8", help="the N to measure, comma-separated")
    parser.add_argument("--links", default="plain,paired", help="plain (Wyoming as it is), paired (TLS, pinned keys), or both")
    parser.add_argument("--without-arbitration", action="store_true", help="also measure plain links without one-answer arbitration")
    args = parser.parse_args(argv)
    sizes = [1, 2] if args.quick else [int(n) for n in args.rooms.split(",")]
    commands = 2 if args.quick else args.commands
    runs = []
    plan = [(link == "paired", n, True) for link in args.links.split(",") for n in sizes]
    plan += [(False, n, False) for n in sizes if n > 1 and args.without_arbitration]
    for paired, n, one_answer in plan:
        run = asyncio.run(measure(n, commands, seed=n, paired=paired, one_answer=one_answer))
        print(f"{'paired' if paired else 'plain'} N={n}: {len(run.latencies_s)} answered, {run.lost} lost, {run.merged} merged, median "
              f"{statistics.median(run.latencies_s) if run.latencies_s else float('nan'):.3f} s", flush=True)
        runs.append(run)
    print(report(runs))
    print()
    print(link_cost())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
