"""One command heard in two adjacent rooms: which room the hub picks, and is it run once?

    .venv/bin/python -m benchmarks.adjacent_rooms [--quick]

Two rooms hear one person: the near room ("kitchen") at full level, the next room ("office") at
0, -6 or -12 dB and 0-200 ms later (the office's own hum under both). Two parts:

1. Which rule picks the near room (`decisions.arbitration.Pick`), on espeak-ng speech ("computer,
   what time is it") as the hub hears a streaming satellite: the speech onset is the wake, the
   level and signature are of the 0.25 s after it (rooms.arbiter). At 0 dB and 0 ms the rooms
   are alike: not scored.
2. End to end, the chosen rule: the hub on the simulator with two `handoff satellite`s (their own
   wake: a tone), one command per level and offset; counted: the rooms that answered and the tool
   calls (the command must run once, in the kitchen).
"""

from __future__ import annotations

import argparse
import asyncio
import audioop
import random
import tempfile
from pathlib import Path

from audio_io.format import SAMPLE_RATE
from decisions.arbitration import ArbitrationCore, Pick
from rooms.arbiter import ONSET_DBFS, dbfs, signature, similarity

LEVELS_DB = (0, -6, -12)
OFFSETS_MS = (0, 15, 50, 100, 200)
CHUNK = 2 * SAMPLE_RATE // 50  # 20 ms


def next_door(pcm: bytes, db: float, ms: int) -> bytes:
    return bytes(2 * SAMPLE_RATE * ms // 1000) + audioop.mul(pcm, 2, 10 ** (db / 20))


def hum(seconds: float, seed: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(int(rng.gauss(0, 60)).to_bytes(2, "little", signed=True) for _ in range(int(seconds * SAMPLE_RATE)))


def heard(pcm: bytes, measure_s: float) -> tuple[float, float, tuple] | None:
    """(onset time, level, signature) as the hub's ArbitratedMicrophone measures them."""
    for start in range(0, len(pcm) - CHUNK, CHUNK):
        if dbfs(pcm[start:start + CHUNK]) >= ONSET_DBFS:
            measured = pcm[start:start + int(measure_s * 2 * SAMPLE_RATE)]
            return start / (2 * SAMPLE_RATE), dbfs(measured), signature(measured)
    return None


def rule_table(speech: bytes) -> str:
    lead = bytes(2 * SAMPLE_RATE // 2)
    rows = ["| rule | near room picked | runs twice | not scored (alike) |", "|---|---|---|---|"]
    for pick in Pick:
        right = twice = scored = 0
        for db in LEVELS_DB:
            for ms in OFFSETS_MS:
                room_noise = hum(2.5, db * 1000 + ms)
                kitchen = audioop.add((lead + speech)[: len(room_noise)].ljust(len(room_noise), b"\0"), room_noise, 2)
                office_sound = next_door(lead + speech, db, ms)[: len(room_noise)].ljust(len(room_noise), b"\0")
                office = audioop.add(office_sound, hum(2.5, 7 + ms), 2)
                core = ArbitrationCore(pick=pick, similar=similarity)
                k, o = heard(kitchen, core.measure_s), heard(office, core.measure_s)
                assert k is not None and o is not None
                verdicts = []
                first, second = sorted([("kitchen", k), ("office", o)], key=lambda item: item[1][0])
                verdicts += core.woke(first[0], first[1][0])
                verdicts += core.woke(second[0], second[1][0])
                for room, (at, level, sig) in (first, second):
                    verdicts += core.level(room, level, at + core.measure_s, sig)
                verdicts += core.tick(first[1][0] + 10)
                twice += len(verdicts) > 1
                if db == 0 and ms == 0:
                    continue
                scored += 1
                right += len(verdicts) == 1 and verdicts[0].winner == "kitchen"
        rows.append(f"| {pick.value} | {right}/{scored} | {twice} | 1 |")
    return "\n".join(rows)


async def end_to_end(quick: bool) -> str:
    from concurrency.changes import wait_for
    from tests.support.rooms_harness import command_tone, handoff_satellite, hub_settings, running_hub, started, tone_sim

    cases = [(db, ms) for db in LEVELS_DB for ms in (OFFSETS_MS[:2] if quick else OFFSETS_MS)]
    phrases = [f"computer, echo kitchen {i}" for i in range(len(cases))]
    rows = ["| office level | office later by | verdict | answered in | tool calls |", "|---|---|---|---|---|"]
    tmp = Path(tempfile.mkdtemp(prefix="handoff-adjacent-"))
    async with tone_sim(phrases) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            async with running_hub(hub_settings(sim, tmp, [office.spec, kitchen.spec])) as running:
                for i, (db, ms) in enumerate(cases):
                    tools_before = {r: t.count("tool") for r, t in running.timelines.items()}
                    told = {r: t.count("narrated") for r, t in running.timelines.items()}
                    verdicts_before = len(running.hub.arbiter.verdicts)
                    tone = command_tone(i)
                    office.say(next_door(tone, db, ms))
                    kitchen.say(tone)
                    await asyncio.wait_for(_any_narrated(running, told, wait_for), 60)
                    await asyncio.sleep(2.0)  # a second answer, if any, has time to come
                    verdicts = list(running.hub.arbiter.verdicts)[verdicts_before:]
                    answered = [r for r, t in running.timelines.items() if t.count("narrated") > told[r]]
                    calls = sum(t.count("tool") - tools_before[r] for r, t in running.timelines.items())
                    said = "; ".join(f"{v.winner} over {', '.join(sorted(v.losers)) or 'none'}" for v in verdicts)
                    rows.append(f"| {db} dB | {ms} ms | {said} | {', '.join(answered)} | {calls} |")
    return "\n".join(rows)


async def _any_narrated(running, told, wait_for) -> None:  # type: ignore[no-untyped-def]
    waits = [asyncio.create_task(wait_for(t, lambda t, r=r: t.count("narrated") > told[r], 60))
             for r, t in running.timelines.items()]  # fmt: skip
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()


async def main_async(quick: bool) -> None:
    from tests.support.satellites import spoken

    speech = await spoken("computer, what time is it", rate=SAMPLE_RATE)
    print("Which rule picks the near room (espeak-ng speech, streaming satellites):\n")
    print(rule_table(speech))
    print("\nEnd to end (two handoff satellites, the shipped rule):\n")
    print(await end_to_end(quick))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="offsets 0 and 15 ms only, end to end")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
