"""One command, one answer: a command heard in two adjacent rooms is answered once, in the nearer
room; two commands in two rooms a second apart are two commands. With `handoff satellite` (its
own wake) and with the reference wyoming-satellite (always streaming: the hub hears the onsets)."""

from __future__ import annotations

import asyncio
import audioop
from pathlib import Path

from audio_io.format import SAMPLE_RATE
from concurrency.changes import wait_for
from decisions.arbitration import ArbitrationCore, Pick
from tests.support.rooms_harness import (
    command_tone, handoff_satellite, hub_settings, resampled, running_hub, started, tone_sim,
)
from tests.support.satellites import RealSatellite

TIMEOUT = 120.0  # safety net only


def heard_next_door(pcm: bytes, db: float, ms: int, rate: int = SAMPLE_RATE) -> bytes:
    """The same sound as the next room hears it: `db` quieter, `ms` later."""
    return bytes(2 * rate * ms // 1000) + audioop.mul(pcm, 2, 10 ** (db / 20))


def tools_run(running) -> int:  # type: ignore[no-untyped-def]
    return sum(t.count("tool") for t in running.timelines.values())


async def test_a_command_heard_in_two_rooms_is_answered_once_in_the_nearer_one(tmp_path: Path) -> None:
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            async with running_hub(hub_settings(sim, tmp_path, [office.spec, kitchen.spec])) as running:
                tone = command_tone(0)
                office.say(heard_next_door(tone, -12, 15))  # the office first: its link is no earlier
                kitchen.say(tone)
                await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                await kitchen.server.changes.wait_until(lambda: bool(kitchen.server.counts.streams), TIMEOUT)
                verdicts = list(running.hub.arbiter.verdicts)
                office_timeline = running.timelines["office"]
                ran = tools_run(running)
    assert running.scripts("kitchen") == ["kitchen one"]
    assert ran == 1, ran
    assert [(v.winner, sorted(v.losers)) for v in verdicts] == [("kitchen", ["office"])], verdicts
    assert office_timeline.count("command") == 0 and office_timeline.count("narrating") == 0
    assert office.server.counts.streams == []  # no chime, no answer
    assert office.server.counts.stopped_by_hub == 1  # told to stop streaming


async def test_two_people_in_two_rooms_a_second_apart_are_two_commands(tmp_path: Path) -> None:
    async with tone_sim(["computer, echo kitchen one", "computer, echo office two"]) as sim:
        async with started([handoff_satellite("kitchen"), handoff_satellite("office")]) as (kitchen, office):
            async with running_hub(hub_settings(sim, tmp_path, [kitchen.spec, office.spec], max_sessions=2)) as running:
                kitchen.say(command_tone(0))
                office.say(bytes(2 * SAMPLE_RATE) + command_tone(1))  # a second later
                for room in ("kitchen", "office"):
                    await wait_for(running.timelines[room], lambda t: t.count("narrated") >= 1, TIMEOUT)
                verdicts = list(running.hub.arbiter.verdicts)
    assert running.scripts("kitchen") == ["kitchen one"] and running.scripts("office") == ["office two"]
    assert sorted(v.winner for v in verdicts) == ["kitchen", "office"] and not any(v.losers for v in verdicts)


async def test_wyoming_satellites_next_door_answer_once_in_the_nearer_room(tmp_path: Path) -> None:
    """Always streaming: the hub hears both rooms' speech begin, about together."""
    async with tone_sim(["computer, echo kitchen one"]) as sim:
        kitchen, office = RealSatellite("kitchen", tmp_path / "kitchen"), RealSatellite("office", tmp_path / "office")
        kitchen.start(), office.start()
        try:
            async with running_hub(hub_settings(sim, tmp_path, [office.spec, kitchen.spec])) as running:
                tone = resampled(command_tone(0), 16000)
                office.say(heard_next_door(tone, -12, 15, 16000))
                kitchen.say(tone)
                await wait_for(running.timelines["kitchen"], lambda t: t.count("narrated") >= 1, TIMEOUT)
                verdicts = list(running.hub.arbiter.verdicts)
                office_timeline = running.timelines["office"]
                ran = tools_run(running)
                office_sent = running.hub.rooms["office"].link.speaker.played_bytes
        finally:
            kitchen.kill(), office.kill()
    assert running.scripts("kitchen") == ["kitchen one"] and ran == 1, (ran, verdicts)
    assert [(v.winner, sorted(v.losers)) for v in verdicts] == [("kitchen", ["office"])], verdicts
    assert office_timeline.count("command") == 0 and office_sent == 0
    assert kitchen.played()


def test_the_core_takes_the_loudest_room_and_the_first_when_they_are_alike() -> None:
    core = ArbitrationCore(join_s=0.35, measure_s=0.25, tie_db=3.0, pick=Pick.LOUDEST_THEN_FIRST)
    assert core.woke("office", 0.0) == [] and core.woke("kitchen", 0.05) == []
    assert core.level("office", -20.0, 0.25) == [] and core.level("kitchen", -8.0, 0.30) == []
    [verdict] = core.tick(0.35)
    assert (verdict.winner, verdict.losers) == ("kitchen", frozenset({"office"}))
    core.woke("office", 1.0), core.woke("kitchen", 1.1)
    core.level("office", -10.0, 1.25)
    [verdict] = core.level("kitchen", -9.0, 1.36)  # 1 dB: alike, the first to wake wins
    assert verdict.winner == "office"
    # A room waking after the episode stopped taking rooms is a command of its own.
    core.woke("kitchen", 2.0)
    assert core.woke("office", 2.4) == []  # too late to join: it waits for the kitchen's verdict
    [first] = core.level("kitchen", -10.0, 2.45)
    assert (first.winner, first.losers) == ("kitchen", frozenset())
    assert core.next_deadline() == 2.4 + 0.25 + 1.5  # the office's own episode
    [second] = core.level("office", -30.0, 2.8)
    assert (second.winner, second.losers) == ("office", frozenset())


def test_an_episode_whose_rooms_are_all_measured_is_decided_at_join_s_not_after_the_grace() -> None:
    """The winner's audio is held until the verdict: a lone command (no other room woke) measured
    within join_s is due at join_s. (It waited for measure_s + grace_s, 1.75 s, with two rooms or
    more: every command ended ~0.9 s late, the rooms benchmark's N = 8 tail.)"""
    core = ArbitrationCore(join_s=0.35, measure_s=0.25, grace_s=1.5)
    core.woke("kitchen", 10.0)
    assert core.next_deadline() == 10.0 + 0.25 + 1.5  # its audio may come late: waited for
    assert core.level("kitchen", -14.0, 10.25) == []  # measured, but another room may still join
    assert core.next_deadline() == 10.35
    [verdict] = core.tick(10.35)
    assert (verdict.winner, verdict.losers) == ("kitchen", frozenset())
    core.woke("kitchen", 20.0), core.woke("office", 20.1)
    core.level("office", -30.0, 20.35)
    assert core.next_deadline() == 20.1 + 0.25 + 1.5  # the kitchen not measured yet: its grace holds
    [verdict] = core.level("kitchen", -12.0, 20.4)  # the last measure, after join_s: decided at once
    assert (verdict.winner, verdict.losers) == ("kitchen", frozenset({"office"}))


def test_rooms_whose_measure_heard_no_sound_are_one_command_however_unlike_their_noise() -> None:
    """The first 0.25 s after a satellite's own wake can be the pause after "computer,": each room
    measures its own noise (or digital silence), and unlike noise is no sign of two people."""
    unlike = lambda a, b: 0.0  # noqa: E731 (every pair of signatures: nothing alike)
    core = ArbitrationCore(join_s=0.35, measure_s=0.25, pick=Pick.LOUDEST_THEN_FIRST, similar=unlike)
    core.woke("kitchen", 0.0), core.woke("office", 0.02)
    core.level("kitchen", -120.0, 0.25, ((1.0,),)), core.level("office", -70.0, 0.27, ((2.0,),))
    [verdict] = core.tick(0.35)
    assert (verdict.winner, verdict.losers) == ("kitchen", frozenset({"office"}))
    # Sound in both, and unlike: two people, two commands.
    core.woke("kitchen", 5.0), core.woke("office", 5.02)
    core.level("kitchen", -20.0, 5.25, ((1.0,),)), core.level("office", -22.0, 5.27, ((2.0,),))
    assert sorted((v.winner, v.losers) for v in core.tick(5.35)) == [("kitchen", frozenset()), ("office", frozenset())]


def test_a_room_that_heard_the_same_command_late_loses_to_the_room_already_answering() -> None:
    """A satellite behind real time (a busy machine) wakes after the episode was decided: the
    same sound loses to its winner; another sound a second later is another command."""
    alike = lambda a, b: 1.0 if a == b else 0.0  # noqa: E731
    core = ArbitrationCore(join_s=0.35, measure_s=0.25, similar=alike)
    core.woke("kitchen", 0.0)
    [first] = core.level("kitchen", -26.0, 0.6, ((1.0,),))
    assert (first.winner, first.losers, first.late) == ("kitchen", frozenset(), False)
    core.woke("office", 0.7)  # 0.7 s after the kitchen: too late to join its episode
    [late] = core.level("office", -30.0, 1.3, ((1.0,),))
    assert (late.winner, late.losers, late.late) == ("kitchen", frozenset({"office"}), True)
    core.woke("office", 1.5)  # someone else, in the office
    [other] = core.level("office", -20.0, 2.0, ((2.0,),))
    assert (other.winner, other.losers) == ("office", frozenset())


async def test_the_measure_begins_with_the_sound_after_the_pause_that_follows_the_wake() -> None:
    """A satellite streams from its own wake: "computer," <pause> "what time is it". The pause
    (digital silence here) says nothing of the room; the level is the speech's."""
    from rooms.arbiter import Arbiter, dbfs
    from rooms.link import SatelliteMicrophone
    from rooms.wire import PipelineStarted

    arbiter = Arbiter(ArbitrationCore(join_s=0.35, measure_s=0.25))
    mic = arbiter.microphone("kitchen", SatelliteMicrophone(20), lambda started: None, lambda: None)
    mic.pipeline(PipelineStarted(woken=True))
    speech = command_tone(0)[: 2 * SAMPLE_RATE // 4]
    for chunk in [bytes(960)] * 20 + [speech[i : i + 960] for i in range(0, len(speech), 960)]:
        mic._take(chunk)
    [candidate] = arbiter.core.candidates.values()
    assert candidate.level_db is not None and abs(candidate.level_db - dbfs(speech)) < 0.5


def test_the_same_sound_next_door_is_alike_and_another_persons_is_not() -> None:
    """Signatures of espeak-ng-like material: the same tone quieter and later matches; another
    pitch does not; the same words match, other words do not."""
    from rooms.arbiter import signature, similarity

    def sweep(start_hz: float, stop_hz: float) -> bytes:  # a "word" that moves, as speech does
        import math
        from array import array
        n = int(0.3 * SAMPLE_RATE)
        phase, out = 0.0, array("h")
        for i in range(n):
            hz = start_hz + (stop_hz - start_hz) * (0.5 - 0.5 * math.cos(6 * math.pi * i / n))
            phase += 2 * math.pi * hz / SAMPLE_RATE
            out.append(int(8000 * math.sin(phase) * (0.3 + 0.7 * abs(math.sin(5 * math.pi * i / n)))))
        return out.tobytes()

    tone = command_tone(0)[: 2 * SAMPLE_RATE * 3 // 10]
    assert similarity(signature(tone), signature(heard_next_door(tone, -12, 40))) > 0.9
    assert similarity(signature(tone), signature(command_tone(10)[: len(tone)])) < 0.6
    words = sweep(300, 1200)
    assert similarity(signature(words), signature(heard_next_door(words, -6, 60))) > 0.9
    assert similarity(signature(words), signature(sweep(1500, 500))) < 0.6


async def test_held_audio_goes_on_at_the_verdict_without_waiting_for_more() -> None:
    """A woken room's command that ends before the verdict is not stuck until the next audio."""
    import contextlib

    from rooms.arbiter import Arbiter
    from rooms.link import SatelliteMicrophone
    from rooms.wire import PipelineStarted

    arbiter = Arbiter(ArbitrationCore(join_s=0.2, measure_s=0.1))
    opened: list[bool] = []
    mic = arbiter.microphone("kitchen", SatelliteMicrophone(20), lambda started: opened.append(True), lambda: None)
    running = asyncio.create_task(arbiter.run())
    try:
        mic.pipeline(PipelineStarted(woken=True))
        tone = command_tone(0)[: 2 * SAMPLE_RATE * 3 // 10]  # 0.3 s, then nothing more comes
        mic._inner.push(tone, SAMPLE_RATE, 1)
        got = bytearray()
        async with asyncio.timeout(10):
            async for chunk in mic.chunks():
                got += chunk
                if len(got) >= len(tone):
                    break
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert bytes(got) == tone and opened == [True]


async def test_a_streaming_room_whose_answer_plays_is_not_held() -> None:
    """"computer, stop" said while the answer plays goes to the stop detector at once."""
    from rooms.arbiter import Arbiter, Gate
    from rooms.link import SatelliteMicrophone
    from rooms.wire import PipelineStarted

    arbiter = Arbiter(ArbitrationCore())
    mic = arbiter.microphone("kitchen", SatelliteMicrophone(20), lambda started: None, lambda: None)
    mic.pipeline(PipelineStarted(woken=False))  # wyoming-satellite streaming all the time
    mic.muted = lambda: True
    loud = command_tone(0)[: 2 * SAMPLE_RATE // 50]
    mic._take(loud)
    assert mic.state is Gate.FREE and list(mic._ready) == [loud] and arbiter.core.decided == 0
    mic.muted = lambda: False
    mic._take(bytes(2 * SAMPLE_RATE * 4 // 10))  # quiet, then speech: a wake
    mic._take(loud)
    assert mic.state is Gate.HELD
