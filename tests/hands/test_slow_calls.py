"""A slow or hung MCP call does not hold the next command up (issue 30, item 4): past
`answer_wait_s` the command is answered that the server is still working, the call goes on in the
background, and what it gives (or its timeout) is said later as a notice; the next command is
routed and answered meanwhile, and a stop does not wait for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from assembly.build import mcp_servers
from config.settings import SettingsError, load_settings
from hands.link import LinkTiming
from realtime_sim import SimConfig
from tools.registry import ToolRegistry
from tests.hands.test_hands import home_stdio, running
from tests.pipeline.test_pipeline_hands import START_S, home_config, home_up
from tests.support.pipeline_harness import narrated_scripts, running_pipeline

PATIENT = LinkTiming(connect_timeout_s=30.0, call_timeout_s=3.0, answer_wait_s=0.2, backoff_initial_s=0.05, backoff_max_s=0.2)
STILL_WORKING = "The home server is still working on that; I'll tell you when it's done."


async def test_a_slow_call_is_answered_as_still_working_and_its_answer_comes_as_a_notice(tmp_path: Path) -> None:
    async with running(home_stdio(tmp_path / "home.jsonl"), timing=PATIENT) as (hands, registry):
        slow = await registry.run("slow_report", '{"seconds": 1}', "c1")
        assert slow.ok and slow.data["pending"] and registry.format(slow).script == STILL_WORKING
        quick = await registry.run("get_lights", '{"area": "hall"}', "c2")  # the server answers others meanwhile
        assert quick.ok and hands.next_batch() is None
        await hands.wait_pending()
        batch = hands.next_batch()
        assert batch is not None and batch.script == "About your earlier request: The home server says: The slow report is ready."
        hands.ack(batch.ids)

        hung = await registry.run("slow_report", '{"seconds": 30}', "c3")
        assert hung.data["pending"]
        await hands.wait_pending()  # its timeout, said
        batch = hands.next_batch()
        assert batch is not None and batch.script == (
            "About your earlier request: The slow report tool didn't work: the home server did not answer within 3 seconds.")


async def test_mcp_answer_wait_s_sets_how_long_a_command_waits_for_a_call(tmp_path: Path) -> None:
    config, _ = home_config(tmp_path)
    assert load_settings(environ={}, dotenv_path=None).mcp_answer_wait_s == 3.0
    settings = load_settings(environ={"MCP_ANSWER_WAIT_S": "0.2", "MCP_CONFIG": str(config)}, dotenv_path=None)
    registry = ToolRegistry()
    async with mcp_servers(settings, registry) as hands:
        link = hands.link("home")
        await link.changes.wait_until(lambda: link.up, START_S)
        slow = await registry.run("slow_report", '{"seconds": 1}', "c1")  # past 0.2 s: answered as still working
        assert slow.ok and slow.data["pending"] and registry.format(slow).script == STILL_WORKING
    with pytest.raises(SettingsError, match=r"^MCP_ANSWER_WAIT_S=soon is not a positive number of seconds; set it in .env"):
        load_settings(environ={"MCP_ANSWER_WAIT_S": "soon"}, dotenv_path=None)


@pytest.mark.parametrize("sim", [SimConfig(audio_frame_delay_s=0, use_espeak=False, seed=1)], indirect=True)
async def test_a_hung_call_holds_up_neither_the_next_command_nor_a_stop(tmp_path: Path, sim) -> None:
    config, _ = home_config(tmp_path)
    async with asyncio.timeout(START_S * 2):  # (a guard: leaving must not wait for the hung call)
        async with running_pipeline(tmp_path, sim, mcp_config=config, mcp_routing="direct") as p:
            await home_up(p)
            hands = p.coordinator.parts.notices.hands
            sim.script.push_tool_call("slow_report", {"seconds": 600})  # hangs past every timeout
            await p.ask("Computer, give me the slow report", START_S)
            assert narrated_scripts(p) == [STILL_WORKING]
            assert hands.background_calls == 1  # it goes on
            sim.script.push_tool_call("get_lights", {"area": "kitchen"})
            await p.ask("Computer, is the kitchen light on", START_S)
            assert narrated_scripts(p)[-1].startswith("The home server says:")
            assert hands.background_calls == 1  # answered while the first call still hangs
        assert hands.background_calls == 0  # the stop cancelled it
