from decisions.stages import Stage, StageTimes


def test_offsets_are_after_the_end_of_speech_in_stage_order() -> None:
    times = StageTimes()
    times.mark(Stage.FIRST_AUDIO, 10.6)
    times.mark(Stage.END_OF_SPEECH, 10.0)
    times.mark(Stage.COMMIT, 10.5)
    assert list(times.offsets().items()) == [("end_of_speech", 0.0), ("commit", 0.5), ("first_audio", 0.6)]


def test_the_first_mark_of_a_stage_wins() -> None:
    times = StageTimes()
    times.mark(Stage.COMMIT, 1.0)
    times.mark(Stage.COMMIT, 3.0)
    times.mark(Stage.TRANSCRIPT, 2.0)
    assert times.offsets() == {"commit": 0.0, "transcript": 1.0}


def test_nothing_marked_is_empty() -> None:
    assert StageTimes().offsets() == {}
