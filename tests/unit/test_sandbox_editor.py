"""The editor's text operations, and the editor tool on a LocalSandbox."""

from __future__ import annotations

import pytest

from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import ToolCall, ToolSet
from agentrl.tools.builtin.editor import EditorError, EditorTool, insert_text, replace_text, view_text

TEXT = "def f():\n    return 1\n\n\ndef g():\n    return 1\n"


def test_view_numbers_lines_and_ranges() -> None:
    assert view_text("a\nb\n") == "     1\ta\n     2\tb"
    assert view_text(TEXT, [5, -1]) == "     5\tdef g():\n     6\t    return 1"
    with pytest.raises(EditorError, match="outside"):
        view_text(TEXT, [9, 10])


def test_replace_is_exact_and_unique() -> None:
    new, line = replace_text(TEXT, "def g():\n    return 1", "def g():\n    return 2")
    assert new.endswith("return 2\n") and line == 5
    with pytest.raises(EditorError, match="no match"):
        replace_text(TEXT, "return 3", "x")
    with pytest.raises(EditorError, match=r"2 matches of old_str \(lines 2, 6\)"):
        replace_text(TEXT, "return 1", "x")
    with pytest.raises(EditorError, match="empty"):
        replace_text(TEXT, "", "x")


def test_insert_after_line() -> None:
    assert insert_text("a\nb\n", 0, "top") == "top\na\nb\n"
    assert insert_text("a\nb\n", 1, "x\ny\n") == "a\nx\ny\nb\n"
    assert insert_text("a\nb", 2, "end") == "a\nb\nend\n"
    with pytest.raises(EditorError, match="outside the file: it has 2 lines"):
        insert_text("a\nb\n", 5, "x")


async def test_editor_tool_round_trip() -> None:
    sandbox = LocalSandbox()
    tools = ToolSet([EditorTool()], trajectory_id="t", sandbox=sandbox)

    async def edit(**args):
        return await tools.execute(ToolCall(id="c", name="editor", arguments=args))

    try:
        assert not (await edit(command="create", path="pkg/m.py", file_text=TEXT)).is_error
        assert (await edit(command="create", path="pkg/m.py", file_text="x")).is_error  # exists
        result = await edit(command="str_replace", path="pkg/m.py", old_str="return 1", new_str="return 2")
        assert result.is_error and "2 matches" in result.content
        result = await edit(command="str_replace", path="pkg/m.py", old_str="def g():\n    return 1", new_str="#")
        assert not result.is_error and "     5\t#" in result.content
        assert not (await edit(command="insert", path="pkg/m.py", insert_line=0, new_str="import os")).is_error
        view = await edit(command="view", path="pkg/m.py")
        assert "     1\timport os" in view.content and "     6\t#" in view.content
        assert "pkg/m.py" in (await edit(command="view", path=".")).content
        missing = await edit(command="str_replace", path="nope.py", old_str="a", new_str="b")
        assert missing.is_error and "does not exist" in missing.content
    finally:
        await tools.release()
        await sandbox.close()
