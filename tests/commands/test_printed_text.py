"""What `handoff history` and `handoff status` print of what the model and the transcriber said:
no raw control characters (a retitled or cleared terminal, a forged line) and never the key,
even from a history or status file written before the fix (issue 23, defects 1 and 6).
tests/service/test_secrets_daemon.py does the same through a running daemon."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from commands import cli
from service.history import HISTORY_FILE, HistoryEntry, HistoryKind, HistoryStore, Outcome
from service.status import STATUS_FILE, Status, write_status
from decisions.coordinator import ToolDone, ToolStarted, ToolsFinished
from decisions.listener_core import RunTools
from realtime_api.wire import FunctionCall

KEY = "handoff-test-key-Q7w9zXv3LmN2pR8t"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\rsay\n2026-01-01 00:00:00  asked: FORGED"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "HANDOFF_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return tmp_path / "state"


def test_history_prints_hostile_text_escaped_and_without_the_key(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = HistoryStore(state / HISTORY_FILE, max_rows=10)
    store.add(HistoryEntry(time.time(), HistoryKind.COMMAND, heard=HOSTILE, tools=[f'echo({{"text": "{HOSTILE}"}})'],
                           said=f"the key is {KEY}. {HOSTILE}", outcome=Outcome.ANSWERED))  # fmt: skip
    store.close()
    assert cli.main(["history", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert not RAW_CONTROL.findall(out) and KEY not in out
    lines = out.splitlines()
    assert len(lines) == 3 and not any(line.startswith("2026-01-01") for line in lines), out
    assert lines[0].endswith("asked: \\x1b]0;pwned\\x07\\x1b[2J\\rsay\\n2026-01-01 00:00:00  asked: FORGED")
    assert "said:  the key is [redacted]." in lines[2]


def test_status_prints_the_last_command_escaped_and_without_the_key(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state.mkdir()
    now = time.time()
    write_status(state / STATUS_FILE, Status(pid=os.getpid(), process_start=None, started_at=now, updated_at=now, heartbeat_s=15.0,
                                             phase="listening\x1b[2J", last_command={"heard": f"{HOSTILE} {KEY}", "at": now,
                                             "tools": [f"echo{HOSTILE}(x)"], "outcome": "answered"}))  # fmt: skip
    cli.main(["status", "--state-dir", str(state)])
    out = capsys.readouterr().out
    assert not RAW_CONTROL.findall(out) and KEY not in out
    assert "now listening\\x1b[2J." in out
    assert 'last command: "\\x1b]0;pwned\\x07\\x1b[2J\\rsay\\n2026-01-01 00:00:00  asked: FORGED [redacted]" at ' in out


async def test_the_status_file_and_the_history_never_keep_the_key(tmp_path: Path) -> None:
    # The key said aloud ("computer, remember <key>") or come from anywhere else: what the
    # daemon writes for `handoff status` and `handoff history` has it cut out (issue 23, defect 1).
    from decisions.events import ToolOutcome
    from service.health import ListenerHealth
    from service.notify import SystemdNotifier
    from service.runtime import ServiceRuntime, StatusFiles
    from tests.service.test_status import command, history_of, say

    state = tmp_path / "state"
    state.mkdir()
    files = StatusFiles(state / STATUS_FILE, HistoryStore(state / HISTORY_FILE, 10), secrets=(KEY,))
    _, _, core = history_of()  # a real coordinator core: the events the daemon's timeline carries
    async with ServiceRuntime(core.timeline, SystemdNotifier({}), ListenerHealth(stuck_after_s=60.0), None, files):
        route = command(core, f"remember {KEY}")
        (start,) = core.handle(RunTools(f"remember {KEY}", (FunctionCall("c1", "echo", f'{{"text": "{KEY}"}}', "i1"),),
                                        session=core.session))  # fmt: skip
        core.handle(ToolStarted(start.command_id, "echo", f'{{"text": "{KEY}"}}'))
        core.handle(ToolDone(start.command_id, "echo", ToolOutcome.OK, KEY))
        core.handle(ToolsFinished(route, (f"You said {KEY}.",)))
        say(core)
    written = (state / STATUS_FILE).read_text() + (state / HISTORY_FILE).read_bytes().decode("latin-1")
    assert "remember [redacted]" in written and "You said [redacted]." in written and "echo(" in written
    assert KEY not in written
