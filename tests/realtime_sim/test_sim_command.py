"""`handoff sim`: starts, logs its base URL, serves, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from realtime_sim import command

REPO = Path(__file__).parents[2]
LISTENING = re.compile(r"simulator listening on (http://127\.0\.0\.1:(\d+)/v1) \(set OPENAI_BASE_URL to this\)")


def test_arguments_and_their_defaults() -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.host, defaults.port, defaults.seed, defaults.fault_rate, defaults.session_length) == (
        "127.0.0.1", 8765, None, 0.0, 3600.0,
    )  # fmt: skip
    given = parser.parse_args(["--port", "0", "--seed", "4", "--fault-rate", "0.25", "--session-length", "90"])
    assert (given.port, given.seed, given.fault_rate, given.session_length) == (0, 4, 0.25, 90.0)


def test_an_invalid_fault_rate_is_a_usage_error(capsys) -> None:
    assert command.main(["--fault-rate", "2"]) == 2
    assert capsys.readouterr().err == "handoff sim: --fault-rate 2 is not a probability; use a number from 0 to 1.\n"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
async def test_sim_command_logs_its_base_url_serves_and_stops_on_ctrl_c(stop: signal.Signals) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "realtime_sim.command", "--port", "0",
        cwd=REPO, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        seen = []
        match = None
        while match is None:
            line = await asyncio.wait_for(process.stderr.readline(), 30)
            assert line, f"the command exited before listening; it said: {seen}"
            seen.append(line.decode())
            match = LISTENING.search(line.decode())
        base_url = match.group(1)
        client = AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
        response = await client.responses.create(model="gpt-5.2", input="ping")
        assert response.output_text  # it really serves at the URL it logged
        process.send_signal(stop)
        assert await asyncio.wait_for(process.wait(), 30) == 0
        rest = (await process.stderr.read()).decode()
        assert "simulator stopped" in rest and "Traceback" not in rest, rest
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
