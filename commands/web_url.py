"""`handoff web-url`: the address of the page `handoff run` serves, with its token when it needs
one (WEB_HOST set). Only reads settings and the token file: safe while the daemon runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config.settings import WebSettings, load_settings
from web.token import page_url, read_token, token_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where the daemon keeps its token (HANDOFF_STATE_DIR)")


def run(args: argparse.Namespace) -> int:
    settings = load_settings({"HANDOFF_STATE_DIR": getattr(args, "state_dir", None)})
    print(web_line(settings.web, settings.state_dir, prefix="") or "", end="")
    if settings.web.port == 0:
        print("handoff serves no page: WEB_PORT=0. Set WEB_PORT (default 8788) and restart it.", file=sys.stderr)
        return 1
    if settings.web.needs_token and read_token(settings.state_dir) is None:
        print(f"handoff has made no token yet ({token_path(settings.state_dir)}): start it with `handoff run` first.",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def web_line(web: WebSettings, state_dir: Path, prefix: str = "page: ") -> str | None:
    """The page's address as a line for `handoff status` / `handoff web-url`; None: no page."""
    if web.port == 0:
        return None
    token = read_token(state_dir) if web.needs_token else None
    if web.needs_token and token is None:
        return None
    return f"{prefix}{page_url(web, token)}\n"
