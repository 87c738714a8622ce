"""The CLI start-up benchmark runs and prints its five rows (figures not asserted: the test that
status and history load none of the assistant's libraries is in tests/service/test_state_folder.py, a
satellite's in tests/rooms/test_rooms_wire.py)."""

from __future__ import annotations

from benchmarks import cli_startup


def test_it_prints_the_baselines_and_both_commands(capsys):
    assert cli_startup.main(["--runs", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| python -c pass (bare start)", "| every subcommand imported (before)", "| handoff status", "| handoff history",
        "| a satellite's modules",
    ]  # fmt: skip
