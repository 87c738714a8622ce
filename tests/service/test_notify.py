"""systemd's notify protocol against a fake manager socket, the watchdog's health rule, and the
daemon's READY / WATCHDOG / STOPPING (issue 13, part 4)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from decisions.timeline import Timeline, TimelineKind
from realtime_sim import SimServer
from service.health import ListenerHealth, stuck_after_s
from service.notify import SystemdNotifier, watchdog_interval_s
from service.runtime import ServiceRuntime
from service.status import Probes
from config.settings import Settings
from tests.service.conftest import FakeManager
from tests.support.daemon import daemon_env, running_daemon, spoken_wav


def test_messages_reach_the_socket_named_in_notify_socket(manager: FakeManager) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(manager.path)})
    assert notifier.ready("listening") and notifier.watchdog() and notifier.stopping("stopping (SIGTERM)")
    notifier.close()
    manager._receive()
    assert manager.messages == ["READY=1\nSTATUS=listening", "WATCHDOG=1", "STOPPING=1\nSTATUS=stopping (SIGTERM)"]


def test_outside_systemd_nothing_is_sent() -> None:
    notifier = SystemdNotifier({})
    assert not notifier.enabled and not notifier.ready("listening") and notifier.sent == []


def test_a_manager_that_went_away_is_logged_once(tmp_path: Path, caplog) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert not notifier.watchdog() and not notifier.watchdog()
    assert caplog.text.count("cannot notify the service manager") == 1


@pytest.mark.parametrize(
    ("environ", "interval"),
    [
        ({"WATCHDOG_USEC": "60000000"}, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "4242"}, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}, None),  # another process's watchdog
        ({"WATCHDOG_USEC": "0"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_is_half_of_watchdog_sec(environ: dict[str, str], interval: float | None) -> None:
    assert watchdog_interval_s(environ, pid=4242) == interval


def test_the_listener_is_healthy_while_up_or_reporting_and_stuck_when_down_and_silent() -> None:
    now = [0.0]
    health = ListenerHealth(stuck_after_s=80.0, clock=lambda: now[0])
    assert health.healthy(listener_up=False)  # just started: connecting
    now[0] = 79.0
    assert health.healthy(listener_up=False)
    now[0] = 81.0
    assert not health.healthy(listener_up=False)  # down and silent too long: stuck
    assert health.healthy(listener_up=True)
    health.news()  # e.g. "listener connection attempt 7 failed": retrying is doing its job
    now[0] = 160.0
    assert health.healthy(listener_up=False)
    assert stuck_after_s(Settings()) == 2 * (30.0 + 0.5 + 10.0)


async def test_ready_on_the_first_listening_then_pings_only_while_healthy(manager: FakeManager) -> None:
    manager.start()
    timeline = Timeline()
    up = [False]
    health = ListenerHealth(stuck_after_s=0.2)
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(manager.path)})
    service = ServiceRuntime(timeline, notifier, health, watchdog_s=0.01)
    service.attach(Probes(listener_up=lambda: up[0]))
    async with service:
        timeline.add(TimelineKind.LISTENING, "listener session 1 ready")
        up[0] = True
        await manager.wait("READY=1")
        await manager.wait("WATCHDOG=1", count=3)
        timeline.add(TimelineKind.LISTENING, "listener session 2 ready")
        await manager.wait("STATUS=listener session 2 ready")

        up[0] = False  # down, and nothing more is reported: stuck once stuck_after_s has passed
        await service.changes.wait_until(lambda: not service.vouching, timeout=10)
        manager._receive()  # datagrams already sent are in the socket's buffer
        pings, checks = manager.count("WATCHDOG=1"), service.checks
        await service.changes.wait_until(lambda: service.checks >= checks + 3, timeout=10)
        manager._receive()
        assert manager.count("WATCHDOG=1") == pings  # checked three more times, vouched for nothing

        timeline.add(TimelineKind.ERROR, "listener connection attempt 9 failed: refused")  # news: retrying
        await service.changes.wait_until(lambda: service.vouching, timeout=10)
        await manager.wait("WATCHDOG=1", count=pings + 1)
        service.stopping("stopping (SIGTERM)")
        await manager.wait("STOPPING=1")
    manager._receive()
    assert manager.messages[0] == "READY=1\nSTATUS=listener session 1 ready"
    assert manager.count("READY=1") == 1 and manager.count("STOPPING=1") == 1  # not again on the way out
    assert manager.messages[-1] == "STOPPING=1\nSTATUS=stopping (SIGTERM)"


async def test_the_daemon_says_ready_pings_and_says_stopping(tmp_path: Path, sim: SimServer, manager: FakeManager) -> None:
    manager.start()
    env = daemon_env(tmp_path, sim.base_url, NOTIFY_SOCKET=str(manager.path), WATCHDOG_USEC="200000")
    wav = spoken_wav(tmp_path / "quiet.wav", utterances=0, seconds_after=120)
    async with running_daemon(tmp_path, env, "--input-wav", str(wav), "--output-wav", str(tmp_path / "out.wav")) as daemon:
        await manager.wait("READY=1")
        # Watchdog pings may come before it: the listener is connecting, which is healthy.
        assert "READY=1\nSTATUS=listener session 1 ready" in manager.messages
        await manager.wait("WATCHDOG=1", count=2)
        daemon.signal(signal.SIGTERM)
        await manager.wait("STOPPING=1")
        assert await daemon.exited(timeout=10) == 0, daemon.log
    assert manager.count("READY=1") == 1 and manager.count("STOPPING=1") == 1
    assert "STOPPING=1\nSTATUS=stopping (SIGTERM)" in manager.messages
    assert manager.messages.index("READY=1\nSTATUS=listener session 1 ready") < manager.messages.index(
        "STOPPING=1\nSTATUS=stopping (SIGTERM)")
