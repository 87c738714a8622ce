"""A microphone for a satellite under test (run as its --mic-command, with any Python): raw
pcm16 mono 16 kHz on stdout in real time, silence unless a `*.raw` file (same format) appears in
the folder given: then that file is "said" (streamed, then deleted), as a person in the room
would say it. Stdlib only: it runs in the satellite's own virtualenv."""

import sys
import time
from pathlib import Path

RATE, CHUNK = 16000, 320  # 20 ms
folder = Path(sys.argv[1])
out = sys.stdout.buffer
start, sent = time.monotonic(), 0
pending = b""
while True:
    if not pending:
        files = sorted(folder.glob("*.raw"))
        if files:
            pending = files[0].read_bytes()
            files[0].unlink()
    chunk, pending = pending[: 2 * CHUNK], pending[2 * CHUNK:]
    out.write(chunk + bytes(2 * CHUNK - len(chunk)))
    out.flush()
    sent += CHUNK
    delay = start + sent / RATE - time.monotonic()
    if delay > 0:
        time.sleep(delay)
