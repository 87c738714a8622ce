"""`handoff web-url`: the address of the page `handoff run` serves, with its token when it needs
one (WEB_HOST set). Only reads settings, the status file and the token file: safe while the
daemon runs. Exit 0: the address; 1: no page (WEB_PORT=0, no token yet); 3: nothing running
serves it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from config.read_only import readable_settings
from config.settings import WebSettings
from service.status import STATUS_FILE, Liveness, StatusCorrupt, liveness, read_status
from web.token import page_url, read_token, token_path

EXIT_NOT_RUNNING = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where the daemon keeps its token (HANDOFF_STATE_DIR)")


def run(args: argparse.Namespace) -> int:
    settings = readable_settings({"HANDOFF_STATE_DIR": getattr(args, "state_dir", None)}, "web-url")
    if settings.web.port == 0:
        print("handoff serves no page: WEB_PORT=0. Set WEB_PORT (default 8788) and restart it.", file=sys.stderr)
        return 1
    if not _running(settings.state_dir):
        print(f"handoff is not running, so nothing serves its page on port {settings.web.port}; start it with "
              "`handoff run` first.", file=sys.stderr)  # fmt: skip
        return EXIT_NOT_RUNNING
    if settings.web.needs_token and read_token(settings.state_dir) is None:
        print(f"handoff has made no token yet ({token_path(settings.state_dir)}): start it with `handoff run` first.",
              file=sys.stderr)  # fmt: skip
        return 1
    print(web_line(settings.web, settings.state_dir, prefix="") or "", end="")
    return 0


def _running(state_dir: Path) -> bool:
    """A daemon is up on this state folder, as its status file says (a damaged file: perhaps)."""
    try:
        status = read_status(state_dir / STATUS_FILE)
    except StatusCorrupt:
        return True  # rewritten within a minute by a running daemon: give the address
    return status is not None and liveness(status, time.time()) in (Liveness.RUNNING, Liveness.UNHEALTHY)


def web_line(web: WebSettings, state_dir: Path, prefix: str = "page: ") -> str | None:
    """The page's address as a line for `handoff status` / `handoff web-url`; None: no page."""
    if web.port == 0:
        return None
    token = read_token(state_dir) if web.needs_token else None
    if web.needs_token and token is None:
        return None
    return f"{prefix}{page_url(web, token)}\n"
