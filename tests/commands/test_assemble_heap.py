"""The heap built to start is frozen out of the collector's sight before the assistant listens
(issue 34: its full passes walked it every few seconds, all day)."""

from __future__ import annotations

import gc

from audio_io import MemorySpeaker, PushMicrophone
from assembly.build import assistant
from tests.commands.test_assemble_sounds import settings_for


async def test_what_was_built_to_start_is_out_of_the_collectors_sight(tmp_path):
    gc.unfreeze()
    try:
        async with assistant(settings_for(tmp_path), PushMicrophone(), MemorySpeaker()) :
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
