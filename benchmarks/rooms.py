"""Rooms: how the hub scales with satellites.

    .venv/bin/python -m benchmarks.rooms [--quick] [--commands N] [--rooms 1,2,4,8]

For each N, N simulated satellites (`handoff satellite`'s server, in this process, real-time
microphones and speakers) on 127.0.0.1 connect to one hub, run in a child process so its CPU time
is its own; the simulator (OpenAI's side, another machine in reality) runs in a process of its
own too, so that neither its work nor the satellites' is counted as the hub's latency. First every
room sits idle for `IDLE_S` (hub CPU per
second with N idle rooms), then each satellite says a command every few seconds (its next one
2-4 s after its answer began), `--commands` each, all rooms at once and interleaved.

Measured per command at the satellite: from the end of speech (the command's last sample left its
microphone) to the first audio of the answer arriving there. Reported as the median and p90 and
as ratios to N = 1 in the same run; the hub's CPU (user + system seconds per second of wall clock)
idle and active, and per active room. Then where the time went, stage by stage (the satellite's
end of speech to the hub's, the hub's stages from decisions.stages, the hub's first audio to the
satellite's), and how late each process's event loop woke (a 10 ms sleep, measured). The concurrent-session bound (MAX_REALTIME_SESSIONS, 2 by
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
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import AsyncIterator

from config.rooms import RoomSettings, SatelliteSpec
from config.settings import ConversationSettings, Settings
from realtime_sim import SimConfig, SimServer
from tests.support.pipeline_harness import fast_settings
from rooms.pairing import HubKeys, SatelliteKeys, pair_with
from tests.support.rooms_harness import ToneTranscriber, command_tone, handoff_satellite, started
from benchmarks.link_cost import link_cost
from benchmarks.spawned import spawned

IDLE_S = 5.0
TONE_S = 0.6  # command_tone's sound, before its silence


class LoopLag:
    """How late this process's event loop wakes: a 10 ms sleep, again and again, and how much
    longer each took (a measuring probe, not product code)."""

    PERIOD_S = 0.01

    def __init__(self) -> None:
        self.lags: list[float] = []

    async def run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.PERIOD_S)
            self.lags.append(time.monotonic() - before - self.PERIOD_S)

    def reset(self) -> list[float]:
        lags, self.lags = self.lags, []
        return lags


def _sim_process(phrases: list[str], seed: int, conn) -> None:  # type: ignore[no-untyped-def]
    """The simulator (OpenAI's side: another machine in reality), alone in its process: sends its
    URL, stops on "stop"."""

    async def main() -> None:
        sim = SimServer(SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=seed, realistic=False),
                        transcriber=ToneTranscriber(phrases))  # fmt: skip
        await sim.start()
        try:
            conn.send(sim.base_url)
            await asyncio.to_thread(conn.recv)
        finally:
            await sim.stop()

    asyncio.run(main())


@contextlib.asynccontextmanager
async def _simulator(phrases: list[str], seed: int) -> AsyncIterator[str]:
    with spawned(_sim_process, phrases, seed, stop="stop") as conn:
        yield await asyncio.to_thread(conn.recv)


def _hub_process(settings: Settings, conn) -> None:  # type: ignore[no-untyped-def]
    """The hub, alone in its process: answers "cpu" with its CPU seconds so far, stops on "stop"."""
    from decisions.timeline import Timeline
    from rooms.hub import hub

    marks: list[tuple[str, float, str, str]] = []  # room, monotonic clock, kind, text

    def timeline(room: str) -> Timeline:
        kept = Timeline()
        kept.on_add.append(lambda entry: marks.append((room, time.monotonic(), entry.kind.value, entry.text))
                           if entry.kind.value in ("command", "stages", "narrating") else None)  # fmt: skip
        return kept

    async def main() -> None:
        async with hub(settings, {s.room: timeline(s.room) for s in settings.rooms.satellites}) as the_hub:
            running = asyncio.create_task(the_hub.run())
            loop = asyncio.get_running_loop()
            stop = loop.create_future()
            lag = LoopLag()
            probing = asyncio.create_task(lag.run())

            def on_message() -> None:
                message = conn.recv()
                if message == "stop":
                    stop.set_result(None)
                elif message == "merged":  # episodes where one room's wake silenced another's
                    conn.send(the_hub.arbiter.core.contested if the_hub.arbiter is not None else 0)
                elif message == "marks":  # the hub's stages of each command, and its loop's lag
                    conn.send((list(marks), lag.reset()))
                else:
                    conn.send(time.process_time())

            loop.add_reader(conn.fileno(), on_message)
            conn.send("ready")
            await stop
            loop.remove_reader(conn.fileno())
            running.cancel()
            probing.cancel()
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
    rooms_cpu: float = 0.0  # this process (the satellites' audio and detectors) while commands run
    stages: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # seconds each stage took, per command
    hub_lag: list[float] = dataclasses.field(default_factory=list)  # the hub's loop, late by (s), while commands ran
    rooms_lag: list[float] = dataclasses.field(default_factory=list)  # ... this process's loop


async def _cpu(conn) -> float:  # type: ignore[no-untyped-def]
    conn.send("cpu")
    return await asyncio.to_thread(conn.recv)


async def measure(n: int, commands: int, seed: int, paired: bool = False, one_answer: bool = True) -> Run:
    rooms = [f"room{i}" for i in range(n)]
    phrases = [f"computer, echo {room} number {k}" for room in rooms for k in range(commands)]
    tmp = Path(tempfile.mkdtemp(prefix="handoff-rooms-bench-"))
    (tmp / "workspace").mkdir()
    async with _simulator(phrases, seed) as sim_url:
        keys = {room: SatelliteKeys(tmp / f"keys-{room}", room) if paired else None for room in rooms}
        async with started([handoff_satellite(room, keys=keys[room]) for room in rooms]) as satellites:
            settings = fast_settings(sim_url, (tmp / "workspace").resolve(), tmp / "state",
                                     conversation=ConversationSettings(follow_up_s=0, working_sound_after_s=600.0))  # fmt: skip
            for s in satellites:  # `handoff satellite pair` there, `handoff rooms pair` here
                if keys[s.room] is not None:
                    await pair_with("127.0.0.1", s.spec.port, s.room, HubKeys(settings.state_dir), keys[s.room].open_window())
            settings = settings.replace(rooms=RoomSettings(satellites=tuple(s.spec
                                                                            for s in satellites), max_sessions=n,
                                                           one_answer=one_answer))  # fmt: skip
            with spawned(_hub_process, settings, stop="stop") as parent:
                assert await asyncio.to_thread(parent.recv) == "ready"
                for s in satellites:
                    await s.server.changes.wait_until(lambda s=s: s.server.hub_connected, 60)
                cpu0, t0 = await _cpu(parent), time.monotonic()
                await asyncio.sleep(IDLE_S)
                cpu1, t1 = await _cpu(parent), time.monotonic()
                idle = (cpu1 - cpu0) / (t1 - t0)
                rng = random.Random(seed)
                latencies: list[float] = []
                said: list[tuple[str, float, float]] = []  # room, end of speech, first audio there
                lost = 0
                parent.send("marks")
                await asyncio.to_thread(parent.recv)  # (the idle time's lags: not kept)
                lag = LoopLag()
                probing = asyncio.create_task(lag.run())

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
                        said.append((satellite.room, end_of_speech, satellite.server.counts.stream_starts[before]))
                        await asyncio.sleep(rng.uniform(2.0, 4.0))  # a few seconds, then the next

                own1 = time.process_time()
                await asyncio.gather(*(talk(i) for i in range(n)))
                cpu2, t2 = await _cpu(parent), time.monotonic()
                rooms_cpu = (time.process_time() - own1) / (t2 - t1)
                active = (cpu2 - cpu1) / (t2 - t1)
                probing.cancel()
                parent.send("merged")
                merged = await asyncio.to_thread(parent.recv)
                parent.send("marks")
                marks, hub_lag = await asyncio.to_thread(parent.recv)
        return Run(n, latencies, idle, active, lost, paired, merged, one_answer, rooms_cpu,
                   _stages(said, marks), hub_lag, lag.lags)  # fmt: skip


def _stages(said: list[tuple[str, float, float]], marks: list[tuple[str, float, str, str]]) -> dict[str, list[float]]:
    """Where each command's time went, from the satellite's end of speech to the first audio
    there: the hub's stage offsets (decisions.stages, from its end of speech) put on the one
    clock (CLOCK_MONOTONIC is the machine's, in both processes) by the time of its "command"
    entry, which is the route being sent."""
    stages: dict[str, list[float]] = {}
    for room in {r for r, _, _ in said}:
        commands = [at for r, at, kind, _ in marks if r == room and kind == "command"]
        offsets = [json.loads(text) for r, _, kind, text in marks if r == room and kind == "stages"]
        for (_, end_of_speech, heard), command_at, offset in zip([c for c in said if c[0] == room], commands, offsets):
            if "route_sent" not in offset or "first_audio" not in offset:
                continue
            hub_end = command_at - offset["route_sent"]
            steps = [("to the hub's end of speech", end_of_speech, hub_end)]
            previous = ("end_of_speech", hub_end)
            for stage in ("commit", "transcript", "route_sent", "call_received", "tool_done", "first_audio"):
                if stage in offset:
                    steps.append((f"{previous[0]} -> {stage}", previous[1], hub_end + offset[stage]))
                    previous = (stage, hub_end + offset[stage])
            steps.append(("hub's first audio -> the satellite's", previous[1], heard))
            for name, begun, ended in steps:
                stages.setdefault(name, []).append(ended - begun)
    return stages


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] if ordered else float("nan")


def report(runs: list[Run]) -> str:
    lines = ["| link | satellites | commands | lost | latency median (s) | p90 (s) | latency vs N=1 | hub CPU idle (% of a core) "
             "| hub CPU active (% of a core) | active CPU vs N=1 | satellites CPU (% of a core) |",
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


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def stage_report(runs: list[Run]) -> str:
    """Which stage grows with N: median and p90 (ms) of each, per run."""
    names = list(dict.fromkeys(name for run in runs for name in run.stages))
    heads = [f"{'paired' if r.paired else 'plain'} N={r.rooms}" for r in runs]
    lines = ["| stage (ms, median / p90) | " + " | ".join(heads) + " |", "|---|" + "---|" * len(runs)]
    for name in names:
        cells = [f"{1000 * statistics.median(r.stages[name]):.0f} / {1000 * _q(r.stages[name], 0.9):.0f}"
                 if r.stages.get(name) else "-" for r in runs]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for label, lags in (("hub loop late by", lambda r: r.hub_lag), ("satellites' loop late by", lambda r: r.rooms_lag)):
        cells = [f"{1000 * _q(lags(r), 0.5):.1f} / {1000 * _q(lags(r), 0.99):.0f} / {1000 * max(lags(r), default=float('nan')):.0f}"
                 for r in runs]  # fmt: skip
        lines.append(f"| {label} (ms, median / p99 / max) | " + " | ".join(cells) + " |")
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
    print(stage_report(runs))
    print()
    print(link_cost())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
