"""Loads the sessions recorded against the live Realtime API (../shared/fixtures/realtime-recorded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

RECORDINGS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "realtime-recorded"


def recording_paths() -> list[Path]:
    return sorted(RECORDINGS_DIR.glob("*.yaml")) if RECORDINGS_DIR.is_dir() else []


def load_recording(name: str) -> list[dict[str, Any]]:
    path = RECORDINGS_DIR / name
    if not path.is_file():
        pytest.skip(f"recorded sessions not found at {RECORDINGS_DIR} (the repository sits beside ../shared)")
    return yaml.safe_load(path.read_text())["interactions"]


def received_events(name: str) -> list[dict[str, Any]]:
    return [i["data"] for i in load_recording(name) if i["kind"] == "message" and i["direction"] == "received"]
