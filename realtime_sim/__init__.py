"""A local stand-in for the OpenAI Realtime API (GA protocol) and the Responses API.

    sim = SimServer(SimConfig(audio_frame_delay_s=0), SimScript())
    base_url = await sim.start()          # "http://127.0.0.1:PORT/v1"
    client = AsyncOpenAI(api_key="sk-test", base_url=base_url)
    ...
    await sim.stop()

The official `openai` SDK connects to it unchanged. What the simulated model says, which tools
it calls and which faults strike are scripted through `sim.script`; everything that happened is
in `sim.connections` / `sim.brain_requests`, and `await sim.wait_for(...)` awaits changes.
"""

from realtime_sim.config import SimConfig
from realtime_sim.script import FAULT_KINDS, Fault, FaultKind, SimScript
from realtime_sim.server import ConnectionRecord, SimServer

__all__ = ["FAULT_KINDS", "ConnectionRecord", "Fault", "FaultKind", "SimConfig", "SimScript", "SimServer"]
