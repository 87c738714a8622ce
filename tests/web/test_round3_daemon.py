"""Issue 28, items 4 and 8, through a real `handoff run` with the on-device wake on spoken (flite)
commands and its page: a command the device woke for and its transcript withdrew leaves no row
"in progress" (on the page, in `history`); /metrics, the status and the history count the same
commands, and /metrics' cost carries no float noise."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from realtime_sim import SimConfig, SimServer
from realtime_sim.transcriber import CueSheet
from speech.local_voice import flite_speech
from tests.service.test_status import handoff_out
from tests.support.audio_helpers import write_wav
from tests.support.daemon import SILENCE_1S, daemon_env, running_daemon
from tests.web.support import free_port, handoff
from web.token import load_or_create_token

SAID = [  # (what the flite voice says, what the transcript says)
    ("hey jarvis, what time is it", "Good morning everyone, the kettle is on."),  # a wake the words withdraw
    ("hey jarvis, what time is it", "Hey jarvis, what time is it?"),
    ("hey jarvis, list the files", "Hey jarvis, list the files."),
]
NOISE = re.compile(r"\.\d*(0{6,}|9{6,})\d")  # 0.00030000000000000003, 0.30000000000000004, 0.1999999999


@pytest.mark.timeout(300)
async def test_a_withdrawn_wake_leaves_no_row_in_progress_and_every_count_agrees(tmp_path: Path) -> None:
    port, state = free_port(), tmp_path / "state"
    pcm, cues, at = [SILENCE_1S * 3], [], 3.0
    for spoken, heard in SAID:
        speech = await flite_speech(spoken)
        cues.append(f"{at:.2f}\t{heard}")
        pcm += [speech, SILENCE_1S * 10]
        at += len(speech) / 48000 + 10
    wav = write_wav(tmp_path / "mic.wav", b"".join(pcm) + SILENCE_1S * 200)
    async with SimServer(SimConfig(transcription_delay_ms=(1200, 1200)), transcriber=CueSheet.parse("\n".join(cues) + "\n")) as sim:
        env = daemon_env(tmp_path, sim.base_url, HANDOFF_UPLOAD_MODE="wake_word", WAKE_PHRASE="hey jarvis", WEB_PORT=str(port))
        async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
            await daemon.wait_line(r"withdrawn: not addressed after all", timeout=120)
            await daemon.wait_line(r"narrated: answer", count=2, timeout=120)
            await daemon.wait_line(r"listener session 3 ready")  # (a fresh one after the last answer: all is written)
            headers = {"Authorization": f"Bearer {load_or_create_token(state)}"}
            async with aiohttp.ClientSession(headers=headers) as client:
                async with client.get(f"http://127.0.0.1:{port}/api/state") as response:
                    page = await response.json()
                async with client.get(f"http://127.0.0.1:{port}/metrics") as response:
                    metrics = await response.text()
            code, status = await asyncio.to_thread(handoff_out, tmp_path, "status")
            daemon.signal(signal.SIGTERM)
            assert await daemon.exited(timeout=30) == 0, daemon.log
    # Item 4: the withdrawn wake is no row on the page, and nothing is "in progress" there or in history.
    rows = [(row["heard"], row["outcome"], row["done"]) for row in page["commands"]]
    assert rows == [("list the files.", "answered", True), ("what time is it?", "answered", True)], (rows, daemon.log)
    _, history = await handoff(env, "history")
    asked = re.findall(r"asked: (.*)", history)
    assert asked == ["what time is it?", "list the files."] and "in progress" not in history, history
    # Item 8: /metrics, status and history count the same two commands; the cost has no float noise.
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(metrics) for s in family.samples}
    assert found["handoff_commands_total", (("outcome", "answered"),)] == len(asked) == 2, metrics
    assert code == 0 and "last 2 command(s)" in status, status
    costs = [line for line in metrics.splitlines() if line.startswith("handoff_cost_today_usd{")]
    assert costs and not [line for line in costs if NOISE.search(line)], costs
