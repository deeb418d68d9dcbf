"""`validate_episodes`: everything an episode needs, resolved before any model, server, container or Ray worker.

Asks each component about its own settings: the loop (`agent.name`, its `agent.kwargs`, tools for a tool-calling
loop, the loop class's own checks, `agent.tool_parser`), the tools (`tools[].class`), the rewards (each component's
`type` and options, and that they fit the samples: `agentrl.rewards.fit`), the environment (`env.id` /
`entry_point` / `adapter`), the rollout servers (settings that contradict each other, a backend not installed) and
the data (every file exists, its first row parses and names a known loop). `agentrl rollout`, `agentrl eval` and
the gateway run it; training adds the trainer's own checks (`agentrl.trainer.preflight.validate_run`). Every
problem is listed at once, each with its fix."""

from __future__ import annotations

from agentrl.config.errors import ConfigError
from agentrl.config.policies import policy_config
from agentrl.config.schema import AgentRLConfig
from agentrl.data import first_row_problem
from agentrl.errors import UserError
from agentrl.harnesses.checks import harness_problems
from agentrl.loops.base import LOOPS
from agentrl.loops.compaction.checks import context_problems
from agentrl.loops.hooks import loop_name
from agentrl.loops.stepped import SteppedLoop
from agentrl.rewards.fit import own_reward_problems, reward_fit_problems
from agentrl.rewards.pipeline import reward_problems
from agentrl.rollout.checks import rollout_problems
from agentrl.tools.parsers.registry import PARSERS
from agentrl.tools.registry import tool_problems


def validate_episodes(cfg: AgentRLConfig) -> None:
    """Check everything the episodes of `cfg` name.

    Raises:
        ConfigError: listing every problem found.
    """
    if problems := episode_problems(cfg):
        raise ConfigError(problems)


def episode_problems(cfg: AgentRLConfig) -> list[str]:
    """Every problem that `validate_episodes` reports (empty when episodes can run)."""
    return [
        *agent_problems(cfg),
        *rollout_problems(cfg.rollout),
        *_policy_rollout_problems(cfg),
        *tool_problems(cfg.tools),
        *reward_problems(cfg.reward),
        *_policy_reward_problems(cfg),
        *reward_fit_problems(cfg),
        *_env_problems(cfg),
        *data_problems(cfg),
        *tree_problems(cfg),
        *context_problems(cfg),
    ]


def _policy_reward_problems(cfg: AgentRLConfig) -> list[str]:
    """Each policy's own reward section (`policies.X.reward`), checked as the run's is; an empty one would score
    every reply 0."""
    problems = []
    for name, policy in cfg.policies.items():
        if policy.reward is None:
            continue
        if not policy.reward.components and not policy.reward.function:
            problems.append(
                f"policies.{name}.reward has no components: give it reward components, or remove it so that the "
                "policy gets the reward its loop assigns it (else the episode's)"
            )
        problems += [f"policies.{name}.reward: {p}" for p in reward_problems(policy.reward)]
    return problems


def _policy_rollout_problems(cfg: AgentRLConfig) -> list[str]:
    """Each policy's own servers (`policies.X.rollout`), checked as the run's are."""
    already = set(rollout_problems(cfg.rollout))
    problems = []
    for name, policy in cfg.policies.items():
        if policy.rollout:
            own = policy_config(cfg, name).rollout
            problems += [f"policies.{name}: {p}" for p in rollout_problems(own) if p not in already]
    return problems


def _env_problems(cfg: AgentRLConfig) -> list[str]:
    if not cfg.env.enabled and cfg.env.adapter is None:
        return []
    from agentrl.envs.factory import env_problems  # imports gymnasium: only for runs that use an environment

    return env_problems(cfg.env)


def agent_problems(cfg: AgentRLConfig) -> list[str]:
    """The loop exists (importing a built-in may need an optional package), takes its `agent.kwargs`, has tools
    when it calls them, and passes its own checks (`AgentLoopBase.problems`); `agent.tool_parser` exists; a harness
    runs without network (`agentrl.harnesses.checks`)."""
    problems = []
    name = loop_name(cfg)
    key = "data.agent_name" if cfg.data.agent_name else "agent.name"
    try:
        loop = LOOPS.get(name)
    except UserError as exc:
        problems.append(f"{key}: {exc}")
    else:
        problems += loop.option_problems(cfg.agent.kwargs)
        problems += loop.problems(cfg)
        problems += role_problems(cfg, name, loop.roles)
        problems += own_reward_problems(cfg, f"{key}={name}", loop.own_reward)
        if loop.uses_tools and not cfg.tools:
            problems.append(
                f"agent.name={name} calls tools, but `tools:` is empty; add some, e.g. tools='[{{class: bash}}]'"
            )
    if problem := PARSERS.problem(cfg.agent.tool_parser):
        problems.append(f"agent.tool_parser: {problem}")
    return problems + harness_problems(cfg)


def role_problems(cfg: AgentRLConfig, loop: str, roles: tuple[str, ...]) -> list[str]:
    """`agent.roles` names roles the loop has, each played by a policy the run has."""
    problems = []
    policies = list(cfg.policies)
    for role, policy in cfg.agent.roles.items():
        if role not in roles:
            has = f"its roles are {', '.join(roles)}" if roles else "it has one agent and no roles"
            problems.append(f"agent.roles.{role}: the loop {loop} has no role {role!r}; {has}")
        elif policy not in policies:
            named = f"the run's policies are {', '.join(policies)}" if policies else "the run has no policies:"
            problems.append(f"agent.roles.{role}: no policy {policy!r} serves it; {named} (name it under policies:)")
    return problems


def tree_problems(cfg: AgentRLConfig) -> list[str]:
    """With `rollout.tree`: the loop and the environment can be forked."""
    if not cfg.rollout.tree.enabled:
        return []
    problems = []
    try:
        loop = LOOPS.get(loop_name(cfg))
    except UserError:
        return []  # reported by the agent checks
    if not issubclass(loop, SteppedLoop) or not loop.forkable:
        problems.append(
            f"rollout.tree: the {loop.__name__} loop cannot be forked (tree rollouts need a SteppedLoop that "
            "forks: single_turn, gym, tool_agent, swe_agent, harbor_agent and textarena do); run it without "
            "rollout.tree"
        )
    if loop.plays_several_roles(cfg):
        problems.append(
            f"rollout.tree: an episode of the {loop.__name__} loop is played by several roles, each trained on its own "
            "reward, and trees do not credit a node per role yet; run it without rollout.tree"
        )
    if cfg.env.enabled:
        from agentrl.envs.gym import fork_problem  # imports gymnasium: only for runs that use an environment

        if problem := fork_problem(cfg.env):
            problems.append(f"rollout.tree: {problem}")
    return problems


def data_problems(cfg: AgentRLConfig) -> list[str]:
    """Every data file exists, and its first row parses and names a known loop when it names one; a reasoning-gym
    dataset is installed, known and takes its options."""
    problems = []
    if cfg.data.reasoning_gym:
        from agentrl.envs.reasoning_gym import reasoning_gym_problems

        problems += reasoning_gym_problems(
            cfg.data.reasoning_gym,
            cfg.data.reasoning_gym_options,
            cfg.data.reasoning_gym_prompt,
            cfg.data.reasoning_gym_shot_reply,
        )
    for key in ("train_files", "eval_files"):
        for i, path in enumerate(getattr(cfg.data, key)):
            if problem := first_row_problem(path, LOOPS.problem, cfg.data.harbor_reader):
                problems.append(f"data.{key}[{i}]: {problem}")
    return problems
