"""`handoff web-url`: the page's address, with its token when WEB_HOST opens it (issue 22)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from commands.cli import main
from service.status import STATUS_FILE, Status, process_start, write_status
from web.token import load_or_create_token, same_token


def running(state: Path) -> None:
    """A status file as a running daemon writes it (this process stands in for it)."""
    now = time.time()
    state.mkdir(parents=True, exist_ok=True)
    write_status(state / STATUS_FILE, Status(pid=os.getpid(), process_start=process_start(os.getpid()), started_at=now,
                                             updated_at=now, heartbeat_s=15.0, phase="listening", listener_up=True))  # fmt: skip


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    for key in ("WEB_PORT", "WEB_HOST", "WEB_METRICS_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HANDOFF_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_by_default_the_page_is_on_this_machine_with_its_token(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    running(state)
    assert main(["web-url"]) == 1  # the daemon has not made one yet
    assert "start it with `handoff run` first" in capsys.readouterr().err
    token = load_or_create_token(state)
    assert main(["web-url"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:8788/?token={token}\n"


def test_with_web_host_set_the_address_carries_the_token(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("WEB_HOST", "0.0.0.0")
    monkeypatch.setenv("WEB_PORT", "9000")
    running(state)
    assert main(["web-url"]) == 1  # the daemon has not made one yet
    assert "start it with `handoff run` first" in capsys.readouterr().err
    token = load_or_create_token(state)
    assert stat.S_IMODE((state / "web-token").stat().st_mode) == 0o600
    assert load_or_create_token(state) == token  # kept, not made again
    assert main(["web-url"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:9000/?token={token}\n"


def test_no_page_says_so(state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WEB_PORT", "0")
    assert main(["web-url"]) == 1
    assert "WEB_PORT=0" in capsys.readouterr().err


def test_with_nothing_running_there_is_no_address(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 28, item 14: it printed an address nothing served, and exit 0.
    assert main(["web-url"]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "handoff is not running, so nothing serves its page on port 8788; start it with `handoff run` first.\n"
    running(state)
    write_status(state / STATUS_FILE, Status(pid=os.getpid(), process_start=process_start(os.getpid()), started_at=1.0,
                                             updated_at=2.0, heartbeat_s=15.0, phase="stopped"))  # fmt: skip
    assert main(["web-url"]) == 3  # it stopped


def test_a_bad_port_in_env_is_one_sentence_and_the_default_is_read(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    # Issue 28, item 5: a typo made while the daemon runs must not hide its page.
    (state.parent / ".env").write_text("WEB_PORT=abc\n")
    running(state)
    token = load_or_create_token(state)
    assert main(["web-url"]) == 0
    out, err = capsys.readouterr()
    assert out == f"http://127.0.0.1:8788/?token={token}\n"
    assert err == ("handoff: WEB_PORT=abc is not a whole number of at least 0; set it in .env or the environment "
                   "(`handoff web-url` reads it as its default meanwhile; `handoff run` refuses it).\n")


def test_tokens_compare_whole() -> None:
    assert same_token("abc", "abc") and not same_token("abd", "abc") and not same_token("ab", "abc") and not same_token(None, "abc")
