"""The tool-schema benchmark runs and prints both rows (figures not asserted)."""

from __future__ import annotations

from benchmarks import tool_schema_size


def test_it_prints_the_baseline_and_the_timer_tools(capsys):
    assert tool_schema_size.main([]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| before") or line.startswith("| with")]
    assert len(rows) == 2 and rows[0].endswith("| 1.00 |")
