"""The stop-latency benchmark's quick mode runs end to end and prints its table (figures are not
asserted: the machine is shared)."""

from __future__ import annotations

from benchmarks import stop_latency


def test_the_stop_latency_quick_run_prints_one_trial(capsys):
    assert stop_latency.main(["--quick"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 0.5 s |")]
    assert len(rows) == 1 and rows[0].count(" ms") >= 6, out
    assert "budget 200 ms" in out
