"""Fixtures shared by the end-to-end tests."""

import pytest

from realtime_sim import SimConfig, SimServer


@pytest.fixture
async def sim(request):
    """A running simulator on 127.0.0.1; parametrize indirectly with a SimConfig to change it."""
    server = SimServer(getattr(request, "param", SimConfig()))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
