"""`handoff run` (the live assistant) and `handoff auto` (live with a key, else the offline demo)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from audio_io import AudioDeviceError, AudioFileError, open_audio
from assembly.build import assistant
from commands.checks import Finding, errors_of, print_errors, validate, wake_is_private, wake_mode_line
from config.logging_setup import configure_logging, redact
from commands.options import add_run_arguments, settings_from_args
from hands.manager import servers_shown, watch_servers
from config.settings import Settings, SettingsError, UploadMode
from decisions.timeline import Timeline
from detectors.stop_word import StopDetector
from safety.process import keep_key_private
from safety.text import printable
from service.health import ListenerHealth, stuck_after_s
from service.notify import SystemdNotifier, watchdog_interval_s
from service.history import HISTORY_FILE, HistoryStore
from service.runtime import ServiceRuntime, StatusFiles
from service.status import STATUS_FILE, Probes
from service.signals import StopSignals
from service.lock import AlreadyRunning, state_folder_lock
from tasks.errors import TaskError

log = logging.getLogger("handoff")

add_auto_arguments = add_run_arguments


async def run_live(settings: Settings, stop_detector: StopDetector | None = None) -> int:
    """Run until the input ends (a WAV file), a fatal error, or SIGTERM/SIGINT/SIGHUP. The first signal
    cancels the run, whatever it is doing (starting, running, closing does not begin twice):
    everything is closed on the way out by its owner (tasks stopped and recorded as stopped by
    the shutdown, stores flushed, sessions closed) and the exit code is 0. A second signal ends
    the process at once."""
    timeline = Timeline(log_overheard=settings.log.overheard)
    runtime = ServiceRuntime(timeline, SystemdNotifier(), ListenerHealth(stuck_after_s(settings)),
                             watchdog_interval_s(), status_files(settings))  # fmt: skip
    main = asyncio.create_task(_serve(settings, timeline, runtime, stop_detector), name="handoff")

    def stop(sig: signal.Signals) -> None:
        runtime.stopping(f"stopping ({sig.name})")
        main.cancel()

    signals = StopSignals(stop)
    with signals.installed(asyncio.get_running_loop()):
        try:
            code = await main
        except asyncio.CancelledError:
            if signals.received is None:
                raise  # we were cancelled ourselves: not ours to swallow
            log.info("handoff stopped (%s)", signals.received.name)
            code = 0
    heard = nothing_heard(settings, timeline) if code == 0 and not settings.rooms.satellites else None
    if heard:
        print(f"handoff: {heard}", file=sys.stderr)
    return code


def nothing_heard(settings: Settings, timeline: Timeline) -> str | None:
    """One sentence when a run ends without a command: what it did hear, and what to try (a run
    that heard nothing ended without a word). None when it heard a command."""
    if timeline.count("command") or timeline.count("heard"):
        return None
    source = f"in {settings.audio.input_wav}" if settings.audio.input_wav else "in this run"
    phrase = settings.listener.wake_phrase
    ignored = timeline.count("ignored")
    if ignored:
        return (f"no command was heard {source}: {ignored} utterance(s) were heard but none began with \"{phrase}\"; "
                f"start each command with it (WAKE_PHRASE).")
    if timeline.count("wake"):
        return f"no command was heard {source}: \"{phrase}\" was heard, but no command came after it."
    if settings.upload.mode is UploadMode.ON_DEVICE_WAKE:
        wav = f" --input-wav {settings.audio.input_wav}" if settings.audio.input_wav else ""
        return (f"no command was heard {source}: the wake phrase \"{phrase}\" was never heard on this machine, so "
                f"nothing was uploaded; `handoff wake-test{wav}` shows how well it hears it.")
    return f"no command was heard {source}: no speech reached the listener; check the microphone (or the recording)."


async def _serve(settings: Settings, timeline: Timeline, runtime: ServiceRuntime, stop_detector: StopDetector | None) -> int:
    if settings.rooms.satellites:
        from commands.rooms import serve_hub  # only with satellites: the wyoming package loads here

        return await serve_hub(settings, runtime)
    from web import daemon as web_page  # only here: `handoff status` does not load aiohttp and prometheus_client

    microphone, speaker = open_audio(settings.audio)
    # The runtime around the assistant: its last status and history come after every task stopped.
    async with runtime, web_page.feeding(settings, timeline, runtime) as feed:  # WEB_PORT=0: no feed
        on_task_change = web_page.task_watchers(runtime.task_changed, feed.task_changed if feed is not None else None)
        async with assistant(settings, microphone, speaker, timeline, on_task_change=on_task_change,
                             stop_detector=stop_detector) as coordinator:
            runtime.attach(Probes(
                listener_up=lambda: coordinator.core.listener_up,
                phase=lambda: coordinator.phase.value,
                sessions_opened=lambda: coordinator.listener.sessions_opened,
                session_age_s=lambda: coordinator.listener.session_age_s,
                weak_matches=lambda: coordinator.parts.narrator.weak_matches,
                inexact_reads=lambda: coordinator.parts.narrator.inexact_reads,
                cost_today=lambda: None if coordinator.parts.cost is None else coordinator.parts.cost.summary().today.parts(),
                mcp_servers=lambda: servers_shown(coordinator.parts.notices),
            ))  # fmt: skip
            # A server coming up or going down is written and shown on the page at once.
            watch_servers(coordinator.parts.notices, runtime.shown_changed, coordinator.changes.notify)
            log.info("handoff is listening: say %r followed by a command (Ctrl-C stops)", settings.listener.wake_phrase)
            if wake_is_private(settings):  # (the fallback was logged as a warning by the checks)
                log.info("%s", wake_mode_line(settings))
            async with web_page.serving(settings, feed, coordinator, runtime):
                code = await coordinator.run()
            runtime.stopping("stopping" if code == 0 else f"stopping after a fatal error (exit {code})")
            if coordinator.fatal_message:
                print(f"handoff: {printable(redact(coordinator.fatal_message, [settings.realtime.api_key]))}", file=sys.stderr)
    return code


def status_files(settings: Settings) -> StatusFiles:
    service = settings.service
    return StatusFiles(
        status_path=settings.state_dir / STATUS_FILE,
        history=HistoryStore(settings.state_dir / HISTORY_FILE, service.history_max_rows),
        keep_overheard=settings.log.overheard,
        min_interval_s=service.status_min_interval_s,
        heartbeat_s=service.status_heartbeat_s,
        secrets=(settings.realtime.api_key,),
    )


def run_run(args: argparse.Namespace) -> int:
    built: list[StopDetector] = []  # the stop detector the checks built: the assistant uses it
    settings, findings = validate(args, built)  # the same checks as `handoff check`, every error at once
    errors = errors_of(findings)
    if settings is None or errors:
        print_errors(errors)
        return 2
    try:
        # Before anything in the state folder is touched: a second daemon on it must not take the
        # first one's running tasks for left behind, nor write its status and history.
        with state_folder_lock(settings.state_dir):
            return _run_locked(settings, findings, built[0] if built else None)
    except AlreadyRunning as exc:
        print(f"handoff: {exc}", file=sys.stderr)
        return 2


def _run_locked(settings: Settings, findings: list[Finding], stop_detector: StopDetector | None) -> int:
    configure_logging(settings.log_level, secrets=[settings.realtime.api_key], file=settings.log.file,
                      max_bytes=settings.log.max_bytes, backups=settings.log.backups)  # fmt: skip
    keep_key_private(settings.realtime.api_key)  # from here on the key lives in `settings` alone
    for finding in findings:  # problems and warnings: said once, the assistant starts anyway
        log.warning("%s", finding.line())
    problems: list[BaseException] = []
    try:
        return asyncio.run(run_live(settings, stop_detector))
    except* (AudioDeviceError, AudioFileError, TaskError) as group:
        # TaskError: the task templates (TaskConfigError), or a task database that cannot be
        # written (a full disk: StoreUnwritable).
        problems.extend(group.exceptions)
    # A device or configuration problem is a clear line, not a traceback.
    for exc in problems:
        print(f"handoff: {printable(redact(str(exc), [settings.realtime.api_key]))}", file=sys.stderr)
    return 2


def run_auto(args: argparse.Namespace) -> int:
    """The README's first command: live with a key, the offline demo without one."""
    try:
        settings = settings_from_args(args)
    except SettingsError:
        return run_run(args)  # it says every problem at once
    if settings.realtime.api_key:
        return run_run(args)
    from commands import demo  # only here: the live command does not load the simulator

    print("handoff: no OPENAI_API_KEY found, so this is the offline demo against the built-in simulator.")
    print("         Put your key in .env (see .env.example) to run the live assistant.\n")
    return demo.run(argparse.Namespace(output_wav=None, log_level=getattr(args, "log_level", None)))
