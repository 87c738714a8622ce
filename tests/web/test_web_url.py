"""`handoff web-url`: the page's address, with its token when WEB_HOST opens it (issue 22)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from commands.cli import main
from web.token import load_or_create_token, same_token


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    for key in ("WEB_PORT", "WEB_HOST", "WEB_METRICS_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HANDOFF_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_by_default_the_page_is_on_this_machine_with_its_token(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web-url"]) == 1  # the daemon has not made one yet
    assert "start it with `handoff run` first" in capsys.readouterr().err
    token = load_or_create_token(state)
    assert main(["web-url"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:8788/?token={token}\n"


def test_with_web_host_set_the_address_carries_the_token(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("WEB_HOST", "0.0.0.0")
    monkeypatch.setenv("WEB_PORT", "9000")
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


def test_a_bad_port_is_one_sentence(state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WEB_PORT", "99999")
    assert main(["web-url"]) == 2
    assert "WEB_PORT=99999 is not a port" in capsys.readouterr().err


def test_tokens_compare_whole() -> None:
    assert same_token("abc", "abc") and not same_token("abd", "abc") and not same_token("ab", "abc") and not same_token(None, "abc")
