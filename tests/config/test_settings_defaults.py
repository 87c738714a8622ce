"""One source of defaults: the settings a user gets with nothing set (ENV_DEFAULTS, through the
checks) are the settings the dataclasses make on their own (`Settings()`, as tests and the demo
build them). Once, `ListenerSettings().wake_phrase` said "computer" while the default was "hey jarvis"."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator

import pytest

from config.settings import ENV_DEFAULTS, Settings, build_settings, resolve_env

# Derived from the state folder when built from the environment; `Settings()` leaves them unset
# (no task templates, no MCP servers) so a test meets no file of the user's.
FROM_THE_STATE_FOLDER = {"tasks_config", "mcp_config"}


def disagreements(built: Any, made: Any, path: str = "") -> Iterator[str]:
    if dataclasses.is_dataclass(built) and type(built) is type(made):
        for f in dataclasses.fields(built):
            if not path and f.name in FROM_THE_STATE_FOLDER:
                continue
            yield from disagreements(getattr(built, f.name), getattr(made, f.name), f"{path}.{f.name}")
    elif built != made:
        yield f"Settings(){path} is {made!r}, but the environment's default gives {built!r}"


def test_the_dataclass_defaults_are_the_environment_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the default workspace and state folder live there
    built = build_settings(resolve_env(cli={}, environ={}, dotenv_path=None))
    assert list(disagreements(built, Settings())) == []


def test_the_check_sees_a_default_that_disagrees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setitem(ENV_DEFAULTS, "WAKE_PHRASE", "computer")
    monkeypatch.setitem(ENV_DEFAULTS, "WEB_PORT", "8789")
    built = build_settings(resolve_env(cli={}, environ={}, dotenv_path=None))
    found = list(disagreements(built, Settings()))
    assert any(".listener.wake_phrase" in line and "'computer'" in line for line in found), found
    assert any(".web.port" in line for line in found), found
