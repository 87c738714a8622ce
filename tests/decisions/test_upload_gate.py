"""The upload gate driven with synthetic verdicts and a hand-held clock (20 ms chunks)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from decisions.upload_gate import (
    TRANSITIONS, GateEvent, GateState, IllegalTransition, KeywordHit, UploadGate, UploadGateSettings, UploadMode,
)

CHUNK_S = 0.02
CHUNK_BYTES = 960


class Mic:
    """Feeds numbered chunks (each chunk's bytes name its index) at 20 ms steps; records what went up."""

    def __init__(self, gate: UploadGate) -> None:
        self.gate = gate
        self.index = 0
        self.sent: list[int] = []

    @property
    def now(self) -> float:
        return self.index * CHUNK_S

    def feed(self, seconds: float, speech: bool, hit_at: float | None = None, hit_start: float | None = None) -> None:
        for _ in range(round(seconds / CHUNK_S)):
            self.index += 1
            hit = None
            if hit_at is not None and abs(self.now - hit_at) < CHUNK_S / 2:
                hit = KeywordHit("computer", start_s=hit_start if hit_start is not None else hit_at - 0.6, detected_s=self.now)
            chunk = self.index.to_bytes(4, "little") * (CHUNK_BYTES // 4)
            for out in self.gate.feed(chunk, self.now, speech, hit):
                self.sent.append(int.from_bytes(out[:4], "little"))

    def sent_seconds(self) -> float:
        return len(self.sent) * CHUNK_S


def gate(mode: UploadMode, **overrides: float) -> Mic:
    return Mic(UploadGate(UploadGateSettings(mode=mode, **overrides)))


def test_continuous_sends_everything():
    mic = gate(UploadMode.CONTINUOUS)
    mic.feed(1.0, speech=False)
    mic.feed(0.5, speech=True)
    assert mic.sent == list(range(1, 76))


@pytest.mark.parametrize("mode", [UploadMode.SPEECH_ONLY, UploadMode.ON_DEVICE_WAKE])
def test_silence_uploads_nothing(mode):
    mic = gate(mode)
    mic.feed(30.0, speech=False)
    assert mic.sent == []
    assert mic.gate.state is GateState.QUIET
    assert mic.gate.next_deadline() is None


def test_onset_sends_the_preroll_first_then_speech_then_the_hangover():
    mic = gate(UploadMode.SPEECH_ONLY, preroll_s=0.3, hangover_s=1.0)
    mic.feed(2.0, speech=False)  # chunks 1..100
    mic.feed(1.0, speech=True)  # chunks 101..150
    mic.feed(3.0, speech=False)  # 151..300
    # At least 300 ms (15 chunks) before the onset chunk 101, in order, no gaps, no repeats.
    assert mic.sent[0] <= 101 - 15
    assert mic.sent == list(range(mic.sent[0], mic.sent[-1] + 1))
    # The hangover: 1 s of silence after the last speech chunk (150) and no more.
    assert mic.sent[-1] == 150 + 50
    assert mic.gate.state is GateState.QUIET


def test_a_pause_shorter_than_the_hangover_does_not_split_the_command():
    mic = gate(UploadMode.SPEECH_ONLY, hangover_s=1.0)
    mic.feed(1.0, speech=False)
    mic.feed(0.6, speech=True)
    mic.feed(0.9, speech=False)  # "computer ... what time is it"
    mic.feed(1.0, speech=True)
    mic.feed(2.0, speech=False)
    assert mic.sent == list(range(mic.sent[0], mic.sent[-1] + 1))  # one contiguous upload


def test_a_pause_longer_than_the_hangover_ends_the_upload_and_the_next_onset_has_its_own_preroll():
    mic = gate(UploadMode.SPEECH_ONLY, hangover_s=0.6, preroll_s=0.4)
    mic.feed(1.0, speech=False)
    mic.feed(0.5, speech=True)  # 51..75
    mic.feed(2.0, speech=False)  # 76..175: 0.6 s of hangover is chunks 76..105
    mic.feed(0.5, speech=True)  # 176..200
    assert 105 in mic.sent and 106 not in mic.sent
    assert 176 - 20 in mic.sent and 150 not in mic.sent


def test_the_deadline_is_the_hangover_end_and_advance_closes_the_gate_without_audio():
    mic = gate(UploadMode.SPEECH_ONLY, hangover_s=1.0)
    mic.feed(0.5, speech=True)
    assert mic.gate.next_deadline() == pytest.approx(0.5 + 1.0)
    mic.gate.advance(1.4)
    assert mic.gate.state is GateState.SENDING
    mic.gate.advance(1.5)
    assert mic.gate.state is GateState.QUIET
    assert mic.gate.next_deadline() is None


def test_wake_mode_uploads_nothing_for_speech_without_the_keyword():
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(1.0, speech=False)
    mic.feed(2.0, speech=True)  # overheard talk
    mic.feed(3.0, speech=False)
    assert mic.sent == []
    assert mic.gate.state is GateState.QUIET


def test_a_keyword_hit_sends_the_utterance_from_its_preroll_then_streams():
    mic = gate(UploadMode.ON_DEVICE_WAKE, preroll_s=0.3)
    mic.feed(1.0, speech=False)  # 1..50
    # Speech from chunk 51 (t=1.0); the spotter recognises "computer" at t=1.6, said from t=1.0.
    mic.feed(1.5, speech=True, hit_at=1.6, hit_start=1.0)  # 51..125
    assert mic.sent[0] <= 51 - 15  # pre-roll before the wake word's onset
    assert mic.sent == list(range(mic.sent[0], 126))  # the held utterance, then live chunks
    assert mic.gate.state is GateState.SENDING


def test_a_keyword_late_in_an_utterance_is_not_a_wake():
    mic = gate(UploadMode.ON_DEVICE_WAKE, max_wake_lead_s=0.5)
    mic.feed(1.0, speech=False)
    mic.feed(2.0, speech=True, hit_at=2.5, hit_start=2.0)  # "I bought a new computer": starts 1 s in
    mic.feed(2.0, speech=False)
    assert mic.sent == []


def test_the_command_window_sends_the_command_after_a_long_pause_then_closes():
    mic = gate(UploadMode.ON_DEVICE_WAKE, hangover_s=0.8, command_window_s=5.0)
    mic.feed(1.0, speech=False)
    mic.feed(0.8, speech=True, hit_at=1.7, hit_start=1.0)  # "computer" alone; wake at t=1.7
    mic.feed(2.0, speech=False)  # a long pause: hangover ends, window stays open, nothing sent
    assert mic.gate.state is GateState.WINDOW
    assert mic.gate.next_deadline() == pytest.approx(1.7 + 5.0)
    sent_before_command = len(mic.sent)
    mic.feed(1.0, speech=True)  # the command, t=3.8..4.8, inside the window
    assert mic.sent[sent_before_command] < 190 + 1  # its own pre-roll before onset chunk 191
    mic.feed(1.0, speech=False)  # its hangover ends at 5.6: the command was sent, the gate closes
    assert mic.gate.state is GateState.QUIET
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # more talk (inside the old window, but after the command): not sent
    assert len(mic.sent) == sent


def test_a_rejected_false_wake_closes_its_window_but_never_cuts_speech_being_sent():
    mic = gate(UploadMode.ON_DEVICE_WAKE, hangover_s=0.8, command_window_s=5.0)
    mic.feed(1.0, speech=False)
    mic.feed(0.8, speech=True, hit_at=1.7, hit_start=1.0)  # "commuter" alone, taken for the wake word
    mic.gate.rejected()  # its transcript comes back while it is still being sent: nothing changes
    assert mic.gate.state is GateState.SENDING
    mic.feed(1.0, speech=False)
    assert mic.gate.state is GateState.WINDOW
    mic.gate.rejected()  # the listener ignored it: no command is coming
    assert mic.gate.state is GateState.QUIET and mic.gate.next_deadline() is None
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # chatter that the open window would have sent
    mic.feed(1.0, speech=False)
    assert len(mic.sent) == sent
    mic.gate.rejected()  # quiet: nothing to close
    assert mic.gate.state is GateState.QUIET


def test_the_command_window_expires_without_a_command():
    mic = gate(UploadMode.ON_DEVICE_WAKE, hangover_s=0.8, command_window_s=5.0)
    mic.feed(1.0, speech=False)
    mic.feed(0.8, speech=True, hit_at=1.7, hit_start=1.0)
    mic.feed(5.5, speech=False)  # past 6.7 s
    assert mic.gate.state is GateState.QUIET
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # after the window: overheard, not sent
    assert len(mic.sent) == sent


def test_a_wake_with_its_command_in_one_utterance_opens_no_window():
    mic = gate(UploadMode.ON_DEVICE_WAKE, hangover_s=0.8, command_window_s=5.0)
    mic.feed(1.0, speech=False)
    mic.feed(2.5, speech=True, hit_at=1.7, hit_start=1.0)  # "computer, what time is it"
    mic.feed(1.0, speech=False)  # hangover ends at 4.3
    assert mic.gate.state is GateState.QUIET
    assert mic.gate.next_deadline() is None


def test_a_keyword_hit_the_vad_missed_still_wakes_with_preroll():
    mic = gate(UploadMode.ON_DEVICE_WAKE, preroll_s=0.3)
    mic.feed(2.0, speech=False, hit_at=1.8, hit_start=1.2)
    assert mic.gate.state is GateState.SENDING
    assert mic.sent[0] <= round((1.2 - 0.3) / CHUNK_S) + 1


def test_speech_only_ignores_keyword_hits():
    mic = gate(UploadMode.SPEECH_ONLY)
    mic.feed(2.0, speech=False, hit_at=1.0)
    assert mic.sent == []


def test_the_held_audio_is_bounded():
    mic = gate(UploadMode.ON_DEVICE_WAKE, preroll_s=0.3, hold_s=2.0)
    mic.feed(60.0, speech=True)  # a minute of talk without the keyword
    assert mic.gate.held_bytes <= (2.0 + 0.04) * 48000
    mic.feed(10.0, speech=False)
    assert mic.gate.held_bytes <= (2.0 + 0.04) * 48000
    speech_only = gate(UploadMode.SPEECH_ONLY, preroll_s=0.3)
    speech_only.feed(10.0, speech=False)
    assert speech_only.gate.held_bytes <= (0.3 + 0.04) * 48000


def test_every_transition_is_in_the_table_and_others_raise():
    g = UploadGate(UploadGateSettings(mode=UploadMode.SPEECH_ONLY))
    with pytest.raises(IllegalTransition):
        g._fire(GateEvent.WAKE)
    assert (UploadMode.SPEECH_ONLY, GateState.QUIET, GateEvent.WAKE) not in TRANSITIONS
    assert all(mode is not UploadMode.CONTINUOUS for mode, _, _ in TRANSITIONS)


def test_settings_refuse_a_hold_shorter_than_preroll_plus_lead():
    with pytest.raises(ValueError):
        UploadGateSettings(preroll_s=0.5, max_wake_lead_s=0.5, hold_s=0.8)


def test_the_decisions_package_stays_pure():
    """No asyncio, network or SDK imports anywhere in decisions/: it must stay a sync core."""
    forbidden = {"asyncio", "openai", "websockets", "aiohttp"}
    root = Path(__file__).resolve().parents[2] / "decisions"
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"


def test_a_wake_word_starting_a_new_speech_run_in_ongoing_talk_is_accepted():
    mic = gate(UploadMode.ON_DEVICE_WAKE, preroll_s=0.3, max_wake_lead_s=0.7)
    mic.feed(1.0, speech=False)
    mic.feed(1.0, speech=True)  # someone else talking, t=1..2
    mic.feed(0.3, speech=False)  # a breath, shorter than the hangover: still one HEARING stretch
    # "computer" from t=2.3 (chunk 116), recognised at 2.9
    mic.feed(1.0, speech=True, hit_at=2.9, hit_start=2.3)
    assert mic.gate.state is GateState.SENDING
    assert mic.sent[0] <= 116 - 15  # the pre-roll before the wake word's run


def test_reset_forgets_held_audio_and_goes_quiet():
    mic = gate(UploadMode.SPEECH_ONLY)
    mic.feed(0.5, speech=True)
    assert mic.gate.state is GateState.SENDING
    mic.gate.reset()
    assert mic.gate.state is GateState.QUIET and mic.gate.held_bytes == 0 and mic.gate.next_deadline() is None


def test_a_command_window_opened_by_the_wake_phrase_alone_outlasts_the_chimes_mute():
    """"hey jarvis" ... (the chime mutes the microphone: the filter resets the gate) ... "what time is
    it": the command still goes up; once the window lapses, speech stays home again."""
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(0.5, speech=False)
    mic.feed(0.7, speech=True, hit_at=1.2, hit_start=0.5)  # the phrase alone
    mic.feed(1.5, speech=False)  # its hangover ends: the window is open
    assert mic.gate.state is GateState.WINDOW
    mic.gate.reset()  # the chime's mute ended
    assert mic.gate.state is GateState.WINDOW and mic.gate.held_bytes == 0
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # the command
    assert len(mic.sent) > sent + 40
    mic.feed(2.0, speech=False)
    assert mic.gate.state is GateState.QUIET  # a command was sent: no window after it
    mic.gate.reset()
    assert mic.gate.state is GateState.QUIET
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # not woken again: stays home
    assert len(mic.sent) == sent


def test_a_window_that_lapsed_during_a_mute_is_not_reopened_by_the_reset():
    mic = gate(UploadMode.ON_DEVICE_WAKE, command_window_s=3.0)
    mic.feed(0.7, speech=True, hit_at=0.7, hit_start=0.1)
    mic.feed(1.5, speech=False)
    assert mic.gate.state is GateState.WINDOW
    mic.gate.advance(mic.now + 5.0)  # muted chunks skipped past the window's end
    mic.gate.reset()
    assert mic.gate.state is GateState.QUIET


def test_speech_after_an_answer_stays_home_unless_the_answer_invited_a_follow_up():
    """Issue 19: after an answer, overheard speech is not uploaded in wake mode; after an answer
    that asked something, the reply goes up without the wake phrase, even across the earcon's
    mute (a reset), and only the first reply."""
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(1.0, speech=False)
    mic.feed(1.0, speech=True)  # "my computer is slow today", to someone else
    mic.feed(2.0, speech=False)
    assert mic.sent == []
    mic.gate.open_follow_up(mic.now + 6.0)
    mic.gate.reset()  # the earcon's mute
    assert mic.gate.state is GateState.WINDOW
    mic.feed(0.5, speech=False)
    start = mic.index + 1
    mic.feed(0.6, speech=True)  # "yes, ten minutes"
    assert mic.sent[0] < start <= mic.sent[-1]  # with its pre-roll
    mic.feed(8.0, speech=False)  # its hangover, then the window lapses
    sent = len(mic.sent)
    mic.gate.reset()
    mic.feed(1.0, speech=True)  # the follow-up was taken: nothing reopens it
    assert len(mic.sent) == sent and mic.gate.state is GateState.HEARING


def test_a_follow_up_invited_before_the_commands_hangover_ran_out_opens_after_the_mute():
    """A recording is not read while the answer plays: the command is still going up (its
    hangover not over in audio time) when the answer asks; the reply must still go up."""
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(0.5, speech=False)
    mic.feed(1.5, speech=True, hit_at=1.2, hit_start=0.5)  # "hey jarvis, unlock the front door"
    mic.feed(0.2, speech=False)
    assert mic.gate.state is GateState.SENDING
    mic.gate.open_follow_up(mic.now + 10.0)  # "Just to be sure: unlock the front door?"
    mic.gate.reset()  # the answer's mute ends
    assert mic.gate.state is GateState.WINDOW
    sent = len(mic.sent)
    mic.feed(2.0, speech=False)
    mic.feed(0.6, speech=True)  # "yes please", no wake phrase
    assert len(mic.sent) > sent


def test_a_follow_up_invited_while_a_paused_recordings_command_is_still_going_up_opens_when_it_ends():
    """A recording paused by the answer's mute is not reset (it goes on where it stopped): the
    window opens when the command's hangover runs out, and the reply goes up without a wake."""
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(0.5, speech=False)
    mic.feed(1.5, speech=True, hit_at=1.2, hit_start=0.5)  # "hey jarvis, unlock the front door"
    mic.feed(0.2, speech=False)
    mic.gate.command_heard()
    mic.gate.open_follow_up(mic.now + 10.0)  # "Just to be sure: unlock the front door?"
    assert mic.gate.state is GateState.SENDING
    mic.feed(2.0, speech=False)  # the hangover runs out in audio time, no reset
    assert mic.gate.state is GateState.WINDOW
    sent = len(mic.sent)
    mic.feed(0.6, speech=True)  # "yes please", no wake phrase
    assert len(mic.sent) > sent


def test_an_unused_follow_up_window_lapses():
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.gate.open_follow_up(mic.now + 2.0)
    mic.feed(2.5, speech=False)
    assert mic.gate.state is GateState.QUIET
    mic.gate.reset()
    assert mic.gate.state is GateState.QUIET
    mic.feed(1.0, speech=True)
    assert mic.sent == []


@pytest.mark.parametrize("mode", [UploadMode.SPEECH_ONLY, UploadMode.CONTINUOUS])
def test_a_follow_up_changes_nothing_where_speech_goes_up_anyway(mode):
    mic = gate(mode)
    mic.gate.open_follow_up(10.0)
    assert mic.gate.state in (GateState.QUIET, GateState.STREAMING)


def test_a_window_whose_command_was_taken_does_not_outlive_the_answers_mute():
    """The wake's window survives the chime's mute (its command is still to come), not the answer's:
    once the listener took a command for it, speech after the answer stays home (issue 19)."""
    mic = gate(UploadMode.ON_DEVICE_WAKE)
    mic.feed(0.5, speech=False)
    mic.feed(0.7, speech=True, hit_at=1.2, hit_start=0.5)  # the wake heard at the utterance's end
    mic.feed(1.5, speech=False)
    assert mic.gate.state is GateState.WINDOW
    mic.gate.command_heard()  # routed (at its commit, or by its transcript)
    mic.gate.reset()  # the answer's mute
    assert mic.gate.state is GateState.QUIET
    sent = len(mic.sent)
    mic.feed(1.0, speech=True)  # someone else, after the answer
    assert len(mic.sent) == sent
