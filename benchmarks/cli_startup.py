"""CPU time of the quick commands, `handoff status` and `handoff history`, as a user runs them
(the installed entry point, a fresh process each time), against two baselines from the same
run: a bare Python start, and the old way (every subcommand's module imported to build the
parser, which loads the whole assistant: openai, numpy, pocketsphinx, aiohttp ...). One more row:
a satellite's modules, which since session 22 leave the assistant out (1.6 s of CPU before).

CPU time (user + system, from getrusage of the child) rather than wall time, so a busy machine
changes the figures little. The target: status and history under 0.5 s of CPU.

Run: nice .venv/bin/python -m benchmarks.cli_startup [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5


def cpu_seconds(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def handoff() -> list[str]:
    script = Path(sys.executable).parent / "handoff"
    return [str(script)] if script.exists() else [sys.executable, "-m", "commands.cli"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (the median is shown)")
    runs = parser.parse_args(argv).runs
    with tempfile.TemporaryDirectory(prefix="handoff-cli-bench-") as tmp:
        state = Path(tmp) / "state"
        env = {**os.environ, "PYTHONPATH": str(REPO), "HANDOFF_STATE_DIR": str(state)}
        cases = {
            "python -c pass (bare start)": [sys.executable, "-c", "pass"],
            "every subcommand imported (before)": [sys.executable, "-c", "from commands.cli import build_parser; build_parser()"],
            "handoff status": [*handoff(), "status"],
            "handoff history": [*handoff(), "history"],
            # A satellite's modules (it then only waits for its hub): no openai, coordinator or MCP (session 22).
            "a satellite's modules": [sys.executable, "-c", "import commands.satellite, rooms.satellite, rooms.pairing"],
        }
        medians = {label: statistics.median(cpu_seconds(command, env, Path(tmp)) for _ in range(runs))
                   for label, command in cases.items()}  # fmt: skip
    before = medians["every subcommand imported (before)"]
    print(f"| command | CPU s (median of {runs}) | ratio to the old start | under {TARGET_S} s |")
    print("|---|---|---|---|")
    for label, seconds in medians.items():
        print(f"| {label} | {seconds:.3f} | {seconds / before:.2f} | {'yes' if seconds < TARGET_S else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
