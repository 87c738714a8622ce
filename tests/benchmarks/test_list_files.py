"""The list_files benchmark runs and prints both rows (figures not asserted)."""

from __future__ import annotations

from benchmarks import list_files


def test_it_prints_the_baseline_and_the_bounded_listing(capsys):
    assert list_files.main(["--entries", "2000"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| before", "| list_files"))]
    assert len(rows) == 2 and rows[0].endswith("| 1.000 |")
