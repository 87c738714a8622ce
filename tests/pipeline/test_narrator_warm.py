"""The warm narrator: a spare session connected and configured ahead of need, used once, replaced
after use, after a drop and before it gets old; nothing leaks."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from audio_io import MemorySpeaker
from config.settings import Settings
from reader_agent import Narrator, SpareState
from realtime_sim import Fault, SimServer
from tests.support.pipeline_harness import fast_settings, running_pipeline
from tests.support.sim import PERFECT, running_sim, sdk

SCRIPT = "The backup finished and everything is in order."


def narrator_settings(sim: SimServer, tmp_path, **narrator: object) -> Settings:
    settings = fast_settings(sim.base_url, tmp_path, tmp_path / "state", narrator_warm=True)
    return settings.replace(narrator=dataclasses.replace(settings.narrator, **narrator))


def configured(sim: SimServer) -> list:
    """Narrator connections the server confirmed a session for, in the order they opened."""
    return [c for c in sim.connections if c.role == "narrator" and "session.updated" in c.sent_types()]


def received_types(connection) -> list[str]:
    return [e["type"] for e in connection.received]


async def spare_ready(sim: SimServer, count: int) -> None:
    """`count` narrator sessions configured so far, the newest of them open and unused."""
    await sim.wait_for(
        lambda s: len(configured(s)) >= count and configured(s)[-1].is_open
        and "response.create" not in received_types(configured(s)[-1]),
        10,
    )


async def speaker_started() -> MemorySpeaker:
    speaker = MemorySpeaker()
    await speaker.start()
    return speaker


async def test_a_warm_narration_sends_only_response_create_after_the_result(tmp_path):
    async with running_sim(PERFECT) as sim:
        async with Narrator(narrator_settings(sim, tmp_path), sdk(sim)) as narrator:
            await spare_ready(sim, 1)
            result_ready = time.monotonic()
            result = await narrator.narrate(SCRIPT, await speaker_started())
            assert result.ok and result.attempts == 1
            used = configured(sim)[0]
            assert received_types(used) == ["session.update", "response.create"]
            update_at, create_at = used.received_at
            assert update_at < result_ready <= create_at  # configured ahead of need, nothing in between
            assert (narrator.warm_starts, narrator.cold_starts) == (1, 0)
            # Replaced after use, in the background: a fresh one is ready for the next answer.
            await spare_ready(sim, 2)
            assert not used.is_open  # a fresh reader session per narration: the used one is closed
            result = await narrator.narrate(SCRIPT, await speaker_started())
            assert result.ok and narrator.warm_starts == 2
            assert received_types(configured(sim)[1]) == ["session.update", "response.create"]


async def test_a_dropped_spare_is_replaced(tmp_path, caplog):
    async with running_sim(PERFECT) as sim:
        sim.script.push_fault(Fault("drop", target="narrator", after_sent="session.updated"))
        with caplog.at_level(logging.WARNING, logger="handoff.narrator"):
            async with Narrator(narrator_settings(sim, tmp_path), sdk(sim)) as narrator:
                await spare_ready(sim, 2)
                assert configured(sim)[0].close_code == 1006
                result = await narrator.narrate(SCRIPT, await speaker_started())
                assert result.ok and (narrator.warm_starts, narrator.cold_starts) == (1, 0)
                assert "response.create" in received_types(configured(sim)[1])
        assert any("closed (code 1006)" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_a_narration_that_finds_the_spare_dead_starts_cold_and_says_why(tmp_path, caplog):
    async with running_sim(PERFECT) as sim:
        # Replacements back off for a long time, so the narration finds none ready.
        settings = narrator_settings(sim, tmp_path)
        settings = settings.replace(reconnect=dataclasses.replace(settings.reconnect, initial_s=30.0, max_s=30.0))
        sim.script.push_fault(Fault("drop", target="narrator", after_sent="session.updated"))
        with caplog.at_level(logging.WARNING, logger="handoff.narrator"):
            async with Narrator(settings, sdk(sim)) as narrator:
                await narrator.wait_spare(SpareState.READY, 10)
                await narrator.wait_spare(SpareState.NONE, 10)  # it saw the drop, and backs off
                result = await narrator.narrate(SCRIPT, await speaker_started())
                assert result.ok and (narrator.warm_starts, narrator.cold_starts) == (0, 1)
        cold = [r.getMessage() for r in caplog.records if "starting one cold" in r.getMessage()]
        assert cold and all(r.levelno == logging.WARNING for r in caplog.records if "starting one cold" in r.getMessage())
        assert "1006" in cold[0]


async def test_the_spare_is_replaced_before_it_gets_old(tmp_path):
    async with running_sim(PERFECT) as sim:
        settings = narrator_settings(sim, tmp_path, warm_max_age_s=0.2)
        async with Narrator(settings, sdk(sim)) as narrator:
            await spare_ready(sim, 3)
            retired = configured(sim)[:2]
            assert [c.close_code for c in retired] == [1000, 1000]  # closed by us, not expired by the server
            assert all("response.create" not in received_types(c) for c in retired)
            result = await narrator.narrate(SCRIPT, await speaker_started())
            assert result.ok


async def test_warming_off_connects_per_narration(tmp_path):
    async with running_sim(PERFECT) as sim:
        async with Narrator(narrator_settings(sim, tmp_path, warm=False), sdk(sim)) as narrator:
            assert not sim.connections
            result = await narrator.narrate(SCRIPT, await speaker_started())
            assert result.ok and (narrator.warm_starts, narrator.cold_starts) == (0, 1)
            assert len(sim.connections) == 1


def our_tasks() -> set[asyncio.Task]:
    """Running tasks but the simulator's HTTP server's own (aiohttp finishes those lazily)."""
    return {t for t in asyncio.all_tasks() if "aiohttp" not in t.get_coro().cr_code.co_filename}


async def test_nothing_leaks_over_200_narrations(tmp_path):
    async with running_sim(PERFECT) as sim:
        tasks_before = our_tasks()
        speaker = await speaker_started()
        async with Narrator(narrator_settings(sim, tmp_path), sdk(sim)) as narrator:
            for _ in range(200):
                result = await narrator.narrate("Done.", speaker)
                assert result.ok
            await spare_ready(sim, 201)
            # One spare open, waiting for the next answer; every used session closed.
            await sim.wait_for(lambda s: sum(c.is_open for c in s.connections) == 1, 10)
            assert (narrator.warm_starts, narrator.cold_starts) == (200, 0)
        await sim.wait_for(lambda s: not any(c.is_open for c in s.connections), 10)
        assert our_tasks() == tasks_before


async def test_commands_are_narrated_on_sessions_configured_before_their_results(tmp_path, sim):
    async with running_pipeline(tmp_path, sim, narrator_warm=True) as p:
        for _ in range(3):
            await p.ask("Computer, what time is it")
        narrator = p.coordinator.parts.narrator
        assert (narrator.warm_starts, narrator.cold_starts) == (3, 0)
        results = [t for c in p.listener_connections() for t, e in zip(c.received_at, c.received)
                   if e["type"] == "conversation.item.create" and e["item"]["type"] == "function_call_output"]
        used = [c for c in p.narrator_connections() if "response.create" in received_types(c)]
        assert len(used) == len(results) == 3
        for connection, result_at in zip(used, results):
            assert received_types(connection) == ["session.update", "response.create"]
            update_at, create_at = connection.received_at
            assert update_at < result_at < create_at
