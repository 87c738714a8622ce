"""One MCP server kept connected through the official SDK (`mcp.Client`): started (stdio) or
reached (streamable HTTP), its tools listed at once and again whenever it says they changed,
and, when it dies or cannot be reached, started again with backoff.

The connection lives in one task (`run`): the SDK's transports are anyio task groups that must be
entered and left in the same task. Calls come from other tasks (`call`), each with a timeout, so
a slow or hung server costs one call its answer, never the voice loop or another command.

It never polls: the connection's end is seen when the server's output ends (stdio: the process
exited; the transport's read stream closes), a failed request or a transport error (HTTP: the
server stopped answering), or a change notice; each wakes the one task that waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from typing import Any, AsyncIterator, Callable

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Tool
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from concurrency.changes import Changes
from hands.config import ServerConfig
from hands.link_types import LinkTiming, Unreachable

log = logging.getLogger("handoff.hands")

MAX_LISTED_PAGES = 20  # a server that pages its tools forever is read this far


class ServerLink:
    """The live connection to one server. `on_tools(tools)` is told its tool list whenever it is
    listed (at each start, and when the server says it changed); `on_down(name, said)` once per
    outage (`said`: a call's answer has told the user already: it died during that call);
    `on_shown()` whenever what the status and the page show of it changed (up, down, its tools)."""

    def __init__(
        self,
        config: ServerConfig,
        on_tools: Callable[[list[Tool]], None],
        on_down: Callable[[str, bool], None],
        timing: LinkTiming = LinkTiming(),
        on_shown: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._on_tools = on_tools
        self._on_down = on_down
        self._on_shown = on_shown
        self.timing = timing
        self._client: Client | None = None
        self._wake = asyncio.Event()  # the server ended, broke, or changed its tools
        self._relist = False
        self._broken = False
        self._said = False  # a call's answer told the user this connection died
        self._in_flight = 0  # calls under way: if it dies now, their answers say so
        self.up = False
        self.restarts = 0  # connections after the first
        self.tool_count = 0
        self.first_listing = asyncio.Event()  # set once the first attempt has succeeded or failed
        self.last_error = ""
        self.changes = Changes()  # notified when it comes up, goes down or lists its tools again
        self._stopping = asyncio.Event()  # `stop`: leave the connection the SDK's way, not by a task cancel

    # -- the connection's task -----------------------------------------------------------------
    def stop(self) -> None:
        """Leave: `run` closes the connection (the SDK stops a stdio server: stdin closed, then
        terminated, then killed) and returns. (A task cancel could skip that and leak the process.)"""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Keep the server connected until `stop`."""
        delay = self.timing.backoff_initial_s
        while not self._stopping.is_set():
            served = False
            try:
                async with self._connected() as client:
                    await self._list(client)
                    served = True
                    self.up = True
                    self.first_listing.set()
                    self._shown_changed()
                    log.info("MCP server %s is up: %d tool(s)%s", self.config.name, self.tool_count,
                             f" (restart {self.restarts})" if self.restarts else "")
                    await self._serve(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever the server or the transport did: it is down; try again
                self.last_error = _reason(exc)
                log.warning("MCP server %s: %s", self.config.name, self.last_error)
            finally:
                self._client = None
                was_up, self.up = self.up, False  # (its tools stay listed: they answer that it is down)
                self._shown_changed()
            self.first_listing.set()
            if self._stopping.is_set():
                return
            if was_up:
                # Once per outage: it was up, now it is not (a call under way says it in its answer).
                self._on_down(self.config.name, self._said or self._in_flight > 0)
                delay = self.timing.backoff_initial_s
            elif served:
                delay = self.timing.backoff_initial_s
            self.restarts += 1
            wait = delay * (1 + random.uniform(0, self.timing.jitter))
            log.info("MCP server %s: trying again in %.1f s", self.config.name, wait)
            with contextlib.suppress(TimeoutError):  # the backoff's deadline (or `stop`), not a poll
                await asyncio.wait_for(self._stopping.wait(), wait)
            delay = min(self.timing.backoff_max_s, delay * 2)

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        self._wake.clear()
        self._relist = self._broken = self._said = False
        async with contextlib.AsyncExitStack() as stack:
            transport = await stack.enter_async_context(self._transport())
            client = Client(
                _Watched(transport, self._ended), cache=None, message_handler=self._message,
                read_timeout_seconds=self.timing.connect_timeout_s,
            )
            # (The handshake's requests time out by read_timeout_seconds; a timeout scope around
            # entering would close around the client's own task group, which outlives it.)
            await stack.enter_async_context(client)
            self._client = client
            yield client

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command is not None:
            params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env) or None)
            with open(os.devnull, "w") as quiet:  # a server's own chatter is not ours to show
                yield stdio_client(params, errlog=quiet)
            return
        timeout = httpx2.Timeout(self.timing.connect_timeout_s, read=300.0)
        async with httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout) as http:
            assert config.url is not None
            yield streamable_http_client(config.url, http_client=http)

    async def _serve(self, client: Client) -> None:
        """Until the server ends or breaks: list its tools again whenever it says they changed."""
        async with anyio.create_task_group() as group:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                group.start_soon(self._listen, client)
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._broken or self._stopping.is_set():
                    group.cancel_scope.cancel()
                    return
                if self._relist:
                    self._relist = False
                    await self._list(client)
                    log.info("MCP server %s changed its tools: %d now", self.config.name, self.tool_count)

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce changes on a subscriptions/listen stream."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _event in changes:
                    self._changed()
        except Exception as exc:  # a server that cannot listen still serves; changes come as notices or not at all
            log.debug("MCP server %s: no change stream (%s)", self.config.name, _reason(exc))

    async def _list(self, client: Client) -> None:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LISTED_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        allowed = [t for t in tools if self.config.allows(t.name)]
        self.tool_count = len(allowed)
        self._on_tools(allowed)
        self._shown_changed()

    async def _message(self, message: Any) -> None:
        if isinstance(message, Exception):  # the transport failed (HTTP: the server stopped answering)
            self.last_error = _reason(message)
            self._break()
        elif isinstance(message, mcp_types.ToolListChangedNotification):  # (a 2025 server's notice)
            self._changed()

    def _shown_changed(self) -> None:
        self.changes.notify()
        self._on_shown()

    def _changed(self) -> None:
        self._relist = True
        self._wake.set()

    def _ended(self) -> None:
        self._break()

    def _break(self) -> None:
        self._broken = True
        self._wake.set()

    # -- calls from other tasks ---------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call a tool; Unreachable (one sentence) when the server is down, goes down, or does not
        answer within the call timeout."""
        client = self._client
        name = self.config.name
        if client is None or not self.up:
            raise Unreachable(f"The {name} server is not reachable right now.")
        self._in_flight += 1
        try:
            async with asyncio.timeout(self.timing.call_timeout_s):
                return await client.call_tool(tool, arguments, read_timeout_seconds=self.timing.call_timeout_s)
        except TimeoutError:
            raise Unreachable(f"The {name} server did not answer within {self.timing.call_timeout_s:g} seconds.") from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._said = True
                self._break()
                raise Unreachable(f"The {name} server stopped while doing that; I'm starting it again.") from None
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise Unreachable(f"The {name} server did not answer in time.") from None
            raise Unreachable(f"The {name} server refused the call: {' '.join(exc.error.message.split())[:200]}") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, httpx2.HTTPError, OSError):
            self._said = True
            self._break()
            raise Unreachable(f"The {name} server is not reachable right now.") from None
        finally:
            self._in_flight -= 1


class _Watched:
    """A transport whose end (the server's output closed) is reported at once: `ended()` is
    called when its read stream runs out, so a dead server is seen without a call or a poll."""

    def __init__(self, transport: Any, ended: Callable[[], None]) -> None:
        self._transport, self._ended = transport, ended
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._transport.__aenter__()
        send, receive = anyio.create_memory_object_stream[Any](0)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._pump, read, send)
        return receive, write

    async def _pump(self, read: Any, send: Any) -> None:
        async with send:
            try:
                async for item in read:
                    await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
        self._ended()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        ended: bool | None = await self._transport.__aexit__(*exc)  # (an SDK transport: untyped)
        return ended


def _reason(exc: BaseException) -> str:
    """What went wrong, in a few words (never a header or an env value: those are redacted anyway)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions[:3])
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename})"
    if isinstance(exc, MCPError):
        return f"it said: {' '.join(exc.error.message.split())[:200]}"
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
