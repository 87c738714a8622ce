"""The coordinator's sync parts: the phase table and the mute holders."""

import pytest

from decisions.errors import IllegalTransition
from decisions.mute import MuteHolders
from handoff import TRANSITIONS, Phase, PhaseMachine


def test_a_command_cycle_walks_the_table():
    changes = []
    machine = PhaseMachine(Phase.RESTARTING, on_change=lambda old, new, ev: changes.append((old, new, ev)))
    for event in ("listener_ready", "command_routed", "narration_started", "narrations_finished", "listener_lost", "listener_ready"):
        machine.fire(event)
    assert machine.phase is Phase.LISTENING
    assert [new for _, new, _ in changes] == [
        Phase.LISTENING, Phase.ROUTING, Phase.NARRATING, Phase.RESTARTING, Phase.LISTENING,
    ]  # the self-loop (restarting, listener_lost) is not a change and is not reported


@pytest.mark.parametrize(
    "phase, event",
    [(Phase.ROUTING, "command_routed"), (Phase.NARRATING, "command_routed"), (Phase.RESTARTING, "command_routed"),
     (Phase.LISTENING, "narrations_finished"), (Phase.NARRATING, "recycle")],
)
def test_illegal_transitions_raise(phase, event):
    machine = PhaseMachine(phase)
    with pytest.raises(IllegalTransition):
        machine.fire(event)
    assert machine.phase is phase


def test_every_phase_can_reach_listening():
    reachable = {Phase.LISTENING}
    changed = True
    while changed:
        changed = False
        for (src, _), dst in TRANSITIONS.items():
            if dst in reachable and src not in reachable:
                reachable.add(src)
                changed = True
    assert reachable == set(Phase)


def test_mute_is_held_while_any_holder_remains():
    mute = MuteHolders()
    assert not mute.muted
    with mute.hold("narration"):
        with mute.hold("chime"):
            assert mute.muted
        assert mute.muted
    assert not mute.muted


def test_mute_holder_released_on_error():
    mute = MuteHolders()
    with pytest.raises(ZeroDivisionError):
        with mute.hold("narration"):
            1 / 0
    assert not mute.muted
    with mute.hold("narration"):
        with pytest.raises(RuntimeError):
            with mute.hold("narration"):
                pass
