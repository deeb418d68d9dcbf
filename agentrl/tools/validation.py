"""Checks tool-call arguments against a tool's JSON schema, with messages a model can act on.

Covers the subset of JSON Schema that tool schemas use: type (one or a list), enum, nullable, anyOf,
properties / required / additionalProperties, items. Unlike plain JSON Schema, an argument not listed in
`properties` is an error unless `additionalProperties` is set, since a Python tool would reject it anyway.
"""

from __future__ import annotations

from typing import Any

_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_MAX_SHOWN = 40


def validate_arguments(arguments: Any, schema: dict[str, Any]) -> list[str]:
    """Every problem of `arguments` against the "object" `schema`; empty when they are valid."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {_json_type(arguments)}"]
    return _check_object(arguments, schema, prefix="")


def _check_object(value: dict[str, Any], schema: dict[str, Any], prefix: str) -> list[str]:
    properties: dict[str, Any] = schema.get("properties", {})
    errors = [f"missing required argument '{prefix}{name}'" for name in schema.get("required", []) if name not in value]
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        path = f"{prefix}{name}"
        if name in properties:
            errors += _check(item, properties[name], path)
        elif isinstance(extra, dict):
            errors += _check(item, extra, path)
        elif not extra:
            allowed = ", ".join(properties) or "none"
            errors.append(f"unexpected argument '{path}' (allowed: {allowed})")
    return errors


def _check(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    if value is None and schema.get("nullable"):
        return []
    if "anyOf" in schema:
        if any(not _check(value, sub, path) for sub in schema["anyOf"]):
            return []
        return [f"argument '{path}' matches none of the allowed types, got {_shown(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(v) for v in schema["enum"])
        return [f"argument '{path}' must be one of {choices}, got {_shown(value)}"]
    types_ = schema.get("type")
    if types_ is not None:
        names = [types_] if isinstance(types_, str) else list(types_)
        if not any(_TYPE_CHECKS.get(t, lambda _v: True)(value) for t in names):
            return [f"argument '{path}' must be {' or '.join(names)}, got {_shown(value)}"]
    if isinstance(value, dict) and ("properties" in schema or "additionalProperties" in schema):
        return _check_object(value, schema, prefix=f"{path}.")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [e for i, item in enumerate(value) for e in _check(item, schema["items"], f"{path}[{i}]")]
    return []


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 3] + "..."
    return f"{_json_type(value)} {text}"


def describe_parameters(schema: dict[str, Any]) -> str:
    """A one-line summary of a tool's parameters, e.g. `path (string, required), limit (integer)`."""
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type", "any")
        kind = "|".join(kind) if isinstance(kind, list) else kind
        parts.append(f"{name} ({kind}{', required' if name in required else ''})")
    return ", ".join(parts) or "no arguments"
