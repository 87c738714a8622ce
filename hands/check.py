"""What `handoff check` says about the MCP servers' file: one sentence per problem.

- The file itself (bad JSON, a server with no command and no URL, ...): errors, the assistant
  will not start with them (`load_servers`).
- A command that is not there (not on PATH, not an executable file): a problem, that server
  will not work.
- A URL nothing answers at (`unreachable`: a TCP connection to its host and port, only in
  `handoff check`, which may use the network): a problem.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from hands.config import ServerConfig, load_servers

CONNECT_TIMEOUT_S = 3.0


def file_problems(path: Path | None, named: bool) -> tuple[list[ServerConfig], list[str]]:
    return load_servers(path, named)


def command_problems(servers: list[ServerConfig], search_path: str | None = None) -> list[str]:
    """Servers whose program is missing, found now rather than at the first command."""
    search_path = os.environ.get("PATH", os.defpath) if search_path is None else search_path
    problems = []
    for server in servers:
        program = server.command
        if program is None:
            continue
        if "/" in program:
            if not (Path(program).is_file() and os.access(program, os.X_OK)):
                problems.append(f"The MCP server '{server.name}' runs {program}, which is not an executable file; "
                                "fix its \"command\".")  # fmt: skip
        elif shutil.which(program, path=search_path) is None:
            problems.append(f"The MCP server '{server.name}' runs {program}, which is not on PATH; install it or "
                            "give its full path as \"command\".")  # fmt: skip
    return problems


async def unreachable(servers: list[ServerConfig], timeout_s: float = CONNECT_TIMEOUT_S) -> list[str]:
    """Servers whose URL nothing answers at (a TCP connection to its host and port)."""

    async def problem(server: ServerConfig) -> str | None:
        assert server.url is not None
        parts = urlsplit(server.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        where = f"{parts.hostname}:{port}"  # never the whole URL: it may carry a token
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout_s)
        except (OSError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError):
                reason = "it did not answer in time"
            else:
                reason = (os.strerror(exc.errno) if exc.errno else "the connection failed").lower()
            return f"The MCP server '{server.name}' at {where} cannot be reached ({reason}); start it or fix its \"url\"."
        writer.close()
        return None

    found = await asyncio.gather(*(problem(s) for s in servers if s.url is not None))
    return [p for p in found if p]
