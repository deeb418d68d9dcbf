"""JSON schemas of tool arguments, built from a Python function's type hints and Google-style docstring."""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Collection
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Examples?|Notes?|Attributes):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def annotation_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint.

    Supports str, int, float, bool, None, list/list[X], dict/dict[str, X], Literal[...], X | Y, Optional[X]
    and Any.

    Raises:
        TypeError: the hint has no JSON-schema equivalent.
    """
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is Any:
        return {}
    origin, args = get_origin(hint), get_args(hint)
    if hint is list or origin is list:
        return {"type": "array", "items": annotation_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return _dict_schema(args)
    if origin is Literal:
        return _literal_schema(args)
    if origin is Union or origin is types.UnionType:
        return _union_schema(args)
    raise TypeError(f"unsupported type hint {hint!r}")


def _dict_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    if not args:
        return {"type": "object"}
    if args[0] is not str:
        raise TypeError(f"dict keys must be str in JSON, got {args[0]!r}")
    return {"type": "object", "additionalProperties": annotation_schema(args[1])}


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_SIMPLE.get(type(v)) for v in values}
    if None in kinds:
        raise TypeError(f"Literal values must be str, int, float, bool or None, got {values!r}")
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    return schema


def _union_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    subs = [annotation_schema(a) for a in args if a is not type(None)]
    if len(subs) == 1:
        schema = subs[0]
    elif all(set(s) == {"type"} and isinstance(s["type"], str) for s in subs):
        schema = {"type": sorted(s["type"] for s in subs)}
    else:
        schema = {"anyOf": subs}
    if type(None) in args:
        schema["nullable"] = True
    return schema


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its `Args:` descriptions.

    Returns:
        The text before the first section (e.g. `Args:`), and a map from parameter name to its description
        (continuation lines joined).
    """
    summary: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] = summary
    for line in inspect.cleandoc(doc or "").splitlines():
        header = _SECTION.match(line) if not line.startswith((" ", "\t")) else None
        if header:
            current = sections.setdefault(header.group(1), [])
        else:
            current.append(line)
    arg_lines = sections.get("Args") or sections.get("Arguments") or sections.get("Parameters") or []
    return "\n".join(summary).strip(), _parse_args(arg_lines)


def _parse_args(lines: list[str]) -> dict[str, str]:
    """Parse the lines of an `Args:` section: `name (type): text`, continued by more-indented lines."""
    args: dict[str, str] = {}
    base_indent: int | None = None
    name: str | None = None
    for line in lines:
        text = line.strip()
        if not text:
            continue
        indent = len(line) - len(line.lstrip())
        base_indent = indent if base_indent is None else base_indent
        match = _ARG_LINE.match(text)
        if match and indent <= base_indent:
            name = match.group(1).lstrip("*")
            args[name] = match.group(2).strip()
        elif name is not None:
            args[name] = f"{args[name]} {text}".strip()
    return args


def function_schema(fn: Callable[..., Any], *, skip: Collection[str] = ()) -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of a function's parameters.

    Args:
        fn: the function; every parameter needs a type hint.
        skip: parameters to leave out (e.g. an injected `ToolContext`).

    Returns:
        The docstring's description and an "object" schema: a property per parameter, described from the
        docstring's `Args:`; parameters without a default are required; extra arguments are not allowed.

    Raises:
        TypeError: a parameter has no type hint, an unsupported one, or is `*args` / `**kwargs`.
    """
    description, arg_docs = parse_docstring(fn.__doc__)
    hints = get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.name in skip:
            continue
        properties[param.name] = _param_schema(fn, param, hints, arg_docs.get(param.name))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return description, schema


def _param_schema(
    fn: Callable[..., Any], param: inspect.Parameter, hints: dict[str, Any], doc: str | None
) -> dict[str, Any]:
    where = f"parameter '{param.name}' of tool function '{fn.__name__}'"
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise TypeError(f"{where}: *args and **kwargs cannot be described in a JSON schema; name each argument")
    if param.name not in hints:
        raise TypeError(f"{where} has no type hint; annotate it (str, int, float, bool, list[...], dict, ...)")
    try:
        schema = dict(annotation_schema(hints[param.name]))
    except TypeError as exc:
        supported = "str, int, float, bool, list[...], dict, Literal[...] or Optional"
        raise TypeError(f"{where}: {exc}; use {supported}") from None
    if doc:
        schema["description"] = doc
    if param.default is not inspect.Parameter.empty and _is_json_value(param.default):
        schema["default"] = param.default
    return schema


def _is_json_value(value: Any) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False
