"""Fixtures shared by the end-to-end tests."""

import logging

import pytest

from decisions.lifecycle import CommandBook
from decisions.listener_session import ListenerSessions
from realtime_sim import SimConfig, SimServer

# A command's illegal move raises in every test in this process (the daemon logs and counts it).
CommandBook.STRICT = True
ListenerSessions.STRICT = True  # ... and so does the listener sessions' (decisions.listener_session)


@pytest.fixture(autouse=True)
def root_logging_restored():
    """Each test leaves the root logger as it found it: a command under test that sets up
    logging (as `handoff run` does) must not leave a console handler behind that writes a
    later test's daemon lines into what that test captures as the command's stderr."""
    root = logging.getLogger()
    handlers, filters, level = list(root.handlers), list(root.filters), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.filters[:] = filters
    root.setLevel(level)


@pytest.fixture
async def sim(request):
    """A running simulator on 127.0.0.1; parametrize indirectly with a SimConfig to change it."""
    server = SimServer(getattr(request, "param", SimConfig()))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
