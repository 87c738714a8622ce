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
    rooms = [r[0] for r in rows(out, "") if r[1] in modes]
    assert [r.split(" (")[0] for r in rooms[::3]] == ["quiet room", "noisy room", "overheard room", "overheard room"], out
    assert [r[1] for r in rows(out, "") if r[1] in modes] == modes * 4
    quiet = {r[1]: r for r in rows(out, "quiet room")}
    # The privacy invariant: in a silent room the gated modes upload nothing at all.
    assert quiet["speech_only"][2] == "0.0" and quiet["wake_word"][2] == "0.0"
    assert quiet["continuous"][3] == "1.000"
    for mode in modes:
        assert [r[1] for r in rows(out, mode)] == ["20", "10"]
