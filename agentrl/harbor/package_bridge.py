"""Harbor's own package, asked by agentrl: run as a script by the Python that has `harbor` installed.

`harbor` needs Python 3.12+ and agentrl runs on 3.11 (its torch wheel), so agentrl does not import it: it runs
this file with harbor's interpreter (`agentrl.harbor.package`) and reads one JSON document from its stdout. This
file imports only the standard library and `harbor`, never agentrl.

    python package_bridge.py tasks DIR...     -> [{"path", "name", "instruction", "config"} | {"path", "error"}]
    python package_bridge.py manifest FILE    -> {"names": [...]} | {"error"}

`tasks` reads each folder with `harbor.models.task.task.Task` (its TaskConfig, its checks of the folder, its
instruction with the canary lines stripped); `manifest` parses a dataset.toml with Harbor's `DatasetManifest`.
Verification is served by a process of its own (`verify_server.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def read_tasks(dirs: list[str]) -> list[dict[str, Any]]:
    from harbor.models.task.task import Task

    out = []
    for folder in dirs:
        try:
            task = Task(folder)
        except Exception as exc:  # Harbor's own complaint about the folder, passed on word for word
            out.append({"path": folder, "error": f"{type(exc).__name__}: {exc}"})
            continue
        out.append({
            "path": str(Path(folder).resolve()),
            "name": task.name,
            "instruction": task.instruction,
            "config": task.config.model_dump(mode="json"),
        })  # fmt: skip
    return out


def read_manifest(path: str) -> dict[str, Any]:
    from harbor.models.dataset.manifest import DatasetManifest

    try:
        manifest = DatasetManifest.from_toml(Path(path).read_text())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"names": [ref.name for ref in manifest.tasks]}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("tasks", "manifest"):
        print("usage: package_bridge.py tasks DIR... | manifest FILE", file=sys.stderr)
        return 2
    commands = {"tasks": lambda a: read_tasks(a), "manifest": lambda a: read_manifest(a[0])}
    json.dump(commands[argv[0]](argv[1:]), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
