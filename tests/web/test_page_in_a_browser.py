"""The page in a real browser (Debian's headless chromium through its chromedriver, driven by
Selenium): a daemon runs a WAV against the simulator, and the open page sees, without reloading,
the state go to narrating and back, a new command appear with its stage bar, a task started
from the page run and finish, the cost go up, and the daemon restart underneath it. Hostile
text (a transcript, a tool result, a task's output) shows as text. Screenshots of each view are
written to <tmp>/screenshots (and to $HANDOFF_SCREENSHOTS, when set) for a person to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from realtime_sim import SimServer
from service.history import HISTORY_FILE, HistoryEntry, HistoryKind, HistoryStore, Outcome
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, handoff, wav_with_commands
from web.cost_days import COST_DAYS_FILE, CostDays

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HOSTILE_HEARD = "Computer, repeat <script>window.__pwned='heard'</script> please"
HOSTILE_ECHO = "<img src=x onerror=window.__pwned=1>"
TASKS = """
[tasks.report]
spoken = "the report"
argv = ["sh", "-c", "echo 'building the report'; echo '<script>window.__pwned=\\"task\\"</script>'; sleep 1; echo done"]
cwd = "."

[tasks.soak]
spoken = "the soak test"
argv = ["sh", "-c", "echo soaking; exec sleep 300"]
cwd = "."
"""
# Records every state the page shows, so a state held for a moment is not missed between looks.
WATCH_STATES = """
window.__states = [];
const node = document.getElementById('now-state');
new MutationObserver(() => window.__states.push(node.textContent))
  .observe(node, {childList: true, characterData: true, subtree: true});
"""


@contextlib.contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1500",
                     "--force-device-scale-factor=1", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


async def until(driver: webdriver.Chrome, condition: Callable[[webdriver.Chrome], Any], timeout: float = 60.0) -> Any:
    """The browser waits (in a thread: the daemon's log is read meanwhile) until `condition` holds. The page
    renders its lists again on every event, so a node a poll found may be gone when it is read: that poll
    tries again (a loaded machine put a re-render between the two)."""
    wait = WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    return await asyncio.to_thread(wait.until, condition)


def text_of(driver: webdriver.Chrome, css: str) -> str:
    return driver.execute_script("const n = document.querySelector(arguments[0]); return n ? n.textContent : '';", css)


def earlier_history(state: Path) -> None:
    """A day of earlier commands with their stage times (for the latency chart) and two weeks
    of spend (for the cost chart), as a daemon that ran before would have left them."""
    store = HistoryStore(state / HISTORY_FILE, 5000)
    now = time.time()
    for i in range(36):
        first_audio = 0.9 + (i % 7) * 0.12 + (0.8 if i % 11 == 0 else 0.0)
        stages = {"end_of_speech": 0.0, "commit": 0.05, "transcript": 0.32, "route_sent": 0.34, "call_received": 0.61,
                  "tool_done": 0.66, "first_audio": round(first_audio, 2), "last_audio": round(first_audio + 2.1, 2)}  # fmt: skip
        store.add(HistoryEntry(now - 23 * 3600 + i * 2300, HistoryKind.COMMAND, heard="what time is it", tools=["get_time({})"],
                               said="It is a quarter past ten.", outcome=Outcome.ANSWERED, stages=stages))  # fmt: skip
    store.close()
    days = CostDays(state / COST_DAYS_FILE, "earlier")
    today = datetime.date.today()
    for back in range(13, 0, -1):
        scale = 0.6 + (back * 7 % 5) / 5
        days.record(today - datetime.timedelta(days=back), {"listener": 0.01 * scale, "narrator": 0.05 * scale,
                                                            "transcription": 0.02 * scale, "brain": 0.03 * scale})  # fmt: skip


def screenshots(driver: webdriver.Chrome, folder: Path, prefix: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    # The window as tall as the page: a view below the fold would be cut otherwise.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(driver.get_window_size()["width"], height + 20)
    driver.save_screenshot(str(folder / f"{prefix}-page.png"))
    for view in ("commands", "tasks", "cost", "latency", "events"):
        driver.find_element(By.ID, f"view-{view}").screenshot(str(folder / f"{prefix}-{view}.png"))


async def test_the_page_follows_a_running_daemon_live(tmp_path: Path, sim: SimServer) -> None:
    port = free_port()
    state = tmp_path / "state"
    state.mkdir()
    earlier_history(state)
    (tmp_path / "tasks.toml").write_text(TASKS)
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port), WEB_HOST="127.0.0.1",
                     HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"), DAILY_BUDGET_USD="1.00")  # fmt: skip
    sim.script.push_transcript(HOSTILE_HEARD)
    sim.script.push_tool_call("echo", {"text": HOSTILE_ECHO})
    # Time to open the page before the command comes (the page sees it come, whenever it opened).
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=1, lead_s=20, seconds_after=300)
    shots = tmp_path / "screenshots"
    args = ("--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav"))
    with chromium() as driver:
        async with running_daemon(tmp_path, env, *args) as daemon:
            await daemon.wait_line(r"web page on ")
            code, url = await handoff(env, "web-url")
            assert code == 0 and "?token=" in url
            await asyncio.to_thread(driver.get, url.strip())
            assert "token" not in driver.current_url  # taken out of the address bar (a cookie now)
            await until(driver, lambda d: text_of(d, "#now-state") == "listening")
            driver.execute_script(WATCH_STATES)
            cost_before = text_of(driver, "#cost-total")
            assert "please" not in text_of(driver, "#commands")  # not yet: it is about to come

            # The command: it appears with its stage bar, the state goes to narrating and back.
            heard = await until(driver, lambda d: text if "please" in (
                text := d.find_element(By.CSS_SELECTOR, "#commands .command .heard").text) else False)  # (read in the poll: no node kept)
            assert heard == HOSTILE_HEARD.removeprefix("Computer, ")  # the command, as routed
            await until(driver, lambda d: "answered" in text_of(d, "#commands .command .outcome"))
            await until(driver, lambda d: text_of(d, "#now-state") == "listening")
            states = driver.execute_script("return window.__states")
            assert "narrating" in states and states[-1] == "listening", states
            command = driver.find_element(By.CSS_SELECTOR, "#commands .command")
            segments = command.find_elements(By.CSS_SELECTOR, ".stagebar .seg")
            assert len(segments) >= 3, command.get_attribute("outerHTML")
            assert {s.get_attribute("data-stage") for s in segments} >= {"route_sent", "call_received", "last_audio"}
            result = command.find_element(By.CSS_SELECTOR, ".result .value").text
            assert HOSTILE_ECHO in result
            assert driver.execute_script("return document.querySelectorAll('#commands script, #commands img').length") == 0
            await until(driver, lambda d: text_of(d, "#cost-total") != cost_before)  # the answer cost something

            # A task started from the page runs and finishes; its output is text too.
            Select(driver.find_element(By.ID, "task-template")).select_by_value("report")
            driver.execute_script("window.__states = []")
            driver.find_element(By.ID, "task-start").click()
            await until(driver, lambda d: "Started #1" in text_of(d, "#task-message"))
            task = "#tasks .task[data-id='1']"
            await until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{task}[data-status='running']")
                        or d.find_elements(By.CSS_SELECTOR, f"{task}[data-status='succeeded']"))  # fmt: skip
            await until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{task}[data-status='succeeded']"))
            output = text_of(driver, f"{task} pre")
            assert "<script>window.__pwned=\"task\"</script>" in output and "done" in output
            # Its outcome is announced: narrating again, then back to listening.
            await until(driver, lambda d: "narrating" in d.execute_script("return window.__states")
                        and text_of(d, "#now-state") == "listening")  # fmt: skip
            # A long one, cancelled from the page.
            Select(driver.find_element(By.ID, "task-template")).select_by_value("soak")
            driver.find_element(By.ID, "task-start").click()
            soak = "#tasks .task[data-id='2']"
            await until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{soak}[data-status='running']")
                        and "soaking" in text_of(d, f"{soak} pre"))  # fmt: skip
            driver.find_element(By.CSS_SELECTOR, f"{soak} button.cancel").click()
            await until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{soak}[data-status='cancelled']"))
            assert "Cancelled #2." in text_of(driver, "#task-message")
            await until(driver, lambda d: text_of(d, "#now-state") == "listening")
            assert driver.execute_script("return window.__pwned === undefined")
            assert driver.execute_script("return document.querySelectorAll('main script, main img').length") == 0
            assert driver.find_elements(By.CSS_SELECTOR, "#latency-chart circle")  # the earlier day's answers
            assert len(driver.find_elements(By.CSS_SELECTOR, "#cost-chart rect")) >= 13 * 4
            assert "left" in text_of(driver, "#cost-budget")
            await asyncio.to_thread(screenshots, driver, shots, "wide")
            await asyncio.to_thread(driver.set_window_size, 390, 1600)  # a phone
            await until(driver, lambda d: d.execute_script("return document.documentElement.scrollWidth <= 390"))
            await until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#commands .command")) == 6)  # fewer on a phone
            await asyncio.to_thread(screenshots, driver, shots, "phone")
            await asyncio.to_thread(driver.set_window_size, 1200, 1500)

            # The daemon stops: the page says it is reconnecting ...
            daemon.signal(signal.SIGTERM)
            assert await daemon.exited(timeout=20) == 0, daemon.log
            await until(driver, lambda d: d.find_element(By.ID, "conn").is_displayed())
            assert text_of(driver, "#now-state") == "reconnecting"
            assert "last heard from" in text_of(driver, "#now-details")  # not the stale session as if now
            driver.save_screenshot(str(shots / "reconnecting.png"))
        # ... and comes back by itself when it starts again.
        quiet = wav_with_commands(tmp_path / "quiet.wav", utterances=0, lead_s=0.5, seconds_after=120)
        async with running_daemon(tmp_path, env, "--input-wav", str(quiet), "--output-wav", str(tmp_path / "out2.wav")) as daemon:
            await until(driver, lambda d: text_of(d, "#now-state") == "listening" and not d.find_element(By.ID, "conn").is_displayed())
            assert HOSTILE_HEARD.removeprefix("Computer, ") in text_of(driver, "#commands")  # from the history, after the restart
            daemon.signal(signal.SIGTERM)
            assert await daemon.exited(timeout=20) == 0, daemon.log
    if os.environ.get("HANDOFF_SCREENSHOTS"):
        shutil.copytree(shots, Path(os.environ["HANDOFF_SCREENSHOTS"]), dirs_exist_ok=True)
    assert json.loads((state / COST_DAYS_FILE).read_text())["days"]  # today's spend was kept at the stop
