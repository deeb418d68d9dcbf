"""Reading test results and patches: pytest's JUnit XML report as SWE-bench test ids, and the files a diff touches.

The report is parsed, never the console output (which carries colours, wrapping and plugin noise). With
``-o junit_family=xunit1`` every ``<testcase>`` has the ``file`` its test lives in, so its pytest node id
(``tests/test_x.py::TestClass::test_name[param]``, SWE-bench's format) is rebuilt exactly.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from enum import StrEnum


class Outcome(StrEnum):
    """A test's result; a test run several times (subtests, reruns) keeps its worst outcome."""

    PASSED = "passed"
    SKIPPED = "skipped"
    FAILED = "failed"
    ERROR = "error"


_RANK = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.FAILED: 2, Outcome.ERROR: 3}


def node_id(file: str | None, classname: str, name: str) -> str:
    """The pytest node id of a JUnit ``<testcase>`` (pytest's ``mangle_test_address``, reversed).

    Args:
        file: the ``file`` attribute (xunit1), relative to the rootdir; None when absent.
        classname: ``tests.test_x.TestClass`` (module path with dots, then the class names).
        name: ``test_name[param]``.
    """
    if not file:
        return f"{classname}::{name}" if classname else name
    module = re.sub(r"\.py$", "", file).replace("/", ".")
    rest = classname[len(module) :].lstrip(".") if classname.startswith(module) else ""
    parts = [file, *(rest.split(".") if rest else []), name]
    return "::".join(parts)


def parse_junit(xml_text: str) -> dict[str, Outcome]:
    """Outcomes by pytest node id from a JUnit XML report.

    Raises:
        ValueError: the text is not a JUnit XML report.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not a JUnit XML report: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"not a JUnit XML report: root element <{root.tag}>")
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        tid = node_id(case.get("file"), case.get("classname", ""), case.get("name", ""))
        outcome = _outcome(case)
        if tid not in outcomes or _RANK[outcome] > _RANK[outcomes[tid]]:
            outcomes[tid] = outcome
    return outcomes


def _outcome(case: ET.Element) -> Outcome:
    tags = {child.tag for child in case}
    if "error" in tags:
        return Outcome.ERROR
    if "failure" in tags:
        return Outcome.FAILED
    if "skipped" in tags:
        return Outcome.SKIPPED
    return Outcome.PASSED


def first_failure(xml_text: str, test_id: str, traceback: bool = False) -> str:
    """The message of the first failure or error recorded for `test_id` ("" if none); with `traceback`, the
    report's full text of it (pytest's traceback, ending in the error) instead of the one-line message."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return ""
    for case in root.iter("testcase"):
        if node_id(case.get("file"), case.get("classname", ""), case.get("name", "")) != test_id:
            continue
        for child in case:
            if child.tag in ("failure", "error"):
                return (child.text if traceback else child.get("message")) or ""
    return ""


_FILE_LINE = re.compile(r"^(---|\+\+\+) (\S+)", re.MULTILINE)


def _strip(path: str) -> str | None:
    """A diff path without its `a/` / `b/` prefix (as `-p1` strips it); None for /dev/null."""
    if path == "/dev/null":
        return None
    return path.split("/", 1)[1] if "/" in path else path


def patch_files(patch: str) -> list[str]:
    """The paths a unified diff touches (new paths; deleted files by their old path), in order."""
    files: list[str] = []
    old: str | None = None
    for marker, path in _FILE_LINE.findall(patch):
        if marker == "---":
            old = _strip(path)
        else:
            new = _strip(path) or old
            if new:
                files.append(new)
    return list(dict.fromkeys(files))


def new_files(patch: str) -> list[str]:
    """The paths a unified diff creates (``--- /dev/null``)."""
    out: list[str] = []
    old: str | None = ""
    for marker, path in _FILE_LINE.findall(patch):
        if marker == "---":
            old = _strip(path)
        elif old is None and _strip(path):
            out.append(_strip(path))  # type: ignore[arg-type]
    return out


def files_of_tests(test_ids: list[str]) -> list[str]:
    """The files of pytest node ids, in order of first appearance."""
    return list(dict.fromkeys(t.split("::", 1)[0] for t in test_ids if t))
