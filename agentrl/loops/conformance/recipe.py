"""What `agentrl check loop=NAME recipe=R` plays: the recipe's run, as `load_config(overrides=["recipe=R"])` reads
it, and its first training task (or `task=ID`), through the loop's `recipe_check_case` hook; and the recipe each
built-in loop is checked with (`CHECK_RECIPES`, which the custom-loop guide quotes as `recipe_table()`)."""

from __future__ import annotations

from agentrl.config import load_config
from agentrl.errors import UserError
from agentrl.loops.base import LOOPS, AgentLoopBase
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.hooks import run_samples
from agentrl.loops.preflight import validate_episodes
from agentrl.types import Sample

CHECK_RECIPES: dict[str, str] = {
    "single_turn": "quickstart",
    "tool_agent": "tool_use",
    "swe_agent": "swe_easy",
    "harbor_agent": "harbor",
    "harbor_oracle": "harbor",
    "gui_agent": "gui_agent",
    "gym": "gym",
    "referential_game": "referential_game",
    "textarena": "textarena",
    "verifiers": "verifiers",
    "openenv": "openenv",
}
"""The recipe each built-in loop is checked with from the command line (`agentrl check loop=NAME recipe=R`), as
agentrl's CI checks it. A loop whose own check case lacks a task (`LoopCheckCase.lacks`) needs it; the others also
play their own case without one."""


def recipe_case(
    loop: type[AgentLoopBase], name: str, recipe: str, settings: list[str], task: str | None = None
) -> LoopCheckCase:
    """The case `agentrl check loop=NAME recipe=R` plays: the run of `recipe` with `settings` (dotted `key=value`
    overrides) and `agent.name=NAME`, checked as a run is at start, and its training task `task` (a sample id;
    default: the first), prepared as a run prepares it (a SWE task's image built when missing).

    Raises:
        UserError: the recipe, a setting or the task is unknown, or the run would not start (every problem listed).
    """
    cfg = load_config(overrides=[f"recipe={recipe}", *settings, f"agent.name={name}"])
    validate_episodes(cfg)
    sample = _task(run_samples(cfg, "train"), recipe, task)
    loop.prepare(cfg, [sample])
    return loop.recipe_check_case(cfg, sample)


def _task(samples: list[Sample], recipe: str, task: str | None) -> Sample:
    if not samples:
        raise UserError(f"recipe {recipe} has no training task to play: give it data.train_files")
    if task is None:
        return samples[0]
    if found := [sample for sample in samples if sample.id == task]:
        return found[0]
    ids = ", ".join(str(sample.id) for sample in samples[:5])
    raise UserError(f"task={task}: recipe {recipe} has no training task of that id (its first: {ids}, ...)")


def missing_recipe(name: str, case: LoopCheckCase) -> str:
    """What `agentrl check loop=NAME` without `recipe=` says of a loop whose case lacks a task (`case.lacks`)."""
    recipe = CHECK_RECIPES.get(name)
    give = f"recipe={recipe}" if recipe else "recipe=R (a recipe whose training tasks the loop plays)"
    return (
        f"the check of {name} plays {case.lacks}, which its own check case lacks: give {give}, as in "
        f"`agentrl check loop={name} {give}` (it plays the recipe's first training task; task=ID picks another)"
    )


def recipe_table() -> str:
    """The recipe of each built-in loop (`CHECK_RECIPES`) as the Markdown table the custom-loop guide quotes."""
    rows = [
        f"| `{loop}` | `agentrl check loop={loop} recipe={CHECK_RECIPES[loop]}` |"
        if loop in CHECK_RECIPES
        else f"| `{loop}` | `agentrl check loop={loop}` (its own check case) |"
        for loop in LOOPS.builtin_names()
    ]
    return "\n".join(["| loop | checked with |", "|---|---|", *rows])


__all__ = ["CHECK_RECIPES", "missing_recipe", "recipe_case", "recipe_table"]
