"""The control socket `handoff tasks start` / `cancel` use to reach the running assistant."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from tasks import TaskConfig, TaskError, TaskManager, TaskSettings, TaskStore, TaskTemplate
from tasks.control import ControlServer, NotRunning, ask


async def test_requests_are_answered_also_at_a_path_too_long_for_a_unix_socket(tmp_path: Path) -> None:
    settings = TaskSettings(state_dir=tmp_path / ("deep" * 30) / "state")
    assert len(str(settings.control_path)) > 108
    store = TaskStore(settings.db_path)
    config = TaskConfig(templates=(TaskTemplate(name="nap", argv=("sleep", "30"), cwd=tmp_path),))
    manager = TaskManager(config, store, settings)
    await manager.start()
    settings.control_path.touch()  # a stale file left by a killed assistant is replaced
    server = ControlServer(manager, settings.control_path)
    await server.start()
    try:
        assert stat.S_IMODE(settings.control_path.stat().st_mode) == 0o600
        started = await asyncio.to_thread(ask, settings.control_path, {"op": "start", "name": "nap", "params": {}}, 10.0)
        assert started["ok"] and started["task"]["status"] == "running"
        refused = await asyncio.to_thread(ask, settings.control_path, {"op": "start", "name": "nope"}, 10.0)
        assert refused == {"ok": False, "error": "There is no task template called 'nope'. The templates are: nap."}
        odd = await asyncio.to_thread(ask, settings.control_path, {"op": "rm"}, 10.0)
        assert odd == {"ok": False, "error": "The request was not understood."}

        second = ControlServer(manager, settings.control_path)  # another assistant on the same folder
        await second.start()
        await second.close()
        cancelled = await asyncio.to_thread(ask, settings.control_path, {"op": "cancel", "task": 1}, 10.0)
        assert cancelled["ok"] and cancelled["cancelled"] and cancelled["task"]["status"] == "cancelled"
    finally:
        await server.close()
        await manager.close()
        store.close()
    assert not settings.control_path.exists()
    with pytest.raises(NotRunning, match="^handoff is not running on "):
        ask(settings.control_path, {"op": "cancel", "task": 1}, 1.0)


async def test_garbage_on_the_socket_gets_a_refusal_not_a_crash(tmp_path: Path) -> None:
    settings = TaskSettings(state_dir=tmp_path / "state")
    store = TaskStore(settings.db_path)
    manager = TaskManager(TaskConfig(), store, settings)
    await manager.start()
    server = ControlServer(manager, settings.control_path)
    await server.start()

    def send_raw(data: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(10)
            client.connect(str(settings.control_path))
            client.sendall(data)
            return client.recv(4096)

    try:
        assert await asyncio.to_thread(send_raw, b"not json\n") == b'{"ok": false, "error": "The request was not understood."}\n'
        assert await asyncio.to_thread(send_raw, b"[1, 2]\n") == b'{"ok": false, "error": "The request was not understood."}\n'
        # Issue 23, defect 14: 30,000 nested brackets got no reply (a RecursionError in the log).
        deep = await asyncio.to_thread(send_raw, b"[" * 30_000 + b"\n")
        assert json.loads(deep) == {"ok": False, "error": "The request was not understood: it is nested too deeply."}
        assert await asyncio.to_thread(send_raw, b"[1, 2]\n")  # still serving
    finally:
        await server.close()
        await manager.close()
        store.close()


@pytest.mark.parametrize("answer", [b'{"ok": true, "task": {"id"', b"[1, 2]\n"], ids=["cut-short", "not-an-object"])
async def test_an_answer_that_cannot_be_read_is_one_sentence_not_a_traceback(answer: bytes) -> None:
    # An assistant stopped while answering leaves half a reply; the command line says so in a sentence.
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(answer)
        await writer.drain()
        writer.close()

    with tempfile.TemporaryDirectory(prefix="ctl") as folder:  # a unix socket's path must be short
        path = Path(folder) / "control.sock"
        server = await asyncio.start_unix_server(reply, path=str(path))
        try:
            with pytest.raises(TaskError, match=r"^handoff's answer could not be read \(it may have stopped"):
                await asyncio.to_thread(ask, path, {"op": "cancel", "task": 1}, 10.0)
        finally:
            server.close()
            await server.wait_closed()
