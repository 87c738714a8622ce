"""Fuzzing the tool and task layers with what a model could send: 1,000 seeded argument sets of
lone surrogates, control characters, leading dashes, huge values, wrong types and nested
objects. Every call answers (a result or a clear error) within a second, the registry still
answers a normal command afterwards, and nothing outside the workspace is read or changed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tools.builtin import build_listener_tools
from tools.registry import ToolRegistry
from config.settings import Settings
from tasks import TaskConfig, TaskParam, TaskSettings, TaskTemplate
from tests.tasks.test_tasks_voice import voice_task_tools

CALLS = 1000
SEED = 20261122
CALL_LIMIT_S = 1.0

_NASTY_PIECES = [
    "\ud800", "\udfff", "\udce9", "\x00", "\x1b[31m", "\r\n", "\t", "\x7f", "-", "--", "--output=pwned", "-C",
    "../", "../../sentinel/secret.txt", "/etc/passwd", "~", "$(touch pwned)", "; rm -rf /", "{prompt}", "{{", "}}",
    "café", "\u202e", "\ufeff", "日本語", "\U0001f600", " ", "", "sentinel", "secret.txt", "notes.txt", "*", "%s%n",
]  # fmt: skip


def nasty_string(rng: random.Random) -> str:
    pieces = [rng.choice(_NASTY_PIECES) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.05:
        pieces.append(rng.choice("ab/-\ud800") * rng.choice((5000, 100_000, 1_100_000)))  # huge values
    return "".join(pieces)


def nasty_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if kind < 0.6 or depth > 3:
        return nasty_string(rng)
    if kind < 0.7:
        return rng.choice([0, -1, 2**63, 1e308, float("-0.0"), True, False, None])
    if kind < 0.85:
        return [nasty_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    nested: Any = {"k": nasty_string(rng)}
    for _ in range(rng.randint(0, 40)):
        nested = {"deeper": nested}
    return nested


def nasty_arguments(rng: random.Random, schema: dict) -> str:
    """JSON text for a call: mostly the tool's own parameters holding hostile text (so the call
    gets past the schema into the handler), sometimes wrong types or extra keys, sometimes not
    an object, sometimes not JSON at all."""
    roll = rng.random()
    if roll < 0.03:
        return rng.choice(["{not json", "[" * 5000, "", "null", '"\\ud800"'])
    if roll < 0.06:
        return json.dumps(nasty_value(rng))
    properties = schema.get("properties", {})
    if roll < 0.2:
        names = list(properties) + ["extra", "name", "command", "task", "path", "prompt"]
        return json.dumps({rng.choice(names): nasty_value(rng) for _ in range(rng.randint(0, 4))})
    required = set(schema.get("required", []))
    arguments: dict[str, Any] = {}
    for name in properties:
        if name in required or rng.random() < (0.1 if name == "command" else 0.5):
            if name == "name" and rng.random() < 0.7:
                arguments[name] = rng.choice(["say", "agent", "the say task", "SAY"])
            elif name == "task" and rng.random() < 0.4:
                arguments[name] = rng.choice(["say", "1", "agent", "three"])
            elif rng.random() < 0.3:
                arguments[name] = rng.choice(["hello", "a-b", "notes.txt", "."])
            else:
                arguments[name] = nasty_string(rng)
    return json.dumps(arguments)


def snapshot(folder: Path) -> dict[str, tuple[float, str]]:
    """Every file's mtime and content hash, and every folder's mtime."""
    state: dict[str, tuple[float, str]] = {}
    for root, dirs, files in os.walk(folder):
        state[root] = (os.stat(root).st_mtime_ns, "")
        for name in files:
            path = os.path.join(root, name)
            state[path] = (os.stat(path).st_mtime_ns, hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return state


@pytest.fixture
async def registry(tmp_path: Path) -> Any:
    workspace, sentinel = tmp_path / "workspace", tmp_path / "sentinel"
    workspace.mkdir()
    sentinel.mkdir()
    (sentinel / "secret.txt").write_text("sentinel secret\n")
    (workspace / "notes.txt").write_text("hello\n")
    os.symlink(sentinel / "secret.txt", workspace / "link-out")  # a link out of the workspace
    tools = build_listener_tools(Settings(workspace_root=workspace), None)
    config = TaskConfig(
        templates=(
            TaskTemplate(name="say", argv=("printf", "%s\\n", "{text}"), cwd=workspace, params=(TaskParam("text", "what"),)),
            TaskTemplate(name="agent", argv=("printf", "%s\\n", "-p", "{prompt}"), cwd=workspace, agent=True,
                         params=(TaskParam("prompt", "what"),)),
        ),  # fmt: skip
    )
    settings = TaskSettings(state_dir=tmp_path / "state", kill_grace_s=0.2, drain_s=0.2, max_concurrent=3)
    async with voice_task_tools(config, settings, tools) as (_, _, manager):
        yield tools, manager, sentinel


async def test_a_thousand_hostile_calls_each_answer_in_time_and_touch_nothing_outside(
    registry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tools, manager, sentinel = registry
    tools: ToolRegistry
    before = snapshot(sentinel)
    rng = random.Random(SEED)
    specs = {spec["name"]: spec.get("parameters", {}) for spec in tools.session_tools()}
    names = sorted(specs)
    outcomes = {"ok": 0, "error": 0}
    per_tool: dict[str, list[int]] = {}
    for n in range(CALLS):
        name = rng.choice(names + ["no_such_tool"])
        arguments = nasty_arguments(rng, specs.get(name, {}))
        async with asyncio.timeout(CALL_LIMIT_S):
            result = await tools.run(name, arguments, f"fuzz-{n}")
        per_tool.setdefault(name, [0, 0])[0 if result.ok else 1] += 1
        if result.ok:
            outcomes["ok"] += 1
        else:
            assert result.error and isinstance(result.error, str), (name, arguments[:200])
            result.error.encode("utf-8")  # speakable: no lone surrogate reaches the narrator
            outcomes["error"] += 1
        assert "sentinel secret" not in json.dumps(result.data if result.ok else result.error)
    bugs = [r for r in caplog.records if r.exc_info]
    assert not bugs, [r.getMessage() for r in bugs]
    assert outcomes["ok"] > 50 and outcomes["error"] > 50, outcomes
    # Still answering a normal command, and the task layer still runs tasks.
    async with asyncio.timeout(5):
        assert (await tools.run("list_files", "{}", "after-1")).ok
        started = await tools.run("start_task", json.dumps({"name": "say", "text": "still here"}), "after-2")
        assert started.ok
        done = await manager.wait(started.data["task"]["id"])
        assert done.tail == ("still here",)
    assert manager.internal_errors == 0
    assert snapshot(sentinel) == before
