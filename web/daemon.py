"""How `handoff run` puts the page on: the feed observes the timeline, the history and the task
manager from the start; the page serves once the assistant is assembled. WEB_PORT=0: neither."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from typing import TYPE_CHECKING, AsyncIterator, Callable

from config.logging_setup import redact
from config.settings import Settings
from decisions.timeline import Timeline
from decisions.upload_gate import GateState
from detectors.pipeline import UploadFilter
from hands.manager import servers_shown
from service.history import HISTORY_FILE, read_history
from service.runtime import ServiceRuntime
from tasks.config import TaskSettings, load_task_config
from tasks.records import TaskRecord
from web.cost_days import COST_DAYS_FILE, CostDays
from web.feed import WebFeed
from web.server import PageConfig, WebPage
from web.snapshot import PageProbes
from web.token import load_or_create_token

if TYPE_CHECKING:
    from handoff import Coordinator

log = logging.getLogger("handoff.web")

PRELOAD_S = 24 * 3600  # the latency chart's day, from the history of earlier runs


@contextlib.asynccontextmanager
async def feeding(settings: Settings, timeline: Timeline, runtime: ServiceRuntime) -> AsyncIterator[WebFeed | None]:
    """The feed, observing the runtime's timeline and history while the block runs."""
    if settings.web.port == 0:
        yield None
        return
    feed = WebFeed(current_command=lambda: runtime.current_command)
    timeline.on_add.append(feed.observe)
    runtime.on_history.append(feed.history_done)
    try:
        yield feed
    finally:
        timeline.on_add.remove(feed.observe)
        runtime.on_history.remove(feed.history_done)


def task_watchers(*watchers: Callable[[TaskRecord], None] | None) -> Callable[[TaskRecord], None]:
    """One on_change for the task manager that tells each of `watchers`."""
    present = [w for w in watchers if w is not None]

    def changed(record: TaskRecord) -> None:
        for watcher in present:
            watcher(record)

    return changed


@contextlib.asynccontextmanager
async def serving(settings: Settings, feed: WebFeed | None, coordinator: "Coordinator",
                  runtime: ServiceRuntime) -> AsyncIterator[WebPage | None]:  # fmt: skip
    """The page, served while the block runs (None without a feed, or when its port is taken)."""
    if feed is None:
        yield None
        return
    web = settings.web
    token = load_or_create_token(settings.state_dir) if web.needs_token else None
    await asyncio.to_thread(_preload, feed, settings)
    task_settings = TaskSettings.from_settings(settings)
    config = PageConfig(
        host=web.bind_host, port=web.port, token=token, metrics_need_token=web.metrics_need_token,
        control_path=task_settings.control_path, templates=load_task_config(settings.tasks_config).templates,
        clean=lambda text: redact(text, [settings.realtime.api_key]),
    )  # fmt: skip
    core, parts = coordinator.core, coordinator.parts
    probes = PageProbes(
        phase=lambda: coordinator.phase.value,
        listener_up=lambda: core.listener_up,
        session_age_s=lambda: coordinator.listener.session_age_s,
        sessions_opened=lambda: coordinator.listener.sessions_opened,
        upload_mode=settings.upload.mode.value,
        upload_state=lambda: (f.gate.state if isinstance(f := parts.mic_filter, UploadFilter) else GateState.STREAMING).value,
        cost=lambda: None if parts.cost is None else parts.cost.summary(),
        rooms=lambda: getattr(runtime.tracker.status, "satellites", None) or None,  # the hub's satellites, once there are any
        mcp_servers=lambda: servers_shown(parts.notices),
    )  # fmt: skip
    # The days the cost meter saves (assembly.build.cost_meter), read for the chart.
    page = WebPage(config, feed, probes, coordinator.changes, CostDays(settings.state_dir / COST_DAYS_FILE))
    started = await page.start()
    try:
        yield page if started else None
    finally:
        await page.close()


def _preload(feed: WebFeed, settings: Settings) -> None:
    path = settings.state_dir / HISTORY_FILE
    if not path.exists():
        return
    try:
        feed.preload(read_history(path, since=time.time() - PRELOAD_S, limit=5000))
    except sqlite3.Error as exc:
        log.warning("the web page shows no earlier commands: %s cannot be read (%s)", path, exc)
