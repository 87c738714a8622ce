"""The running assistant's control socket, so the command line can do what the voice can:
`handoff tasks start NAME [PARAM=VALUE...]` and `handoff tasks cancel ID` ask the assistant,
whose task manager then starts or cancels the task exactly as the voice tools would. The task
runs under the one manager that owns the notice queue, so its outcome is announced exactly
once, like any other (a second manager on the same store would neither hear of the notice nor
know the task was still running).

Without a running assistant nothing is started: the command says so and exits 3.

Protocol: one JSON request line, one JSON reply line, over a Unix socket at
`<state_dir>/tasks/control.sock`. The folder is 0700 and the socket 0600, so only the user can
connect. Requests: {"op": "start", "name": ..., "params": {...}}, {"op": "cancel", "task": ...};
replies: {"ok": true, "task": {...}} ({"cancelled": bool} too for cancel) or {"ok": false,
"error": "<one sentence>"}.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from tasks.errors import AmbiguousTask, TaskError
from tasks.identify import written_candidates
from tasks.records import TaskRecord

if TYPE_CHECKING:
    from tasks.manager import TaskManager

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024
_MAX_UNIX_PATH = 100  # sun_path holds 108 bytes on Linux; longer paths go through /proc/self/fd


class NotRunning(TaskError):
    """No assistant answers on the control socket."""


@contextlib.contextmanager
def _socket_path(path: Path) -> Iterator[str]:
    """`path` as something bind/connect accept: itself, or, when too long for a Unix socket
    address, the same file reached through a descriptor of its folder."""
    if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def record_data(record: TaskRecord) -> dict[str, Any]:
    return {"id": record.id, "name": record.name, "spoken": record.spoken, "status": str(record.status),
            "error": record.error}  # fmt: skip


class ControlServer:
    """Serves the control socket for one task manager while the assistant runs."""

    def __init__(self, manager: "TaskManager", path: Path) -> None:
        self._manager = manager
        self._path = Path(path)
        self._server: asyncio.AbstractServer | None = None
        # `handoff say --room ROOM TEXT`: (text, room or "all") -> None, or why not (the hub sets it).
        self.on_announce: Callable[[str, str], str | None] | None = None

    async def start(self) -> None:
        """Listen, unless another assistant already serves this state folder (then log it: two
        assistants on one task list would each take the other's tasks for interrupted)."""
        if await asyncio.to_thread(_answers, self._path):
            log.warning("another handoff is already running on %s; `handoff tasks start` will reach that one",
                        self._path.parent)  # fmt: skip
            return
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()  # left behind by an assistant that was killed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _socket_path(self._path) as address:
                listener.bind(address)
            os.chmod(self._path, 0o600)
            self._server = await asyncio.start_unix_server(self._serve, sock=listener, limit=MAX_REQUEST_BYTES)
        except BaseException:
            listener.close()
            raise

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        await self._server.wait_closed()
        self._server = None
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await reader.readline()
                request = json.loads(line)
            except (ValueError, asyncio.LimitOverrunError):  # includes JSONDecodeError
                reply: dict[str, Any] = {"ok": False, "error": "The request was not understood."}
            except RecursionError:  # thousands of nested brackets: no request of ours looks like that
                reply = {"ok": False, "error": "The request was not understood: it is nested too deeply."}
            else:
                try:
                    reply = await self.answer(request)
                except Exception:  # a bug: logged with its traceback; the assistant goes on
                    log.exception("control request %r failed", request)
                    reply = {"ok": False, "error": "handoff hit an internal error; the details are in its log."}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except ConnectionError:
            pass  # the command gave up waiting (Ctrl-C): nobody to tell
        finally:
            writer.close()

    async def answer(self, request: object) -> dict[str, Any]:
        """The reply to one request; a task error is one sentence for the command line to print."""
        if not isinstance(request, dict):
            return {"ok": False, "error": "The request was not understood."}
        op, params = request.get("op"), request.get("params", {})
        try:
            if op == "start" and isinstance(request.get("name"), str) and isinstance(params, dict):
                record = await self._manager.start_task(request["name"], params)
                return {"ok": True, "task": record_data(record)}
            if op == "announce" and isinstance(request.get("text"), str) and isinstance(request.get("room"), str):
                if self.on_announce is None:
                    return {"ok": False, "error": "The running handoff has no rooms (SATELLITES is empty there)."}
                problem = self.on_announce(request["text"], request["room"])
                return {"ok": problem is None, **({"error": problem} if problem else {})}
            if op == "cancel" and isinstance(request.get("task"), (str, int)):
                outcome = await self._manager.cancel(request["task"])
                return {"ok": True, "task": record_data(outcome.record), "cancelled": outcome.stopped}
        except AmbiguousTask as exc:  # the question is spoken; the command line writes the choices
            return {"ok": False, "error": str(exc), "count": len(exc.candidates),
                    "candidates": written_candidates(exc.candidates)}
        except TaskError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": "The request was not understood."}


def _answers(path: Path) -> bool:
    """True if something accepts connections on the socket at `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _socket_path(path) as address:
            probe.connect(address)
        return True
    except OSError:  # missing, refused (stale), not a socket
        return False
    finally:
        probe.close()


def ask(path: Path, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one request to the running assistant and return its reply (blocking: for the CLI).
    Raises NotRunning when no assistant answers, TimeoutError when it does not reply in time."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout_s)
    try:
        try:
            with _socket_path(path) as address:
                client.connect(address)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            raise NotRunning(
                f"handoff is not running on {path.parent.parent} (nothing answers at {path}), so nothing "
                "was started or cancelled; start it with `./run` (in its folder)."
            ) from None
        client.sendall(json.dumps(request).encode() + b"\n")
        reply = bytearray()
        while not reply.endswith(b"\n"):
            chunk = client.recv(65536)
            if not chunk:
                break
            reply += chunk
        if not reply:
            raise TaskError("handoff closed the connection without answering; the details are in its log.")
        try:
            answer = json.loads(reply)
        except (ValueError, RecursionError):  # cut short (it stopped while answering), or not handoff
            answer = None
        if not isinstance(answer, dict):
            raise TaskError("handoff's answer could not be read (it may have stopped while answering); "
                            "see its log.")  # fmt: skip
        return answer
    finally:
        client.close()
