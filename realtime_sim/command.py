"""`handoff sim`: serve the Realtime + Responses simulator until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from config.logging_setup import configure_logging
from realtime_sim.config import SimConfig
from realtime_sim.server import SimServer
from realtime_sim.transcriber import CueSheet, CueSheetError, Recogniser, Transcriber

log = logging.getLogger("realtime_sim")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on; 0 picks a free one (default: 8765)")
    parser.add_argument("--seed", type=int, default=None, help="seed for random faults and ids (repeatable runs)")
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="probability (0-1) that a new connection suffers one random fault (default: 0)",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        default=None,
        metavar="FILE",
        help="what your recording says: lines of `seconds<TAB>words`, the seconds counted from the start of "
        "the recording (default: recognise it offline with pocketsphinx, roughly)",
    )
    parser.add_argument(
        "--session-length",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="sessions expire after this long: session_expired error, then close 1001 (default: 3600)",
    )
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="one-way network delay added to every WebSocket frame, both directions (RTT = 2x; default: 0)",
    )
    parser.add_argument(
        "--upgrade-delay-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="extra time each WebSocket handshake takes (TCP + TLS + upgrade; default: 0)",
    )


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve(config: SimConfig, host: str, port: int, transcriber: Transcriber | None = None) -> None:
    """Serve until SIGINT or SIGTERM (or cancelled); logs the base URL clients should use."""
    sim = SimServer(config, transcriber=transcriber)
    base_url = await sim.start(host, port)
    log.info("simulator listening on %s (set OPENAI_BASE_URL to this)", base_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Handlers of our own: a stop is clean even where SIGINT was inherited as ignored (a job
    # started in the background by a script) or comes as a service manager's SIGTERM.
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        await sim.stop()
        if transcriber is not None:
            transcriber.close()
        log.info("simulator stopped")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"handoff sim: --port {args.port} is not a port number; use 1-65535, or 0 to pick a free one.", file=sys.stderr)
        return 2
    problem = _flag_problem(args)
    if problem:
        print(f"handoff sim: {problem}", file=sys.stderr)
        return 2
    try:
        config = SimConfig(
            seed=args.seed,
            fault_rate=args.fault_rate,
            session_length_s=args.session_length,
            network_delay_s=args.delay_ms / 1000,
            upgrade_delay_s=args.upgrade_delay_ms / 1000,
            record_events=False,  # nobody reads the records of a standalone server: keep memory flat
        )
    except ValueError as exc:
        print(f"handoff sim: {exc}", file=sys.stderr)
        return 2
    configure_logging()
    try:
        transcriber = _transcriber(getattr(args, "transcripts", None))
    except CueSheetError as exc:
        print(f"handoff sim: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config, args.host, args.port, transcriber))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # the port is taken, or not ours to use: the user picks another
        print(f"handoff sim: {exc}; check --host, or pick another --port (0 picks a free one).", file=sys.stderr)
        return 2
    return 0


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags, in their own names (SimConfig's checks name its fields)."""
    if not 0.0 <= args.fault_rate <= 1.0:
        return f"--fault-rate {args.fault_rate:g} is not a probability; use a number from 0 to 1."
    if not args.session_length > 0:
        return f"--session-length {args.session_length:g} is not a length; use a positive number of seconds."
    for flag, value in (("--delay-ms", args.delay_ms), ("--upgrade-delay-ms", args.upgrade_delay_ms)):
        if not value >= 0:
            return f"{flag} {value:g} is not a delay; use 0 or more milliseconds."
    return None


def _transcriber(cue_sheet: Path | None) -> Transcriber:
    if cue_sheet is not None:
        cues = CueSheet.read(cue_sheet)
        log.info("speech in the recording says what %s says (%d cues)", cue_sheet, len(cues.cues))
        return cues
    log.info("no --transcripts: speech is recognised offline with pocketsphinx (roughly: speak clearly, "
             "or give a cue sheet)")  # fmt: skip
    return Recogniser()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="handoff sim", description="serve the Realtime + Responses simulator")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
