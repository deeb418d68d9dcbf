"""`edit_line`: one piece of text replaced on one numbered line; the tool on a LocalSandbox."""

from __future__ import annotations

import pytest

from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import ToolCall, ToolSet
from agentrl.tools.builtin.edit_line import EditLineTool, edit_line_text
from agentrl.tools.builtin.editor import EditorError

TEXT = "def f(seq, n):\n    if len(seqq) < n:\n        return seq\n    return seq[:n] + seq[:n]\n"


def call(**arguments: object) -> ToolCall:
    return ToolCall(id="c", name="edit_line", arguments=arguments)


def test_the_text_is_replaced_on_that_line_only() -> None:
    assert edit_line_text(TEXT, 2, "seqq", "seq") == TEXT.replace("seqq", "seq")
    assert edit_line_text(TEXT, 3, "seq", "None") == TEXT.replace("return seq\n", "return None\n")


@pytest.mark.parametrize(
    ("line", "old", "message"),
    [
        (3, "seqq", "'seqq' is not on line 3"),
        (4, "seq", "occurs 2 times on line 4"),
        (2, "", "is empty"),
        (9, "x", "outside the file: it has 4 lines"),
        ("2", "seqq", "outside the file"),
    ],
)
def test_a_wrong_line_or_text_is_refused_with_what_the_line_holds(line: object, old: str, message: str) -> None:
    with pytest.raises(EditorError, match=message):
        edit_line_text(TEXT, line, old, "x")  # type: ignore[arg-type]


def test_several_lines_are_refused() -> None:
    with pytest.raises(EditorError, match="within one line"):
        edit_line_text(TEXT, 2, "seqq", "seq\n")


async def test_the_tool_edits_the_sandbox_file_and_may_end_the_episode() -> None:
    sandbox = LocalSandbox()
    await sandbox.write_file(sandbox.resolve("pkg/m.py"), TEXT)
    plain = ToolSet([EditLineTool()], trajectory_id="t", sandbox=sandbox)
    ending = ToolSet([EditLineTool({"ends_episode": True})], trajectory_id="t", sandbox=sandbox)
    try:
        result = await plain.execute(call(path="pkg/m.py", line=2, old="seqq", new="seq"))
        assert not result.is_error and "len(seq) < n" in result.content
        assert not result.metadata.get("submitted")
        assert (await sandbox.read_file(sandbox.resolve("pkg/m.py"))).decode() == TEXT.replace("seqq", "seq")
        bad = await plain.execute(call(path="pkg/m.py", line=2, old="seqq", new="seq"))
        assert bad.is_error and "is not on line 2" in bad.content
        done = await ending.execute(call(path="pkg/m.py", line=3, old="return seq", new="return n"))
        assert done.metadata["submitted"] is True
    finally:
        await sandbox.close()


async def test_a_module_named_as_a_file_is_its_package_init() -> None:
    sandbox = LocalSandbox()
    await sandbox.write_file(sandbox.resolve("pkg/__init__.py"), TEXT)
    tools = ToolSet([EditLineTool()], trajectory_id="t", sandbox=sandbox)
    try:
        result = await tools.execute(call(path="pkg.py", line=2, old="seqq", new="seq"))
        assert not result.is_error and "pkg/__init__.py" in result.content
        assert (await sandbox.read_file(sandbox.resolve("pkg/__init__.py"))).decode() == TEXT.replace("seqq", "seq")
        missing = await tools.execute(call(path="other.py", line=2, old="seqq", new="seq"))
        assert missing.is_error and "other.py does not exist" in missing.content
    finally:
        await sandbox.close()
