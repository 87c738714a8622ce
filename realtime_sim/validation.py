"""Checks client events against the openai SDK's own types, and words errors like the real server.

The SDK's `RealtimeClientEvent` models accept undeclared fields silently (extra="allow"); the
real server rejects them (`unknown_parameter`). So an event is validated by the model for its
`type`, then every model in the result is searched for undeclared fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, get_args

from pydantic import BaseModel, ValidationError
from openai.types.realtime import RealtimeClientEvent, ResponseItemReference

# A valid stand-in for `item_reference` entries of `response.input`, which the SDK's model for
# response.create does not declare (the SDK sends them through a separate param type).
_REFERENCE_PLACEHOLDER = {"type": "message", "role": "user", "content": []}
_DISCRIMINATORS = ("type", "role")


@dataclass(frozen=True)
class ClientEventError:
    """Why a client event was rejected, in the real server's terms."""

    code: str  # unknown_parameter | invalid_value | invalid_type | missing_required_parameter | invalid_json
    message: str
    param: str | None


def _model_for_type() -> dict[str, type[BaseModel]]:
    union = get_args(RealtimeClientEvent)[0]
    models: dict[str, type[BaseModel]] = {}
    for model in get_args(union):
        (literal,) = get_args(model.model_fields["type"].annotation)
        models[literal] = model
    return models


def format_param(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def undeclared_fields(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Paths of fields a validated SDK model holds without declaring them."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, BaseModel):
        for key in value.__pydantic_extra__ or {}:
            found.append(path + (key,))
        for name in type(value).model_fields:
            if name in value.model_fields_set:
                found.extend(undeclared_fields(getattr(value, name), path + (name,)))
    elif isinstance(value, (list, tuple)):
        for index, element in enumerate(value):
            found.extend(undeclared_fields(element, path + (index,)))
    return found


class ClientEventValidator:
    """Validates one client event dict; build once per server (it caches the model table)."""

    def __init__(self) -> None:
        self._models = _model_for_type()

    @property
    def event_types(self) -> tuple[str, ...]:
        return tuple(self._models)

    def check(self, event: Any) -> ClientEventError | None:
        if not isinstance(event, dict):
            return ClientEventError(
                "invalid_type", "Invalid type for client event: expected an object with a 'type'.", None
            )
        event_type = event.get("type")
        if event_type is None:
            return ClientEventError("missing_required_parameter", "Missing required parameter: 'type'.", "type")
        model = self._models.get(event_type) if isinstance(event_type, str) else None
        if model is None:
            supported = ", ".join(f"'{t}'" for t in self._models)
            return ClientEventError(
                "invalid_value", f"Invalid value: {event_type!r}. Supported values are: {supported}.", "type"
            )
        event, reference_error = self._split_references(event)
        if reference_error is not None:
            return reference_error
        try:
            validated = model.model_validate(event)
        except ValidationError as exc:
            return _describe(exc, event)
        unknown = undeclared_fields(validated)
        if unknown:
            param = format_param(unknown[0])
            return ClientEventError("unknown_parameter", f"Unknown parameter: '{param}'.", param)
        return None

    def _split_references(self, event: dict[str, Any]) -> tuple[dict[str, Any], ClientEventError | None]:
        """Check `item_reference` inputs on their own and swap in a stand-in for the main check."""
        response = event.get("response")
        if event["type"] != "response.create" or not isinstance(response, dict):
            return event, None
        inputs = response.get("input")
        if not isinstance(inputs, list):
            return event, None
        replaced = []
        for index, item in enumerate(inputs):
            if isinstance(item, dict) and item.get("type") == "item_reference":
                path: tuple[str | int, ...] = ("response", "input", index)
                try:
                    reference = ResponseItemReference.model_validate(item)
                except ValidationError as exc:
                    return event, _describe(exc, item, path)
                unknown = undeclared_fields(reference, path)
                if unknown:
                    param = format_param(unknown[0])
                    return event, ClientEventError("unknown_parameter", f"Unknown parameter: '{param}'.", param)
                replaced.append(_REFERENCE_PLACEHOLDER)
            else:
                replaced.append(item)
        return {**event, "response": {**response, "input": replaced}}, None


# -- turning pydantic's union-heavy errors into one real-server error -----------------------


@dataclass
class _Located:
    error: Mapping[str, Any]
    tokens: tuple[tuple[str, Any], ...]  # ("key", name/index) or ("branch", union member tag)

    @property
    def path(self) -> tuple[str | int, ...]:
        return tuple(value for kind, value in self.tokens if kind == "key")

    def boundaries(self) -> list[tuple[tuple[tuple[str, Any], ...], str]]:
        """(tokens before the union member, member tag) for each union this error passed through."""
        return [(self.tokens[:i], value) for i, (kind, value) in enumerate(self.tokens) if kind == "branch"]

    def is_discriminator_miss(self, before: tuple[tuple[str, Any], ...], tag: str) -> bool:
        rest = self.tokens[len(before) + 1 :]
        return (
            self.error["type"] == "literal_error"
            and len(rest) == 1
            and rest[0][0] == "key"
            and rest[0][1] in _DISCRIMINATORS
        )


def _locate(error: Mapping[str, Any], data: Any) -> _Located:
    tokens: list[tuple[str, Any]] = []
    current = data
    loc = error["loc"]
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(current, dict) and isinstance(part, str) and part in current:
            tokens.append(("key", part))
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            tokens.append(("key", part))
            current = current[part]
        elif last and error["type"] == "missing":
            tokens.append(("key", part))
        else:
            tokens.append(("branch", str(part)))
    return _Located(error, tuple(tokens))


def _choose(located: list[_Located]) -> _Located:
    """Follow, at every union, the member the client most plausibly meant: one whose `type`/`role`
    matched, else the one with the fewest errors; report the first error left."""
    candidates = list(located)
    decided: set[tuple[tuple[str, Any], ...]] = set()
    while True:
        position = next(
            (before for c in candidates for before, _tag in c.boundaries() if before not in decided),
            None,
        )
        if position is None:
            return candidates[0]
        by_tag: dict[str, list[_Located]] = {}
        for candidate in candidates:
            for before, tag in candidate.boundaries():
                if before == position:
                    by_tag.setdefault(tag, []).append(candidate)
        plausible = [
            tag for tag, errors in by_tag.items() if not any(e.is_discriminator_miss(position, tag) for e in errors)
        ]
        pool = plausible or list(by_tag)
        best = min(pool, key=lambda tag: len(by_tag[tag]))
        candidates = [
            c for c in candidates if all(tag == best for before, tag in c.boundaries() if before == position)
        ]
        decided.add(position)


def _describe(exc: ValidationError, data: Any, prefix: tuple[str | int, ...] = ()) -> ClientEventError:
    located = [_locate(error, data) for error in exc.errors()]
    chosen = _choose(located)
    path = prefix + chosen.path
    param = format_param(path) or None
    error = chosen.error
    if error["type"] == "missing":
        return ClientEventError("missing_required_parameter", f"Missing required parameter: '{param}'.", param)
    if error["type"] in ("literal_error", "enum"):
        # Offer what every plausible member of the innermost union accepts, not just the first one.
        branches = [i for i, (kind, _value) in enumerate(chosen.tokens) if kind == "branch"]
        shared = chosen.tokens[: branches[-1]] if branches else chosen.tokens
        expected: list[str] = []
        for other in located:
            if (
                other.path == chosen.path
                and other.tokens[: len(shared)] == shared
                and other.error["type"] in ("literal_error", "enum")
            ):
                for value in str(other.error.get("ctx", {}).get("expected", "")).replace(" or ", ", ").split(", "):
                    if value and value not in expected:
                        expected.append(value)
        return ClientEventError(
            "invalid_value",
            f"Invalid value: {error.get('input')!r}. Supported values are: {', '.join(expected)}.",
            param,
        )
    return ClientEventError(
        "invalid_type",
        f"Invalid type for '{param}': {error['msg'].rstrip('.')}; got {type(error.get('input')).__name__} "
        f"{error.get('input')!r}.",
        param,
    )
