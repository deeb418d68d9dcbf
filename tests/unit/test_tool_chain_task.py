"""The tool_chain recipe: its `lookup` tool (a file beside the recipe, found from there), its data and its config."""

import asyncio
import json
from pathlib import Path

from agentrl.config import load_config
from agentrl.tools.base import ToolCall
from agentrl.tools.registry import build_tools
from agentrl.tools.toolset import ToolSet

RECIPE = Path(__file__).parents[2] / "recipes" / "tool_chain"


def _tools():
    cfg = load_config("tool_chain")
    return ToolSet(build_tools(cfg.tools), trajectory_id="t")


def _lookup(tools, key):
    return asyncio.run(tools.execute(ToolCall(id="call_0", name="lookup", arguments={"key": key})))


def test_the_recipe_finds_its_tool_file_beside_it_wherever_it_runs_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config("tool_chain")
    assert cfg.tools[0].class_ == f"{RECIPE / 'tools.py'}:lookup"
    assert load_config("tool_use").tools[0].class_ == "calculator"  # a registered name is left as it is


def test_lookup_holds_a_three_digit_entry_under_every_key_and_refuses_what_is_not_a_key():
    tools = _tools()
    first = _lookup(tools, "KQZV")
    number = first.content.split()[0]
    assert not first.is_error and 100 <= int(number) <= 999
    assert first.content == f"{number} (a key too: look up {number} next)"  # says where to go next
    assert _lookup(tools, " kqzv ").content == first.content  # case and spaces do not matter
    second = _lookup(tools, number)  # an entry is a key too; one under a number is just the number
    assert not second.is_error and 100 <= int(second.content) <= 999
    for bad in ("KQZ", "KQZVX", "017", "12"):
        refused = _lookup(tools, bad)
        assert refused.is_error and "four capital letters" in refused.content


def test_every_answer_is_two_lookups_away_and_held_out_keys_are_new():
    tools = _tools()
    files = {name: RECIPE / "data" / f"{name}.jsonl" for name in ("train", "eval")}
    rows = {name: [json.loads(line) for line in file.open()] for name, file in files.items()}
    assert len(rows["eval"]) == 32 and len(rows["train"]) >= 128
    for row in rows["eval"][:4] + rows["train"][:4]:
        key = row["prompt"][-1]["content"].split()[2].rstrip(",")
        first = _lookup(tools, key).content.split()[0]
        assert row["ground_truth"] == _lookup(tools, first).content
    asked = [{r["prompt"][-1]["content"] for r in rows[name]} for name in ("train", "eval")]
    assert not asked[0] & asked[1]
