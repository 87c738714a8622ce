"""A tool's arguments checked against its JSON schema, with `jsonschema` (any draft a server
publishes: nested objects, arrays, enums, anyOf/oneOf, $ref inside the schema), and each failure
said as one sentence a listener can follow ("The argument 'area' of set_light must be one of:
kitchen, hall.").

The schema comes from our own tools or from an MCP server (untrusted): it is checked once, when
the tool is registered, and a schema that is not one is refused there; a `$ref` that leaves the
schema document is never fetched (the validator's registry holds nothing outside it).
"""

from __future__ import annotations

from typing import Any

from jsonschema import exceptions as schema_exceptions
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from tools.result import ToolError

_TYPE_WORDS = {
    "string": "text", "integer": "a whole number", "number": "a number", "boolean": "true or false",
    "array": "a list", "object": "an object with named fields", "null": "empty (null)",
}  # fmt: skip
MAX_ENUM_SPOKEN = 8  # "must be one of: ..." names this many choices
MAX_MESSAGE_CHARS = 200  # the validator's own words, when no sentence of ours fits, are cut here


def compile_schema(parameters: dict[str, Any]) -> Validator:
    """A validator for a tool's `parameters`; ValueError if they are no JSON schema of an object."""
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise ValueError("a tool's parameters must be a JSON schema of type 'object'")
    cls = validator_for(parameters, default=Draft202012Validator)
    try:
        cls.check_schema(parameters)
    except schema_exceptions.SchemaError as exc:
        raise ValueError(f"the tool's parameters are not a valid JSON schema: {exc.message[:MAX_MESSAGE_CHARS]}") from None
    # An empty registry: a $ref to anything outside this document fails instead of being fetched.
    return cls(parameters, registry=Registry())


def validate_arguments(tool: str, validator: Validator, arguments: object) -> dict[str, Any]:
    """The arguments with top-level defaults filled in, or ToolError saying the first thing wrong."""
    if not isinstance(arguments, dict):
        raise ToolError(f"The arguments for {tool} must be a JSON object.")
    try:
        errors = sorted(validator.iter_errors(arguments), key=_rank)
    except (schema_exceptions.SchemaError, Unresolvable, RecursionError):
        raise ToolError(f"The {tool} tool's own description of its arguments cannot be checked.") from None
    if errors:
        raise ToolError(_sentence(tool, validator.schema, errors[0]))
    validated = dict(arguments)
    for name, prop in (validator.schema.get("properties") or {}).items():
        if name not in validated and isinstance(prop, dict) and "default" in prop:
            validated[name] = prop["default"]
    return validated


def _rank(error: schema_exceptions.ValidationError) -> tuple[int, int, str]:
    """Extra arguments first, then missing ones, then the rest, shallowest first (as people read)."""
    order = {"additionalProperties": 0, "required": 1}.get(str(error.validator), 2)
    return order, len(error.absolute_path), "/".join(map(str, error.absolute_path))


def _sentence(tool: str, schema: dict[str, Any], error: schema_exceptions.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    kind, value = str(error.validator), error.validator_value
    instance = error.instance
    if kind == "required" and isinstance(instance, dict):
        missing = next((n for n in value if n not in instance), "?")
        if not path:
            return f"The {tool} tool needs the argument '{missing}'."
        return f"The argument '{path}' of {tool} needs the field '{missing}'."
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = set((error.schema.get("properties") or {}))
        extra = sorted(set(instance) - known) or sorted(instance)
        names = ", ".join(f"'{n}'" for n in extra)
        if not path:
            if not known:
                return f"The {tool} tool takes no arguments, but got {names}."
            return f"The {tool} tool has no argument called {names}."
        return f"The argument '{path}' of {tool} has no field called {names}."
    subject = f"The argument '{path}' of {tool}" if path else f"The arguments for {tool}"
    if kind == "type":
        kinds = value if isinstance(value, list) else [value]
        return f"{subject} must be {' or '.join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)}."
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        low, high = error.schema.get("minimum"), error.schema.get("maximum")
        if low is not None and high is not None:
            return f"{subject} must be between {low} and {high}."
        return f"{subject} must be {'at least' if kind.endswith('inimum') else 'at most'} {value}."
    if kind == "minLength":
        return f"{subject} must not be empty." if value == 1 else f"{subject} must be at least {value} characters."
    if kind == "maxLength":
        return f"{subject} is longer than {value} characters."
    if kind == "enum" and isinstance(value, list):
        shown = ", ".join(str(v) for v in value[:MAX_ENUM_SPOKEN]) + (", ..." if len(value) > MAX_ENUM_SPOKEN else "")
        return f"{subject} must be one of: {shown}."
    if kind == "const":
        return f"{subject} must be {value}."
    if kind in ("anyOf", "oneOf"):
        return f"{subject} matches none of the forms it may take."
    if kind in ("minItems", "maxItems"):
        return f"{subject} must have {'at least' if kind == 'minItems' else 'at most'} {value} items."
    return f"{subject} is not valid: {error.message[:MAX_MESSAGE_CHARS]}."


def schema_problem(parameters: Any) -> str | None:
    """Why `parameters` cannot be a tool's schema, or None (for `handoff check` and the MCP loader)."""
    try:
        compile_schema(parameters)
    except ValueError as exc:
        return str(exc)
    return None
