"""A speaker for a satellite under test (run as its --snd-command, once per played stream):
everything on stdin goes to a new file in the folder given, renamed to `played-*.raw` once the
stream ends, so a test sees only whole streams. Stdlib only."""

import os
import sys
import time
from pathlib import Path

folder = Path(sys.argv[1])
name = f"{time.time_ns()}-{os.getpid()}"
part = folder / f"{name}.part"
with part.open("wb") as file:
    while block := sys.stdin.buffer.read(4096):
        file.write(block)
part.rename(folder / f"played-{name}.raw")
