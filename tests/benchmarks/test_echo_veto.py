"""The twin-veto stop listeners the barge-in benchmark measures (benchmarks/echo_veto.py)."""

from __future__ import annotations

from benchmarks.echo_veto import BargeInListener, EchoVetoListener
from decisions.upload_gate import KeywordHit
from detectors.barge_in import BargeInDetector
from detectors.stop_word import StopHit, StopListener
from tests.detectors.test_barge_in import CHUNK_S, Scripted


class Said:
    """A twin stop phrase detector on what the speaker played: it spots the given words at the
    given times (its clock), as `StopPhraseDetector.spotted` does."""

    wake = "hey jarvis"

    def __init__(self, words: dict[float, str]) -> None:
        self.words = {round(t, 2): w for t, w in words.items()}
        self.spotted: list[tuple[str, float]] = []
        self.resets = 0

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        word = self.words.get(round(at, 2))
        if word is not None:
            self.spotted.append((word, at))
        return None

    def reset(self) -> None:
        self.resets += 1


def run_veto(listener: EchoVetoListener, until_s: float, passed: bool = True) -> list[StopHit]:
    hits = []
    for _ in range(round(until_s / CHUNK_S)):
        listener.heard_reference(bytes(960), narrating=True)
        hit = listener.hear(bytes(960), passed, narrating=True)
        if hit is not None:
            hits.append(hit)
    return hits


STOP = StopHit("hey jarvis stop", end_s=3.0, stop_word="stop", start_s=2.2)


def test_a_stop_the_narration_itself_said_is_vetoed_by_the_twin_on_what_was_played():
    listener = EchoVetoListener(Scripted({3.0: STOP}), Said({2.9: "stop"}), lead_s=0.5)  # said at 2.4 on the mic's clock
    assert run_veto(listener, 4.0) == [] and listener.vetoed == 1


def test_a_stop_the_narration_did_not_say_stands():
    listener = EchoVetoListener(Scripted({3.0: STOP}), Said({0.4: "stop", 2.9: "hey jarvis"}), lead_s=0.5)
    assert run_veto(listener, 4.0) == [STOP] and listener.vetoed == 0


def test_the_detectors_hear_every_cancelled_chunk_and_a_hit_needs_the_gates_passes():
    detector = Scripted({3.0: STOP})
    listener = EchoVetoListener(detector, None, min_passed=3)
    assert run_veto(listener, 4.0, passed=False) == [] and listener.vetoed == 1
    assert detector.resets == 0  # nothing the gate dropped restarted it mid-phrase (StopListener would)
    gated = Scripted({})
    before = StopListener(gated)  # the gated feed: a chunk the gate dropped restarts the detector
    before.hear(bytes(960), True, narrating=True)
    before.hear(bytes(960), False, narrating=True)
    assert gated.resets == 1
    listener = EchoVetoListener(Scripted({3.0: STOP}), None, min_passed=3)
    assert run_veto(listener, 4.0, passed=True) == [STOP]


def test_the_barge_in_listener_lets_the_wake_model_hear_what_the_gate_held_back_and_vetoes_the_narrations_own():
    """Every cancelled chunk reaches the wake model (the gate behind the canceller passed none of
    them here: the old listener fed it nothing), and a wake the narration itself said (its twin,
    fed what was played, heard it 1 s before) is vetoed; the stop phrase's search hears nothing
    the gate held back."""
    stop = Scripted({})
    wake = Scripted({1.0: KeywordHit("hey jarvis", 0.4, 1.0), 3.0: KeywordHit("hey jarvis", 2.4, 3.0)})
    twin = Scripted({0.1: KeywordHit("hey jarvis", 0.0, 0.1)})
    listener = BargeInListener(BargeInDetector(stop, wake, "hey jarvis"), twin, lambda: bytes(960), window_s=1.5)
    hits = [listener.hear(bytes(960), passed=False, narrating=True) for _ in range(200)]
    found = [(round(listener_at, 2), h) for listener_at, h in zip([(i + 1) * 0.02 for i in range(200)], hits) if h is not None]
    assert [(at, h.command, h.start_s) for at, h in found] == [(3.0, True, 2.4)]  # the one at 1.0 s was the narration's
    assert listener.vetoed == 1
    old = StopListener(BargeInDetector(Scripted({}), Scripted({1.0: KeywordHit("hey jarvis", 0.4, 1.0)}), "hey jarvis"))
    assert all(old.hear(bytes(960), passed=False, narrating=True) is None for _ in range(100))
