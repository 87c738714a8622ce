"""The page's connections, bounded: at most `limit` open at once (more are closed as they come,
so their file descriptors are given back at once), and each must deliver a request within
`first_request_s` (a half-sent request is closed, not held). Idle keep-alive connections are
aiohttp's (`keepalive_timeout`). The assistant's own connections (the listener's, the
narrator's, the state files) need file descriptors too: a flood of half-sent requests once took
all 1,024 and the assistant went offline; the page now takes at most `limit`.

`ConnectionGate` wraps aiohttp's protocol factory (`AppRunner.server`) for `loop.create_server`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

log = logging.getLogger("handoff.web")


class ConnectionGate:
    def __init__(self, factory: Callable[[], Any], limit: int = 48, first_request_s: float = 10.0) -> None:
        self._factory, self.limit, self.first_request_s = factory, limit, first_request_s
        self.open = 0
        self.refused = 0  # closed at once: too many open
        self.timed_out = 0  # closed: no whole request in time
        self._waiting: dict[int, _Guarded] = {}  # id(transport) -> connection with no request yet

    def __call__(self) -> asyncio.BaseProtocol:
        return _Guarded(self)

    def request_came(self, transport: Any) -> None:
        """A request reached the application on this connection (the page's middleware says)."""
        guarded = self._waiting.pop(id(transport), None)
        if guarded is not None:
            guarded.cancel_deadline()


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's handler behind the gate."""

    def __init__(self, gate: ConnectionGate) -> None:
        self._gate = gate
        self._inner: Any = None
        self._timer: asyncio.TimerHandle | None = None
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:
        gate = self._gate
        if gate.open >= gate.limit:
            gate.refused += 1
            if gate.refused == 1 or gate.refused % 1000 == 0:
                log.warning("the page has %d connections open, its limit: closing new ones (%d so far)",
                            gate.open, gate.refused)  # fmt: skip
            transport.abort()
            return
        gate.open += 1
        self._transport = transport
        self._inner = gate._factory()
        gate._waiting[id(transport)] = self
        self._timer = asyncio.get_running_loop().call_later(gate.first_request_s, self._too_slow)
        self._inner.connection_made(transport)

    def _too_slow(self) -> None:
        self._timer = None
        if self._gate._waiting.pop(id(self._transport), None) is not None:
            self._gate.timed_out += 1
            self._transport.abort()

    def cancel_deadline(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is None:
            return
        self.cancel_deadline()
        self._gate._waiting.pop(id(self._transport), None)
        self._gate.open -= 1
        self._inner.connection_lost(exc)
