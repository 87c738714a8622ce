"""`handoff run` as a real daemon process, for the tests that signal it, read its status file
and history (this module holds no tests). Its log lines are read as they come, and waited for
(`wait_line`), never slept for."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import AsyncIterator

from concurrency.changes import Changes
from tests.support.audio_helpers import write_wav
from tests.support.pipeline_harness import UTTERANCE

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-daemon-test-0123456789"
SILENCE_1S = bytes(48000)


def handoff_command() -> list[str]:
    """The installed entry point next to this Python (`.venv/bin/handoff`), else the module."""
    script = Path(sys.executable).parent / "handoff"
    return [str(script)] if script.exists() else [sys.executable, "-m", "commands.cli"]


def daemon_env(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HANDOFF_", "LOG_", "NOTIFY_", "WATCHDOG_"))}
    env.update(PYTHONPATH=str(REPO), OPENAI_API_KEY=KEY, OPENAI_BASE_URL=base_url, HANDOFF_STATE_DIR=str(tmp_path / "state"),
               WORKSPACE_ROOT=str(tmp_path), XDG_RUNTIME_DIR=str(tmp_path),
               # The WAV "speaks" in tones the simulator's VAD hears; the on-device VAD rightly
               # does not call a tone speech, so these daemons send the continuous stream.
               HANDOFF_UPLOAD_MODE="continuous",
               # The scripted transcripts address it as "computer" (the default phrase is "hey jarvis").
               WAKE_PHRASE="computer",
               # Chatter right after an answer must stay overheard here: no follow-up window.
               FOLLOW_UP_WINDOW_S="0",
               # Many daemons run at once here: no page unless a test asks for one (on a port of its own).
               WEB_PORT="0",
               # They are spoken to in flite's voice, which the wake verifier (on by default, trained to
               # judge people's voices) refuses as often as not; its own tests run it (tests/detectors).
               WAKE_VERIFY="false")  # fmt: skip
    env.update(extra)
    return env


def spoken_wav(path: Path, utterances: int, seconds_after: float) -> Path:
    """Half a second of silence, then `utterances` short utterances (the simulator's VAD hears
    them; what they say is scripted), then silence: a WAV microphone that lasts."""
    pcm = bytes(24000) + (UTTERANCE + SILENCE_1S) * utterances + bytes(int(48000 * seconds_after))
    return write_wav(path, pcm)


class Daemon:
    """A running `handoff run`: its stderr lines, collected as they arrive."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = Changes()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._changed.notify()
        self._changed.notify()

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    async def wait_line(self, pattern: str, timeout: float = 60.0, count: int = 1) -> str:
        """The `count`-th log line matching the regex `pattern`, once it has been written."""
        regex = re.compile(pattern)

        def found() -> bool:
            return sum(bool(regex.search(line)) for line in self.lines) >= count or self._reader.done()

        try:
            await self._changed.wait_until(found, timeout)
        except TimeoutError:
            raise AssertionError(f"no line matching {pattern!r} within {timeout} s; the log so far:\n{self.log}") from None
        matching = [line for line in self.lines if regex.search(line)]
        assert len(matching) >= count, f"the daemon ended without {pattern!r}:\n{self.log}"
        return matching[count - 1]

    def signal(self, sig: signal.Signals = signal.SIGTERM) -> None:
        self.process.send_signal(sig)

    async def exited(self, timeout: float) -> int:
        """Its exit code; AssertionError if it is still running after `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):
                code = await self.process.wait()
        except TimeoutError:
            raise AssertionError(f"handoff still running {timeout} s later; its log:\n{self.log}") from None
        await self._reader
        return code


@contextlib.asynccontextmanager
async def running_daemon(tmp_path: Path, env: dict[str, str], *args: str, command: str = "run") -> AsyncIterator[Daemon]:
    """`handoff run ARGS` (or another `command`, e.g. "sim") with its stderr read as it comes."""
    process = await asyncio.create_subprocess_exec(
        *handoff_command(), command, *args, cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    daemon = Daemon(process)
    try:
        yield daemon
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await daemon._reader
