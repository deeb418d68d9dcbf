"""Harbor task folders written for unit tests."""

from __future__ import annotations

from pathlib import Path

TASK_TOML = """\
schema_version = "1.4"
[task]
name = "test/{name}"
[verifier]
timeout_sec = 30.0
[agent]
timeout_sec = 60.0
[environment]
cpus = 2
memory_mb = 4096
"""


def write_task(root: Path, name: str, toml: str | None = None, skip: tuple[str, ...] = ()) -> Path:
    """A complete task folder `root/name` (leave files out with `skip`)."""
    files = {
        "instruction.md": f"Do the {name} thing.\n",
        "task.toml": TASK_TOML.format(name=name) if toml is None else toml,
        "environment/Dockerfile": "FROM agentrl/sandbox:base\nWORKDIR /app\n",
        "solution/solve.sh": "echo solved > /app/out.txt\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    }
    folder = root / name
    for rel, text in files.items():
        if rel not in skip:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
