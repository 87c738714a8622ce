"""`handoff run` (the live assistant) and `handoff auto` (live with a key, else the offline demo)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from pathlib import Path

from audio_io import AudioDeviceError, AudioFileError, open_audio
from commands.assemble import assistant
from commands.checks import errors_of, preflight
from config.logging_setup import configure_logging, redact
from config.settings import Settings, load_settings, require_api_key
from decisions.timeline import Timeline
from service.health import ListenerHealth, stuck_after_s
from service.notify import SystemdNotifier, watchdog_interval_s
from service.history import HISTORY_FILE, HistoryStore
from service.runtime import ServiceRuntime, StatusFiles
from service.status import STATUS_FILE, Probes
from service.signals import StopSignals
from tasks import TaskConfigError

log = logging.getLogger("handoff")

# CLI flag -> settings key (CLI beats environment beats .env beats defaults).
_FLAG_KEYS = {
    "base_url": "OPENAI_BASE_URL",
    "workspace": "WORKSPACE_ROOT",
    "input_device": "AUDIO_INPUT_DEVICE",
    "output_device": "AUDIO_OUTPUT_DEVICE",
    "wake_phrase": "WAKE_PHRASE",
    "log_level": "LOG_LEVEL",
    "state_dir": "HANDOFF_STATE_DIR",
}


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. the simulator's http://127.0.0.1:8765/v1")
    parser.add_argument("--workspace", help="folder the file tools may read (WORKSPACE_ROOT)")
    parser.add_argument("--wake-phrase", help="the word that addresses the assistant (WAKE_PHRASE)")
    parser.add_argument("--state-dir", help="where task records and logs live (HANDOFF_STATE_DIR)")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--input-device", help="microphone by index or name part (see `handoff devices`)")
    parser.add_argument("--output-device", help="speaker by index or name part")
    parser.add_argument("--input-wav", type=Path, help="read the microphone from this WAV file instead")
    parser.add_argument("--output-wav", type=Path, help="write what would be played to this WAV file instead")
    parser.add_argument("--fast", action="store_true", help="read --input-wav as fast as possible, not in real time")


add_auto_arguments = add_run_arguments


def settings_from_args(args: argparse.Namespace) -> Settings:
    cli = {key: getattr(args, flag, None) for flag, key in _FLAG_KEYS.items()}
    settings = load_settings(cli)
    input_wav, output_wav = getattr(args, "input_wav", None), getattr(args, "output_wav", None)
    if input_wav or output_wav:
        settings = settings.replace(audio=dataclasses.replace(
            settings.audio, input_wav=input_wav, output_wav=output_wav, realtime_wav_input=not getattr(args, "fast", False)
        ))
    return settings


async def run_live(settings: Settings) -> int:
    """Run until the input ends (a WAV file), a fatal error, or SIGTERM/SIGINT. The first signal
    cancels the run, whatever it is doing (starting, running, closing does not begin twice):
    everything is closed on the way out by its owner (tasks stopped and recorded as stopped by
    the shutdown, stores flushed, sessions closed) and the exit code is 0. A second signal ends
    the process at once."""
    timeline = Timeline(log_overheard=settings.log.overheard)
    runtime = ServiceRuntime(timeline, SystemdNotifier(), ListenerHealth(stuck_after_s(settings)),
                             watchdog_interval_s(), status_files(settings))  # fmt: skip
    main = asyncio.create_task(_serve(settings, timeline, runtime), name="handoff")

    def stop(sig: signal.Signals) -> None:
        runtime.stopping(f"stopping ({sig.name})")
        main.cancel()

    signals = StopSignals(stop)
    with signals.installed(asyncio.get_running_loop()):
        try:
            return await main
        except asyncio.CancelledError:
            if signals.received is None:
                raise  # we were cancelled ourselves: not ours to swallow
            log.info("handoff stopped (%s)", signals.received.name)
            return 0


async def _serve(settings: Settings, timeline: Timeline, runtime: ServiceRuntime) -> int:
    if settings.rooms.satellites:
        from commands.rooms import serve_hub  # only with satellites: the wyoming package loads here

        return await serve_hub(settings, runtime)
    microphone, speaker = open_audio(settings.audio)
    async with runtime:  # around the assistant: its last status and history come after every task stopped
        async with assistant(settings, microphone, speaker, timeline, on_task_change=runtime.task_changed) as coordinator:
            runtime.attach(Probes(
                listener_up=lambda: coordinator.core.listener_up,
                phase=lambda: coordinator.phase.value,
                sessions_opened=lambda: coordinator.listener.sessions_opened,
                session_age_s=lambda: coordinator.listener.session_age_s,
                weak_matches=lambda: coordinator.parts.narrator.weak_matches,
                inexact_reads=lambda: coordinator.parts.narrator.inexact_reads,
                cost_today=lambda: None if coordinator.parts.cost is None else coordinator.parts.cost.summary().today.parts(),
            ))  # fmt: skip
            log.info("handoff is listening: say %r followed by a command (Ctrl-C stops)", settings.listener.wake_phrase)
            code = await coordinator.run()
            runtime.stopping("stopping" if code == 0 else f"stopping after a fatal error (exit {code})")
            if coordinator.fatal_message:
                print(f"handoff: {redact(coordinator.fatal_message, [settings.realtime.api_key])}", file=sys.stderr)
    return code


def status_files(settings: Settings) -> StatusFiles:
    service = settings.service
    return StatusFiles(
        status_path=settings.state_dir / STATUS_FILE,
        history=HistoryStore(settings.state_dir / HISTORY_FILE, service.history_max_rows),
        keep_overheard=settings.log.overheard,
        min_interval_s=service.status_min_interval_s,
        heartbeat_s=service.status_heartbeat_s,
    )


def run_run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    require_api_key(settings)
    findings = preflight(settings)
    errors = errors_of(findings)
    if errors:
        for finding in errors:
            print(f"handoff: {finding.message}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, secrets=[settings.realtime.api_key], file=settings.log.file,
                      max_bytes=settings.log.max_bytes, backups=settings.log.backups)  # fmt: skip
    for finding in findings:  # problems and warnings: said once, the assistant starts anyway
        log.warning("%s", finding.line())
    problems: list[BaseException] = []
    try:
        return asyncio.run(run_live(settings))
    except* (AudioDeviceError, AudioFileError, TaskConfigError) as group:
        problems.extend(group.exceptions)
    # A device or configuration problem is a clear line, not a traceback.
    for exc in problems:
        print(f"handoff: {redact(str(exc), [settings.realtime.api_key])}", file=sys.stderr)
    return 2


def run_auto(args: argparse.Namespace) -> int:
    """The README's first command: live with a key, the offline demo without one."""
    settings = settings_from_args(args)
    if settings.realtime.api_key:
        return run_run(args)
    from commands import demo  # only here: the live command does not load the simulator

    print("handoff: no OPENAI_API_KEY found, so this is the offline demo against the built-in simulator.")
    print("         Put your key in .env (see .env.example) to run the live assistant.\n")
    return demo.run(argparse.Namespace(output_wav=None, log_level=getattr(args, "log_level", None)))
