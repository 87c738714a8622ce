"""Pairing a satellite with its hub: a code shown on the satellite, typed on the hub.

    satellite$ handoff satellite pair        -> "Pairing code: 7KQM-2XF9-HT4C (10 minutes)"
    hub$       handoff rooms pair kitchen 7KQM-2XF9-HT4C

The code is 60 random bits, used once, for `WINDOW_S`, and five wrong tries close it. The hub
connects over TLS asking for `PAIR_NAME`; neither side knows the other's certificate yet, and
each proves it knows the code, bound to both certificates as that connection saw them:

    hub -> satellite:  its certificate, HMAC-SHA256(code, "hub" | satellite's | hub's fingerprint)
    satellite -> hub:  HMAC-SHA256(code, "satellite" | satellite's | hub's fingerprint)

Each side then pins the other's certificate (rooms.keys) and the window closes. Someone in the
middle would see its own certificate in one of the two, so its proof never matches, and guessing
60 bits offline within the window is out of reach; on the satellite's pairing connection nothing
else is served. Built on TLS and HMAC from the standard library: no cipher of our own.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from config.rooms import hub_keys_folder, pinned_satellite
from rooms.keys import (
    PAIR_NAME, Identity, fingerprint, hub_context, identity, peer_pem, short_fingerprint, write_private, write_public,
)

log = logging.getLogger("handoff.rooms")

WINDOW_S = 600.0
MAX_FAILURES = 5
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base 32: no I, L, O, U
CODE_CHARS = 12  # 60 bits
MAX_LINE = 16384


class PairingError(Exception):
    """One sentence saying what to change."""


def new_code() -> str:
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_CHARS))
    return "-".join(raw[i:i + 4] for i in range(0, CODE_CHARS, 4))


def normal_code(typed: str) -> str | None:
    """The code as typed ("7kqm 2xf9-ht4c", an O for a zero) -> its canonical form, or None."""
    raw = typed.strip().upper().replace("-", "").replace(" ", "").replace("O", "0").replace("I", "1").replace("L", "1")
    if len(raw) != CODE_CHARS or any(c not in ALPHABET for c in raw):
        return None
    return "-".join(raw[i:i + 4] for i in range(0, CODE_CHARS, 4))


def proof(code: str, role: str, satellite_pem: str, hub_pem: str) -> str:
    message = f"handoff pairing\n{role}\n{fingerprint(satellite_pem)}\n{fingerprint(hub_pem)}".encode()
    return hmac.new(code.encode(), message, hashlib.sha256).hexdigest()


@dataclass
class SatelliteKeys:
    """`handoff satellite`'s keys, its paired hub and its pairing window, in `folder`."""

    folder: Path
    name: str = "satellite"

    @property
    def identity(self) -> Identity:
        return identity(self.folder, f"satellite {self.name}")

    def hub_pem(self) -> str | None:
        path = self.folder / "hub.pem"
        return path.read_text() if path.exists() else None

    def pin_hub(self, pem: str) -> None:
        write_public(self.folder / "hub.pem", pem)

    def open_window(self, now: float | None = None) -> str:
        code = new_code()
        window = {"code": code, "expires": (now or time.time()) + WINDOW_S, "failures": 0}
        write_private(self.folder / "pairing.json", json.dumps(window).encode())
        return code

    def _window(self, now: float) -> dict[str, Any] | None:
        path = self.folder / "pairing.json"
        try:
            window = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(window, dict) or window.get("expires", 0) < now or window.get("failures", 0) >= MAX_FAILURES:
            path.unlink(missing_ok=True)
            return None
        return window

    def check(self, hub_pem: str, claimed: str, now: float | None = None) -> str | None:
        """The hub's proof: the satellite's answer when it holds (the hub is pinned and the window
        closed), else None (a failure is counted)."""
        now = now or time.time()
        window = self._window(now)
        if window is None:
            return None
        own = self.identity.cert_pem
        if not hmac.compare_digest(proof(window["code"], "hub", own, hub_pem), claimed):
            window["failures"] = window.get("failures", 0) + 1
            write_private(self.folder / "pairing.json", json.dumps(window).encode())
            return None
        self.pin_hub(hub_pem)
        (self.folder / "pairing.json").unlink(missing_ok=True)
        return proof(window["code"], "satellite", own, hub_pem)


@dataclass
class HubKeys:
    """The hub's keys and its paired satellites, under the state directory."""

    state_dir: Path

    @property
    def identity(self) -> Identity:
        return identity(hub_keys_folder(self.state_dir), "hub")

    def satellite_pem(self, room: str) -> str | None:
        path = pinned_satellite(self.state_dir, room)
        return path.read_text() if path.exists() else None

    def pin(self, room: str, pem: str) -> None:
        write_public(pinned_satellite(self.state_dir, room), pem)


def hub_keys(settings: Any) -> HubKeys:
    return HubKeys(settings.state_dir)


def satellite_keys(settings: Any) -> SatelliteKeys:
    return SatelliteKeys(settings.state_dir / "rooms" / "satellite", settings.rooms.satellite_name)


async def answer_pairing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keys: SatelliteKeys,
                         on_paired: Callable[[str], object] = lambda pem: None) -> bool:  # fmt: skip
    """The satellite's side of one pairing connection: True when a hub paired."""
    answer: dict[str, str] = {"refused": "no"}
    paired = False
    try:
        async with asyncio.timeout(10):
            line = await reader.readuntil(b"\n")
        request = json.loads(line[:MAX_LINE])
        hub_pem, claimed = request["certificate"], request["proof"]
        fingerprint(hub_pem)  # a certificate at all
        reply = keys.check(hub_pem, claimed) if isinstance(claimed, str) else None
        if reply is not None:
            answer, paired = {"proof": reply}, True
            on_paired(hub_pem)
            log.info("paired with a hub (%s)", fingerprint(hub_pem)[:16])
        else:
            log.warning("a pairing attempt failed (no window open, or the wrong code)")
    except (OSError, ValueError, KeyError, TypeError, TimeoutError, asyncio.IncompleteReadError,
            asyncio.LimitOverrunError) as exc:  # fmt: skip
        log.info("a pairing attempt broke off: %s", exc.__class__.__name__)
    try:
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
    except (OSError, ConnectionError):
        pass
    writer.close()
    return paired


async def pair_with(host: str, port: int, room: str, keys: HubKeys, typed_code: str, timeout_s: float = 10.0) -> str:
    """The hub's side: pairs with the satellite at host:port; returns its short fingerprint."""
    code = normal_code(typed_code)
    if code is None:
        raise PairingError(f"{typed_code!r} is not a pairing code (12 letters and digits, as `handoff satellite pair` shows them).")
    own = keys.identity
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port, ssl=hub_context(own, None), server_hostname=PAIR_NAME)
            satellite_pem = peer_pem(writer.get_extra_info("ssl_object"))
            if satellite_pem is None:
                raise PairingError("the satellite showed no certificate; is it `handoff satellite`?")
            hub_pem = own.cert_pem
            writer.write(json.dumps({"certificate": hub_pem, "proof": proof(code, "hub", satellite_pem, hub_pem)}).encode() + b"\n")
            await writer.drain()
            answer = json.loads((await reader.readuntil(b"\n"))[:MAX_LINE])
            writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
        raise PairingError(f"could not pair with tcp://{host}:{port} ({exc.__class__.__name__}: {exc}); is "
                           "`handoff satellite` running there, and the address in SATELLITES right?") from None
    claimed = answer.get("proof") if isinstance(answer, dict) else None
    if not isinstance(claimed, str) or not hmac.compare_digest(claimed, proof(code, "satellite", satellite_pem, hub_pem)):
        raise PairingError("the satellite refused the code: run `handoff satellite pair` there again and type the new code "
                           "(a code is good for 10 minutes and one pairing).")
    keys.pin(room, satellite_pem)
    return short_fingerprint(satellite_pem)
