"""A daemon with its page on, for the web tests (this module holds no tests)."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from tests.support.audio_helpers import write_wav
from tests.support.daemon import SILENCE_1S, handoff_command
from tests.support.pipeline_harness import UTTERANCE


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wav_with_commands(path: Path, utterances: int, lead_s: float, seconds_after: float) -> Path:
    """`lead_s` of silence (time for a browser to open the page), then the utterances, 2 s apart."""
    pcm = bytes(int(48000 * lead_s)) + (UTTERANCE + 2 * SILENCE_1S) * utterances + bytes(int(48000 * seconds_after))
    return write_wav(path, pcm)


async def handoff(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Another `handoff` command (web-url, history) against the same state folder."""
    process = await asyncio.create_subprocess_exec(*handoff_command(), *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)  # fmt: skip
    out, err = await process.communicate()
    sys.stderr.write(err.decode())
    assert process.returncode is not None
    return process.returncode, out.decode()
