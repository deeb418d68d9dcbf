"""`validate_run`: the one check of a whole training run, before any model, server, container or Ray worker.

It asks every component about its own settings: everything an episode needs (`agentrl.loops.preflight`: the loop,
tools, rewards, environment, rollout servers and data), then the trainer's (`trainer.advantage`, `trainer.loss`,
the trainer settings that depend on each other, and that a per-turn estimator has a loop that records turn
rewards). Every problem is listed at once, each with its fix. `agentrl train` runs it first, and `train(cfg)` again.
"""

from __future__ import annotations

from agentrl.config.errors import ConfigError
from agentrl.config.policies import policy_config, trainable_policies
from agentrl.config.schema import AgentRLConfig, TrainerConfig
from agentrl.errors import UserError
from agentrl.loops.base import LOOPS
from agentrl.loops.preflight import episode_problems, loop_name
from agentrl.trainer.registry import ADVANTAGES, LOSSES, is_per_turn_advantage

ASYNC_TIS_CAP = 2.0
"""`trainer.tis_cap` of the async modes when the run sets none: their tokens are off-policy within the bound too."""


def tis_cap(t: TrainerConfig) -> float | None:
    """The cap of the off-policy correction the run trains with: `trainer.tis_cap`, else `ASYNC_TIS_CAP` in `async`
    and `fully_async` (whose tokens may be up to `max_staleness` versions old), else None (no correction)."""
    if t.tis_cap is not None:
        return t.tis_cap
    return ASYNC_TIS_CAP if t.mode in ("async", "fully_async") else None


def validate_run(cfg: AgentRLConfig) -> None:
    """Check everything the training run `cfg` names.

    Raises:
        ConfigError: listing every problem found.
    """
    if problems := run_problems(cfg):
        raise ConfigError(problems)


def run_problems(cfg: AgentRLConfig) -> list[str]:
    """Every problem that `validate_run` reports (empty when the run can start)."""
    problems = [*episode_problems(cfg), *trainer_problems(cfg), *turn_credit_problems(cfg)]
    return problems + several_policies_problems(cfg, already=set(problems))


def several_policies_problems(cfg: AgentRLConfig, already: set[str]) -> list[str]:
    """With `policies:`: each trainable policy's own trainer settings checked as the run's are (a problem the
    run's settings already have is not repeated), and what several policies do not support yet (trees)."""
    if not cfg.policies:
        return []
    problems = []
    for name in trainable_policies(cfg):
        own = policy_config(cfg, name)
        found = [*trainer_problems(own), *turn_credit_problems(own)]
        problems += [f"policies.{name}: {p}" for p in found if p not in already]
    if cfg.rollout.tree.enabled:
        problems.append("policies: tree rollouts of several policies are not supported yet: unset rollout.tree")
    return problems


def trainer_problems(cfg: AgentRLConfig) -> list[str]:
    """The estimator and loss exist; trainer settings that only mean something together are set together."""
    t = cfg.trainer
    problems = []
    if problem := ADVANTAGES.problem(t.advantage):
        problems.append(f"trainer.advantage: {problem}")
    if problem := LOSSES.problem(t.loss):
        problems.append(f"trainer.loss: {problem}")
    if t.resume and not cfg.output_dir:
        problems.append("trainer.resume=true needs output_dir=DIR: the run directory to continue")
    if t.overlong_max_tokens is not None and not 0 < t.overlong_cache_tokens <= t.overlong_max_tokens:
        problems.append(
            f"trainer.overlong_cache_tokens must be in (0, overlong_max_tokens={t.overlong_max_tokens}], "
            f"got {t.overlong_cache_tokens}"
        )
    cap = tis_cap(t)
    if (t.is_mode != "truncate" or t.is_level != "token") and cap is None:
        problems.append(
            f"trainer.is_mode={t.is_mode} / is_level={t.is_level} shape the off-policy correction, which is off: "
            "set trainer.tis_cap=C (e.g. 2.0) to turn it on"
        )
    if t.entropy_choices and t.entropy_coef == 0:
        problems.append(
            "trainer.entropy_choices shapes the entropy bonus, which is off: set trainer.entropy_coef (e.g. 0.1)"
        )
    if len(t.entropy_choices) == 1:
        problems.append("trainer.entropy_choices: one choice has no entropy; list at least two replies")
    if t.entropy_choices_weighted and not t.entropy_choices:
        problems.append(
            "trainer.entropy_choices_weighted weighs the entropy over trainer.entropy_choices, which lists none: "
            "list the replies (e.g. trainer.entropy_choices=[LEFT,DOWN,RIGHT,UP]) or drop the setting"
        )
    if t.advantage == "tree_grpo" and not cfg.rollout.tree.enabled:
        problems.append(
            "trainer.advantage=tree_grpo credits the nodes of tree rollouts: set rollout.tree.branch_turns "
            "(e.g. rollout.tree.branch_turns=[1,3])"
        )
    if cfg.rollout.tree.enabled and t.mode != "sync":
        problems.append(f"rollout.tree trains with trainer.mode=sync for now, not {t.mode}")
    if t.is_mode == "mask" and cap is not None and t.is_mask_low >= cap:
        problems.append(f"trainer.is_mask_low ({t.is_mask_low}) must be below trainer.tis_cap ({cap})")
    return problems + sft_problems(cfg)


def sft_problems(cfg: AgentRLConfig) -> list[str]:
    """Supervised fine-tuning needs demonstrations, and trains one step after another on one policy."""
    t = cfg.trainer
    if t.objective != "sft":
        return []
    problems = []
    if not cfg.data.demonstrations:
        problems.append(
            "trainer.objective=sft trains on demonstrations: list their files in data.demonstrations (agentrl "
            "trajectory files or chat rows, JSONL), e.g. data.demonstrations=[runs/teacher/trajectories.jsonl]"
        )
    if t.mode != "sync":
        problems.append(f"trainer.objective=sft trains in trainer.mode=sync (its data wait for nothing), not {t.mode}")
    if cfg.policies:
        problems.append("trainer.objective=sft trains one policy for now: unset policies")
    return problems


def untrained_root_warning(cfg: AgentRLConfig) -> str | None:
    """One line when `tree_grpo` can only give the turns before a tree's first fork advantage 0, else None.

    Those turns are the tree's root: it has no siblings (intra-tree term 0), and its value is the mean of all its
    leaves, which with one tree a prompt is the prompt's mean (inter-tree term 0)."""
    t, tree = cfg.trainer, cfg.rollout.tree
    if t.advantage != "tree_grpo" or not tree.enabled or tree.branch_turns[:1] == [0]:
        return None
    if cfg.rollout.n >= 2 and t.tree_inter_weight > 0:
        return None
    why = "rollout.n=1" if cfg.rollout.n < 2 else "trainer.tree_inter_weight=0"
    return (
        f"warning: trainer.advantage=tree_grpo with {why} and no fork before the first turn: the turns before a "
        "tree's first fork are its root, which has nothing to be compared with, so their advantage is 0 and they are "
        "not learned; set rollout.n=2 or more (the inter-tree term then compares the trees of a prompt) or fork at "
        "the start too (rollout.tree.branch_turns=[0,...])"
    )


def turn_credit_problems(cfg: AgentRLConfig) -> list[str]:
    """A per-turn estimator needs a loop that records turn rewards, and an episode reward that is their sum."""
    name = cfg.trainer.advantage
    try:
        if not is_per_turn_advantage(name):
            return []
        loop = LOOPS.get(loop_name(cfg))
    except UserError:
        return []  # reported by the agent and trainer checks
    problems = []
    if loop.plays_several_roles(cfg):
        problems.append(
            f"trainer.advantage={name} credits each turn, but the {loop_name(cfg)} loop's episodes are played by "
            "several roles, each trained on its own reward, which per-turn credit does not keep apart yet: use an "
            "outcome estimator (trainer.advantage=grpo, rloo, ...)"
        )
    if not loop.records_turns:
        problems.append(
            f"trainer.advantage={name} credits each turn with its own reward, but the loop {loop_name(cfg)} records "
            "no per-turn rewards: use an outcome estimator (trainer.advantage=grpo, rloo, ...) or a loop that "
            "records them (agent.name=gym or tool_agent)"
        )
    if cfg.env.enabled and cfg.env.discount != 1.0:
        problems.append(
            f"trainer.advantage={name} discounts turns itself (trainer.turn_discount); set env.discount=1 so that the "
            "episode reward is the sum of the turn rewards"
        )
    return problems + _turn_option_problems(cfg)


def _turn_option_problems(cfg: AgentRLConfig) -> list[str]:
    """The per-turn estimator takes the turn options the config sets (`tree_grpo` takes no GiGPO option, and a
    user's estimator may take none of them)."""
    from agentrl.trainer.advantages import turn_options  # imports torch: only for a per-turn estimator

    try:
        turn_options(cfg.trainer, ADVANTAGES.get(cfg.trainer.advantage))
    except UserError as error:
        return [str(error)]
    return []
