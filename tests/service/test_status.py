"""`handoff status` and `handoff history`: the status file and the history store, alone and
written by a daemon running against the simulator (issue 13, part 5)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from commands import cli
from decisions.coordinator import (
    ROUTING_FAILED_MESSAGE, CoordinatorCore, CoordinatorTimings, NarrationDone, NarrationsFinished, NoticeBatchFetched,
    NoticesPending, RouteSent, SendRoute, StopHeard, Tick, ToolDone, ToolStarted, ToolsFinished,
)
from decisions.events import ConnectAttemptFailed, ToolOutcome
from decisions.listener_core import (
    CommandCommitted, CommandConfirmed, CommandHeard, CommandRejected, Heard, RoutingFailed, RunTools, SessionReady,
    SessionEnd, SpeakText,
)
from decisions.timeline import Timeline
from decisions.uplink import Uplink
from decisions.wake_gate import Command as WakeCommand, Ignore, WakeGate
from realtime_api.wire import Closed, FunctionCall
from realtime_sim import SimServer
from service.history import HistoryEntry, HistoryKind, HistoryStore, HistoryTracker, Outcome, read_history
from service.status import Liveness, Probes, StatusTracker, liveness, process_start, read_status, write_status
from tests.support.awaiting import file_written
from tests.support.daemon import daemon_env, running_daemon, spoken_wav


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def history_of(keep_overheard: bool = False) -> tuple[list[HistoryEntry], HistoryTracker, CoordinatorCore]:
    """A real coordinator core whose timeline feeds a history tracker, as the daemon wires them."""
    clock = Clock()
    done: list[HistoryEntry] = []
    tracker = HistoryTracker(done.append, keep_overheard, clock=lambda: 1000.0)
    timeline = Timeline(clock=clock, log_overheard=keep_overheard)
    timeline.on_add.append(tracker.observe)
    core = CoordinatorCore(CoordinatorTimings(chime=False, follow_up_s=0), WakeGate("computer"), timeline,
                           Uplink(500, 48000), clock, read_only_tools=frozenset({"get_time"}))  # fmt: skip
    core.handle(SessionReady(1))
    return done, tracker, core


def say(core: CoordinatorCore, stopped_after_s: float | None = None) -> None:
    request = core.next_narration()
    assert request is not None
    core.handle(NarrationDone(request, "similarity 1.00, attempts 1", stopped_after_s=stopped_after_s))
    core.handle(NarrationsFinished())
    core.handle(SessionEnd(Closed(1000), by_us=True, expired=False, healthy=True, interrupted_command=None,
                           replay_from_ms=None))  # (the restart after an answer)
    core.handle(SessionReady(core.session + 1))


def command(core: CoordinatorCore, words: str) -> int:
    core.handle(Heard(f"Computer, {words}", WakeCommand(words)))
    (send,) = [a for a in core.handle(CommandHeard(words)) if isinstance(a, SendRoute)]
    core.handle(RouteSent(send.route))
    return send.route


def answer_a_command(core: CoordinatorCore) -> None:
    core.handle(Heard("did you feed the cat", Ignore()))
    route = command(core, "what time is it?")
    (start,) = core.handle(RunTools("what time is it?", (FunctionCall("c1", "get_time", "{}", "i1"),), session=core.session))
    core.handle(ToolStarted(start.command_id, "get_time", "{}"))
    core.handle(ToolDone(start.command_id, "get_time", ToolOutcome.OK, "15:05"))
    core.handle(ToolsFinished(route, ("It's 3:05 PM.",)))
    say(core)
    core.handle(NoticesPending())
    core.handle(Tick())
    core.handle(NoticeBatchFetched((1,), "The backup finished in two minutes."))
    say(core)
    command(core, "do something odd")
    core.handle(RoutingFailed("do something odd", "no response"))
    say(core)


def test_history_keeps_commands_their_tools_and_what_was_said_but_not_overheard_speech() -> None:
    done, tracker, core = history_of()
    answer_a_command(core)
    assert [(e.kind, e.heard, e.tools, e.said, e.outcome) for e in done] == [
        (HistoryKind.COMMAND, "what time is it?", ["get_time({})"], "It's 3:05 PM.", Outcome.ANSWERED),
        (HistoryKind.NOTICE, "", [], "The backup finished in two minutes.", Outcome.SAID),
        (HistoryKind.COMMAND, "do something odd", [], ROUTING_FAILED_MESSAGE, Outcome.APOLOGISED),
    ]
    assert tracker.last_command is done[-1]


def test_a_narration_cut_by_computer_stop_is_kept_as_stopped() -> None:
    done, _, core = history_of()
    command(core, "read me the story")
    core.handle(SpeakText("read me the story", "Once upon a time."))
    request = core.next_narration()
    core.handle(StopHeard("computer stop"))
    core.handle(NarrationDone(request, "stopped after 2.3 s of audio", stopped_after_s=2.3))
    assert [(e.heard, e.said, e.outcome) for e in done] == [("read me the story", "Once upon a time.", Outcome.STOPPED)]


def test_overheard_speech_is_kept_only_when_the_debug_setting_says_so() -> None:
    done, _, core = history_of(keep_overheard=True)
    answer_a_command(core)
    assert done[0] == HistoryEntry(1000.0, HistoryKind.OVERHEARD, "did you feed the cat", outcome=Outcome.IGNORED)
    done, _, core = history_of(keep_overheard=False)
    answer_a_command(core)
    assert not [e for e in done if e.kind is HistoryKind.OVERHEARD]


def test_the_history_store_is_private_capped_and_flushed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "state" / "history.db"
    store = HistoryStore(path, max_rows=3)
    for n in range(5):
        store.add(HistoryEntry(1000.0 + n, HistoryKind.COMMAND, f"command {n}", [], "ok", Outcome.ANSWERED))
    store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [e.heard for e in read_history(path)] == ["command 2", "command 3", "command 4"]  # the oldest went
    assert [e.heard for e in read_history(path, since=1004.0)] == ["command 4"]
    assert [e.heard for e in read_history(path, limit=1)] == ["command 4"]


def status_tracker(clock: Callable[[], float], up: bool = True) -> StatusTracker:
    probes = Probes(listener_up=lambda: up, phase=lambda: "listening", sessions_opened=lambda: 3,
                    session_age_s=lambda: 60.0, weak_matches=lambda: 1, inexact_reads=lambda: 2,
                    cost_today=lambda: {"listener": 0.01, "narrator": 0.02, "transcription": 0.0, "brain": 0.5})  # fmt: skip
    return StatusTracker(probes, heartbeat_s=15.0, clock=clock)


def test_the_status_file_is_written_atomically_and_privately(tmp_path: Path) -> None:
    now = [time.time()]
    tracker = status_tracker(lambda: now[0])
    _, _, core = history_of()
    core.timeline.on_add.append(tracker.observe)
    answer_a_command(core)  # three narrations, one routing error
    core.timeline.emit(ConnectAttemptFailed(1, "refused"))
    tracker.task_changed(7, "running", active=True)
    tracker.task_changed(8, "queued", active=True)
    tracker.task_changed(8, "cancelled", active=False)
    path = tmp_path / "status.json"
    write_status(path, tracker.snapshot(healthy=True))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left behind
    status = read_status(path)
    assert status is not None and status.pid == os.getpid()
    assert (status.session, status.reconnects, status.failed_attempts, status.narrations) == (3, 2, 1, 3)
    assert (status.weak_matches, status.inexact_reads, status.tasks_running, status.tasks_queued) == (1, 2, 1, 0)
    assert status.failures_today == 2 and status.cost_today_usd == 0.53
    assert status.cost_parts_usd == {"listener": 0.01, "narrator": 0.02, "transcription": 0.0, "brain": 0.5}
    assert liveness(status, now[0]) is Liveness.RUNNING
    assert liveness(status, now[0] + 46) is Liveness.UNHEALTHY  # more than three heartbeats old: stuck


def test_a_dead_or_reused_pid_means_not_running(tmp_path: Path) -> None:
    tracker = status_tracker(time.time)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    status = tracker.snapshot(healthy=True)
    status.pid = int(gone.stdout)
    assert liveness(status, time.time()) is Liveness.GONE
    status.pid, status.process_start = os.getpid(), (process_start(os.getpid()) or 0) + 1  # our pid, another start
    assert liveness(status, time.time()) is Liveness.GONE


@pytest.mark.parametrize(
    ("shift", "code", "first_line"),
    [(0, 0, "handoff is running (pid "), (120, 1, "handoff is unhealthy (pid ")],
)
def test_status_command_exit_codes(tmp_path: Path, capsys, monkeypatch, shift: float, code: int, first_line: str) -> None:
    monkeypatch.chdir(tmp_path)
    write_status(tmp_path / "status.json", status_tracker(lambda: time.time() - shift).snapshot(healthy=True))
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == code
    out = capsys.readouterr().out
    assert out.startswith(first_line)
    if code:
        assert "unhealthy: its status is 2 min old (it is rewritten every 15 s)" in out


def test_status_without_a_daemon(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 3
    assert capsys.readouterr().out.strip() == f"handoff is not running (no status file at {tmp_path / 'status.json'})."


def handoff_out(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = subprocess.run([sys.executable, "-m", "commands.cli", *args, "--state-dir", str(tmp_path / "state")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


async def test_status_and_history_of_a_daemon_on_the_simulator(tmp_path: Path, sim: SimServer) -> None:
    sim.script.push_transcript("I think we should paint the kitchen blue.")  # overheard
    sim.script.push_transcript("Computer, echo hello from the service")
    sim.script.push_tool_call("echo", {"text": "hello from the service"})
    sim.script.push_transcript("Computer, what time is it?")
    sim.script.push_tool_call("get_time", {})
    wav = spoken_wav(tmp_path / "mic.wav", utterances=3, seconds_after=120)
    env = daemon_env(tmp_path, sim.base_url)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await daemon.wait_line(r"narrated: answer", count=2)
        status_path = tmp_path / "state" / "status.json"

        def answered() -> bool:
            status = read_status(status_path)
            return status is not None and (status.last_command or {}).get("heard") == "what time is it?" \
                and status.last_command["outcome"] == "answered" and status.phase == "listening"

        await file_written(status_path.parent, answered)
        code, out = await asyncio.to_thread(handoff_out, tmp_path, "status")
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0].startswith("handoff is running (pid ") and lines[0].endswith(", now listening.")
        assert lines[1].startswith("listener: up, session 3 for ")  # a fresh session after each answer
        assert lines[2].startswith('last command: "what time is it?" at ') and lines[2].endswith(": get_time, answered")
        assert lines[3].startswith("narrations: 2 (")
        assert lines[4:6] == ["tasks: 0 running, 0 queued", "failures today: 0"]
        # The cost meter's estimate: the listener's routing responses, the narrator's two reads
        # (the simulator reports usage in every response.done) and the transcriptions.
        status = read_status(status_path)
        assert status is not None and status.cost_parts_usd is not None, lines
        parts = status.cost_parts_usd
        assert parts["listener"] > 0 and parts["narrator"] > 0 and parts["transcription"] > 0, parts
        assert parts["brain"] == 0  # no brain question asked
        assert status.cost_today_usd == sum(parts.values())
        assert lines[6] == (f"cost today: ${status.cost_today_usd:.4f} (listener ${parts['listener']:.4f}, "
                            f"narrator ${parts['narrator']:.4f}, transcription ${parts['transcription']:.4f}, brain $0.0000), "
                            "estimated from the usage the API reported")
        # Every command's stages, summarised (issue 20): both commands, end of speech to first audio.
        assert status.stages_ms is not None and status.stages_ms["commands"] == 2, (status.stages_ms, lines)
        assert len(lines) > 7 and lines[7].startswith("voice to voice (end of speech to first answer audio): p50 "), (lines, sorted(status.stages_ms))

        daemon.signal(signal.SIGTERM)
        assert await daemon.exited(timeout=10) == 0, daemon.log
    code, out = await asyncio.to_thread(handoff_out, tmp_path, "status")
    assert code == 3 and out.startswith("handoff is stopped, since ")
    code, out = await asyncio.to_thread(handoff_out, tmp_path, "history", "--today")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].endswith("  asked: echo hello from the service")
    assert lines[1].strip() == 'ran:   echo({"text": "hello from the service"})'
    assert lines[2].strip().startswith("said:  ") and "hello from the service" in lines[2]
    assert lines[3].endswith("  asked: what time is it?") and lines[4].strip() == "ran:   get_time({})"
    assert "kitchen" not in out  # overheard speech is not kept (nor logged word for word)
    assert "kitchen" not in daemon.log
    assert "ignored an utterance not addressed to me (8 words)" in daemon.log
    assert stat.S_IMODE((tmp_path / "state" / "history.db").stat().st_mode) == 0o600


def test_history_keeps_stages_and_room_and_reads_an_older_file(tmp_path) -> None:
    import sqlite3

    from service.history import HistoryEntry, HistoryKind, HistoryStore, Outcome, read_history

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:  # the first release's table, without stages or room
        db.execute("CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, kind TEXT NOT NULL,"
                   " heard TEXT NOT NULL, tools TEXT NOT NULL, said TEXT NOT NULL, outcome TEXT NOT NULL)")
        db.execute("INSERT INTO history (at, kind, heard, tools, said, outcome) VALUES (1, 'command', 'hi', '[]', '', 'answered')")
    assert [(e.heard, e.stages, e.room) for e in read_history(old)] == [("hi", {}, "")]

    store = HistoryStore(old, max_rows=10)
    store.add(HistoryEntry(2.0, HistoryKind.COMMAND, "what time is it", [], "ten", Outcome.ANSWERED,
                           {"end_of_speech": 0.0, "first_audio": 0.61}, "kitchen"))
    store.close()
    assert [(e.stages, e.room) for e in read_history(old)] == [({}, ""), ({"end_of_speech": 0.0, "first_audio": 0.61}, "kitchen")]


def test_every_status_field_is_checked_when_read(tmp_path) -> None:
    """A field added to Status without a check would make every status file unreadable."""
    import dataclasses
    import json

    from service.status import _FIELD_CHECKS, FORMAT_VERSION, Status, StatusCorrupt, read_status

    assert {f.name for f in dataclasses.fields(Status)} == set(_FIELD_CHECKS)
    status = Status(pid=1, process_start=None, started_at=1.0, updated_at=2.0, heartbeat_s=5.0)
    status.satellites = [{"room": "kitchen", "uri": "tcp://127.0.0.1:10700", "state": "connected", "reconnects": 1,
                          "last_command_at": None, "last_error": None}]
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"version": FORMAT_VERSION, **dataclasses.asdict(status)}))
    assert read_status(path).satellites == status.satellites
    path.write_text(json.dumps({"version": FORMAT_VERSION, **dataclasses.asdict(status), "satellites": [{"room": 3}]}))
    with pytest.raises(StatusCorrupt):
        read_status(path)


def test_stages_are_kept_with_the_command_and_summarised_small() -> None:
    from service.status import stage_summary
    done, _, core = history_of()
    answer_a_command(core)
    assert set(done[0].stages) >= {"route_sent", "call_received", "tool_done", "last_audio"}
    rows = [{"end_of_speech": 0.0, "commit": 0.5, "first_audio": 0.4 + n / 100} for n in range(100)]
    summary = stage_summary(rows)
    assert summary == {"commands": 100, "commit": [500, 500], "first_audio": [900, 1340], "voice_to_voice": [900, 1340]}


def test_a_command_routed_by_its_audio_gets_its_words_in_history_even_after_its_answer() -> None:
    done, _, core = history_of()
    send = core.handle(CommandCommitted("item_1"))[0]
    core.handle(RouteSent(send.route))
    (start,) = core.handle(RunTools("", (FunctionCall("c1", "get_time", "{}", "i1"),), session=core.session))
    core.handle(ToolStarted(start.command_id, "get_time", "{}"))
    core.handle(ToolsFinished(send.route, ("It's noon.",)))
    say(core)
    assert done == []  # its words are still to come
    core.handle(CommandConfirmed("item_1", "what time is it"))
    # a second one, withdrawn before anything was said: nothing of it is kept
    send = core.handle(CommandCommitted("item_2"))[0]
    core.handle(RouteSent(send.route))
    core.handle(CommandRejected("item_2", "the weather is nice"))
    assert [(e.heard, e.tools, e.said, e.outcome) for e in done] == [
        ("what time is it", ["get_time(...)"], "It's noon.", Outcome.ANSWERED)]


def test_an_answer_whose_words_never_came_is_kept_when_the_assistant_stops() -> None:
    done, _, core = history_of()
    send = core.handle(CommandCommitted("item_1"))[0]
    core.handle(RouteSent(send.route))
    core.handle(RunTools("", (FunctionCall("c1", "get_time", "{}", "i1"),), session=core.session))
    core.handle(ToolsFinished(send.route, ("It's noon.",)))
    say(core)
    core.settle_commands()
    assert [(e.heard, e.outcome) for e in done] == [("", Outcome.ANSWERED)]
