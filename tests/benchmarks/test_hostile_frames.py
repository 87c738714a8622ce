"""The hostile-frames benchmark runs in its quick mode and prints every row (figures not asserted)."""

from __future__ import annotations

from benchmarks import hostile_frames


def test_it_prints_the_baseline_and_each_hostile_row(capsys):
    assert hostile_frames.main(["--quick"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and " ms |" in line]
    assert len(rows) == 5 and rows[0].endswith("| 1 |")
