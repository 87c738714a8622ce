"""The page's token: random, made on the first run that needs it (WEB_HOST set), kept in
`<state dir>/web-token`, 0600. Stdlib only: `handoff status` and `handoff web-url` read it."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

from config.settings import WebSettings

TOKEN_FILE = "web-token"


def token_path(state_dir: Path) -> Path:
    return state_dir / TOKEN_FILE


def read_token(state_dir: Path) -> str | None:
    """The token, if the file is ours (not a link, not another user's: one planted there would be
    a token its planter knows)."""
    try:
        fd = os.open(token_path(state_dir), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return None
        with os.fdopen(fd, "r", encoding="ascii") as handle:
            fd = -1
            token = handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    return token or None


def load_or_create_token(state_dir: Path) -> str:
    """The token in the state folder, made (0600, never readable by others even for a moment)
    if there is none."""
    existing = read_token(state_dir)
    if existing is not None:
        os.chmod(token_path(state_dir), 0o600)  # a copy restored with looser permissions
        return existing
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    path = token_path(state_dir)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # an empty or unreadable one, or one that is not ours
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token


def same_token(given: str | None, expected: str) -> bool:
    """Constant time: how much of a guess was right does not show in how long the answer takes."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def page_url(web: WebSettings, token: str | None) -> str:
    host = web.bind_host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # listening everywhere: this machine's own address works from here
    if ":" in host:
        host = f"[{host}]"
    url = f"http://{host}:{web.port}/"
    return f"{url}?token={token}" if web.needs_token and token else url
