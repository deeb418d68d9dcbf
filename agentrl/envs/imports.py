"""Import an object named by a dotted path (`pkg.module:Name` or `pkg.module.Name`)."""

from __future__ import annotations

import importlib
from typing import Any

from agentrl.errors import UserError


def import_object(path: str, key: str) -> Any:
    """The object at `path`; `key` is the config key that named it (for the error message).

    Raises:
        UserError: the module or the attribute cannot be found.
    """
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attr:
        raise UserError(f"{key}={path!r} is not a dotted path; write it as pkg.module:Name")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"{key}={path!r}: cannot import module {module_name!r} ({exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"{key}={path!r}: module {module_name!r} has no attribute {attr!r}") from None
