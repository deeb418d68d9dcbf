"""`validate_run`: resolve every name a run's config gives, before any model, server, container or Ray worker.

Checked: `agent.name` (and the loop's own `agent.kwargs`, and that a tool-calling loop has `tools:`),
`agent.tool_parser`, each `tools[].class`, each reward component's `type` and options, `trainer.advantage`,
`trainer.loss`, the trainer settings that depend on each other (a per-turn estimator needs a loop that records
turn rewards), `env.id` / `env.entry_point` / `env.adapter`, and that every data file exists and its first row
parses (and names a known loop, when it names one). Every problem is listed at once, each with its fix.
"""

from __future__ import annotations

from pathlib import Path

from agentrl.config.errors import ConfigError
from agentrl.config.schema import AgentRLConfig


def validate_run(cfg: AgentRLConfig) -> None:
    """Check everything `cfg` names.

    Raises:
        ConfigError: listing every problem found.
    """
    problems = run_problems(cfg)
    if problems:
        raise ConfigError(problems)


def run_problems(cfg: AgentRLConfig) -> list[str]:
    """Every problem of `cfg` that `validate_run` reports (empty when it can run)."""
    return [
        *_agent_problems(cfg),
        *_rollout_problems(cfg),
        *_tool_problems(cfg),
        *_reward_problems(cfg),
        *_trainer_problems(cfg),
        *_turn_credit_problems(cfg),
        *_env_problems(cfg),
        *_data_problems(cfg),
    ]


def _rollout_problems(cfg: AgentRLConfig) -> list[str]:
    r, problems = cfg.rollout, []
    if r.placement == "ray" and r.urls:
        problems.append(
            "rollout.placement=ray starts servers on the Ray cluster, rollout.urls connects to running ones: "
            "set only one of them"
        )
    if r.weight_transfer == "nccl" and (r.backend == "hf" or r.placement == "ray"):
        problems.append(
            "rollout.weight_transfer=nccl is for vLLM and SGLang servers reached by URL or started here; the hf "
            "server and Ray server actors get weights by file or object store: use rollout.weight_transfer=file"
        )
    if r.shared_weights_dir is not None and not Path(r.shared_weights_dir).is_dir():
        problems.append(f"rollout.shared_weights_dir: {r.shared_weights_dir} is not a folder on this machine")
    from agentrl.rollout.servers.availability import backend_problem

    if problem := backend_problem(r):
        problems.append(problem)
    return problems


def _agent_problems(cfg: AgentRLConfig) -> list[str]:
    from agentrl.errors import UserError
    from agentrl.loops.base import LOOPS
    from agentrl.tools.parsers.registry import PARSERS

    problems = []
    name = loop_name(cfg)
    key = "data.agent_name" if cfg.data.agent_name else "agent.name"
    try:
        loop = LOOPS.get(name)  # imports the loop's module: a built-in may need an optional package
    except UserError as exc:
        problems.append(f"{key}: {exc}")
    else:
        problems += loop.option_problems(cfg.agent.kwargs)
        if loop.uses_tools and not cfg.tools:
            problems.append(
                f"agent.name={name} calls tools, but `tools:` is empty; add some, e.g. tools='[{{class: bash}}]'"
            )
    if problem := PARSERS.problem(cfg.agent.tool_parser):
        problems.append(f"agent.tool_parser: {problem}")
    return problems


def loop_name(cfg: AgentRLConfig) -> str:
    """The loop the run's training rows play: `agent.name`, or the one named on rows generated from env seeds."""
    from agentrl.data import env_rows_loop

    seeded = cfg.env.enabled and not cfg.data.train_files
    return cfg.data.agent_name or (env_rows_loop(cfg) if seeded else None) or cfg.agent.name


def _tool_problems(cfg: AgentRLConfig) -> list[str]:
    from agentrl.tools.registry import TOOLS

    return [f"tools[{i}].class: {p}" for i, spec in enumerate(cfg.tools) if (p := TOOLS.problem(spec.class_))]


def _reward_problems(cfg: AgentRLConfig) -> list[str]:
    from agentrl.rewards.pipeline import reward_problems

    return reward_problems(cfg.reward)


def _trainer_problems(cfg: AgentRLConfig) -> list[str]:
    from agentrl.trainer.registry import ADVANTAGES, LOSSES

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
    corrected = t.tis_cap is not None or (t.mode == "async" and t.stale_samples == "correct")
    if (t.is_mode != "truncate" or t.is_level != "token") and not corrected:
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
    if t.is_mode == "mask" and t.tis_cap is not None and t.is_mask_low >= t.tis_cap:
        problems.append(f"trainer.is_mask_low ({t.is_mask_low}) must be below trainer.tis_cap ({t.tis_cap})")
    return problems


def _turn_credit_problems(cfg: AgentRLConfig) -> list[str]:
    """A per-turn estimator needs a loop that records turn rewards, and an episode reward that is their sum."""
    from agentrl.errors import UserError
    from agentrl.loops.base import LOOPS
    from agentrl.trainer.registry import is_per_turn_advantage

    name = cfg.trainer.advantage
    try:
        if not is_per_turn_advantage(name):
            return []
        loop = LOOPS.get(loop_name(cfg))
    except UserError:
        return []  # reported by the agent and trainer checks
    problems = []
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
    """A user's per-turn estimator must take the turn options the config sets (the built-ins take them all)."""
    from agentrl.errors import UserError
    from agentrl.trainer.registry import ADVANTAGES, PER_TURN_BUILTINS

    if cfg.trainer.advantage in PER_TURN_BUILTINS:
        return []
    from agentrl.trainer.advantages import turn_options

    try:
        turn_options(cfg.trainer, ADVANTAGES.get(cfg.trainer.advantage))
    except UserError as error:
        return [str(error)]
    return []


def _env_problems(cfg: AgentRLConfig) -> list[str]:
    if not cfg.env.enabled and cfg.env.adapter is None:
        return []
    from agentrl.envs.factory import env_problems

    return env_problems(cfg.env)


def _data_problems(cfg: AgentRLConfig) -> list[str]:
    from agentrl.data import first_row_problem
    from agentrl.loops.base import LOOPS

    problems = []
    for key in ("train_files", "eval_files"):
        for i, path in enumerate(getattr(cfg.data, key)):
            if problem := first_row_problem(path, LOOPS.problem):
                problems.append(f"data.{key}[{i}]: {problem}")
    return problems
