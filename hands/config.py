"""The MCP servers' file (`MCP_CONFIG`, by default `<state dir>/mcp.json`), in the shape desktop
MCP clients use:

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "Europe/London"}},
        "home": {"url": "http://homeassistant.local:8123/api/mcp",
                 "headers": {"Authorization": "Bearer <long-lived token>"},
                 "allowedTools": ["HassTurnOn", "HassTurnOff"]}}}

Read here, checked whole: every problem is one sentence naming the server and what to change
(`handoff check` prints them all; the daemon refuses to start on any). `env` values and
`headers` values are secrets: `ServerConfig.secrets` lists them for redaction, and nothing here
ever puts one in a message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

_EMPTY: Mapping[str, str] = MappingProxyType({})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,39}$")
EFFECT_WORDS = ("reads", "acts", "confirms")  # tools.registry.Effect's values
MIN_SECRET_CHARS = 4  # shorter values ("1", "on") are no secret worth cutting out of every line


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: a command to start (stdio) or a URL to reach (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: _EMPTY, repr=False)  # secrets: never shown
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY, repr=False)  # secrets: never shown
    allowed_tools: frozenset[str] | None = None  # None: every tool it lists
    # The user's word on what a tool does ("reads", "acts" or "confirms"), over its annotations:
    # for a server that says nothing about its tools (Home Assistant's), or says too little.
    effects: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def source(self) -> str:
        """How its tools are marked in the registry (`ToolSpec.source`)."""
        return f"mcp:{self.name}"

    @property
    def secrets(self) -> list[str]:
        """Every value to cut out of logs, results and errors: env and header values (and a
        header's token without its "Bearer "), and a URL's password and query values (a token
        passed as `?token=...`)."""
        found: list[str] = []
        url_values: list[str] = []
        if self.url:
            parts = urlsplit(self.url)
            url_values = [v for _, v in parse_qsl(parts.query)] + ([parts.password] if parts.password else [])
        for value in [*self.env.values(), *self.headers.values(), *url_values]:
            found.append(value)
            found.extend(part for part in value.split() if len(part) >= MIN_SECRET_CHARS)
        return [s for s in found if len(s) >= MIN_SECRET_CHARS]

    def allows(self, tool: str) -> bool:
        return self.allowed_tools is None or tool in self.allowed_tools


def load_servers(path: Path | None, named: bool = False) -> tuple[list[ServerConfig], list[str]]:
    """The servers in `path` and every problem found (empty: all usable). No file is no servers,
    unless the user named it (`named`: MCP_CONFIG), when it must exist."""
    if path is None:
        return [], []
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # (a state folder that is no folder is said elsewhere)
        return [], ([f"MCP_CONFIG={path} does not exist; create it or unset MCP_CONFIG."] if named else [])
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is not UTF-8 text"
        return [], [f"The MCP servers' file {path} cannot be read ({reason.lower()}); fix it or set MCP_CONFIG."]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [f"The MCP servers' file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                    f"{exc.msg.lower()}); fix it."]  # fmt: skip
    except RecursionError:
        return [], [f"The MCP servers' file {path} is nested too deeply to read; fix it."]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], [f"The MCP servers' file {path} has no \"mcpServers\" object; write "
                    '{"mcpServers": {"name": {"command": ...}}}.']  # fmt: skip
    found: list[ServerConfig] = []
    problems: list[str] = []
    for name, entry in servers.items():
        server, problem = _server(str(name), entry, path)
        if problem:
            problems.append(problem)
        elif server is not None:
            found.append(server)
    return found, problems


def _server(name: str, entry: Any, path: Path) -> tuple[ServerConfig | None, str | None]:
    where = f"The MCP server '{name}' in {path}"
    if not _NAME.match(name):
        return None, f"{where} needs a name of letters, digits, spaces, dots, dashes or underscores (at most 40); rename it."
    if not isinstance(entry, dict):
        return None, f"{where} must be an object with a \"command\" or a \"url\"."
    if entry.get("disabled") is True:
        return None, None
    command, url = entry.get("command"), entry.get("url")
    if command is not None and url is not None:
        return None, f"{where} has both a \"command\" and a \"url\"; keep one."
    if command is None and url is None:
        return None, f"{where} has neither a \"command\" (a program to start) nor a \"url\"; give one."
    allowed = entry.get("allowedTools")
    if allowed is not None and not _strings(allowed):
        return None, f"{where} has an \"allowedTools\" that is not a list of tool names; fix it."
    allowed_tools = frozenset(allowed) if allowed is not None else None
    effects = entry.get("effects", {})
    if not isinstance(effects, dict) or any(v not in EFFECT_WORDS for v in effects.values()):
        return None, f"{where} has \"effects\" that are not an object of tool names to reads, acts or confirms; fix them."
    effects = MappingProxyType(dict(effects))
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            return None, f"{where} has an empty \"command\"; name the program that starts it."
        args, env = entry.get("args", []), entry.get("env", {})
        if not _strings(args):
            return None, f"{where} has \"args\" that are not a list of strings; fix them."
        if not isinstance(env, dict) or not _strings(list(env.values())):
            return None, f"{where} has an \"env\" that is not an object of strings; fix it."
        return ServerConfig(name, command=command, args=tuple(args), env=MappingProxyType(dict(env)),
                            allowed_tools=allowed_tools, effects=effects), None  # fmt: skip
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        return None, f"{where} has a \"url\" that is not an http:// or https:// address; fix it."
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not _strings(list(headers.values())):
        return None, f"{where} has \"headers\" that are not an object of strings; fix them."
    return ServerConfig(name, url=url, headers=MappingProxyType(dict(headers)), allowed_tools=allowed_tools,
                        effects=effects), None


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
