"""The advantage of every response token of a step's rows, from either kind of estimator (`trainer.advantage`).

An outcome estimator (`agentrl.trainer.algorithms`) gives each trajectory one advantage, which every turn of it
shares; a per-turn estimator (`agentrl.trainer.turn_algorithms`) gives each turn its own. Either way a turn's
advantage lands on exactly that turn's generated tokens (`turn_credit.token_advantages`), and tool, observation
and user tokens get none.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.errors import UserError
from agentrl.trainer.algorithms import get_advantage, rewards_and_groups
from agentrl.trainer.turn_algorithms import is_per_turn
from agentrl.trainer.turn_credit import step_sample_advantages, token_advantages, turn_episodes, with_turns_untrained
from agentrl.types import Trajectory


@dataclass
class RowAdvantages:
    """The rows of a training step and their token advantages.

    Attributes:
        rows: the trajectories, each preceded by its earlier step samples (`with_step_samples`).
        tokens: per row, a float32 vector of its response tokens' advantages (`response_length(row)` long).
        metrics: `train/advantage_*` (over trajectories, or over turns for a per-turn estimator) and the
            per-turn estimator's own figures (`train/turn_adv_abs_mean`, ...).
    """

    rows: list[Trajectory]
    tokens: list[torch.Tensor]
    metrics: dict[str, float]


def row_advantages(cfg: TrainerConfig, trajectories: list[Trajectory]) -> RowAdvantages:
    """Run `cfg.advantage` on scored trajectories. `trajectories` are left as they are: a row that trains fewer
    turns than its trajectory generated (a tree's shared prefix, trained by one leaf) is a copy.

    Raises:
        UserError: a trajectory has no reward, or (per-turn estimators) no turn rewards.
    """
    estimator = get_advantage(cfg.advantage)
    if is_per_turn(estimator):
        episodes = turn_episodes(trajectories, cfg.advantage)
        result = estimator(episodes, **turn_options(cfg, estimator))
        untrained = result.untrained or [[] for _ in trajectories]
        # a shared prefix another leaf trains is not this row's: the row is a copy without it (the caller's
        # trajectory, which the run saves, keeps every turn it generated)
        samples = [
            pair
            for t, a, gone in zip(trajectories, result.per_turn, untrained, strict=True)
            for pair in step_sample_advantages(
                with_turns_untrained(t, gone), [x for i, x in enumerate(a.tolist()) if i not in set(gone)]
            )
        ]
        per_turn = torch.cat(result.per_turn)
        metrics = {**_figures(per_turn), "train/turn_adv_abs_mean": float(per_turn.abs().mean()), **result.metrics}
        return RowAdvantages([row for row, _ in samples], [adv for _, adv in samples], metrics)
    rewards, groups = rewards_and_groups(trajectories)
    rows, advantages = with_step_samples(trajectories, estimator(rewards, groups))
    tokens = [token_advantages(t, [a] * t.num_generated_turns) for t, a in zip(rows, advantages.tolist(), strict=True)]
    return RowAdvantages(rows, tokens, _figures(advantages))


def turn_options(cfg: TrainerConfig, estimator: Any) -> dict[str, Any]:
    """The keywords of `cfg` that a per-turn estimator accepts (`discount`, `step_weight`, `anchor_scope`,
    `step_norm`, `intra_weight`, `inter_weight`, `prefix_weight`).

    A user's estimator written before a keyword existed still runs: keywords it does not take are left out, unless
    the config sets them away from their default, which that estimator would silently ignore.

    Raises:
        UserError: the config sets an option the estimator does not accept.
    """
    options = {
        "intra_weight": ("tree_intra_weight", cfg.tree_intra_weight),
        "inter_weight": ("tree_inter_weight", cfg.tree_inter_weight),
        "discount": ("turn_discount", cfg.turn_discount),
        "step_weight": ("gigpo_step_weight", cfg.gigpo_step_weight),
        "anchor_scope": ("gigpo_anchor_scope", cfg.gigpo_anchor_scope),
        "step_norm": ("gigpo_step_norm", cfg.gigpo_step_norm),
        "prefix_weight": ("tree_prefix_weight", cfg.tree_prefix_weight),
    }
    params = inspect.signature(estimator).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return {keyword: value for keyword, (_, value) in options.items()}
    defaults = {name: field.default for name, field in TrainerConfig.model_fields.items()}
    ignored = [key for keyword, (key, value) in options.items() if keyword not in params and value != defaults[key]]
    if ignored:
        raise UserError(
            f"trainer.advantage={cfg.advantage} does not take {', '.join(ignored)}: leave "
            f"{'it' if len(ignored) == 1 else 'them'} at the default, or add the keyword to the estimator"
        )
    return {keyword: value for keyword, (_, value) in options.items() if keyword in params}


def with_step_samples(
    trajectories: list[Trajectory], advantages: torch.Tensor
) -> tuple[list[Trajectory], torch.Tensor]:
    """Each trajectory preceded by its earlier step samples (`Trajectory.earlier_steps`, those with generated
    tokens), every one a row of its own with the trajectory's advantage (step-wise training)."""
    if not any(t.earlier_steps for t in trajectories):
        return trajectories, advantages
    rows = [sample for traj in trajectories for sample in traj.step_samples()]
    index = [i for i, traj in enumerate(trajectories) for _ in traj.step_samples()]
    return rows, advantages[torch.tensor(index, dtype=torch.long)]


def _figures(advantages: torch.Tensor) -> dict[str, float]:
    if advantages.numel() == 0:
        return {}
    return {
        "train/advantage_abs_mean": float(advantages.abs().mean()),
        "train/advantage_std": float(advantages.std(unbiased=False)),
        "train/advantage_max": float(advantages.max()),
        "train/advantage_min": float(advantages.min()),
    }
