"""`replace_line`: one numbered line replaced, its indentation kept; the tool on a LocalSandbox."""

from __future__ import annotations

import pytest

from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import ToolCall, ToolSet
from agentrl.tools.builtin.editor import EditorError
from agentrl.tools.builtin.replace_line import ReplaceLineTool, replace_line_text


def call(**arguments: object) -> ToolCall:
    return ToolCall(id="c", name="replace_line", arguments=arguments)


TEXT = "def f(a, b):\n    if a < b:\n        return a\n    return b\n"


def test_the_line_keeps_its_indentation_whatever_the_reply_indents() -> None:
    assert replace_line_text(TEXT, 2, "if a <= b:") == TEXT.replace("a < b", "a <= b")
    assert replace_line_text(TEXT, 2, "  if a <= b:  ") == TEXT.replace("a < b", "a <= b")
    assert replace_line_text(TEXT, 1, "def f(a, c):\n") == TEXT.replace("a, b)", "a, c)")


@pytest.mark.parametrize("line", [0, 5, -1, True, "2"])
def test_a_line_outside_the_file_is_refused_with_its_length(line: object) -> None:
    with pytest.raises(EditorError, match="outside the file: it has 4 lines"):
        replace_line_text(TEXT, line, "x")  # type: ignore[arg-type]


def test_several_lines_are_refused() -> None:
    with pytest.raises(EditorError, match="one line"):
        replace_line_text(TEXT, 2, "if a:\n    pass")


async def test_the_tool_edits_the_sandbox_file_and_may_end_the_episode() -> None:
    sandbox = LocalSandbox()
    await sandbox.write_file(sandbox.resolve("pkg/m.py"), TEXT)
    plain = ToolSet([ReplaceLineTool()], trajectory_id="t", sandbox=sandbox)
    ending = ToolSet([ReplaceLineTool({"ends_episode": True})], trajectory_id="t", sandbox=sandbox)
    try:
        result = await plain.execute(call(path="pkg/m.py", line=3, text="return b"))
        assert not result.is_error and "return b" in result.content
        assert not result.metadata.get("submitted")
        assert (await sandbox.read_file(sandbox.resolve("pkg/m.py"))).decode().split("\n")[2] == "        return b"
        bad = await plain.execute(call(path="pkg/m.py", line=9, text="x"))
        assert bad.is_error and "it has 4 lines" in bad.content
        missing = await plain.execute(call(path="nope.py", line=1, text="x"))
        assert missing.is_error and "does not exist" in missing.content
        done = await ending.execute(call(path="pkg/m.py", line=2, text="if a <= b:"))
        assert done.metadata["submitted"] is True
    finally:
        await sandbox.close()
