"""The web page's idle-CPU benchmark runs end to end and prints its table (figures are not
asserted: the machine is shared)."""

from __future__ import annotations

import pytest

from benchmarks import web_idle


async def test_the_web_idle_benchmark_measures_three_daemons_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    await web_idle.main(seconds=2.0, rounds=1)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "%" not in line and "---" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| WEB_PORT=0 (no page)", "| page on, nobody looking", "| page on, one page open"]
