"""The pipeline upload benchmark's quick mode: the whole assistant in both modes, its table printed
(figures not asserted), and speech-only routes every command continuous routes."""

from __future__ import annotations

from benchmarks import listener_upload_pipeline
from tests.benchmarks.test_listener_upload import rows


def test_quick_run_prints_both_modes_and_speech_only_routes_what_continuous_routes(tmp_path, capsys):
    assert listener_upload_pipeline.main(["--quick", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = {r[0]: r for r in rows(out, "") if r[0] in ("continuous", "speech_only")}
    assert list(table) == ["continuous", "speech_only"], out
    assert table["continuous"][1] == "6/6", out  # every command of the quick set goes through
    assert table["speech_only"][1] == "6/6", out
    assert "routed in continuous but not in speech_only: none" in out
    assert table["continuous"][4] == "1.000" and float(table["speech_only"][4]) < 1, out  # less went up


def test_listening_rows_name_a_chunk_and_how_much_is_read_at_a_time() -> None:
    assert listener_upload_pipeline.chunk_sizes("20,40,20/40") == ((20, None), (40, None), (20, 40))
