"""`Hands`: every configured MCP server, started with the daemon, its tools in the registry.

- At start each server is connected in its own task; `start` waits a moment (`start_wait_s`) for
  their first listings, so the first command can use them; a slow server's tools come when it is up.
- A listing (at each connect, and when the server says its tools changed) replaces that server's
  tools in the registry (`ToolSpec.source` is `mcp:<server>`).
- A server that dies keeps its tools listed: they answer "The home server is not reachable right
  now." while it is started again with backoff (`hands.link`); its death is announced once, as a
  notice (`wait_pending` / `next_batch` / `ack`, merged with the task notices by `CombinedNotices`).
- Its `env` and `headers` values are added to the secrets every log line, result and script is
  cleaned of (`config.logging_setup.add_secrets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from concurrency.changes import Changes
from config.logging_setup import add_secrets, redact
from hands.config import ServerConfig
from hands.link_types import LinkTiming, Unreachable
from hands.routing import Routing
from hands.tools import function_name, result_data, spec_for
from tasks.notices import NoticeBatch
from tools.formatters import format_mcp
from tools.registry import ToolRegistry
from tools.result import ToolError, ToolResult

if TYPE_CHECKING:  # the MCP SDK loads only when a server is configured (see hands.link_types)
    from mcp_types import CallToolResult, Tool

    from hands.link import ServerLink

log = logging.getLogger("handoff.hands")

START_WAIT_S = 5.0  # how long the daemon's start waits for the servers' first listings
CLOSE_WAIT_S = 10.0  # how long closing waits for the servers to stop (a stdio server: up to 2 s each, then killed)


@dataclass(frozen=True)
class ServerState:
    """What `handoff tools`, the status and the page show about one server."""

    name: str
    transport: str  # stdio | http
    up: bool
    tools: int
    restarts: int
    error: str  # the last thing that went wrong ("" if nothing did)


class Hands:
    def __init__(self, servers: list[ServerConfig], registry: ToolRegistry, timing: LinkTiming = LinkTiming(),
                 routing: Routing | None = None) -> None:
        """`routing`: offers the MCP tools directly or through the brain (None: always directly)."""
        self._registry = registry
        self.routing = routing
        self._servers = {s.name: s for s in servers}
        for server in servers:
            add_secrets(server.secrets)
        # Told whenever a server comes up, goes down or lists its tools again: the status file
        # and the page show it at once, not at their next write (the daemon subscribes).
        self.on_change: list[Callable[[], None]] = []
        self._links = self._linked(servers, timing)
        self._tasks: list[asyncio.Task[None]] = []
        self._notices: dict[int, str] = {}  # id (negative: apart from the task notices) -> script
        self._ids = itertools.count(-1, -1)
        self._posted = Changes()
        self._timing = timing
        self._background: set[asyncio.Task[CallToolResult]] = set()  # slow calls the command no longer waits for

    def _linked(self, servers: list[ServerConfig], timing: LinkTiming) -> dict[str, ServerLink]:
        if not servers:
            return {}
        from hands.link import ServerLink  # the MCP SDK: only for a start with servers configured

        return {s.name: ServerLink(s, functools.partial(self._listed, s), self._down, timing, self._shown_changed)
                for s in servers}  # fmt: skip

    @property
    def servers(self) -> list[ServerState]:
        return [ServerState(name, link.config.transport, link.up, link.tool_count, link.restarts, link.last_error)
                for name, link in self._links.items()]  # fmt: skip

    def shown(self) -> list[dict[str, Any]]:
        """Each server as the status file and the page show it (its last error cleaned of its secrets)."""
        return [{"name": s.name, "transport": s.transport, "up": s.up, "tools": s.tools, "restarts": s.restarts,
                 "error": redact(s.error, self._servers[s.name].secrets)} for s in self.servers]  # fmt: skip

    def _shown_changed(self) -> None:
        for watcher in self.on_change:
            watcher()

    @property
    def background_calls(self) -> int:
        """Slow calls still running after their command was answered."""
        return len(self._background)

    def link(self, name: str) -> ServerLink:
        return self._links[name]

    async def start(self, wait_s: float = START_WAIT_S) -> None:
        """Start every server; return once each has been listed or has failed once, or after `wait_s`."""
        for name, link in self._links.items():
            self._tasks.append(asyncio.create_task(link.run(), name=f"mcp:{name}"))
        if self._links:
            waits = [asyncio.create_task(link.first_listing.wait()) for link in self._links.values()]
            await asyncio.wait(waits, timeout=wait_s)
            for wait in waits:
                wait.cancel()
            ready = [n for n, link in self._links.items() if link.up]
            log.info("MCP servers up at start: %s of %d", ", ".join(ready) or "none", len(self._links))

    async def close(self) -> None:
        """Stop every server (each link leaves its connection the SDK's way); a link still busy
        connecting after CLOSE_WAIT_S is cancelled."""
        for call in list(self._background):
            call.cancel()
        for link in self._links.values():
            link.stop()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CLOSE_WAIT_S)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    # -- the registry ------------------------------------------------------------------------------
    def _listed(self, server: ServerConfig, tools: list[Tool]) -> None:
        self._registry.remove_source(server.source)
        call = functools.partial(self._call, server.name)
        for tool in tools:
            name = function_name(server.name, tool.name, lambda n: self._registry.get(n) is not None)
            if name is None:
                log.warning("MCP server %s: tool %r skipped: its name is taken", server.name, tool.name)
                continue
            try:
                self._registry.add(spec_for(server, tool, name, call))
            except ValueError as exc:  # its input schema is no JSON schema: not offered
                log.warning("MCP server %s: tool %r skipped: %s", server.name, tool.name, exc)
        if self.routing is not None:
            self.routing.update()

    async def _call(self, server: str, tool: str, arguments: dict[str, Any]) -> CallToolResult | None:
        """The call's result; None when it takes longer than `answer_wait_s`: it goes on in the
        background (the command is answered that it is still working, and the next command is
        routed meanwhile) and its answer, or its failure, is said later as a notice."""
        call = asyncio.create_task(self._links[server].call(tool, arguments), name=f"mcp call {server}.{tool}")
        done, _ = await asyncio.wait({call}, timeout=self._timing.answer_wait_s)
        if call not in done:
            log.info("MCP server %s: %s is slow; it goes on in the background", server, tool)
            self._background.add(call)
            call.add_done_callback(functools.partial(self._answered_late, server, tool))
            return None
        try:
            return call.result()
        except Unreachable as exc:
            raise ToolError(str(exc), data={"server": server}) from None

    def _answered_late(self, server: str, tool: str, call: "asyncio.Task[CallToolResult]") -> None:
        """A background call ended: what it gave (or why it failed) is said as a notice."""
        self._background.discard(call)
        if call.cancelled():  # (closing)
            return
        try:
            result = ToolResult(tool=tool, call_id="late", ok=True, data=result_data(server, call.result()))
        except (Unreachable, ToolError) as exc:
            result = ToolResult(tool=tool, call_id="late", ok=False, data={"server": server}, error=str(exc))
        except Exception as exc:  # a bug: said as a failure, logged with its traceback
            log.error("MCP server %s: %s failed late", server, tool, exc_info=exc)
            result = ToolResult(tool=tool, call_id="late", ok=False, data={"server": server}, error="it failed")
        log.info("MCP server %s: %s answered after the command was answered (%s)", server, tool, "ok" if result.ok else result.error)
        script = redact(f"About your earlier request: {format_mcp(result)}", self._servers[server].secrets)
        self._notices[next(self._ids)] = script
        self._posted.notify()

    # -- announcements (a server went down) ------------------------------------------------------
    def _down(self, name: str, said: bool) -> None:
        """Announced once, unless it died during a call whose answer said so already."""
        if said:
            return
        self._notices[next(self._ids)] = f"The {name} server stopped; I'm starting it again."
        self._posted.notify()

    async def wait_pending(self) -> None:
        await self._posted.wait_until(lambda: bool(self._notices))

    def next_batch(self, now: float | None = None) -> NoticeBatch | None:
        if not self._notices:
            return None
        return NoticeBatch(ids=list(self._notices), script=" ".join(self._notices.values()))

    def ack(self, ids: list[int]) -> None:
        for notice in ids:
            self._notices.pop(notice, None)


def hands_of(notices: Any) -> Hands | None:
    """The MCP servers behind a coordinator's notice source (`CombinedNotices`), if it has any."""
    hands = getattr(notices, "hands", None)
    return hands if isinstance(hands, Hands) else None


def servers_shown(notices: Any) -> list[dict[str, Any]]:
    """The MCP servers of a coordinator's notice source, as the status and the page show them (or none)."""
    hands = hands_of(notices)
    return hands.shown() if hands is not None else []


def watch_servers(notices: Any, *watchers: Callable[[], None]) -> None:
    """Call each of `watchers` whenever a server behind `notices` comes up, goes down or lists its tools again."""
    hands = hands_of(notices)
    if hands is not None:
        hands.on_change.extend(watchers)


class CombinedNotices:
    """The coordinator's one notice source: the hands' announcements (negative ids) first, then
    the task manager's notices."""

    def __init__(self, tasks: Any, hands: Hands) -> None:
        self._tasks, self._hands = tasks, hands

    @property
    def hands(self) -> Hands:
        return self._hands

    async def wait_pending(self) -> None:
        waits = [asyncio.create_task(self._tasks.wait_pending()), asyncio.create_task(self._hands.wait_pending())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def next_batch(self, now: float) -> Any:
        return self._hands.next_batch(now) or self._tasks.next_batch(now)

    def ack(self, ids: list[int]) -> None:
        mine = [i for i in ids if i < 0]
        if mine:
            self._hands.ack(mine)
        if len(mine) < len(ids):
            self._tasks.ack([i for i in ids if i >= 0])
