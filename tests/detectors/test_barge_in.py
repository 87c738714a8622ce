"""Barge-in (detectors.barge_in): the wake phrase alone cuts the narration, and what follows is
held until it is clearly no "stop", then goes up from just before the phrase."""

from __future__ import annotations

from decisions.upload_gate import KeywordHit
from detectors.barge_in import BargeInDetector, CommandHold, EchoVetoListener, Held, HoldSettings
from detectors.stop_word import StopHit, StopListener

CHUNK_S = 0.02


class Scripted:
    """A stop detector or a wake spotter that reports what it is told, at the given times."""

    def __init__(self, at: dict[float, object]) -> None:
        self.at = {round(t, 2): hit for t, hit in at.items()}
        self.resets = 0

    def feed(self, chunk: bytes, at: float):  # type: ignore[no-untyped-def]
        return self.at.get(round(at, 2))

    def reset(self) -> None:
        self.resets += 1


def chunks(start_s: float, end_s: float) -> list[Held]:
    n0, n1 = round(start_s / CHUNK_S), round(end_s / CHUNK_S)
    return [Held(i * 960, bytes([i % 256]) * 960, (i + 1) * CHUNK_S) for i in range(n0, n1)]


def test_the_wake_phrase_alone_is_a_command_hit_and_the_stop_phrase_a_stop():
    wake = KeywordHit("hey jarvis", start_s=1.0, detected_s=1.8)
    detector = BargeInDetector(Scripted({2.4: StopHit("hey jarvis stop", end_s=2.4, stop_word="stop")}),
                               Scripted({1.8: wake}), "hey jarvis")
    hit = detector.feed(b"", 1.8)
    assert hit is not None and hit.command and hit.start_s == 1.0 and hit.phrase == "hey jarvis"
    stop = detector.feed(b"", 2.4)
    assert stop is not None and not stop.command and stop.stop_word == "stop"
    detector.reset()
    assert detector.stop.resets == detector.wake.resets == 1  # type: ignore[attr-defined]


def test_a_command_is_held_from_before_the_phrase_and_released_once_the_mute_has_lifted():
    hold = CommandHold(HoldSettings(preroll_s=0.5, decide_s=1.0, keep_s=4.0))
    for piece in chunks(0.0, 2.0):  # the narration plays; the user starts "hey jarvis" at 1.5 s
        hold.remember(piece)
    hold.hit(StopHit("hey jarvis", end_s=2.0, start_s=1.5, command=True))
    assert hold.holding
    assert all(hold.take(p, muted=False) == [] for p in chunks(2.0, 2.98))  # still deciding
    released = hold.take(chunks(2.98, 3.0)[0], muted=True)  # decided, but still muted: held on
    assert released == [] and hold.holding
    released = hold.take(chunks(3.0, 3.02)[0], muted=False)
    assert [p.offset for p in released] == [p.offset for p in chunks(1.0, 3.02)]  # from 0.5 s before it
    assert hold.released == 1 and not hold.holding
    after = chunks(3.02, 3.04)[0]
    assert hold.take(after, muted=False) == [after]  # then as usual


def test_hey_jarvis_stop_drops_what_was_held():
    hold = CommandHold()
    for piece in chunks(0.0, 2.0):
        hold.remember(piece)
    hold.hit(StopHit("hey jarvis", end_s=2.0, start_s=1.5, command=True))
    assert hold.take(chunks(2.0, 2.02)[0], muted=False) == []
    hold.hit(StopHit("hey jarvis stop", end_s=2.4, stop_word="stop"))  # the user said stop
    assert not hold.holding and hold.dropped == 1 and hold.released == 0
    piece = chunks(2.4, 2.42)[0]
    assert hold.take(piece, muted=False) == [piece]


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
