"""The trainer's extension points: advantage estimators (`trainer.advantage`) and policy losses (`trainer.loss`).

Both are `agentrl.registry.Registry`s whose built-ins are imported (with torch) only when first used, so a run's
configuration is checked before torch loads. Register your own with `register_advantage` /
`register_loss` (in `agentrl.trainer.algorithms` / `agentrl.trainer.losses`), or name a dotted path.
"""

from __future__ import annotations

from typing import Any

from agentrl.registry import Registry


def _is_loss(obj: Any) -> bool:
    from agentrl.trainer.policy_loss import PolicyLoss

    return isinstance(obj, PolicyLoss) or callable(obj)


def _as_loss(name: str, obj: Any) -> Any:
    """A `PolicyLoss`: as registered, or a bare token-level surrogate wrapped with its `default_agg`."""
    from agentrl.trainer.policy_loss import PolicyLoss

    if isinstance(obj, PolicyLoss):
        return obj
    return PolicyLoss(name, obj, getattr(obj, "default_agg", "token-mean"))


ADVANTAGES: Registry[Any] = Registry(
    "advantage estimator",
    {
        "grpo": "agentrl.trainer.algorithms:grpo_advantage",
        "gspo": "agentrl.trainer.algorithms:grpo_advantage",
        "dr_grpo": "agentrl.trainer.algorithms:dr_grpo_advantage",
        "rloo": "agentrl.trainer.algorithms:rloo_advantage",
        "reinforce++": "agentrl.trainer.algorithms:reinforce_pp_baseline_advantage",
        "turn_grpo": "agentrl.trainer.turn_algorithms:turn_grpo_advantage",
        "gigpo": "agentrl.trainer.turn_algorithms:gigpo_advantage",
        "tree_grpo": "agentrl.trainer.tree_advantages:tree_grpo_advantage",
    },
    accepts=callable,
    expected="an advantage estimator function (rewards, group_ids, *, eps) -> advantages, or a per-turn one "
    "(agentrl.trainer.turn_algorithms.TurnAdvantageEstimator)",
    example="my_pkg.advantages:my_estimator",
)
"""Advantage estimators by `trainer.advantage`: outcome ones `(rewards [B], group_ids [B], *, eps) -> advantages
[B]`, and per-turn ones (`per_turn = True`) `(episodes, *, discount, step_weight, anchor_scope, step_norm, eps) ->
TurnAdvantages`; a per-turn estimator may leave out the options it does not use (`advantages.turn_options`)."""

PER_TURN_BUILTINS = frozenset({"turn_grpo", "gigpo", "tree_grpo"})
OUTCOME_BUILTINS = frozenset({"grpo", "gspo", "dr_grpo", "rloo", "reinforce++"})


def is_per_turn_advantage(name: str) -> bool:
    """Whether `trainer.advantage=name` credits turns rather than whole trajectories: the built-ins are told apart
    without importing them (nor torch), any other estimator by its `per_turn` attribute.

    Raises:
        UserError: unknown name.
    """
    if name in PER_TURN_BUILTINS or name in OUTCOME_BUILTINS:
        return name in PER_TURN_BUILTINS
    return bool(getattr(ADVANTAGES.get(name), "per_turn", False))


LOSSES: Registry[Any] = Registry(
    "policy loss",
    {
        "ppo_clip": "agentrl.trainer.losses:ppo_clip",
        "dapo": "agentrl.trainer.losses:dapo",
        "dual_clip": "agentrl.trainer.losses:dual_clip",
        "cispo": "agentrl.trainer.losses:cispo",
        "gspo": "agentrl.trainer.losses:gspo",
        "sapo": "agentrl.trainer.losses:sapo",
    },
    accepts=_is_loss,
    expected="a PolicyLoss or a token-level surrogate function",
    example="my_pkg.losses:my_surrogate",
    convert=_as_loss,
    plural="policy losses",
)
"""Policy losses by `trainer.loss`, as `agentrl.trainer.losses.PolicyLoss`es."""
