"""The page's HTTP side (aiohttp, inside the daemon's event loop):

- `GET /` and `/static/*`: the page (plain HTML, CSS and JS shipped in the package);
- `GET /api/state`: what it shows, as JSON; `GET /events`: the same, pushed as Server-Sent
  Events whenever it changes (the browser's EventSource reconnects by itself when the daemon
  restarts);
- `POST /api/tasks/start`, `POST /api/tasks/cancel`: through the control socket, exactly as
  `handoff tasks start/cancel`;
- `GET /metrics`: Prometheus.

Security: bound to 127.0.0.1 unless WEB_HOST is set; either way every request needs the token
(`?token=` once, then an HttpOnly SameSite=Strict cookie; or `Authorization: Bearer`), compared
in constant time: on 127.0.0.1 too, or every user of this machine could read it and start tasks
(the control socket it drives is 0600). Bound to 127.0.0.1, only a Host of this machine is
served (a DNS-rebinding page cannot read it). `/metrics` without its token (WEB_METRICS_TOKEN
false, for a scraper) answers only to a Host that is an IP address, localhost or this machine's
name, never to a name a rebinding page controls. Every POST carries the CSRF token the page got
with its state (a header other sites cannot set) and, when the browser says where it comes from,
our own origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ipaddress
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from aiohttp import web

from concurrency.changes import Changes
from tasks import control
from tasks.config import TaskTemplate
from tasks.errors import TaskError
from web import metrics, snapshot
from web.connections import ConnectionGate
from web.cost_days import CostDays
from web.feed import WebFeed
from web.snapshot import PageProbes
from web.token import same_token

log = logging.getLogger("handoff.web")

STATIC = Path(__file__).parent / "static"
COOKIE = "handoff_token"
CSRF_HEADER = "X-CSRF-Token"
KEEPALIVE_S = 20.0  # a comment line on a quiet stream, so proxies and phones keep it open
BATCH_S = 0.1  # changes this close together go out as one update
CONTROL_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 48  # open at once (a flood of half-sent requests took every file descriptor)
ACCEPT_BATCH = 16  # connections accepted per wake-up (asyncio's default, 100, held that many open at once)
FIRST_REQUEST_S = 10.0  # a connection's first request is due within this
KEEPALIVE_IDLE_S = 15.0  # an idle keep-alive connection is closed after this (aiohttp's default: an hour)
MAX_STREAMS = 16  # event streams at once (pages open); more are told to try again later
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
_LOOPBACK_BINDS = frozenset({"127.0.0.1", "localhost", "::1"})
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the first URL carries the token
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class PageConfig:
    host: str
    port: int
    token: str | None  # None: nothing but an open /metrics is served
    metrics_need_token: bool
    control_path: Path  # the task manager's control socket
    templates: tuple[TaskTemplate, ...]
    clean: Callable[[str], str]  # secrets out of every text shown


class WebPage:
    """`await start()` once the assistant is assembled, `await close()` before it is taken apart."""

    def __init__(self, config: PageConfig, feed: WebFeed, probes: PageProbes, wake: Changes,
                 cost_days: CostDays | None) -> None:  # fmt: skip
        """`wake`: a `Changes` notified when the assistant's state changes (its phase), besides
        the feed's own."""
        self.config = config
        self.feed = feed
        self.probes = probes
        self._wake = wake
        self._cost_days = cost_days
        self.csrf = secrets.token_urlsafe(24)  # per run: a page from before a restart fetches the new one
        self._runner: web.AppRunner | None = None
        self._listening: asyncio.Server | None = None
        self.gate: ConnectionGate | None = None
        self._closing = False
        self.streams = 0  # event streams open now
        self._static = {name: (STATIC / name).read_bytes() for name in ("index.html", "app.js", "app.css")}

    # -- life ---------------------------------------------------------------------------------------
    async def start(self) -> bool:
        """Serve; False (logged) if the port cannot be had: the assistant runs on without its page."""
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._file)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/events", self._events)
        app.router.add_post("/api/tasks/start", self._start_task)
        app.router.add_post("/api/tasks/cancel", self._cancel_task)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=KEEPALIVE_IDLE_S,
                               shutdown_timeout=1.0)  # fmt: skip
        await runner.setup()
        assert runner.server is not None
        self.gate = ConnectionGate(runner.server, MAX_CONNECTIONS, FIRST_REQUEST_S)
        try:
            self._listening = await asyncio.get_running_loop().create_server(
                self.gate, self.config.host, self.config.port, reuse_address=True, backlog=ACCEPT_BATCH)
        except OSError as exc:
            await runner.cleanup()
            log.warning("the web page cannot listen on %s:%d (%s); handoff runs without it (set WEB_PORT to "
                        "another port, or 0 for no page)", self.config.host, self.config.port, exc.strerror or exc)  # fmt: skip
            return False
        self._runner = runner
        log.info("web page on http://%s:%d/%s", self.config.host, self.config.port,
                 " (token required: `handoff web-url` prints the address)" if self.config.token else "")  # fmt: skip
        return True

    async def close(self) -> None:
        self._closing = True
        self.feed.changes.notify()  # open event streams end
        if self._listening is not None:
            self._listening.close()
            self._listening = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- guard --------------------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self.gate is not None:
            self.gate.request_came(request.transport)
        refusal = self._refusal(request)
        if refusal is not None:
            response: web.StreamResponse = refusal
        elif self.config.token and request.query.get("token") and request.method == "GET" and request.path == "/":
            # The address with the token: set the cookie, and take the token out of the address bar.
            rest = {k: v for k, v in request.query.items() if k != "token"}  # (`&once`: the state without the stream)
            response = web.HTTPSeeOther(str(request.rel_url.with_query(rest)))
            response.set_cookie(COOKIE, self.config.token, httponly=True, samesite="Strict", path="/")
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = exc
        response.headers.update(_HEADERS)
        return response

    def _refusal(self, request: web.Request) -> web.Response | None:
        token = self.config.token
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        if self.config.host in _LOOPBACK_BINDS and host not in _LOOPBACK_HOSTS:
            return _text(403, "This page answers only to 127.0.0.1 or localhost.")
        if request.path == "/metrics" and not self.config.metrics_need_token:
            if not _names_this_machine(host):  # a rebinding page's own name: refused
                return _text(403, "/metrics answers only to an IP address, localhost or this machine's name.")
        elif token is None or not self._authorised(request, token):
            return _text(401, "This page needs its token: open the address `handoff web-url` prints.")
        if request.method == "POST":
            if not same_token(request.headers.get(CSRF_HEADER), self.csrf):
                return _text(403, "Refused: the request did not come from the page (no CSRF token). Reload the page.")
            origin = request.headers.get("Origin")
            if origin is not None and origin != f"{request.scheme}://{request.host}":
                return _text(403, "Refused: the request came from another site.")
        return None

    @staticmethod
    def _authorised(request: web.Request, token: str) -> bool:
        bearer = request.headers.get("Authorization", "")
        given = [request.cookies.get(COOKIE), request.query.get("token"),
                 bearer[7:] if bearer.startswith("Bearer ") else None]  # fmt: skip
        return any(same_token(candidate, token) for candidate in given if candidate)

    # -- pages --------------------------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=self._static["index.html"], content_type="text/html", charset="utf-8")

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ("app.js", "app.css"):
            raise web.HTTPNotFound()
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return web.Response(body=self._static[name], content_type=kind, charset="utf-8")

    def state(self) -> dict[str, Any]:
        return snapshot.build(self.feed, self.probes, self.config.clean, self.config.templates,
                              self._cost_days, self.csrf, time.time())  # fmt: skip

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if self.streams >= MAX_STREAMS:
            return _text(503, f"{MAX_STREAMS} pages are open already: close one, or try again later.")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        response.headers.update(_HEADERS)
        await response.prepare(request)
        self.streams += 1
        sent: tuple[Any, ...] | None = None
        try:
            while not self._closing:
                probes = self.probes
                seen = (self.feed.revision, probes.phase(), probes.listener_up(), probes.upload_state())
                if seen != sent:
                    sent = seen
                    await response.write(b"data: " + json.dumps(self.state()).encode() + b"\n\n")
                elif not await self._changed(KEEPALIVE_S):
                    await response.write(b": keepalive\n\n")
                    continue
                await asyncio.sleep(BATCH_S)  # a burst of changes makes one update
        except ConnectionError:
            pass  # the page was closed
        finally:
            self.streams -= 1
        return response

    async def _changed(self, timeout: float) -> bool:
        """Wait for the feed or the assistant's state to change; False after `timeout` without."""
        waits = [asyncio.ensure_future(self.feed.changes.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        return bool(done)

    async def _metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=metrics.render(self.feed, self.probes.cost))
        response.headers["Content-Type"] = metrics.CONTENT_TYPE
        return response

    # -- tasks: the control socket, as `handoff tasks start/cancel` --------------------------------
    async def _start_task(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        name, params = body.get("name"), body.get("params", {})
        if not isinstance(name, str) or not isinstance(params, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in params.items()):  # fmt: skip
            return web.json_response({"ok": False, "error": "Say which template to start, and its parameters as text."}, status=400)
        return await self._ask({"op": "start", "name": name, "params": params})

    async def _cancel_task(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        task = body.get("task")
        if not isinstance(task, (int, str)) or isinstance(task, bool):
            return web.json_response({"ok": False, "error": "Say which task to cancel."}, status=400)
        return await self._ask({"op": "cancel", "task": task})

    async def _ask(self, request: dict[str, Any]) -> web.Response:
        try:
            reply = await asyncio.to_thread(control.ask, self.config.control_path, request, CONTROL_TIMEOUT_S)
        except (TaskError, TimeoutError, OSError, ValueError) as exc:
            reply = {"ok": False, "error": str(exc) or "handoff did not answer in time."}
        return web.json_response(reply, status=200 if reply.get("ok") else 400)


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="The request was not JSON.") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="The request was not a JSON object.")
    return body


def _names_this_machine(host: str) -> bool:
    """A Host header no DNS-rebinding page can send: an IP address, localhost, or this machine's
    own name (a rebinding page is served under a name its author controls)."""
    name = host.strip("[]").lower().rstrip(".")
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(name)
        return True
    machine = socket.gethostname().lower()
    return name in ("localhost", machine, f"{machine}.local")


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text)
