"""rooms.wire: every Wyoming event becomes a tagged event; one that does not fit is Unusable."""

from __future__ import annotations

from wyoming.audio import AudioChunk
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.pipeline import PipelineStage, RunPipeline

from rooms.wire import Audio, DescribeAsked, PipelineStarted, Unusable, parse


def test_events_are_tagged() -> None:
    assert parse(RunPipeline(start_stage=PipelineStage.ASR, end_stage=PipelineStage.TTS).event()) == PipelineStarted(True)
    assert parse(RunPipeline(start_stage=PipelineStage.WAKE, end_stage=PipelineStage.TTS).event()) == PipelineStarted(False)
    assert parse(AudioChunk(rate=16000, width=2, channels=1, audio=b"\0\0").event()) == Audio(b"\0\0", 16000, 2, 1)
    assert parse(Describe().event()) == DescribeAsked()


def test_what_does_not_fit_is_unusable_not_an_exception() -> None:
    assert isinstance(parse(Event("run-pipeline", {"start_stage": "nonsense"})), Unusable)
    assert isinstance(parse(Event("audio-chunk", {"rate": 16000})), Unusable)
    assert isinstance(parse(AudioChunk(rate=16000, width=4, channels=1, audio=b"").event()), Unusable)
    assert parse(Event("something-new")) == Unusable("something-new")


def test_the_wyoming_package_loads_only_for_rooms() -> None:
    """`handoff status` and the other commands build their parser without it (a hub or a
    satellite loads it when it runs)."""
    import subprocess
    import sys

    code = "import sys, commands.cli as c; c.build_parser(); import commands.status, commands.run; print('wyoming' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_satellite_loads_none_of_the_assistant() -> None:
    """A satellite (often a small machine in another room) needs its detectors and its link, not the
    openai SDK, the coordinator or MCP: 1.6 s of CPU and tens of MB when it built them through
    `assembly.build`."""
    import subprocess
    import sys

    code = ("import sys, commands.satellite, rooms.satellite, rooms.pairing, commands.pairing\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'handoff', 'hands', 'mcp', 'brain', 'tasks'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
