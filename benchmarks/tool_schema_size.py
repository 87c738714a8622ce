"""What the timer tools add to every routed command: the listener sends its tool definitions
with each session, and the model reads them on every routing response.

Measured against the same registry without them (built in the same run, as `assembly.build`
builds it); tokens are estimated at 4 characters each, as the simulator bills text.

Run: .venv/bin/python -m benchmarks.tool_schema_size
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from config.settings import Settings
from tasks import TaskConfig, TaskManager, TaskSettings, TaskStore, register_task_tools, register_timer_tools
from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry

CHARS_PER_TOKEN = 4
TEXT_IN_PER_M = 4.0  # $ per 1M text input tokens (gpt-realtime class), as in listener_cost


def registry(with_timers: bool, state_dir: Path) -> ToolRegistry:
    settings = Settings(workspace_root=state_dir, state_dir=state_dir)
    tools = build_listener_tools(settings, brain=None)
    manager = TaskManager(TaskConfig(), TaskStore(state_dir / "tasks.db"), TaskSettings(state_dir=state_dir))
    register_task_tools(tools, manager)  # never started: only the definitions are read
    if with_timers:
        register_timer_tools(tools, manager)
    return tools


def size(tools: ToolRegistry) -> int:
    return len(json.dumps(tools.session_tools(), separators=(",", ":")))


def main(argv: Sequence[str] | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        baseline, timers = size(registry(False, Path(tmp))), size(registry(True, Path(tmp)))
    print("| tools | characters | ~tokens per routed command | $ per 1,000 commands | ratio |")
    print("|---|---|---|---|---|")
    for label, chars in (("before (no timer tools)", baseline), ("with the timer tools", timers)):
        tokens = chars / CHARS_PER_TOKEN
        print(f"| {label} | {chars} | {tokens:.0f} | {tokens * 1000 * TEXT_IN_PER_M / 1e6:.3f} | {chars / baseline:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
