"""Runs one program as a task: its own session and process group, output streamed to a sink,
ended by exit, time limit or a stop request, and never leaving a process behind.

A task's processes are found two ways: its process group, and a marker in the environment
(`HANDOFF_TASK=<token>`) that every descendant inherits, so a child that calls setsid and
leaves the group is still found. Stopping is SIGTERM to all of them, a grace period, then
SIGKILL to whatever is left. The leader gets PR_SET_PDEATHSIG, so it dies with the daemon
even on kill -9; whatever it left is found by its marker at the next start (`stop_marked`).
This is the only async part of a task; what the outcome *means* is decided by `tasks.state`.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tasks.state import StopReason

log = logging.getLogger(__name__)


MARKER = "HANDOFF_TASK"
_PR_SET_PDEATHSIG = 1
# Environment variables a task never inherits unless its template names them (`env = [...]`).
_SECRET_NAME = re.compile(r"^OPENAI_")


class LaunchError(Exception):
    """The program could not be started; the message says why in plain words."""


def task_environment(
    base: Mapping[str, str], token: str, secrets: Sequence[str], passed: Sequence[str] = ()
) -> dict[str, str]:
    """`base` without OpenAI settings or any variable holding a configured secret, whole or as
    a part (`TOKEN=Bearer <key>`), unless named in `passed`; plus the marker that identifies
    the task's processes."""
    secret_values = {s for s in secrets if s}
    env = {
        name: value
        for name, value in base.items()
        if name in passed or not (_SECRET_NAME.match(name) or any(s in value for s in secret_values))
    }
    env[MARKER] = token
    return env


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL it when the daemon's thread dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def marked_processes(token: str) -> list[int]:
    """Live processes whose environment carries `MARKER=token` (zombies have none)."""
    needle = f"{MARKER}={token}".encode() + b"\0"
    found = []
    me = os.getpid()
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    environ = handle.read() + b"\0"
            except OSError:
                continue  # gone, or not ours to read
            if b"\0" + needle in b"\0" + environ:
                found.append(int(entry.name))
    return found


def _signal_marked(token: str, sig: int) -> bool:
    """Signal every process carrying the marker; True if there were any."""
    pids = marked_processes(token)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return bool(pids)


async def stop_marked(token: str, grace_s: float, poll_s: float = 0.02) -> int:
    """Stop whatever a task left running when the daemon died (found by its marker): SIGTERM,
    then SIGKILL after `grace_s`. Returns how many processes were found."""
    count = len(marked_processes(token))
    if not _signal_marked(token, signal.SIGTERM):
        return 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while marked_processes(token) and loop.time() < deadline:
        await asyncio.sleep(poll_s)  # nothing signals that a process has died unless it is our child
    _signal_marked(token, signal.SIGKILL)
    return count


class _OutputProtocol(asyncio.SubprocessProtocol):
    """Hands output to the sink as it arrives and reports exit and pipe closing separately:
    the leader can exit while a child still holds the pipe open."""

    def __init__(self, sink: Callable[[bytes], None], exited: asyncio.Future[None], closed: asyncio.Future[None]):
        self._sink = sink
        self._exited = exited
        self._closed = closed

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._sink(data)

    def process_exited(self) -> None:
        if not self._exited.done():
            self._exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)


class ProcessRunner:
    """Runs programs for tasks; holds only the timing settings, no per-run state."""

    def __init__(self, kill_grace_s: float, drain_s: float, poll_s: float = 0.02) -> None:
        self._kill_grace_s = kill_grace_s
        self._drain_s = drain_s
        self._poll_s = poll_s

    async def run(
        self,
        argv: Sequence[str],
        cwd: str,
        sink: Callable[[bytes], None],
        *,
        timeout_s: float,
        stop: asyncio.Future[StopReason],
        on_started: Callable[[int], None],
        on_stop: Callable[[StopReason], None],
        env: Mapping[str, str],
    ) -> int:
        """Run `argv` to the end and return its exit code (negative: killed by that signal).

        `stop` resolving (with a reason such as "cancel") or `timeout_s` passing stops the whole
        process group; `on_stop(reason)` is called first ("timeout" for the time limit).
        Raises LaunchError if it cannot start. If this coroutine is cancelled (handoff is
        shutting down), the group is stopped before the cancellation goes on. `env` must hold
        the task's MARKER: it is how processes that left the group are found.
        """
        token = env[MARKER]
        if not Path(cwd).is_dir():
            raise LaunchError(f"its working folder {cwd} does not exist")
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        closed: asyncio.Future[None] = loop.create_future()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _OutputProtocol(sink, exited, closed),
                *argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so stopping it reaches its children
                env=dict(env),
                preexec_fn=_die_with_parent,
            )
        except FileNotFoundError as exc:
            raise LaunchError(f"the program {argv[0]} was not found") from exc
        except PermissionError as exc:
            raise LaunchError(f"the program {argv[0]} is not allowed to run") from exc
        except OSError as exc:
            raise LaunchError(f"the program {argv[0]} failed to start: {exc.strerror or exc}") from exc

        pgid = transport.get_pid()
        try:
            on_started(pgid)
            either: set[asyncio.Future[Any]] = {exited, stop}
            await asyncio.wait(either, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                on_stop(stop.result() if stop.done() else "timeout")
                await self._stop_group(pgid, token, exited)
            elif group_alive(pgid) or marked_processes(token):
                # The program ended but left processes behind; they belong to this task.
                await self._stop_group(pgid, token, exited)
            # The last output may still be in the pipe after the exit is reported.
            await asyncio.wait({closed}, timeout=self._drain_s)
            return_code = transport.get_returncode()
            return return_code if return_code is not None else -signal.SIGKILL
        except BaseException:
            # Cancelled (handoff is closing) or a bug: either way its processes must not outlive it.
            await self._stop_group(pgid, token, exited)
            raise
        finally:
            transport.close()

    async def _stop_group(self, pgid: int, token: str, exited: asyncio.Future[None]) -> None:
        """SIGTERM to the group and every marked process; SIGKILL to whatever is still alive
        after the grace period. Returns once all are gone (or, after SIGKILL, a bounded wait)."""
        _signal_group(pgid, signal.SIGTERM)
        _signal_marked(token, signal.SIGTERM)
        if await self._all_gone(pgid, token, exited, self._kill_grace_s):
            return
        log.info("task process group %s outlived SIGTERM by %.1fs; sending SIGKILL", pgid, self._kill_grace_s)
        _signal_group(pgid, signal.SIGKILL)
        _signal_marked(token, signal.SIGKILL)
        # SIGKILL cannot be ignored; the bound only guards a process stuck inside the kernel.
        if not await self._all_gone(pgid, token, exited, max(self._kill_grace_s, 1.0)):
            log.warning("task process group %s survived SIGKILL", pgid)

    async def _all_gone(self, pgid: int, token: str, exited: asyncio.Future[None], within_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        if not exited.done():
            await asyncio.wait({exited}, timeout=within_s)
        while group_alive(pgid) or marked_processes(token):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(self._poll_s)  # nothing signals that a process group has emptied
        return exited.done()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # already gone


def group_alive(pgid: int) -> bool:
    """True while any process of the group is alive. Zombies do not count: they are dead, just
    not yet reaped by whoever adopted them (some container inits never reap)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell zombies apart here; killpg said something is there
    with os.scandir(proc) as entries:
        return any(entry.name.isdigit() and process_state(int(entry.name), pgid) == "alive" for entry in entries)


def process_state(pid: int, pgid: int | None = None) -> str:
    """"alive", "zombie" or "gone" for `pid` (via /proc; "gone" also if it left group `pgid`)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return "gone"
    # The command name in parentheses may itself contain spaces or parentheses.
    fields = stat[stat.rfind(b")") + 2 :].split()
    state, group = fields[0], int(fields[2])
    if pgid is not None and group != pgid:
        return "gone"
    return "zombie" if state in (b"Z", b"X") else "alive"
