"""Reading Harbor tasks with Harbor's own package (`pip install harbor`), from agentrl's Python.

`harbor` needs Python 3.12+, and agentrl runs on 3.11, so the package lives in an interpreter of its own (`make
setup` makes `.venv-harbor/`). agentrl runs `package_bridge.py` with that interpreter and reads its JSON answer:
each task folder through `harbor.models.task.task.Task` (its config model, its checks, its instruction), a
dataset.toml through Harbor's `DatasetManifest`. Verification runs Harbor's `Verifier` in a long-lived process
of its own (`agentrl.harbor.verify_client`). The containers and their limits stay agentrl's.

`data.harbor_reader` chooses: `harbor` (this module; refused at start when no interpreter has the package),
`agentrl` (agentrl's own reader, `agentrl.harbor.config`, which mirrors harbor 0.26's fields), or `auto` (the
package when it is found, else agentrl's reader).

The interpreter is the first of: `$AGENTRL_HARBOR_PYTHON`; this Python, when it can import `harbor`; the
checkout's `.venv-harbor/bin/python`, once `make setup` has finished installing the package there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from agentrl.errors import UserError

HarborReader = Literal["auto", "harbor", "agentrl"]
BRIDGE = Path(__file__).with_name("package_bridge.py")
CHECKOUT_VENV = Path(__file__).resolve().parents[2] / ".venv-harbor"
READY_STAMP = ".agentrl-ready"  # written by scripts/setup.sh once the package is installed
INSTALL_HINT = (
    "install it in a Python 3.12+ environment (`make setup` makes .venv-harbor/, or `python3.12 -m venv V && "
    "V/bin/pip install harbor`) and point AGENTRL_HARBOR_PYTHON at its python; or set data.harbor_reader=agentrl"
)


class HarborPackageError(UserError):
    """Harbor's package is missing, or it refused what it was asked to read (its message passed on)."""


def harbor_python() -> str | None:
    """The interpreter that has `harbor` installed (see the module docstring), or None."""
    explicit = os.environ.get("AGENTRL_HARBOR_PYTHON")
    if explicit:
        return explicit
    if importlib.util.find_spec("harbor") is not None:
        return sys.executable
    return str(CHECKOUT_VENV / "bin" / "python") if (CHECKOUT_VENV / READY_STAMP).is_file() else None


def resolve_reader(choice: HarborReader | str) -> Literal["harbor", "agentrl"]:
    """`auto` made definite: the package when an interpreter has it, else agentrl's reader.

    Raises:
        HarborPackageError: `harbor` is asked for and no interpreter has it.
    """
    if choice == "agentrl":
        return "agentrl"
    if harbor_python() is None:
        if choice == "harbor":
            message = "data.harbor_reader=harbor, but no Python has the `harbor` package"
            raise HarborPackageError(f"{message}: {INSTALL_HINT}")
        return "agentrl"
    return "harbor"


def read_tasks(paths: list[Path]) -> list[dict[str, Any]]:
    """Harbor's reading of each task folder: `{"path", "name", "instruction", "config"}`, or `{"path", "error"}`
    with Harbor's complaint. Each folder is asked once per process."""
    missing = [str(p) for p in paths if str(p) not in _TASKS]
    if missing:
        _TASKS.update(zip(missing, _ask("tasks", *missing), strict=True))  # answers come in the order asked
    return [_TASKS[str(p)] for p in paths]


_TASKS: dict[str, dict[str, Any]] = {}


@lru_cache(maxsize=64)
def manifest_names(manifest: Path) -> list[str]:
    """The task names a dataset.toml lists, as Harbor's `DatasetManifest` parses it.

    Raises:
        HarborPackageError: Harbor refused the manifest (its message).
    """
    answer = _ask("manifest", str(manifest))
    if "error" in answer:
        raise HarborPackageError(f"{manifest}: harbor: {answer['error']}")
    return list(answer["names"])


def _ask(command: str, *args: str) -> Any:
    python = harbor_python()
    if python is None:
        raise HarborPackageError(f"reading Harbor tasks with the `harbor` package needs it: {INSTALL_HINT}")
    try:
        done = subprocess.run(
            [python, str(BRIDGE), command, *args], capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarborPackageError(f"running {python} for the `harbor` package failed: {exc}; {INSTALL_HINT}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise HarborPackageError(f"{python} could not use the `harbor` package: {' / '.join(tail)}; {INSTALL_HINT}")
    return json.loads(done.stdout)
