"""Rooms settings: the satellites the hub connects to, and `handoff satellite`'s own address.

    SATELLITES=kitchen=tcp://kitchen.local:10700,office=unauthenticated:tcp://10.0.0.7:10700

A room is a paired `handoff satellite` (TLS, both keys pinned: rooms.keys, rooms.pairing) unless
marked `unauthenticated:`: a plain Wyoming satellite (wyoming-satellite, Home Assistant's), whose
connection carries the room's audio in the clear.

Wyoming has no authentication (as in Home Assistant): a satellite connection carries a room's
audio in the clear, so a satellite must be on the home network. An address that is not private,
link-local or loopback is refused unless SATELLITES_ALLOW_PUBLIC=true; a host name is checked
once it resolves (`address_problem`), at every connect.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

DEFAULT_PORT = 10700  # wyoming-satellite's usual port
_ROOM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


class NoticesTo(enum.Enum):
    """Which room hears a task's or a timer's notice."""

    ORIGIN = "origin"  # the room whose command started it (default)
    ALL = "all"  # every room
    ROOM = "room"  # one named room (RoomSettings.notices_room)


@dataclass(frozen=True)
class SatelliteSpec:
    room: str  # lower case, the name people say and history shows
    host: str
    port: int = DEFAULT_PORT
    unauthenticated: bool = False  # plain Wyoming (marked so in SATELLITES): no pairing, no encryption

    @property
    def uri(self) -> str:
        return f"tcp://{self.host}:{self.port}"


# The environment keys of rooms, with their defaults (RoomSettings takes its defaults from here).
ENV_DEFAULTS: dict[str, str] = {
    "SATELLITES": "",
    "SATELLITES_ALLOW_PUBLIC": "false",
    "MAX_REALTIME_SESSIONS": "2",
    "NOTICES_TO": "origin",
    "SATELLITE_RATE": "22050",
    "SATELLITE_LISTEN": "tcp://127.0.0.1:10700",
    "SATELLITE_NAME": "satellite",
}


@dataclass(frozen=True)
class RoomSettings:
    satellites: tuple[SatelliteSpec, ...] = ()  # empty: this machine's own mic and speaker (one room)
    allow_public: bool = ENV_DEFAULTS["SATELLITES_ALLOW_PUBLIC"] == "true"  # SATELLITES_ALLOW_PUBLIC: accept addresses outside the home network
    max_sessions: int = int(ENV_DEFAULTS["MAX_REALTIME_SESSIONS"])  # MAX_REALTIME_SESSIONS: narrations at once across rooms; a further room waits its turn
    notices_to: NoticesTo = NoticesTo(ENV_DEFAULTS["NOTICES_TO"])
    notices_room: str = ""  # with NoticesTo.ROOM
    satellite_rate: int = int(ENV_DEFAULTS["SATELLITE_RATE"])  # SATELLITE_RATE: the rate of the audio sent to a satellite's speaker
    ping_s: float = 5.0  # a ping this often; no answer to two in a row: the satellite is gone
    reconnect_initial_s: float = 0.25
    reconnect_max_s: float = 4.0  # a rebooted satellite is found again within this (plus its boot)
    connect_timeout_s: float = 3.0
    # A satellite that woke itself streams until the hub has understood a command: after this
    # long with none (a false wake), the hub says so (an empty transcript) and it stops.
    pipeline_timeout_s: float = 15.0
    announce_after_s: float = 30.0  # a satellite gone this long is announced in the other rooms (a blip is not)
    one_answer: bool = True  # with two rooms or more, a command heard in several is taken by one (rooms.arbiter)
    # `handoff satellite`: where it listens for its hub. Loopback by default: nothing reaches it
    # from outside until the user names the address (SATELLITE_LISTEN=tcp://0.0.0.0:10700).
    listen: SatelliteSpec = field(default_factory=lambda: _listen(ENV_DEFAULTS["SATELLITE_LISTEN"]))
    satellite_name: str = ENV_DEFAULTS["SATELLITE_NAME"]  # SATELLITE_NAME: the room `handoff satellite` says it is



def address_problem(address: str, allow_public: bool) -> str | None:
    """Why the hub must not talk to `address` (an IP address), or None."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"{address} is not an IP address"
    if allow_public or ip.is_loopback or ip.is_private or ip.is_link_local:
        return None
    return (f"{address} is not on the home network (Wyoming has no authentication: a room's audio would cross "
            "the internet unprotected); use the satellite's LAN address, or set SATELLITES_ALLOW_PUBLIC=true")


def parse_uri(room: str, uri: str, allow_public: bool, any_port: bool = False) -> tuple[SatelliteSpec | None, str | None]:
    """`tcp://host:port` -> the satellite, or one sentence saying what to change. `any_port`: port
    0 is a port to listen on, picked by the system (SATELLITE_LISTEN); no port is DEFAULT_PORT."""
    try:
        parts = urlsplit(uri.strip())
        port = DEFAULT_PORT if parts.port is None else parts.port
    except ValueError:
        return None, f"{room}={uri}: not a tcp://host:port address"
    if port == 0 and not any_port:
        return None, f"{room}={uri}: port 0 is no satellite's port (the default is {DEFAULT_PORT})"
    if parts.scheme != "tcp" or not parts.hostname or parts.path not in ("", "/"):
        return None, f"{room}={uri}: not a tcp://host:port address (for example tcp://192.168.1.20:10700)"
    try:
        ipaddress.ip_address(parts.hostname)
    except ValueError:
        return SatelliteSpec(room, parts.hostname, port), None  # a name: checked once it resolves
    problem = address_problem(parts.hostname, allow_public)
    return (None, f"{room}: {problem}") if problem else (SatelliteSpec(room, parts.hostname, port), None)


UNAUTHENTICATED = "unauthenticated:"


def _listen(uri: str) -> SatelliteSpec:
    """`handoff satellite`'s own address (a checked tcp://host:port)."""
    parts = urlsplit(uri)
    return SatelliteSpec("satellite", parts.hostname or "127.0.0.1", DEFAULT_PORT if parts.port is None else parts.port)


def hub_keys_folder(state_dir: Path) -> Path:
    """The hub's key and its paired satellites' certificates (rooms.pairing.HubKeys)."""
    return state_dir / "rooms" / "hub"


def pinned_satellite(state_dir: Path, room: str) -> Path:
    """The certificate of the room's paired satellite: present once `handoff rooms pair` worked."""
    return hub_keys_folder(state_dir) / "paired" / f"{room}.pem"


def parse_satellites(raw: str, allow_public: bool) -> tuple[tuple[SatelliteSpec, ...], list[str]]:
    satellites: list[SatelliteSpec] = []
    problems: list[str] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        room, _, uri = item.partition("=")
        room = room.strip().lower()
        if not _ROOM_NAME.match(room) or not uri:
            problems.append(f"SATELLITES: {item!r} is not room=tcp://host:port (room: letters, digits, - or _)")
            continue
        if any(s.room == room for s in satellites):
            problems.append(f"SATELLITES: the room {room} is named twice")
            continue
        plain = uri.strip().lower().startswith(UNAUTHENTICATED)
        spec, problem = parse_uri(room, uri.strip()[len(UNAUTHENTICATED):] if plain else uri, allow_public)
        if problem:
            problems.append(f"SATELLITES: {problem}")
        elif spec is not None:
            satellites.append(replace(spec, unauthenticated=plain))
    return tuple(satellites), problems


def room_settings(values: Mapping[str, str], problems: list[str]) -> RoomSettings:
    """RoomSettings from resolved key/value pairs; every problem appended as one sentence."""

    def get(key: str) -> str:
        return values.get(key, ENV_DEFAULTS[key]).strip()

    allow = get("SATELLITES_ALLOW_PUBLIC").lower()
    if allow not in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        problems.append(f"SATELLITES_ALLOW_PUBLIC={allow} is neither true nor false; set it in .env or the environment.")
    allow_public = allow in ("true", "yes", "on", "1")
    satellites, found = parse_satellites(get("SATELLITES"), allow_public)
    problems += [f"{p}; set SATELLITES in .env or the environment." for p in found]
    sessions, rate = get("MAX_REALTIME_SESSIONS"), get("SATELLITE_RATE")
    if not sessions.isdigit() or int(sessions) < 1:
        problems.append(f"MAX_REALTIME_SESSIONS={sessions} is not a whole number of at least 1; set it in .env or the environment.")
        sessions = "1"
    if not rate.isdigit() or not 8000 <= int(rate) <= 48000:
        problems.append(f"SATELLITE_RATE={rate} is not a sample rate from 8000 to 48000 (Hz); set it in .env or the environment.")
        rate = "22050"
    notices = get("NOTICES_TO").lower()
    notices_to, notices_room = NoticesTo.ORIGIN, ""
    if notices == "all":
        notices_to = NoticesTo.ALL
    elif notices not in ("origin", ""):
        notices_to, notices_room = NoticesTo.ROOM, notices
        if not any(s.room == notices for s in satellites):
            problems.append(f"NOTICES_TO={notices} is not origin, all or a room named in SATELLITES; set it in .env or the environment.")
    listen, problem = parse_uri("SATELLITE_LISTEN", get("SATELLITE_LISTEN"), allow_public=True, any_port=True)
    if problem:
        problems.append(f"{problem}; set it in .env or the environment.")
    name = get("SATELLITE_NAME").lower()
    if not _ROOM_NAME.match(name):
        problems.append(f"SATELLITE_NAME={name} is not a room name (letters, digits, - or _); set it in .env or the environment.")
    return RoomSettings(
        satellites=satellites, allow_public=allow_public, max_sessions=int(sessions), notices_to=notices_to,
        notices_room=notices_room, satellite_rate=int(rate), listen=replace(listen, room="satellite") if listen else RoomSettings().listen,
        satellite_name=name if _ROOM_NAME.match(name) else "satellite",
    )
