"""`list_files` on a huge folder (issue 23, defect 15): how long the event loop stalls while a
folder of many entries is listed, the shipped tool against the way it used to list (the whole
folder read and sorted on the event loop), measured in the same run on the same folder.

The stall is the longest gap a 5 ms ticker on the loop saw beyond its own sleep while the call ran.

Run: .venv/bin/python -m benchmarks.list_files [--entries N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable, Sequence

from config.settings import Settings
from tools.builtin import MAX_LIST_ENTRIES, build_listener_tools

TICK_S = 0.005


def whole_folder_on_the_loop(root: Path) -> int:
    """The listing before the fix: every entry read and sorted, the first ones stat'ed."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        entries = sorted(os.scandir(fd), key=lambda e: (e.name.lower(), e.name))
        for entry in entries[:MAX_LIST_ENTRIES]:
            entry.stat(follow_symlinks=False)
    finally:
        os.close(fd)
    return len(entries)


async def measured(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(seconds the call took, the longest stall of the event loop meanwhile)."""
    stalls: list[float] = [0.0]

    async def ticker() -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(TICK_S)
            stalls.append(time.perf_counter() - start - TICK_S)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(3 * TICK_S)
    stalls[:] = [0.0]
    start = time.perf_counter()
    await call()
    took = time.perf_counter() - start
    await asyncio.sleep(3 * TICK_S)
    tick.cancel()
    return took, max(stalls)


async def compare(root: Path) -> list[tuple[str, float, float]]:
    tools = build_listener_tools(Settings(workspace_root=root, state_dir=root.parent / "state"), None)

    async def before() -> None:
        whole_folder_on_the_loop(root)

    async def after() -> None:
        result = await tools.run("list_files", '{"path": "."}', "bench")
        assert result.ok, result

    return [("before: whole folder, on the loop", *await measured(before)),
            ("list_files: at most 10,000 entries, on a worker thread", *await measured(after))]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=300_000, help="files in the folder (default 300,000)")
    parser.add_argument("--quick", action="store_true", help="20,000 files")
    args = parser.parse_args(argv)
    entries = 20_000 if args.quick else args.entries
    tmp = Path(tempfile.mkdtemp(prefix="handoff-list-"))
    try:
        root = tmp / "workspace"
        root.mkdir()
        for n in range(entries):
            os.close(os.open(root / f"file-{n:07d}.txt", os.O_CREAT | os.O_WRONLY, 0o600))
        rows = asyncio.run(compare(root))
    finally:
        shutil.rmtree(tmp)
    baseline_stall = rows[0][2]
    print(f"{entries:,} files in one folder")
    print("| listing | call ms | longest event-loop stall ms | stall ratio |")
    print("|---|---|---|---|")
    for label, took, stall in rows:
        print(f"| {label} | {took * 1000:.0f} | {stall * 1000:.0f} | {stall / baseline_stall:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
