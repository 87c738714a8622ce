"""The page as a new user met it (issue 28, item 17), in headless chromium: stage bars on one
time scale, tool results readable on a phone, no Start button without templates, and a
screenshot with a virtual time budget that finishes."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from selenium.webdriver.common.by import By

from realtime_sim import SimServer
from web.token import load_or_create_token
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, handoff, wav_with_commands
from tests.web.test_page_in_a_browser import CHROMIUM, chromium, earlier_history, text_of, until

BARS = """
return [...document.querySelectorAll('#commands .command .stagebar')].map((bar) => ({
  end: Number(bar.dataset.end),
  track: bar.getBoundingClientRect().width,
  filled: [...bar.querySelectorAll('.seg')].reduce((sum, seg) => sum + seg.getBoundingClientRect().width, 0),
}));
"""


async def test_the_page_reads_well_on_one_scale_and_on_a_phone(tmp_path: Path, sim: SimServer) -> None:
    port = free_port()
    state = tmp_path / "state"
    state.mkdir()
    earlier_history(state)  # a day of commands, 0.9 to 3.6 s from the end of speech to the last audio
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port))  # no task templates
    sim.script.push_transcript("Computer, set a timer for two minutes")
    sim.script.push_tool_call("set_timer", {"duration": "PT2M"})
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=1, lead_s=3, seconds_after=300)
    with chromium() as driver:
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
            await daemon.wait_line(r"web page on ")
            url = f"http://127.0.0.1:{port}/?token={load_or_create_token(state)}"  # (the page needs it on loopback too)
            await asyncio.to_thread(driver.get, url)
            await until(driver, lambda d: "set_timer" in text_of(d, "#commands") and "got" in text_of(d, "#commands .result"))

            # One time scale: the longest command shown fills its track, the others in proportion.
            bars = driver.execute_script(BARS)
            longest = max(bar["end"] for bar in bars)
            assert len({round(bar["end"], 2) for bar in bars}) > 2, bars  # commands of different lengths
            for bar in bars:
                assert abs(bar["filled"] / bar["track"] - bar["end"] / longest) < 0.03, (bar, longest)
            assert text_of(driver, "#stage-scale").startswith("bars: 0 to ")

            # A tool's result reads as names and values, not JSON, and words are not broken.
            result = text_of(driver, "#commands .command .result .value")
            assert "{" not in result and '"' not in result and "timer status: running" in result, result
            await asyncio.to_thread(driver.set_window_size, 390, 1600)  # a phone
            await until(driver, lambda d: d.execute_script("return document.documentElement.scrollWidth <= 390"))
            wrap = driver.execute_script(
                "return getComputedStyle(document.querySelector('#commands .result')).overflowWrap")
            assert wrap == "break-word", wrap  # ("anywhere" broke "running" into "runn" / "ing")

            # No templates: no drop-down to choose from, and no Start button to press.
            assert not driver.find_element(By.ID, "task-form").is_displayed()
            assert not driver.find_element(By.ID, "task-start").is_displayed()

            # The live page's event stream stays open as long as the page (keep-alive comments
            # every 20 s): a headless screenshot with a virtual time budget waits for the network
            # to go quiet, so it takes `/?once`, the state without the stream, and finishes.
            shot = tmp_path / "once.png"
            done = await asyncio.to_thread(subprocess.run, [
                CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=390,1200",
                f"--screenshot={shot}", "--virtual-time-budget=3000", url + "&once"], capture_output=True, timeout=90)  # fmt: skip
            assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr.decode()[-2000:]
