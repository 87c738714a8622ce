"""Which pending faults strike one connection, and when.

Scripted faults are shared by all connections (the first matching occurrence consumes one);
random faults belong to the connection they were drawn for. Event triggers are counted per
connection from the moment the fault is visible to it, and only while the role matches.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from realtime_sim.script import Fault, SimScript
from realtime_sim.session_config import Role


class FaultMatcher:
    def __init__(self, script: SimScript, own_faults: Sequence[Fault] = ()) -> None:
        self._script = script
        # Negative keys: the connection's own faults; positive: the script's sequence numbers.
        self._own = {-(index + 1): fault for index, fault in enumerate(own_faults)}
        self._counts: dict[int, int] = {}

    def _candidates(self) -> list[tuple[int, Fault]]:
        scripted = [(pending.seq, pending.fault) for pending in self._script.pending_faults]
        return scripted + list(self._own.items())

    def _take(self, key: int) -> Fault | None:
        return self._own.pop(key, None) if key < 0 else self._script.take_fault(key)

    @staticmethod
    def _targets(fault: Fault, role: Role) -> bool:
        return fault.target == "any" or fault.target == role

    def after_sent(self, event_type: str, role: Role) -> Iterator[Fault]:
        """Count one sent event; yield (consuming) each fault whose nth such event this was.
        Stop iterating when a fault ends the connection: the rest stay pending."""
        ready = []
        for key, fault in self._candidates():
            if fault.trigger_event == event_type and self._targets(fault, role):
                self._counts[key] = self._counts.get(key, 0) + 1
                if self._counts[key] >= fault.nth:
                    ready.append(key)
        for key in ready:
            taken = self._take(key)  # None when another connection took it meanwhile
            if taken is not None:
                yield taken

    def due(self, age_s: float, role: Role) -> Iterator[Fault]:
        """Yield (consuming) each timed fault due on a connection this old with this role."""
        for key, fault in self._candidates():
            if fault.after_s is not None and age_s >= fault.after_s and self._targets(fault, role):
                taken = self._take(key)
                if taken is not None:
                    yield taken

    def next_due_s(self, age_s: float) -> float | None:
        """The connection age at which the next timed fault falls due (None: no timed faults)."""
        upcoming = [f.after_s for _key, f in self._candidates() if f.after_s is not None and f.after_s > age_s]
        return min(upcoming, default=None)
