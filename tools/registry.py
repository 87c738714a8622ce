"""The tool registry: named tools with JSON-schema arguments, an async handler and a formatter.

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
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from config.logging_setup import redact
from safety.text import clean, map_strings
from speech.speakable import DEFAULT_MAX_CHARS, speakable_text
from tools.formatters import Formatter, Speakable, format_generic
from tools.result import ToolError, ToolResult

log = logging.getLogger(__name__)

Handler = Callable[[dict], Awaitable[dict]]


# --- argument validation (the JSON-schema subset our tools use) -------------------------

_SCHEMA_KEYS = {"type", "properties", "required", "additionalProperties", "description"}
_PROPERTY_KEYS = {"type", "description", "default", "minimum", "maximum", "minLength", "maxLength"}
_PROPERTY_TYPES = {"string", "integer", "boolean"}
_TYPE_WORDS = {"string": "text", "integer": "a whole number", "boolean": "true or false"}


def check_schema(parameters: dict) -> None:
    """Refuse schemas using keywords the validator does not implement, so none is silently ignored."""
    if parameters.get("type") != "object":
        raise ValueError("a tool's parameters must be a JSON schema of type 'object'")
    unknown = set(parameters) - _SCHEMA_KEYS
    if unknown:
        raise ValueError(f"unsupported schema keywords: {sorted(unknown)}")
    properties = parameters.get("properties", {})
    for name, prop in properties.items():
        if prop.get("type") not in _PROPERTY_TYPES or set(prop) - _PROPERTY_KEYS:
            raise ValueError(f"property {name!r} uses an unsupported type or keyword")
    missing = set(parameters.get("required", ())) - set(properties)
    if missing:
        raise ValueError(f"required properties {sorted(missing)} are not defined")


def validate_arguments(tool: str, parameters: dict, arguments: object) -> dict:
    """Return the arguments with defaults filled in, or raise ToolError saying what is wrong."""
    if not isinstance(arguments, dict):
        raise ToolError(f"The arguments for {tool} must be a JSON object.")
    properties: dict = parameters.get("properties", {})
    if parameters.get("additionalProperties") is False:
        extra = sorted(set(arguments) - set(properties))
        if extra and not properties:
            raise ToolError(f"The {tool} tool takes no arguments, but got {_quoted_list(extra)}.")
        if extra:
            raise ToolError(f"The {tool} tool has no argument called {_quoted_list(extra)}.")
    for name in parameters.get("required", ()):
        if name not in arguments:
            raise ToolError(f"The {tool} tool needs the argument '{name}'.")
    validated = dict(arguments)
    for name, prop in properties.items():
        if name not in validated:
            if "default" in prop:
                validated[name] = prop["default"]
            continue
        _check_value(tool, name, prop, validated[name])
    return validated


def _check_value(tool: str, name: str, prop: dict, value: object) -> None:
    kind = prop["type"]
    # bool is a subclass of int in Python; JSON true is not a number.
    matches = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }[kind]
    if not matches:
        raise ToolError(f"The argument '{name}' of {tool} must be {_TYPE_WORDS[kind]}.")
    if kind == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ToolError(f"The argument '{name}' of {tool} must be between {low} and {high}.")
    if kind == "string":
        if len(value) < prop.get("minLength", 0):
            raise ToolError(f"The argument '{name}' of {tool} must not be empty.")
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            raise ToolError(f"The argument '{name}' of {tool} is longer than {prop['maxLength']} characters.")


def _quoted_list(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


# --- the registry ---------------------------------------------------------------------------


class Effect(enum.Enum):
    """What a tool does to the world: decides whether it may run before the transcript confirms
    a command routed by its audio (a false local wake then costs at worst one spoken answer)."""

    READS = "reads"  # only reads (the time, files, the brain, task and timer state): may run at once
    ACTS = "acts"  # changes something (starts or cancels a task, sets a timer): waits for the transcript


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict
    handler: Handler
    formatter: Formatter = format_generic  # ToolResult -> words for the narrator
    effect: Effect = Effect.ACTS  # unmarked: treated as changing something (it waits)


class ToolRegistry:
    """Named tools with validated arguments; `run` turns every outcome into a ToolResult."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, secrets: Iterable[str] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._max_chars = max_chars  # the longest script `format` returns
        self._secrets = tuple(s for s in secrets if s)  # cut out of every result

    def register(
        self, name: str, description: str, parameters: dict, handler: Handler, formatter: Formatter = format_generic,
        effect: Effect = Effect.ACTS,
    ) -> None:
        if name in self._tools:
            raise ValueError(f"a tool called {name!r} is already registered")
        check_schema(parameters)
        self._tools[name] = ToolSpec(name, description, parameters, handler, formatter, effect)

    def names(self) -> list[str]:
        return list(self._tools)

    def read_only_names(self) -> frozenset[str]:
        """The tools that only read (Effect.READS)."""
        return frozenset(n for n, spec in self._tools.items() if spec.effect is Effect.READS)

    def session_tools(self) -> list[dict]:
        """The tools in the shape `session.update {session: {tools: [...]}}` expects."""
        return [
            {"type": "function", "name": s.name, "description": s.description, "parameters": s.parameters}
            for s in self._tools.values()
        ]

    async def run(self, name: str, arguments_json: str, call_id: str) -> ToolResult:
        spec = self._tools.get(name)
        if spec is None:
            return self._failed(name, call_id, f"There is no tool called {name}.")
        try:
            # Models send "" for a call without arguments.
            arguments = json.loads(arguments_json) if arguments_json.strip() else {}
        except (ValueError, RecursionError, AttributeError, TypeError):  # JSONDecodeError is a ValueError
            return self._failed(name, call_id, f"The arguments for {name} were not valid JSON.")
        try:
            validated = validate_arguments(name, spec.parameters, arguments)
            data = await spec.handler(validated)
        except ToolError as exc:
            return self._failed(name, call_id, self._safe(str(exc)), self._safe(exc.data))
        except Exception as exc:  # a bug or an unexpected OS error: say so, keep the session going
            log.exception("tool %s (call %s) failed unexpectedly", name, call_id)
            return self._failed(name, call_id, f"The {name} tool failed: {type(exc).__name__}.")
        log.info("tool %s (call %s) succeeded", name, call_id)
        return ToolResult(tool=name, call_id=call_id, ok=True, data=self._safe(data), error=None)

    def _safe(self, value: Any) -> Any:
        """`value` with lone surrogates replaced and the secrets cut out of every string in it."""
        return map_strings(value, lambda text: redact(clean(text), self._secrets))

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
    def _failed(name: str, call_id: str, error: str, data: dict | None = None) -> ToolResult:
        log.info("tool %s (call %s) refused: %s", name, call_id, error)
        return ToolResult(tool=name, call_id=call_id, ok=False, data=dict(data or {}), error=error)
