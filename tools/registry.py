"""The tool registry: named tools with JSON-schema arguments, an async handler and a formatter.

Tools come and go while it runs (an MCP server's tools are listed again when it says they
changed, and taken away while it is down): `session_tools()` and `read_only_names()` are live
views that always show the tools registered now.

`run` is the only way a tool is called: it parses and validates the arguments the model sent,
calls the handler, and always returns a `ToolResult` (never raises for bad input), so the listener
can answer every function call, however malformed. `format` turns a result into a script for the
narrator with the formatter registered on the tool's spec (the generic one by default).

`run` is also where what a tool found is made safe, once for every tool: lone surrogates
become U+FFFD (nothing downstream can encode them) and the configured secrets (the API key) are
cut out, whatever file or task they came from, before the model, the narrator, the history or
the log see it. (Arguments with a lone surrogate are each tool's call: what is only said or
asked is cleaned, a path or a task's parameter is refused: it would name the wrong thing.)
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Iterator

from jsonschema.protocols import Validator

from config.logging_setup import redact
from safety.text import clean, map_strings
from speech.speakable import DEFAULT_MAX_CHARS, speakable_text
from tools.arguments import compile_schema, validate_arguments
from tools.formatters import Formatter, Speakable, format_generic
from tools.result import ToolError, ToolResult

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


# --- the registry ---------------------------------------------------------------------------


class Effect(enum.Enum):
    """What a tool does to the world: decides whether it may run before the transcript confirms
    a command routed by its audio (a false local wake then costs at worst one spoken answer)."""

    READS = "reads"  # only reads (the time, files, the brain, task and timer state): may run at once
    ACTS = "acts"  # changes something (starts or cancels a task, sets a timer): waits for the transcript
    # May do what cannot be undone (unlock a door; an MCP tool marked destructive, or one that
    # says nothing about itself): waits for the transcript AND a spoken yes. `ToolRegistry.run`
    # never runs it; only `run_confirmed` does, after the yes.
    CONFIRMS = "confirms"


BUILT_IN = "built-in"  # the source of the tools this program ships


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    formatter: Formatter = format_generic  # ToolResult -> words for the narrator
    effect: Effect = Effect.ACTS  # unmarked: treated as changing something (it waits)
    source: str = BUILT_IN  # built-in, tasks, timers, or "mcp:<server>"
    title: str = ""  # how to say what it does, for the question asked before a CONFIRMS tool runs
    offered: bool = True  # in `session_tools` (the listener may call it); False: run by name only (hands.routing)
    validator: Validator | None = field(default=None, compare=False, repr=False)
    # Work that changes nothing and may start while the call waits for its command's words (the
    # brain's pick behind `use_device`): its run then finds it done. None: nothing to prepare.
    prepare: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False, repr=False)

    @property
    def needs_yes(self) -> bool:
        """Runs only after a spoken yes (`ToolRegistry.run_confirmed`)."""
        return self.effect is Effect.CONFIRMS

    def question(self, arguments: dict[str, Any]) -> str:
        """What is asked before it runs: "Unlock the front door?" (its title, or its name, and the
        simple values it was given)."""
        action = (self.title or self.name.replace("_", " ")).strip().rstrip("?.")
        values = [str(v) for v in arguments.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
        said = f"{action} ({', '.join(values)})" if values else action
        return said[:1].upper() + said[1:] + "?"


def function_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool as the Realtime session and the Responses API declare a function."""
    return {"type": "function", "name": spec.name, "description": spec.description, "parameters": spec.parameters}


class _LiveNames(Set[str]):
    """The names of the tools of one effect, as they are now (not a copy)."""

    def __init__(self, tools: dict[str, ToolSpec], effect: Effect = Effect.READS) -> None:
        self._tools = tools
        self._effect = effect

    def __contains__(self, name: object) -> bool:
        spec = self._tools.get(name) if isinstance(name, str) else None
        return spec is not None and spec.effect is self._effect

    def __iter__(self) -> Iterator[str]:
        return iter([n for n, spec in self._tools.items() if spec.effect is self._effect])

    def __len__(self) -> int:
        return sum(1 for spec in self._tools.values() if spec.effect is self._effect)


class ToolRegistry:
    """Named tools with validated arguments; `run` turns every outcome into a ToolResult."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, secrets: Iterable[str] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._max_chars = max_chars  # the longest script `format` returns
        self._secrets = tuple(s for s in secrets if s)  # cut out of every result
        self._session_tools: list[dict[str, Any]] = []  # one list, changed in place: whoever holds it sees changes
        self._read_only = _LiveNames(self._tools)
        self._needs_yes = _LiveNames(self._tools, Effect.CONFIRMS)

    def register(
        self, name: str, description: str, parameters: dict[str, Any], handler: Handler, formatter: Formatter = format_generic,
        effect: Effect = Effect.ACTS, source: str = BUILT_IN, title: str = "",
    ) -> None:
        self.add(ToolSpec(name, description, parameters, handler, formatter, effect, source, title))

    def add(self, spec: ToolSpec) -> None:
        """Register a spec; ValueError if its name is taken or its parameters are no JSON schema."""
        if spec.name in self._tools:
            raise ValueError(f"a tool called {spec.name!r} is already registered")
        self._tools[spec.name] = dataclasses.replace(spec, validator=compile_schema(spec.parameters))
        self._changed()

    def remove_source(self, source: str) -> list[str]:
        """Take away every tool from `source` (an MCP server that went away); their names."""
        gone = [n for n, spec in self._tools.items() if spec.source == source]
        for name in gone:
            del self._tools[name]
        if gone:
            self._changed()
        return gone

    def set_offered(self, names: Iterable[str], offered: bool) -> None:
        """Offer these tools to the listener, or keep them registered but unoffered (routed to
        through another tool: hands.routing)."""
        for name in names:
            spec = self._tools.get(name)
            if spec is not None and spec.offered != offered:
                self._tools[name] = dataclasses.replace(spec, offered=offered)
        self._changed()

    def _changed(self) -> None:
        self._session_tools[:] = [function_tool(s) for s in self._tools.values() if s.offered]

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return list(self._tools.values())

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def read_only_names(self) -> Set[str]:
        """The tools that only read (Effect.READS), live: a tool registered or taken away later
        is in or out of it at once (a copy taken at start would let a tool that stopped being
        read-only run before the command is confirmed)."""
        return self._read_only

    def needs_yes_names(self) -> Set[str]:
        """The tools that run only after a spoken yes (Effect.CONFIRMS), live."""
        return self._needs_yes

    def question_for(self, name: str, arguments_json: str) -> str | None:
        """What is asked before the call runs ("Unlock the front door?"), or None when its
        arguments do not even validate (the command's own words are asked about then)."""
        spec = self._tools.get(name)
        try:
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
            assert spec is not None and spec.validator is not None
            return self._safe_text(spec.question(validate_arguments(name, spec.validator, arguments)))
        except (AssertionError, ValueError, RecursionError, TypeError, ToolError):
            return None

    def prepare(self, name: str, arguments_json: str) -> None:
        """Start what a held call may do before it runs (its `prepare`), if its arguments validate."""
        spec = self._tools.get(name)
        if spec is None or spec.prepare is None or spec.validator is None:
            return
        try:
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
            validated = validate_arguments(name, spec.validator, arguments)
        except (ValueError, RecursionError, TypeError, AttributeError, ToolError):
            return  # (its run says what is wrong with them)
        spec.prepare(validated)

    def session_tools(self) -> list[dict[str, Any]]:
        """The tools in the shape `session.update {session: {tools: [...]}}` expects: one list,
        kept up to date in place."""
        return self._session_tools

    async def run(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        """Run a call; a tool that needs a spoken yes is not run: its result says so, with the
        question to ask and the call to make after the yes (`data["needs_yes"]`)."""
        return await self._run(name, arguments_json, call_id, confirmed=False)

    async def run_confirmed(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        """Run a call the user said yes to (the only way a CONFIRMS tool runs). Call it once per yes."""
        return await self._run(name, arguments_json, call_id, confirmed=True)

    async def _run(self, name: str, arguments_json: str, call_id: str, confirmed: bool) -> ToolResult:
        spec = self._tools.get(name)
        if spec is None:
            return self._failed(name, call_id, f"There is no tool called {name}.")
        try:
            # Models send "" for a call without arguments.
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
        except (ValueError, RecursionError, AttributeError, TypeError):  # JSONDecodeError is a ValueError
            return self._failed(name, call_id, f"The arguments for {name} were not valid JSON.")
        try:
            assert spec.validator is not None  # (set by `add`)
            validated = validate_arguments(name, spec.validator, arguments)
            if spec.needs_yes and not confirmed:
                question = self._safe_text(spec.question(validated))
                log.info("tool %s (call %s) waits for a spoken yes", name, call_id)
                return ToolResult(tool=name, call_id=call_id, ok=False, error="That needs a spoken yes first; nothing was done.",
                                  data={"needs_yes": True, "question": question, "tool": name,
                                        "arguments": self._safe(validated)})
            data = await spec.handler(validated)
        except ToolError as exc:
            return self._failed(name, call_id, self._safe_text(str(exc)), self._safe(exc.data))
        except Exception as exc:  # a bug or an unexpected OS error: say so, keep the session going
            log.exception("tool %s (call %s) failed unexpectedly", name, call_id)
            return self._failed(name, call_id, f"The {name} tool failed: {type(exc).__name__}.")
        log.info("tool %s (call %s) succeeded", name, call_id)
        return ToolResult(tool=name, call_id=call_id, ok=True, data=self._safe(data), error=None)

    def _safe(self, value: Any) -> Any:
        """`value` with lone surrogates replaced and the secrets cut out of every string in it."""
        return map_strings(value, self._safe_text)

    def _safe_text(self, text: str) -> str:
        return redact(clean(text), self._secrets)

    def format(self, result: ToolResult) -> Speakable:
        """The result as a script to read aloud, by its tool's formatter; always something speakable
        (a missing or broken formatter falls back to the generic one)."""
        spec = self._tools.get(result.tool)
        formatter = spec.formatter if spec is not None else format_generic
        try:
            script = redact(speakable_text(formatter(result), self._max_chars), self._secrets)
        except Exception:  # a broken formatter must not cost the user their answer
            log.exception("formatter for %s failed; using the generic one", result.tool)
            script = ""
        if not script:
            script = speakable_text(format_generic(result), self._max_chars)
        return Speakable(script=script, full=dataclasses.asdict(result))

    @staticmethod
    def _failed(name: str, call_id: str, error: str, data: dict[str, Any] | None = None) -> ToolResult:
        log.info("tool %s (call %s) refused: %s", name, call_id, error)
        return ToolResult(tool=name, call_id=call_id, ok=False, data=dict(data or {}), error=error)
