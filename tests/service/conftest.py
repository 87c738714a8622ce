"""A fake service manager: a datagram socket bound where NOTIFY_SOCKET points."""

from __future__ import annotations

import asyncio
import socket
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from concurrency.changes import Changes


class FakeManager:
    """Collects what handoff sends, one message per datagram, and lets a test await them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[str] = []
        self._changed = Changes()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)

    def start(self) -> None:
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._receive)

    def _receive(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                break
            self.messages.append(data.decode())
        self._changed.notify()

    def count(self, field: str) -> int:
        return sum(field in message.split("\n") for message in self.messages)

    async def wait(self, field: str, count: int = 1, timeout: float = 30.0) -> None:
        try:
            await self._changed.wait_until(lambda: self.count(field) >= count, timeout)
        except TimeoutError:
            raise AssertionError(f"{count} x {field} not received within {timeout} s: {self.messages}") from None

    def close(self) -> None:
        try:
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
        except RuntimeError:
            pass  # no loop any more: nothing was registered with it
        self.sock.close()


@pytest.fixture
def manager() -> Iterator[FakeManager]:
    # A short folder of its own: a socket path must fit in 108 bytes, which tmp_path may not.
    with tempfile.TemporaryDirectory(prefix="hn-") as folder:
        fake = FakeManager(Path(folder) / "notify.sock")
        try:
            yield fake
        finally:
            fake.close()
