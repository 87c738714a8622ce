"""The two-model decision (`detectors.wake_confirm.FusionCore`): fed scores with their times, no audio."""

from __future__ import annotations

import dataclasses

import pytest

from detectors.wake_confirm import STRICT, ConfirmSettings, Fusion, FusionCore

SETTINGS = ConfirmSettings(candidate_cutoff=0.1, micro_cutoff=0.7, threshold=0.7, window_s=1.0, phases=2, start_after_s=0)


def test_a_score_under_the_candidate_cutoff_opens_no_window():
    core = FusionCore(SETTINGS, 0.97)
    assert core.micro(0.1, 1.0) is Fusion.NOTHING
    assert core.deadline is None and not core.listening
    assert core.open(0, 0.99, 1.0) is Fusion.NOTHING  # openWakeWord is not listening: nothing it says counts


def test_a_candidate_starts_the_second_model_and_each_passing_score_keeps_the_window_open():
    core = FusionCore(SETTINGS, 0.97)
    assert core.micro(0.3, 1.0) is Fusion.START
    assert core.deadline == pytest.approx(2.0)
    assert core.micro(0.9, 1.3) is Fusion.NOTHING  # already listening: no second start
    assert core.micro(0.2, 1.6) is Fusion.NOTHING
    assert core.deadline == pytest.approx(2.6)
    assert core.peak_s == pytest.approx(1.3)  # microWakeWord's best: about where the phrase ended


def test_both_frame_grids_must_pass_the_threshold_somewhere_in_the_window():
    core = FusionCore(SETTINGS, 0.97)
    core.micro(0.9, 1.0)
    assert core.open(0, 0.95, 1.1) is Fusion.NOTHING  # one grid alone: the score that moves with frame edges
    assert core.open(1, 0.6, 1.2) is Fusion.NOTHING
    assert core.open(0, 0.2, 1.3) is Fusion.NOTHING  # a later low score does not undo the grid's best
    assert core.open(1, 0.8, 1.4) is Fusion.WAKE
    assert not core.listening


def test_the_window_closes_at_its_deadline_and_a_new_candidate_starts_afresh():
    core = FusionCore(SETTINGS, 0.97)
    core.micro(0.9, 1.0)
    core.open(0, 0.9, 1.2)
    assert core.tick(2.0) is Fusion.NOTHING  # at the deadline: still listening
    assert core.micro(0.05, 2.02) is Fusion.STOP  # past it
    assert core.deadline is None
    assert core.open(1, 0.9, 2.1) is Fusion.NOTHING
    assert core.micro(0.8, 5.0) is Fusion.START
    assert core.open(1, 0.9, 5.1) is Fusion.NOTHING  # the first window's grid-0 score is forgotten
    assert core.open(0, 0.9, 5.2) is Fusion.WAKE


def test_an_open_score_after_the_deadline_closes_the_window_instead_of_waking():
    core = FusionCore(SETTINGS, 0.97)
    core.micro(0.5, 1.0)
    core.open(0, 0.9, 1.5)
    assert core.open(1, 0.2, 2.5) is Fusion.STOP
    assert core.open(1, 0.9, 2.6) is Fusion.NOTHING


def test_reset_forgets_an_open_window():
    core = FusionCore(SETTINGS, 0.97)
    core.micro(0.5, 1.0)
    core.reset()
    assert core.deadline is None
    assert core.micro(0.5, 1.1) is Fusion.START


def test_a_score_heard_after_the_deadline_does_not_count():
    core = FusionCore(SETTINGS, 0.97)
    core.micro(0.9, 1.0)
    core.open(0, 0.9, 1.5)
    assert core.open(1, 0.9, 2.5) is Fusion.STOP


def test_microwakeword_must_pass_its_own_cutoff_in_the_same_window_whichever_model_comes_first():
    one_grid = ConfirmSettings(candidate_cutoff=0.1, micro_cutoff=0.7, threshold=0.8, window_s=1.0, phases=1, start_after_s=0)
    core = FusionCore(one_grid, 0.97)
    assert core.micro(0.3, 1.0) is Fusion.START
    assert core.open(0, 0.99, 1.1) is Fusion.NOTHING  # openWakeWord sure, microWakeWord not: "hey chavez"
    assert core.micro(0.75, 1.2) is Fusion.WAKE  # microWakeWord catches up within the window
    core = FusionCore(one_grid, 0.97)
    core.micro(0.95, 1.0)
    assert core.open(0, 0.8, 1.1) is Fusion.NOTHING  # not above the threshold
    assert core.open(0, 0.81, 1.2) is Fusion.WAKE
    core = FusionCore(one_grid, 0.97)
    core.micro(0.69, 1.0)
    core.open(0, 1.0, 1.1)
    assert core.micro(0.05, 2.1) is Fusion.STOP  # the window closed without microWakeWord passing 0.7
    assert core.micro(0.75, 3.0) is Fusion.START  # a new window: openWakeWord's 1.0 was for the last one
    assert core.open(0, 0.5, 3.1) is Fusion.NOTHING


def test_microwakeword_alone_still_wakes_at_its_own_cutoff_without_waiting_for_the_second_model():
    """openWakeWord scores some clean flite commands 0.45 ("hey jarvis, list my tasks") that
    microWakeWord scores 0.99: the second model only adds wakes."""
    core = FusionCore(SETTINGS, 0.97)
    assert core.micro(0.5, 1.0) is Fusion.START
    assert core.micro(0.98, 1.1) is Fusion.WAKE
    assert not core.listening and core.peak_s == pytest.approx(1.1)
    assert FusionCore(SETTINGS, 0.97).micro(0.98, 2.0) is Fusion.WAKE  # no window needed


def test_a_short_word_a_pause_and_speech_again_let_the_second_model_decide_alone():
    """"hey, <pause> jarvis": microWakeWord scores it near 0 and opens no candidate (issue 34)."""
    core = FusionCore(ConfirmSettings(pause_threshold=0.9, phases=1), 0.97)
    assert core.pause(1.0, 1.3, 1.8) is Fusion.START  # "hey" 0.3 s, 0.5 s of pause
    assert core.paused_from == 1.0 and core.deadline == pytest.approx(3.3)
    assert core.open(0, 0.85, 2.2) is Fusion.NOTHING  # under its own threshold
    assert core.open(0, 0.95, 2.4) is Fusion.WAKE
    assert core.micro(0.0, 2.5) is Fusion.NOTHING


def test_the_pause_rule_wants_a_short_word_and_a_pause_of_a_pause_s_length():
    core = FusionCore(ConfirmSettings(pause_threshold=0.9), 0.97)
    assert core.pause(1.0, 2.0, 2.5) is Fusion.NOTHING  # a whole sentence, not "hey"
    assert core.pause(1.0, 1.3, 3.0) is Fusion.NOTHING  # 1.7 s later: another utterance
    assert core.pause(1.0, 1.3, 1.35) is Fusion.NOTHING  # no pause at all
    assert FusionCore(ConfirmSettings(pause_threshold=None), 0.97).pause(1.0, 1.3, 1.8) is Fusion.NOTHING
    core.pause(1.0, 1.3, 1.8)
    assert core.tick(3.4) is Fusion.STOP and core.paused_from is None  # lapsed: the next window is ordinary


HELD = ConfirmSettings(candidate_cutoff=0.1, micro_cutoff=0.7, threshold=0.8, window_s=1.0, phases=1, start_after_s=0.25)


def test_a_candidate_holds_the_second_model_back_and_a_wake_microwakeword_makes_meanwhile_never_starts_it():
    """openWakeWord costs 0.1-0.3 s of CPU per start; microWakeWord alone passes its cutoff on most
    real commands a few frames after the candidate opened (issue 34, what listening costs)."""
    core = FusionCore(HELD, 0.97)
    assert core.micro(0.3, 1.0) is Fusion.HOLD
    assert core.holding and not core.listening and core.deadline == pytest.approx(2.0)
    assert core.micro(0.6, 1.1) is Fusion.NOTHING
    assert core.micro(0.98, 1.2) is Fusion.WAKE
    assert not core.holding and not core.listening and core.peak_s == pytest.approx(1.2)


def test_a_held_candidate_starts_the_second_model_once_its_time_comes_and_it_still_decides():
    core = FusionCore(HELD, 0.97)
    core.micro(0.8, 1.0)
    assert core.tick(1.2) is Fusion.NOTHING
    assert core.tick(1.25) is Fusion.START and core.listening
    assert core.tick(1.3) is Fusion.NOTHING  # started once
    assert core.open(0, 0.9, 1.3) is Fusion.WAKE  # microWakeWord's 0.8 and openWakeWord's 0.9, one window
    core = FusionCore(HELD, 0.97)
    core.micro(0.5, 1.0)
    assert core.micro(0.4, 1.3) is Fusion.START  # a score past the hold starts it too
    core = FusionCore(HELD, 0.97)
    core.micro(0.5, 1.0)
    core.reset()
    assert not core.holding and core.tick(1.5) is Fusion.NOTHING


def test_strict_every_wake_waits_for_the_second_model_even_when_microwakeword_is_sure():
    """"hey chavez", "hey jarvie", "a jar of peas" score 0.97-1.00 with microWakeWord (issue 34):
    its score alone no longer wakes."""
    core = FusionCore(dataclasses.replace(STRICT, start_after_s=0), 0.97)
    assert core.micro(0.99, 1.0) is Fusion.START
    assert core.micro(1.0, 1.1) is Fusion.NOTHING
    assert core.open(0, 0.9, 1.2) is Fusion.NOTHING
    assert core.open(0, 0.9, 1.28) is Fusion.WAKE
    assert core.peak_s == pytest.approx(1.1)  # the upload still starts from microWakeWord's peak


def test_the_second_model_must_hold_above_its_threshold_for_frames_frames_not_peak_once():
    """The phrase holds openWakeWord above 0.8 for 4-8 frames; most sound-alikes peak in 0-1."""
    core = FusionCore(dataclasses.replace(STRICT, start_after_s=0), 0.97)
    core.micro(0.9, 1.0)
    assert core.open(0, 1.0, 1.1) is Fusion.NOTHING  # one frame, however sure
    assert core.open(0, 0.5, 1.2) is Fusion.NOTHING
    assert core.open(0, 0.8, 1.3) is Fusion.NOTHING  # not above it
    assert core.open(0, 0.81, 1.4) is Fusion.WAKE  # two (not in a row: counted in the window)
    core = FusionCore(dataclasses.replace(STRICT, start_after_s=0), 0.97)
    core.micro(0.9, 1.0)
    core.open(0, 1.0, 1.1)
    assert core.micro(0.05, 2.3) is Fusion.STOP  # the window closed at one frame
    core.micro(0.9, 3.0)
    assert core.open(0, 1.0, 3.1) is Fusion.NOTHING  # a new window counts afresh


def test_a_pause_window_wants_its_frames_too():
    core = FusionCore(STRICT, 0.97)
    assert core.pause(1.0, 1.3, 1.8) is Fusion.START
    assert core.open(0, 0.99, 2.0) is Fusion.NOTHING  # "hey, <pause> jarvie": one frame
    assert core.open(0, 0.9, 2.1) is Fusion.NOTHING  # not above its threshold
    assert core.open(0, 0.95, 2.2) is Fusion.WAKE and core.paused_from == 1.0  # the upload starts at "hey"


@pytest.mark.parametrize("verify", [False, True])
def test_with_the_verifier_a_window_microwakeword_barely_opened_wakes_when_openwakeword_agrees(verify):
    # "jarvis, ..." alone: microWakeWord under 0.3, openWakeWord above its threshold; the verifier
    # (asked by the spotter on WAKE) judges it, so only with `verify` does the lower cutoff apply.
    settings = dataclasses.replace(SETTINGS, phases=1, verify=verify, verified_micro_cutoff=0.15)
    core = FusionCore(settings, 0.97)
    assert core.micro(0.2, 1.0) is Fusion.START
    assert core.open(0, 0.9, 1.1) is (Fusion.WAKE if verify else Fusion.NOTHING)


def test_with_the_verifier_microwakeword_must_still_pass_its_verified_cutoff():
    settings = dataclasses.replace(SETTINGS, phases=1, verify=True, verified_micro_cutoff=0.3)
    core = FusionCore(settings, 0.97)
    core.micro(0.2, 1.0)
    assert core.open(0, 0.99, 1.1) is Fusion.NOTHING
    assert core.micro(0.35, 1.2) is Fusion.WAKE  # its best in the window passes it: both agreed


@pytest.mark.parametrize("verify", [False, True])
def test_with_the_verifier_the_models_wake_at_the_cutoffs_its_weights_were_trained_on(verify):
    # The verifier's weights were trained on what a spotter at `verified_*` woke to (issue 34, session 17):
    # openWakeWord above 0.5, the pause rule above 0.7, microWakeWord alone above 0.5.
    settings = dataclasses.replace(SETTINGS, phases=1, threshold=0.8, verify=verify, verified_threshold=0.5,
                                   verified_pause_threshold=0.7, verified_alone_cutoff=0.5)
    core = FusionCore(settings, 0.97)
    assert core.micro(0.6, 1.0) is (Fusion.WAKE if verify else Fusion.START)  # alone
    core.reset()
    core.micro(0.3, 2.0)
    assert core.open(0, 0.6, 2.1) is (Fusion.WAKE if verify else Fusion.NOTHING)
    core.reset()
    assert core.pause(3.0, 3.3, 3.6) is Fusion.START
    assert core.open(0, 0.75, 3.7) is (Fusion.WAKE if verify else Fusion.NOTHING)


@pytest.mark.parametrize("verify", [False, True])
def test_with_the_verifier_a_wake_microwakeword_makes_alone_is_asked_at_its_peak_within_the_hold(verify):
    # At the grid weights' alone cutoff (0.5) microWakeWord passes it 150-250 ms before its peak, before the phrase's
    # end (issue 34, session 24): with `verified_alone_hold_s` the wake waits while it still rises, and comes at the
    # first frame that does not, timed from the peak; the hold's end wakes it too. Without the verifier: no hold.
    settings = dataclasses.replace(SETTINGS, phases=1, verify=verify, verified_alone_cutoff=0.5, verified_alone_hold_s=0.3)
    core = FusionCore(settings, 0.5)
    assert core.micro(0.55, 1.00) is (Fusion.START if verify else Fusion.WAKE)  # (held: the window opens as for any candidate)
    if not verify:
        return
    assert core.micro(0.0, 1.01) is Fusion.NOTHING  # (the stream's 0.0 between its scores is no fall)
    assert core.micro(0.8, 1.03) is Fusion.NOTHING
    assert core.micro(0.99, 1.06) is Fusion.NOTHING
    assert core.micro(0.99, 1.09) is Fusion.WAKE
    assert (core.peak, core.peak_s) == (0.99, 1.06)
    core.reset()
    core.micro(0.6, 2.0)
    assert core.micro(0.7, 2.2) is Fusion.NOTHING
    assert core.micro(0.8, 2.32) is Fusion.WAKE  # still rising at the hold's end
    assert (core.peak, core.peak_s) == (0.8, 2.32)


def test_a_held_wake_that_falls_under_the_alone_cutoff_is_still_asked_about():
    settings = dataclasses.replace(SETTINGS, phases=1, verify=True, verified_alone_cutoff=0.5, verified_alone_hold_s=0.3)
    core = FusionCore(settings, 0.97)
    core.micro(0.6, 1.0)
    assert core.micro(0.05, 1.03) is Fusion.WAKE  # (it passed the cutoff: a wake, at its first frame that did not rise)
    assert (core.peak, core.peak_s) == (0.6, 1.0)
