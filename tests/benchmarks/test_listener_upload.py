"""The upload benchmark's quick mode runs end to end and prints its tables (figures not asserted)."""

from __future__ import annotations

from benchmarks import listener_upload


def rows(text: str, first_cell: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith(f"| {first_cell}")]


def test_quick_run_prints_every_room_and_mode_and_a_quiet_room_sends_nothing(tmp_path, capsys):
    assert listener_upload.main(["--quick", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    modes = [m.value for m in listener_upload.UploadMode]
    upload_rows = [r for r in rows(out, "") if r[1].split(" (")[0].split(",")[0] in modes]
    rooms = [r[0].split(" (")[0] for r in upload_rows]
    assert sorted(set(rooms)) == ["noisy room", "overheard room", "quiet room"], out
    labels = list(dict.fromkeys(r[1] for r in upload_rows))
    assert [label.split(" (")[0] for label in labels] == [
        "continuous", "speech_only", "wake_word, pocketsphinx", "wake_word, shipped model"], labels
    assert 'shipped model ("hey jarvis": the default)' in labels[-1]
    quiet = {r[1]: r for r in rows(out, "quiet room")}
    # The privacy invariant: in a silent room the gated modes upload nothing at all.
    assert all(quiet[label][2] == "0.0" for label in labels[1:])
    assert quiet["continuous"][3] == "1.000"
    for label in labels:
        assert [r[1] for r in rows(out, label)] == ["20", "10"]


def test_the_floor_table_has_both_rooms_with_the_quiet_path_off_and_on_and_uploads_nothing(tmp_path, capsys):
    assert listener_upload.main(["--floor-minutes", "0.05", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    floor = [r for r in rows(out, "") if r[0].startswith(("-60 dBFS", "a microphone's hiss"))]
    assert [(r[0].split(" ")[0], r[1].split(" (")[0]) for r in floor] == [
        ("-60", "quiet path off"), ("-60", "quiet path on"), ("a", "quiet path off"), ("a", "quiet path on")]
    assert all(r[7] == "0" for r in floor)  # nothing uploaded where nobody talks


def test_the_quiet_path_rule_judges_through_a_vad_with_the_quiet_path_switched():
    """`wake_choice --quiet-path` (and `listener_upload --quiet-path`) measure the VAD's quiet path
    the other way from the shipped VAD, in the same run."""
    from benchmarks.wake_choice import QUIET_RULE, judges_for
    from detectors.vad import QUIET_MARGIN, VadSettings

    judges = judges_for("hey jarvis", ["shipped", QUIET_RULE])
    shipped = judges["shipped"].upload.detectors.vad.settings
    switched = judges[QUIET_RULE].upload.detectors.vad.settings
    assert shipped == VadSettings()
    assert switched == listener_upload.quiet_path(VadSettings().quiet_margin <= 0)
    assert switched.quiet_margin == (QUIET_MARGIN if VadSettings().quiet_margin <= 0 else 0.0)
