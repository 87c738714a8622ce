"""Ids shaped like the real service's: a prefix and 21 letters/digits (`event_E6U11oE4PwyJSvJ9e3mzM`)."""

from __future__ import annotations

import random
import string

_ALPHABET = string.ascii_letters + string.digits


class IdFactory:
    """Makes prefixed ids from its own random generator (seeded: repeatable runs)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def new(self, prefix: str, length: int = 21) -> str:
        return prefix + "_" + "".join(self._rng.choice(_ALPHABET) for _ in range(length))

    def event(self) -> str:
        return self.new("event")

    def item(self) -> str:
        return self.new("item")

    def response(self) -> str:
        return self.new("resp")

    def call(self) -> str:
        return self.new("call", 16)
