"""The configuration reference, generated from the schema: every key, its type, default and description, so the
documentation cannot drift from the code. `python -m agentrl.config.reference > docs/reference/configuration.md`
writes it; a test checks the file lists every key."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from agentrl.config.schema import AgentRLConfig

HEADER = """# Configuration reference

Every key of a run's configuration (`agentrl train recipe=NAME key=value ...`), generated from
`agentrl/config/schema.py` by `python -m agentrl.config.reference`; do not edit by hand.
"""


def config_keys(model: type[BaseModel] = AgentRLConfig, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, field info) of every key of the schema in declaration order: sections expanded, a list of
    items (`tools`) followed by its items' keys (`tools[].class`), and a mapping of named items (`policies`) by
    its items' keys (`policies.<name>.model`)."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            yield from config_keys(info.annotation, key + ".")
            continue
        yield key, info
        if (item := _list_item_model(info.annotation)) is not None:
            yield from config_keys(item, key + "[].")
        if (item := _dict_value_model(info.annotation)) is not None:
            yield from config_keys(item, key + ".<name>.")


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    args = getattr(annotation, "__args__", ())
    if getattr(annotation, "__origin__", None) is list and args and isinstance(args[0], type):
        return args[0] if issubclass(args[0], BaseModel) else None
    return None


def _dict_value_model(annotation: Any) -> type[BaseModel] | None:
    args = getattr(annotation, "__args__", ())
    if getattr(annotation, "__origin__", None) is dict and len(args) == 2 and isinstance(args[1], type):
        return args[1] if issubclass(args[1], BaseModel) else None
    return None


def _section(key: str) -> str:
    top = key.split(".")[0].split("[")[0]
    annotation = AgentRLConfig.model_fields[top].annotation
    nested = top != key or _list_item_model(annotation) is not None or _dict_value_model(annotation) is not None
    return top if nested else "(top level)"


def reference() -> str:
    """The reference as Markdown: one table per section."""
    out = [HEADER]
    section = None
    for key, info in config_keys():
        top = _section(key)
        if top != section:
            section = top
            out.append(f"\n## `{top}`\n\n| key | type | default | description |\n|---|---|---|---|")
        out.append(f"| `{key}` | `{_type(info)}` | `{_default(info)}` | {_cell(info.description or '')} |")
    return "\n".join(out) + "\n"


def _type(info: Any) -> str:
    text = str(info.annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return _cell(text.replace("agentrl.config.schema.", ""))


def _default(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
        value = value.model_dump() if isinstance(value, BaseModel) else value
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    return _cell(json.dumps(value, default=str))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.stdout.write(reference())
