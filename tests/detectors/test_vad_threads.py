"""Silero runs on the thread that feeds it (issue 34: OpenMP's spinning threads were most of what a
window cost), and nothing the assistant starts inherits the limit that makes it so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A fresh interpreter: the limit only acts where the wheel's libgomp is first loaded.
_PROBE = """
import json, os, sys
from pathlib import Path
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
from detectors.vad import SileroVad
vad = SileroVad()
pcm = Path(sys.argv[1]).read_bytes()
for i in range(0, len(pcm), 960):
    vad.feed(pcm[i : i + 960])
print(json.dumps({"before": before, "after": threads(), "windows": vad.windows_run,
                  "limit": os.environ.get("OMP_THREAD_LIMIT")}))
"""


def _probe(tmp_path: Path, speech: bytes, **env: str) -> dict:
    clip = tmp_path / "speech.pcm"
    clip.write_bytes(speech)
    environment = {k: v for k, v in os.environ.items() if k != "OMP_THREAD_LIMIT"} | env
    environment["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", _PROBE, str(clip)], capture_output=True, text=True,
                          env=environment, cwd=REPO, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_silero_starts_no_threads_and_leaves_no_limit_behind(tmp_path, small_corpus):
    seen = _probe(tmp_path, small_corpus[0][0].pcm)
    assert seen["windows"] > 0, "the clip never reached Silero"
    assert seen["after"] == seen["before"], f"Silero started {seen['after'] - seen['before']} threads"
    assert seen["limit"] is None, "the limit leaked into the environment children inherit"


def test_a_limit_the_user_set_is_left_as_it_was(tmp_path, small_corpus):
    seen = _probe(tmp_path, small_corpus[0][0].pcm, OMP_THREAD_LIMIT="2")
    assert seen["windows"] > 0
    assert seen["limit"] == "2"
