"""An answer read ahead for a provisional route, then dropped (issue 33), is cut: what its
response used still reaches the cost meter (priced as the narrator's) and whoever cut it (counted
as bought nothing), once the server ends the cancelled response."""

from __future__ import annotations

import asyncio
import time

from audio_io.held import HeldSpeaker
from reader_agent import NarrationCut, Narrator
from realtime_api import wire
from realtime_sim import SimConfig
from tests.support.pipeline_harness import fast_settings
from tests.support.sim import running_sim, sdk

LONG_ANSWER = " ".join(["The quick brown fox jumps over the lazy dog, and then it runs away."] * 12)
STREAMING = SimConfig(audio_frame_delay_s=0.02, use_espeak=False, seed=1)  # still generating when cut


class DroppingSpeaker(HeldSpeaker):
    """The held speaker a read-ahead reads into, dropped as its first audio arrives, as the
    coordinator drops it when the user goes on (`DropNarration`)."""

    def __init__(self, cut: NarrationCut, billed) -> None:
        super().__init__(time.monotonic)
        self.cut, self.billed = cut, billed

    def play(self, pcm: bytes) -> None:
        super().play(pcm)
        self.drop()
        self.cut.cut(billed=self.billed)


async def test_a_dropped_read_ahead_bills_what_its_cancelled_response_used(tmp_path):
    priced: list[wire.Usage] = []
    dropped: asyncio.Queue[wire.Usage] = asyncio.Queue()
    async with running_sim(STREAMING) as sim:
        narrator = Narrator(fast_settings(sim.base_url, tmp_path, tmp_path / "state"), sdk(sim), on_usage=priced.append)
        async with narrator:
            cut = NarrationCut()
            speaker = DroppingSpeaker(cut, dropped.put_nowait)
            result = await narrator.narrate(LONG_ANSWER, speaker, cut)
            assert result.stopped and result.attempts == 1
            usage = await asyncio.wait_for(dropped.get(), timeout=10)  # once the cancelled response ended
        (connection,) = sim.connections
        assert [e["type"] for e in connection.received][-1] == "response.cancel"
    assert priced == [usage] and usage.input_text_tokens > 0 and usage.output_audio_tokens > 0
    assert dropped.empty()  # once
