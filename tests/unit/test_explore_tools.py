"""The exploration tools of the swe_explore tier (`view_lines`, `search_code`, `run_tests`) on a LocalSandbox
holding a small package with a failing test."""

from __future__ import annotations

from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import ToolCall, ToolSet
from agentrl.tools.builtin.run_tests import RunTestsTool
from agentrl.tools.builtin.search_code import SearchCodeTool
from agentrl.tools.builtin.view_lines import ViewLinesTool

MODULE = "".join(f"# line {i}\n" for i in range(1, 50)) + "def double(n):\n    return n + n + 1\n"
TEST = "from pkg import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\ndef test_zero():\n    pass\n"


async def play(calls: list[tuple[str, dict]], run_tests: dict | None = None, module: str = MODULE) -> list:
    sandbox = LocalSandbox()
    await sandbox.write_file(sandbox.resolve("pkg/__init__.py"), module)
    await sandbox.write_file(sandbox.resolve("test_pkg.py"), TEST)
    tools = ToolSet(
        [
            ViewLinesTool({"max_lines": 5}),
            SearchCodeTool({"max_matches": 2}),
            RunTestsTool(run_tests or {"max_lines": 8}),
        ],
        trajectory_id="t",
        sandbox=sandbox,
    )
    try:
        return [await tools.execute(ToolCall(id=str(i), name=n, arguments=a)) for i, (n, a) in enumerate(calls)]
    finally:
        await sandbox.close()


async def test_view_lines_shows_a_numbered_range_capped_and_finds_a_package_module() -> None:
    (shown, capped, missing, around, neither) = await play([
        ("view_lines", {"path": "pkg.py", "start": 50, "end": 51}),
        ("view_lines", {"path": "pkg/__init__.py", "start": 1, "end": 99}),
        ("view_lines", {"path": "nope.py", "start": 1, "end": 2}),
        ("view_lines", {"path": "pkg.py", "line": 10}),
        ("view_lines", {"path": "pkg.py"}),
    ])  # fmt: skip
    header, *lines = shown.content.splitlines()
    assert header.endswith("pkg/__init__.py, lines 50-51 of 51:") and len(lines) == 2
    assert "50" in lines[0] and lines[0].endswith("def double(n):") and lines[1].endswith("return n + n + 1")
    assert "lines 1-5 of 51" in capped.content and "# line 6" not in capped.content
    assert missing.is_error and "does not exist" in missing.content
    assert "lines 7-11 of 51" in around.content  # the line and its neighbours, capped at max_lines
    assert neither.is_error and "give start and end" in neither.content


async def test_search_code_lists_file_and_line_of_the_first_matches() -> None:
    (found, many, none) = await play([
        ("search_code", {"text": "return n + n"}),
        ("search_code", {"text": "# line"}),
        ("search_code", {"text": "no such text"}),
    ])  # fmt: skip
    assert found.content == "pkg/__init__.py:51:    return n + n + 1"
    assert many.content.count("\n") == 2 and many.content.endswith("[more matches not shown]")
    assert none.content == "No line contains 'no such text'."


async def test_run_tests_shows_the_end_of_pytests_report() -> None:
    (failing, passing) = await play([
        ("run_tests", {"test": "test_pkg.py::test_double"}),
        ("run_tests", {"test": "test_pkg.py::test_zero"}),
    ])  # fmt: skip
    assert "assert 5 == 4" in failing.content and "1 failed" in failing.content
    assert len(failing.content.splitlines()) <= 9 and "1 passed" in passing.content


async def test_run_tests_frame_report_shows_the_frame_that_raised() -> None:
    typo = MODULE.replace("return n + n + 1", "m = n\n    return n + nn")
    (failing, passing) = await play(
        [("run_tests", {}), ("run_tests", {"test": "test_pkg.py::test_zero"})],
        run_tests={"report": "frame", "max_lines": 5},
        module=typo,
    )
    assert failing.content.startswith("A test fails here:") and "test_double" not in failing.content
    frame = failing.content.split("```")[1].strip("\n").splitlines()
    assert frame[0] == ">       return n + nn" and frame[-1] == "pkg/__init__.py:52: NameError"  # the last 5 lines
    assert "E       NameError: name 'nn' is not defined" in frame and len(frame) == 5
    assert "test_pkg.py" not in failing.content  # the test's own frame is not the one that raised
    assert "1 passed" in passing.content  # nothing failed: the report's tail


async def test_a_tool_set_to_ignore_stray_arguments_drops_them_and_counts_it() -> None:
    sandbox = LocalSandbox()
    await sandbox.write_file(sandbox.resolve("pkg/__init__.py"), MODULE)
    strict = ToolSet([ViewLinesTool()], trajectory_id="t", sandbox=sandbox)
    lenient = ToolSet([ViewLinesTool({"extra_arguments": "ignore"})], trajectory_id="t", sandbox=sandbox)
    stray = ToolCall(id="1", name="view_lines", arguments={"path": "pkg.py", "line": 51, "old": "x"})
    try:
        refused, shown = await strict.execute(stray), await lenient.execute(stray)
    finally:
        await sandbox.close()
    assert refused.is_error and "unexpected argument 'old'" in refused.content
    assert not shown.is_error and "return n + n + 1" in shown.content
    assert lenient.metrics["tool/ignored_args"] == 1 and strict.metrics["tool/bad_args"] == 1
