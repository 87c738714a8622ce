"""Small state machines that move together by one table (the h11 way): `Machines` holds one
state per machine (each an Enum) and `fire(event)` moves every machine the table has a row for,
or raises `IllegalTransition` and moves none. The coordinator's eight machines and each
command's life (`decisions.lifecycle`) are such tables."""

from __future__ import annotations

import enum
from typing import Any, Generic, Mapping, TypeVar

from decisions.errors import IllegalTransition

E = TypeVar("E", bound=enum.Enum)


class Table(Generic[E]):
    """Every legal move, keyed by (state, event); which machines an event moves is derived."""

    def __init__(self, rows: Mapping[tuple[enum.Enum, E], enum.Enum], initial: Mapping[type[enum.Enum], enum.Enum],
                 events: type[E]) -> None:  # fmt: skip
        self.rows = dict(rows)
        self.initial = dict(initial)
        self.machines: tuple[type[enum.Enum], ...] = tuple(initial)
        self.moved_by: dict[E, frozenset[type[enum.Enum]]] = {
            event: frozenset(type(state) for (state, ev) in self.rows if ev is event) for event in events
        }


class Machines(Generic[E]):
    """The machines' current states. `fire` moves all that an event concerns, or none."""

    def __init__(self, table: Table[E], states: dict[type[enum.Enum], enum.Enum] | None = None) -> None:
        self.table = table
        self.states = dict(table.initial if states is None else states)

    def __getitem__(self, machine: type[enum.Enum]) -> Any:
        return self.states[machine]

    def allows(self, event: E) -> bool:
        return all((self.states[m], event) in self.table.rows for m in self.table.moved_by[event])

    def fire(self, event: E) -> None:
        moves = {}
        for machine in self.table.moved_by[event]:
            current = self.states[machine]
            try:
                moves[machine] = self.table.rows[(current, event)]
            except KeyError:
                raise IllegalTransition(f"{event.value!r} is not allowed while {machine.__name__} is {current.value}") from None
        self.states.update(moves)
