"""Issue 27, 10 and 15: the state folder must be the user's and written by nobody else (a web
token planted there by another user was adopted), and a damaged cost-days file must not break
the page."""

from __future__ import annotations

import datetime
import json
import os
import signal
import stat
from pathlib import Path

import aiohttp

from realtime_sim import SimServer
from tests.service.test_state_folder import handoff
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, wav_with_commands
from web.token import load_or_create_token, read_token

NOBODY = 65534


def _said(result) -> list[str]:
    return [line for line in (result.stdout + result.stderr).strip().splitlines()
            if not line.startswith("Settings read from: ")]  # fmt: skip


def test_a_state_folder_others_can_write_is_refused_by_check(tmp_path: Path) -> None:
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1")
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    result = handoff(env, tmp_path, "check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"HANDOFF_STATE_DIR={state} can be written by other users (mode 777): run `chmod 700 {state}`." in _said(result)[0]


def test_a_state_folder_of_another_user_is_refused_and_a_planted_token_is_not_adopted(tmp_path: Path) -> None:
    """(Run as root, as the suite is here: only root can give a folder to another user.)"""
    env = daemon_env(tmp_path, "http://127.0.0.1:9/v1")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    result = handoff(env, tmp_path, "check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"HANDOFF_STATE_DIR={state} belongs to another user (uid {NOBODY})" in _said(result)[0]
    os.chown(state, os.geteuid(), os.getegid())
    planted = state / "web-token"
    planted.write_text("known-to-the-planter\n")
    os.chown(planted, NOBODY, NOBODY)
    assert read_token(state) is None
    token = load_or_create_token(state)
    assert token != "known-to-the-planter" and planted.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(planted.stat().st_mode) == 0o600


async def test_a_damaged_cost_days_file_leaves_the_page_answering(tmp_path: Path, sim: SimServer) -> None:
    """{"days": {"<today>": {"old-run": 5}}} made every /api/state answer 500, then and in the next run."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    today = datetime.date.today().isoformat()
    (state / "cost-days.json").write_text(json.dumps({"version": 1, "days": {
        today: {"old-run": 5, "fine-run": {"listener": 0.25}, "odd-run": {"brain": "lots", "narrator": float("inf")}},
        "not-a-day": {"x": {"listener": 1}}, "2020-01-01": [1]}}))  # fmt: skip
    port = free_port()
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port))
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=0, lead_s=0.5, seconds_after=120)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"web page on ")
        token = (state / "web-token").read_text().strip()
        async with aiohttp.ClientSession() as client:
            async with client.get(f"http://127.0.0.1:{port}/api/state",
                                  headers={"Authorization": f"Bearer {token}"}) as response:  # fmt: skip
                assert response.status == 200, await response.text()
                days = (await response.json())["cost"]["days"]
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log
    assert days[-1]["day"] == today and days[-1]["parts"]["listener"] >= 0.25
