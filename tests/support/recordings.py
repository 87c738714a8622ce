"""Loads the sessions recorded against the live Realtime API (tests/fixtures/realtime-recorded).
A missing recording fails the test that needs it: it is part of the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

RECORDINGS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "realtime-recorded"


def recording_paths() -> list[Path]:
    paths = sorted(RECORDINGS_DIR.glob("*.yaml"))
    assert paths, f"no recorded sessions found in {RECORDINGS_DIR}"
    return paths


def load_recording(name: str) -> list[dict[str, Any]]:
    path = RECORDINGS_DIR / name
    assert path.is_file(), f"recorded session {name} not found in {RECORDINGS_DIR}"
    return yaml.safe_load(path.read_text())["interactions"]


def received_events(name: str) -> list[dict[str, Any]]:
    return [i["data"] for i in load_recording(name) if i["kind"] == "message" and i["direction"] == "received"]
