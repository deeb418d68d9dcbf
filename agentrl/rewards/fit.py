"""Reward sections that do not fit the run's samples (`reward_fit_problems`) or its loop (`own_reward_problems`),
found from the config at start.

A reasoning-gym dataset (`data.reasoning_gym`) is scored by the package's own `score_answer`, through reward type
`reasoning_gym`; that reward needs the dataset's entry, which only those samples carry. Either without the other
would score every reply by rules the run did not mean, or 0: refused at start. Where the samples come from data
files, which may hold such entries, the reward scores what it can, and a sample without an entry is a reward failure
recorded on its trajectory (`reward_details`).

A loop whose reward is its environment's own scorer (the verifiers loop: the environment's rubric, as verifiers
scores a rollout) declares it (`AgentLoopBase.own_reward`); reward components would replace that reward, since the
pipeline's sum takes the place of the loop's, so they are refused and the message says to change the scorer itself.
"""

from __future__ import annotations

from typing import Any

from agentrl.config.schema import AgentRLConfig, RewardConfig
from agentrl.errors import UserError
from agentrl.rewards.registry import REWARDS


def reward_fit_problems(cfg: AgentRLConfig) -> list[str]:
    """What the run's reward sections (`reward:`, each `policies.X.reward`) cannot score, with each fix."""
    data = cfg.data
    scorers = [where for where, entry in reward_entries(cfg) if _is_reasoning_gym(entry)]
    problems = []
    if data.reasoning_gym and not scorers:
        problems.append(
            f"data.reasoning_gym={data.reasoning_gym}: its questions are scored by the dataset's own score_answer, "
            "through reward type: reasoning_gym, which no reward component has: add it, e.g. "
            "reward.components='[{name: score, type: reasoning_gym}]' (beside any others)"
        )
    if not data.reasoning_gym and not data.train_files and not data.eval_files:
        problems += [
            f"{where}: type reasoning_gym scores samples of data.reasoning_gym (the dataset's entry in their "
            "extra_info), and this run's samples are none (data.reasoning_gym is unset and no data files are given): "
            "set data.reasoning_gym=NAME to train on that dataset, or use a reward type that scores these samples"
            for where in scorers
        ]
    return problems


def own_reward_problems(cfg: AgentRLConfig, loop: str, own_reward: str | None) -> list[str]:
    """Reward sections that would replace the reward a loop takes from its environment's own scorer (`own_reward`,
    declared by the loop class; `loop` says how the config names the loop): that scorer is the environment's
    reward, so they are refused rather than silently put in its place."""
    if own_reward is None:
        return []
    sections = ["reward.components"] if cfg.reward.components else []
    sections += ["reward.function"] if cfg.reward.function else []
    sections += [f"policies.{name}.reward" for name, p in cfg.policies.items() if p.reward is not None]
    return [
        f"{where}: {loop} is rewarded by {own_reward}, the environment's own reward; {where} would replace that "
        f"reward, not add to it: remove {where}, and change the reward in {own_reward}"
        for where in sections
    ]


def reward_entries(cfg: AgentRLConfig) -> list[tuple[str, dict[str, Any]]]:
    """Every reward component of the run, each with where the config declares it."""
    sections = [("reward", cfg.reward)]
    sections += [(f"policies.{name}.reward", p.reward) for name, p in cfg.policies.items() if p.reward is not None]
    return [entry for prefix, section in sections for entry in _section_entries(prefix, section)]


def _section_entries(prefix: str, section: RewardConfig) -> list[tuple[str, dict[str, Any]]]:
    entries = [(f"{prefix}.function", {"name": "compute_score", "type": section.function})] if section.function else []
    for i, entry in enumerate(section.components):
        name = (entry.get("name") or entry.get("type")) if isinstance(entry, dict) else None
        entries.append((f"{prefix}.components[{i}] ({name})", entry))
    return entries


def _is_reasoning_gym(entry: Any) -> bool:
    """Whether the entry's type is the reasoning_gym reward, by its name or its dotted path (a type that does not
    resolve is reported by `reward_problems`)."""
    if not isinstance(entry, dict) or entry.get("type") is None:
        return False
    try:
        return REWARDS.get(entry["type"]) is REWARDS.get("reasoning_gym")
    except UserError:
        return False


__all__ = ["own_reward_problems", "reward_entries", "reward_fit_problems"]
