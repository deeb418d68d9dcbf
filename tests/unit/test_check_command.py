"""`agentrl check loop=NAME recipe=R`: the recipe's run and first training task through the loop's hook, and exit 2
(saying what to give) for every configuration that cannot play an episode. No model, no Docker: the loops that need
them are played for real in tests/integration/test_check_loop_real.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentrl.models
from agentrl.cli import main
from agentrl.config import load_config
from agentrl.loops import LoopCheckCase
from agentrl.loops.base import LOOPS, get_loop_class
from agentrl.loops.conformance.recipe import CHECK_RECIPES, recipe_case, recipe_table
from agentrl.loops.hooks import run_samples
from agentrl.swe.gold_edit import one_line_fix
from agentrl.swe.task import SWETask
from agentrl.tools.parsers import get_parser

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "custom-loop.md"
LACKING = [name for name in LOOPS.builtin_names() if get_loop_class(name).check_case().lacks]


@pytest.fixture
def no_model(tokenizer, monkeypatch):
    """`agentrl check` plays with the unit tier's tokenizer, whatever model it names."""
    monkeypatch.setattr(agentrl.models, "load_tokenizer", lambda path: tokenizer)
    monkeypatch.setattr(agentrl.models, "resolve_model", lambda name, **kwargs: name)


@pytest.fixture
def no_image_builds(monkeypatch):
    """The SWE loop's tasks as prepared, without Docker (`prepare` builds a task's image)."""
    prepared: list[str | None] = []
    monkeypatch.setattr(
        get_loop_class("swe_agent"),
        "prepare",
        classmethod(lambda cls, cfg, samples: prepared.extend(s.id for s in samples)),
    )
    return prepared


def test_the_five_loops_that_need_a_task_are_the_ones_the_check_asks_a_recipe_for():
    assert sorted(LACKING) == ["gui_agent", "harbor_agent", "harbor_oracle", "openenv", "swe_agent"]
    assert all(name in CHECK_RECIPES for name in LACKING)


@pytest.mark.parametrize("loop", LACKING)
def test_a_loop_that_needs_a_task_exits_2_naming_its_recipe_never_breaks_the_contract(loop, capsys):
    assert main(["check", f"loop={loop}"]) == 2
    err = capsys.readouterr().err
    assert f"give recipe={CHECK_RECIPES[loop]}" in err and "loop contract" not in err, err


def test_a_case_that_cannot_be_played_exits_2_with_what_it_says_and_nothing_checked(no_model, capsys):
    assert main(["check", f"loop={__name__}:NeedsCandidates"]) == 2
    err = capsys.readouterr().err
    assert "no check episode could be played, so nothing was checked" in err and "extra_info.candidates" in err
    assert "breaks the loop contract" not in err


class NeedsCandidates(get_loop_class("referential_game")):  # type: ignore[misc]
    """A game whose own case gives no candidates: its row is refused, so no episode is played."""

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        return LoopCheckCase()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["loop=single_turn", "recipe=no_such_recipe"], "no_such_recipe"),
        (["loop=single_turn", "recipe=quickstart", "task=no-such-task"], "task=no-such-task: recipe quickstart has"),
        (["loop=single_turn", "task=x"], "give recipe=R too"),
        (["loop=single_turn", "recipe=quickstart", "agent.no_such_key=1"], "no_such_key"),
        (["loop=textarena", "recipe=textarena", "agent.kwargs.env_id=NoSuchGame-v0"], "NoSuchGame-v0"),
    ],
)
def test_a_recipe_task_or_setting_that_does_not_exist_exits_2(args, says, no_model, capsys):
    assert main(["check", *args]) == 2
    assert says in capsys.readouterr().err


def test_the_recipe_is_loaded_as_load_config_loads_it_with_the_settings_over_it(no_image_builds):
    case = recipe_case(get_loop_class("swe_agent"), "swe_agent", "swe_easy", ["agent.max_turns=2"])
    cfg = load_config(overrides=["recipe=swe_easy", "agent.max_turns=2"])
    expected = cfg.model_dump(mode="json", by_alias=True, exclude={"policies"})
    assert {k: v for k, v in case.config.items() if k != "rollout"} == {
        k: v for k, v in expected.items() if k != "rollout"
    }
    assert case.config["agent"]["max_turns"] == 2 and case.config["tools"] == expected["tools"]
    first = run_samples(cfg, "train")[0]
    assert case.sample == first and no_image_builds == [first.id]  # its image prepared as a run's start does
    assert case.needs == {"docker"} and case.lacks is None


def test_the_swe_loop_answers_its_task_with_the_gold_edit_and_the_room_to_write_it(no_image_builds):
    case = recipe_case(get_loop_class("swe_agent"), "swe_agent", "swe_easy", [], task="benjaminp__six-typo3")
    (call,) = get_parser("hermes").parse(case.reply).calls
    bug = SWETask.from_sample(case.sample).image_build["bug"]
    assert case.sample.id == "benjaminp__six-typo3" and call.name == "edit_line"
    assert (call.arguments["path"], call.arguments["line"]) == (bug["file"], bug["line"])
    _, name, _, typo = bug["kind"].split()  # `typo word -> wordd`
    assert call.arguments["old"].replace(typo, name) == call.arguments["new"]
    assert case.config["rollout"]["max_tokens"] > len(case.reply.encode()) > 96  # the recipe's 96 would cut it


@pytest.mark.parametrize(("loop", "turns"), [("harbor_agent", 1), ("harbor_oracle", 0)])
def test_the_harbor_loops_play_the_recipe_s_first_task_as_their_class_says(loop, turns):
    case = recipe_case(get_loop_class(loop), loop, "harbor", [])
    assert case.sample.id == "agentrl/fix-script" and case.min_turns == turns
    assert [tool["class"] for tool in case.config["tools"]] == ["bash", "editor", "submit"]


def test_every_recipe_s_policies_are_played_by_the_one_scripted_policy():
    case = recipe_case(get_loop_class("referential_game"), "referential_game", "referential_game", [])
    assert "policies" not in case.config and case.config["agent"]["roles"] == {}


LIGHT = [name for name in CHECK_RECIPES if not get_loop_class(name).check_case().needs]


@pytest.mark.parametrize("loop", LIGHT)
def test_each_loop_that_needs_nothing_more_keeps_the_contract_with_its_recipe_from_the_command_line(
    loop, no_model, capsys
):
    roomy = ["rollout.max_model_len=32768", "agent.max_total_tokens=32768"]  # this tier's tokenizer: a token a byte
    assert main(["check", f"loop={loop}", f"recipe={CHECK_RECIPES[loop]}", *roomy]) == 0
    assert f"{loop}: keeps the loop contract" in capsys.readouterr().err


def test_every_recipe_of_the_table_exists_and_its_loops_are_built_in():
    assert set(CHECK_RECIPES) <= set(LOOPS.builtin_names())
    assert all((ROOT / "recipes" / recipe / "config.yaml").is_file() for recipe in CHECK_RECIPES.values())


def test_the_guide_quotes_the_table_as_generated():
    assert recipe_table() in GUIDE.read_text(), "docs/guides/custom-loop.md: paste recipe_table() again"


def test_a_one_line_gold_patch_is_read_as_its_line_and_any_other_is_not():
    rows = [json.loads(line) for line in (ROOT / "recipes" / "swe_easy" / "data" / "train.jsonl").open()]
    for row in rows:
        task = SWETask.from_row(row)
        fix, bug = one_line_fix(task.patch), task.image_build["bug"]
        assert fix is not None and (fix.path, fix.line) == (bug["file"], bug["line"]), task.instance_id
    two_lines = rows[0]["patch"] + rows[1]["patch"]
    assert one_line_fix(two_lines) is None and one_line_fix("") is None
