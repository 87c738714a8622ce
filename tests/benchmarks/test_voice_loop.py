"""The voice-loop and echo benchmarks' quick modes run end to end and print their tables
(figures are not asserted: the machine is shared)."""

from __future__ import annotations

from benchmarks import echo_choice, voice_loop, voice_to_voice


def rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]


# The quick run's sections, each a test of its own so that they run side by side.
async def test_the_latency_table_shows_warm_next_to_cold_at_each_rtt():
    table = rows(await voice_loop.latency_section(True, 2))
    warm, cold = voice_loop.mode(True), voice_loop.mode(False)
    latency = [r for r in table if r[0] in ("0", "50") and r[1] in (warm, cold)]
    assert [(r[0], r[1]) for r in latency] == [("0", warm), ("0", cold), ("50", warm), ("50", cold)], table
    assert all(r[2].endswith(" ms") and r[3].endswith(" ms") for r in latency)


async def test_the_speech_lost_table_has_both_narrators():
    table = rows(await voice_loop.lost_section(True))
    warm, cold = voice_loop.mode(True), voice_loop.mode(False)
    assert [r[0] for r in table[1:]] == [warm, cold] and all(r[1].endswith(" ms") for r in table[1:]), table


async def test_the_fast_runs_route_every_command_quiet_loaded_and_late():
    table = rows(await voice_loop.fast_section(True))
    warm, cold = voice_loop.mode(True), voice_loop.mode(False)
    fast = [r for r in table if r[0] in (warm, cold) and len(r) == 6]
    assert len(fast) == 2 and all(r[1].endswith(" of 3") for r in fast), table
    loaded = {r[0]: r for r in table if r[0] in ("quiet", "two CPU hogs", "server 1 s behind")}
    assert list(loaded) == ["quiet", "two CPU hogs", "server 1 s behind"], table
    assert loaded["two CPU hogs"][1].endswith(" of 3") and loaded["server 1 s behind"][1].endswith(" of 1"), table


async def test_voice_to_voice_quick_run_has_every_route_and_its_stages():
    # Voice to voice (issue 20): each way of routing, both transcript timings, and each stage.
    table = rows(await voice_to_voice.measure(True, 1))
    v2v = [r for r in table if r[0] == "50" and len(r) == 8]
    assert [(r[1], r[2].split(",")[0]) for r in v2v] == [
        (when, how.split(",")[0]) for when, _ in voice_to_voice.TRANSCRIPTS for _, how in voice_to_voice.ROUTES], table
    assert all(r[3].endswith(" ms") and r[5].endswith(" ms") for r in v2v)
    stages = [r for r in table if r[0] == "50" and len(r) == 10]
    assert len(stages) == len(v2v) and all(r[6] != "-" for r in stages)  # the first audio of every one


def test_the_command_line_prints_every_table(capsys, monkeypatch):
    async def section(*_args) -> str:
        return "| a section |"
    for name in ("latency_section", "lost_section", "fast_section"):
        monkeypatch.setattr(voice_loop, name, section)
    monkeypatch.setattr(voice_to_voice, "measure", section)
    assert voice_loop.main(["--quick"]) == 0
    assert capsys.readouterr().out.count("| a section |") == 4


def test_the_echo_choice_quick_run_prints_the_gate_and_every_candidate(capsys):
    assert echo_choice.main(["--quick"]) == 0
    table = rows(capsys.readouterr().out)
    assert [r[0] for r in table[1:]] == [name for name, _ in echo_choice.candidates()]
    gate = table[1]
    assert gate[0].startswith("reference-energy gate") and "/" in gate[1]
