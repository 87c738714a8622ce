"""`handoff run` against a hostile server (issue 23, defects 4 and 16), as the real daemon: a
response asking for 10,000 calls or answering a megabyte keeps it responsive (the next command
is answered, SIGTERM is honoured at once); a megabyte transcript is cut everywhere it goes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from realtime_api.wire import MAX_TRANSCRIPT_CHARS
from realtime_sim import Fault, SimServer
from service.history import read_history
from service.status import read_status
from tests.support.daemon import daemon_env, running_daemon, spoken_wav

# Generous safety net: the issue asks for 2 s; the measured time is printed (see docs/PERFORMANCE.md).
SIGTERM_NET_S = 10.0


@pytest.mark.parametrize("fault", ["many_calls", "huge_answer"])
async def test_a_response_asking_too_much_leaves_the_daemon_responsive(tmp_path: Path, sim: SimServer, fault: str) -> None:
    """The loop froze for minutes on such a response (SIGTERM waited); now the daemon reads a
    bounded answer, and a SIGTERM while it does is honoured at once. (That the next command is
    answered is tested faster in tests/pipeline/test_pipeline_hostile.py.)"""
    sim.script.push_fault(Fault(fault, target="listener", after_sent="response.created"))
    sim.script.push_transcript("Computer, what time is it?")
    wav = spoken_wav(tmp_path / "mic.wav", utterances=1, seconds_after=120)
    env = daemon_env(tmp_path, sim.base_url)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        script = await daemon.wait_line(r"narrating: ")  # the bounded answer plays (read in real time)
        signalled = time.monotonic()
        daemon.signal()
        assert await daemon.exited(timeout=SIGTERM_NET_S) == 0, daemon.log
        print(f"{fault}: SIGTERM honoured in {time.monotonic() - signalled:.2f} s")
    assert "Traceback" not in daemon.log
    assert len(script) < 6_000  # one bounded script, not 380 KB or a megabyte
    if fault == "many_calls":
        assert daemon.log.count("result: get_time ok") == 8
        assert "only the first 8 run" in daemon.log


async def test_a_huge_transcript_is_cut_in_history_status_and_log(tmp_path: Path, sim: SimServer) -> None:
    """Defect 16: a 1 MB transcript was stored whole in history, in status.json (every
    heartbeat), three times in the log, and routed."""
    # 100 KB (the simulator streams it as transcription deltas too, one per word: 1 MB would be 30 MB of them)
    sim.script.push_transcript("Computer, echo " + "blah " * 20_000)
    sim.script.push_tool_call("echo", {"text": "hello"})
    wav = spoken_wav(tmp_path / "mic.wav", utterances=1, seconds_after=120)
    env = daemon_env(tmp_path, sim.base_url)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"narrated: answer")
        daemon.signal()
        assert await daemon.exited(timeout=SIGTERM_NET_S) == 0, daemon.log
    limit = MAX_TRANSCRIPT_CHARS + 10
    [entry] = [e for e in read_history(tmp_path / "state" / "history.db") if e.heard]
    assert 0 < len(entry.heard) <= limit
    status = read_status(tmp_path / "state" / "status.json")
    assert status is not None and len((status.last_command or {}).get("heard", "")) <= limit
    assert len((tmp_path / "state" / "status.json").read_text()) < 20_000
    assert len(daemon.log) < 60_000, f"the log holds {len(daemon.log)} characters"
    routed = [e for c in sim.connections if c.role == "listener" for e in c.received if e.get("type") == "response.create"]
    assert routed and all(len(str(e)) < limit + 20_000 for e in routed)


@pytest.mark.parametrize("kind", ["refuse_quota", "refuse_quota_close_only"])
async def test_a_refused_account_stops_the_daemon_after_one_sentence_and_few_connections(
    tmp_path: Path, sim: SimServer, kind: str
) -> None:
    """Issue 24: the service answers the upgrade, then an `error` and a close 1008 arrive together
    on every connection. The daemon said nothing and reconnected 16 times in 45 s."""
    for _ in range(20):
        sim.script.push_fault(Fault(kind))
    wav = spoken_wav(tmp_path / "mic.wav", utterances=1, seconds_after=120)
    env = daemon_env(tmp_path, sim.base_url, NARRATOR_WARM="true")
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        assert await daemon.exited(timeout=60) == 3, daemon.log
    assert len(sim.connections) <= 3, [(c.role, c.close_code) for c in sim.connections]
    assert daemon.log.count("no credit left") >= 1
    assert "reconnecting" not in daemon.log and "Traceback" not in daemon.log
