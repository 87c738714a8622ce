"""The page's server in a real `handoff run` against the simulator: /metrics agrees with
`handoff history`, and the guard refuses what it must (issue 22)."""

from __future__ import annotations

import re
import signal
import stat
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from realtime_sim import SimServer
from tests.support.daemon import daemon_env, running_daemon
from tests.web.support import free_port, handoff, wav_with_commands

TASKS = '[tasks.hello]\nspoken = "the hello task"\nargv = ["sh", "-c", "echo hello"]\ncwd = "."\n'


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def test_metrics_agree_with_the_history_of_a_scripted_run(tmp_path: Path, sim: SimServer) -> None:
    port = free_port()
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port))
    sim.script.push_transcript("Computer, what time is it?")
    sim.script.push_tool_call("get_time", {})
    sim.script.push_transcript("Computer, say banana")
    sim.script.push_tool_call("echo", {"text": "banana"})
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=2, lead_s=0.5, seconds_after=120)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(rf"web page on http://127.0.0.1:{port}/")
        await daemon.wait_line(r"narrated: answer", count=2)
        await daemon.wait_line(r"listener session 3 ready")  # each answer ends in a fresh session
        async with aiohttp.ClientSession() as client:
            async with client.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                found = samples(await response.text())
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log
    code, history = await handoff(env, "history")
    assert code == 0
    asked = re.findall(r"asked: (.*)", history)
    ran = re.findall(r"ran:   (\w+)\(", history)
    assert len(asked) == 2 and sorted(ran) == ["echo", "get_time"], history
    assert found["handoff_commands_total", (("outcome", "answered"),)] == len(asked)
    for tool in ran:
        assert found["handoff_tool_runs_total", (("outcome", "ok"), ("tool", tool))] == 1
    assert found["handoff_narrations_total", (("kind", "answer"),)] == 2
    assert found["handoff_listener_sessions_total", ()] >= 3
    assert found["handoff_stage_seconds_count", (("stage", "last_audio"),)] == 2
    assert found["handoff_cost_today_usd", (("part", "narrator"),)] > 0
    assert found["handoff_uploaded_audio_today_seconds", ()] > 0


async def test_with_web_host_set_the_token_is_required_and_a_post_needs_the_csrf_token(tmp_path: Path, sim: SimServer) -> None:
    port = free_port()
    (tmp_path / "tasks.toml").write_text(TASKS)
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port), WEB_HOST="127.0.0.1", WEB_METRICS_TOKEN="true",
                     HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"))  # fmt: skip
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=0, lead_s=0.5, seconds_after=120)
    base = f"http://127.0.0.1:{port}"
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"web page on .*token required")
        jar = aiohttp.CookieJar(unsafe=True)  # (aiohttp keeps no cookie of an IP address otherwise)
        token_file = tmp_path / "state" / "web-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        code, url = await handoff(env, "web-url")
        assert code == 0 and url.strip() == f"{base}/?token={token}"
        code, status = await handoff(env, "status")
        assert f"page: {base}/?token={token}" in status
        async with aiohttp.ClientSession(cookie_jar=jar) as client:
            for path in ("/", "/api/state", "/events", "/metrics", "/static/app.js"):
                async with client.get(base + path) as response:
                    assert response.status == 401, path
            async with client.get(base + "/api/state", params={"token": token[:-1] + "x"}) as response:
                assert response.status == 401
            bearer = {"Authorization": f"Bearer {token}"}
            async with client.get(base + "/api/state", headers=bearer) as response:
                assert response.status == 200
                csrf = (await response.json())["csrf"]
            async with client.post(base + "/api/tasks/start", json={"name": "hello"}, headers=bearer) as response:
                assert response.status == 403  # no CSRF token
            forged = {**bearer, "X-CSRF-Token": csrf, "Origin": "http://evil.example"}
            async with client.post(base + "/api/tasks/start", json={"name": "hello"}, headers=forged) as response:
                assert response.status == 403  # another site's page
            assert "task 1" not in daemon.log
            with_csrf = {**bearer, "X-CSRF-Token": csrf}
            async with client.post(base + "/api/tasks/start", json={"name": "nope"}, headers=with_csrf) as response:
                reply = await response.json()
                assert response.status == 400 and not reply["ok"] and "nope" in reply["error"]
            async with client.post(base + "/api/tasks/start", json={"name": "hello"}, headers=with_csrf) as response:
                reply = await response.json()
                assert response.status == 200 and reply["task"]["name"] == "hello", reply
            await daemon.wait_line(r"task 1 \(hello\)")
            # The address with the token sets an HttpOnly cookie and leaves the token out of the address bar.
            async with client.get(f"{base}/?token={token}", allow_redirects=False) as response:
                assert response.status == 303 and response.headers["Location"] == "/"
                assert "HttpOnly" in response.headers["Set-Cookie"] and "SameSite=Strict" in response.headers["Set-Cookie"]
            async with client.get(base + "/") as response:  # the cookie from now on
                assert response.status == 200
                assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log


async def test_without_web_host_the_token_is_needed_too_and_only_this_machine_s_names_are_served(
        tmp_path: Path, sim: SimServer) -> None:  # fmt: skip
    """On 127.0.0.1 every user of this machine reaches the port: without the token one could read
    the transcripts and start tasks (issue 27), where the control socket (0600) refuses them."""
    port = free_port()
    (tmp_path / "tasks.toml").write_text(TASKS)
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port), HANDOFF_TASKS_CONFIG=str(tmp_path / "tasks.toml"))
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=0, lead_s=0.5, seconds_after=120)
    base = f"http://127.0.0.1:{port}"
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(rf"web page on http://127.0.0.1:{port}/ \(token required")
        token = (tmp_path / "state" / "web-token").read_text().strip()
        code, url = await handoff(env, "web-url")
        assert code == 0 and url.strip() == f"{base}/?token={token}"
        async with aiohttp.ClientSession() as client:
            for path in ("/", "/api/state", "/events"):
                async with client.get(base + path) as response:
                    assert response.status == 401, path
            async with client.post(base + "/api/tasks/start", json={"name": "hello"}) as response:
                assert response.status == 401
            bearer = {"Authorization": f"Bearer {token}"}
            async with client.get(base + "/api/state", headers=bearer) as response:
                assert response.status == 200
            # A page on another name resolving here (DNS rebinding) gets nothing, even with the token.
            async with client.get(base + "/api/state", headers={**bearer, "Host": f"evil.example:{port}"}) as response:
                assert response.status == 403
        assert "task 1" not in daemon.log
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log


async def test_an_open_metrics_answers_only_to_this_machine_s_names(tmp_path: Path, sim: SimServer) -> None:
    """WEB_HOST set, WEB_METRICS_TOKEN false: a DNS-rebinding page could read the counters and
    today's cost (issue 27). 127.0.0.2 is a loopback address that is not the default bind."""
    port = free_port()
    env = daemon_env(tmp_path, sim.base_url, WEB_PORT=str(port), WEB_HOST="127.0.0.2")
    wav = wav_with_commands(tmp_path / "mic.wav", utterances=0, lead_s=0.5, seconds_after=120)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"web page on ")
        async with aiohttp.ClientSession() as client:
            async with client.get(f"http://127.0.0.2:{port}/metrics") as response:
                assert response.status == 200  # the scraper, by address
            async with client.get(f"http://127.0.0.2:{port}/metrics", headers={"Host": f"localhost:{port}"}) as response:
                assert response.status == 200
            async with client.get(f"http://127.0.0.2:{port}/metrics", headers={"Host": f"evil.example:{port}"}) as response:
                assert response.status == 403
        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=20) == 0, daemon.log
