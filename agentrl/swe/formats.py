"""Published task datasets, read as they ship: each format's columns mapped onto `SWETask`'s fields.

* `swe-bench` (full, Lite, Verified, Multimodal): the columns of `swebench.types.SWEbenchInstance`; the image is
  its `image` column (rows as swebench 5 publishes them), else `swebench/sweb.eval.x86_64.<id>`; the agent starts
  at `base_commit`.
* `swe-gym`: SWE-bench's columns (less `environment_setup_commit`, `hints_text`, `created_at`); the image is
  `xingyaoww/sweb.eval.x86_64.<id>` with `__` spelled `_s_`.
* `swe-smith`: `instance_id repo patch FAIL_TO_PASS PASS_TO_PASS image_name problem_statement`; the image is
  `image_name` (a bare one under `jyangballin/`); `patch` makes the bug, so the agent starts from the image's
  commit with it applied.
* `r2e-gym`: `repo_name docker_image commit_hash problem_statement expected_output_json`; the image is
  `docker_image`, the agent starts from its checkout.

The format of a row is named by the caller (`load_tasks(path, row_format="swe-gym")`), by a `row_format` column,
or by a data source naming the dataset (`SWE-Gym/SWE-Gym`); else it is told by columns only that format has (two
of R2E-Gym's `repo_name docker_image expected_output_json parsed_commit_content`; SWE-smith's `image_name` without
a `test_patch`; SWE-bench's full set). SWE-Gym's columns are SWE-bench's, so SWE-Gym rows must be named. Rows of
none of these (agentrl's own tasks) are taken as they are. A mapped row carries `row_format`: mapping it again is a
no-op.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

SWEBENCH_ENV_SETUP = "source /opt/miniconda3/bin/activate testbed"
"""SWE-bench's evaluation images (and SWE-Gym's and SWE-smith's, built the same way) keep the tests' env here."""

SWE_GYM_COLUMNS = (
    "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "version", "FAIL_TO_PASS",
    "PASS_TO_PASS",
)  # fmt: skip
SWE_SMITH_COLUMNS = ("instance_id", "repo", "patch", "FAIL_TO_PASS", "PASS_TO_PASS", "image_name", "problem_statement")
R2E_GYM_COLUMNS = ("repo_name", "docker_image", "commit_hash", "problem_statement", "expected_output_json")
R2E_GYM_ONLY = ("repo_name", "docker_image", "expected_output_json", "parsed_commit_content")
SWE_SMITH_NAMESPACE = "jyangballin"
"""Where SWE-smith's images were published when its rows name them without a namespace."""


def swe_bench_columns() -> tuple[str, ...]:
    """The columns every SWE-bench row has, as the official package defines them."""
    from swebench.types import SWEbenchInstance

    return tuple(SWEbenchInstance.__annotations__)


def detect(row: dict[str, Any]) -> str | None:
    """The format a raw row is in, told by its columns (None: agentrl's own row, or an already mapped one)."""
    if "row_format" in row or "image_build" in row:
        return None
    if sum(c in row for c in R2E_GYM_ONLY) >= 2:
        return "r2e-gym"
    if "image_name" in row and "test_patch" not in row:
        return "swe-smith"
    # instance_id first: a row without it is not SWE-bench's, and the official package (slow to import, and absent
    # where agentrl runs without the SWE extras) need not load for every row of every other dataset
    if "instance_id" in row and all(c in row for c in swe_bench_columns()):
        return "swe-bench"
    return None


def format_of_source(data_source: str | None) -> str | None:
    """The format a data source names (`SWE-Gym/SWE-Gym` → `swe-gym`), or None (agentrl's own `swe/<repo>` too)."""
    if (data_source or "").startswith("swe/"):
        return None
    name = re.sub(r"[^a-z0-9]", "", (data_source or "").lower())
    for fmt in ("swe-gym", "swe-smith", "r2e-gym", "swe-bench"):
        if fmt.replace("-", "") in name:
            return fmt
    return None


def normalize(row: dict[str, Any], row_format: str | None = None, where: str = "row") -> dict[str, Any]:
    """The row with its format's columns mapped onto `SWETask`'s fields (and `row_format` set).

    Args:
        row: a dataset row as published.
        row_format: its format (see `FORMATS`); None: the row's `row_format` column, else told by its columns.
        where: how error messages name the row (file and index).

    Raises:
        TaskError: an unknown format, or a column the format needs is missing (named).
    """
    from agentrl.swe.errors import TaskError

    fmt = row_format or row.get("row_format") or detect(row)
    if fmt is None:
        return row
    if fmt not in FORMATS:
        raise TaskError(f"{where}: unknown row format {fmt!r}; use one of {', '.join(FORMATS)}")
    if row.get("row_format") == fmt:
        return row  # mapped already
    required, mapping = FORMATS[fmt]
    missing = [c for c in required() if c not in row]
    if missing:
        raise TaskError(
            f"{where}: a {fmt} row needs the column(s) {', '.join(missing)}, which it lacks; give the dataset's "
            f"rows unchanged, or name their format (row_format / --format: {', '.join(FORMATS)})"
        )
    return {**mapping(row), "row_format": fmt}


def _swe_bench(row: dict[str, Any]) -> dict[str, Any]:
    return dict(row)  # the image: its `image` column (swebench 5 rows), else the package's naming (SWETask.image)


def _swe_gym(row: dict[str, Any]) -> dict[str, Any]:
    image = f"xingyaoww/sweb.eval.x86_64.{str(row['instance_id']).replace('__', '_s_')}:latest".lower()
    return {"image_name": image, "env_setup": SWEBENCH_ENV_SETUP, **row}


def swe_smith_image(name: str) -> str:
    """SWE-smith's image name: as given, or for a bare name (early rows) under its namespace, with `__` spelled
    `_1776_` as Docker Hub needs."""
    if "/" in name:
        return name
    return f"{SWE_SMITH_NAMESPACE}/{name}".replace("__", "_1776_").lower()


def _swe_smith(row: dict[str, Any]) -> dict[str, Any]:
    # Its `patch` makes the bug and its `base_commit` is that bug's commit on a GitHub mirror, which the image does
    # not hold: the bug is applied to the image's checkout instead, and undoing it is the fix.
    return {
        "env_setup": SWEBENCH_ENV_SETUP,
        **row,
        "image_name": swe_smith_image(str(row["image_name"])),
        "start_patch": row["patch"],
        "patch": "",
        "base_commit": "",
        "bug_commit": row.get("base_commit"),
    }


def _r2e_gym(row: dict[str, Any]) -> dict[str, Any]:
    # R2E-Gym's `prompt` column is the prompt that wrote the issue text and holds the fix: never the task's text.
    out = {k: v for k, v in row.items() if k != "prompt"}
    old_commit = _json(row.get("parsed_commit_content")).get("old_commit_hash")
    out.update(
        instance_id=f"{row['repo_name']}-{str(row['commit_hash'])[:12]}",
        repo=str(row["repo_name"]),
        image_name=str(row["docker_image"]),
        problem_statement=_issue_text(str(row["problem_statement"])),
        base_commit="",  # the image holds the repository at the task's start; its history may not
        old_commit=old_commit,
    )
    return out


def _issue_text(statement: str) -> str:
    found = re.search(r"\[ISSUE\](.*)\[/ISSUE\]", statement, re.DOTALL)
    return found.group(1).strip() if found else statement


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value.strip() else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


FORMATS: dict[str, tuple[Callable[[], tuple[str, ...]], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "swe-bench": (swe_bench_columns, _swe_bench),
    "swe-gym": (lambda: SWE_GYM_COLUMNS, _swe_gym),
    "swe-smith": (lambda: SWE_SMITH_COLUMNS, _swe_smith),
    "r2e-gym": (lambda: R2E_GYM_COLUMNS, _r2e_gym),
}
"""Format name → (the columns its rows need, the mapping onto `SWETask`'s fields)."""
