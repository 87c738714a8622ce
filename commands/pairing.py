"""`handoff rooms pair ROOM CODE` (on the hub) and `handoff satellite pair` (on the satellite):
pairing a `handoff satellite` with its hub (rooms.pairing). The wyoming package and the key
library load only here."""

from __future__ import annotations

import argparse
import asyncio
import sys

from config.settings import load_settings

EXIT_FAILED = 1
EXIT_USAGE = 2


def add_rooms_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rooms_action", metavar="ACTION", required=True)
    pair = sub.add_parser("pair", help="pair this hub with a room's satellite, with the code `handoff satellite pair` shows there")
    pair.add_argument("room", help="the room, as named in SATELLITES")
    pair.add_argument("code", nargs="+", help="the pairing code, e.g. 7KQM-2XF9-HT4C")


def run_rooms(args: argparse.Namespace) -> int:
    from rooms.pairing import PairingError, hub_keys, pair_with

    settings = load_settings({})
    spec = next((s for s in settings.rooms.satellites if s.room == args.room.lower()), None)
    if spec is None:
        named = ", ".join(s.room for s in settings.rooms.satellites) or "none"
        print(f"handoff rooms pair: {args.room} is not a room in SATELLITES (named: {named}); add it there first.", file=sys.stderr)
        return EXIT_USAGE
    if spec.unauthenticated:
        print(f"handoff rooms pair: the {spec.room} is marked unauthenticated: in SATELLITES; remove the mark to pair it.",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    try:
        fingerprint = asyncio.run(pair_with(spec.host, spec.port, spec.room, hub_keys(settings), " ".join(args.code)))
    except PairingError as exc:
        print(f"handoff rooms pair: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"Paired with the {spec.room} satellite (key {fingerprint}). A running hub uses it from its next connection.")
    return 0


def pair_satellite(settings) -> int:  # type: ignore[no-untyped-def]
    """`handoff satellite pair`: opens a pairing window; the running satellite (or the next one
    started) accepts the hub that types the code."""
    from rooms.keys import short_fingerprint
    from rooms.pairing import WINDOW_S, satellite_keys

    keys = satellite_keys(settings)
    code = keys.open_window()
    print(f"Pairing code: {code}  (good for {WINDOW_S / 60:.0f} minutes, for one hub)")
    print(f"On the hub:   handoff rooms pair {settings.rooms.satellite_name} {code}")
    print(f"This satellite's key: {short_fingerprint(keys.identity.cert_pem)}")
    if keys.hub_pem() is not None:
        print("It is paired with a hub now: that hub is replaced once the new one has paired.")
    return 0
