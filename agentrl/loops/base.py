"""`AgentLoopBase`, its typed options, and the loop registry.

A loop is built once per loop kind per worker with its config, then `run` is awaited once per trajectory,
concurrently with many others: keep per-trajectory state in locals or in `ctx`, never on `self`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrl.config.environment_form import environment_form as config_environment_form
from agentrl.config.schema import AgentConfig, AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.registry import Registry
from agentrl.types import Sample, Trajectory

L = TypeVar("L", bound="type[AgentLoopBase]")


class LoopOptions(BaseModel):
    """Base of a loop's typed `agent.kwargs`: subclass it with one `Field` per option; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class AgentLoopBase(ABC):
    """Base class of agent loops.

    Subclass it, implement `run`, and register it:

        @register_loop("guess_number")
        class GuessNumberLoop(AgentLoopBase):
            async def run(self, sample, ctx):
                ctx.start(sample.prompt)
                turn = await ctx.generate()
                ...
                return ctx.trajectory

    `ctx.start`, `ctx.generate` and `ctx.add_messages` keep the trajectory's tokens exact; raise
    `StopLoop(reason)` (or let a budget raise it) to end with a stop reason.

    A loop with options declares them as a `LoopOptions` subclass in `Options`; they are checked against
    `agent.kwargs` before the run starts (every problem listed), and the loop reads them as `self.options`.
    Without `Options`, `self.kwargs` is the raw `agent.kwargs` dict, unchecked.

    What else a loop brings is asked of its class, never of its name, so a subclass registered under another name
    keeps it: its own dataset (`samples`), its start-up checks (`problems`) and the environment it reads, in words
    (`environment_form`).
    """

    Options: ClassVar[type[BaseModel] | None] = None
    """The typed model of `agent.kwargs` (a `LoopOptions` subclass), or None to take them unchecked."""
    uses_tools: bool = False
    roles: ClassVar[tuple[str, ...]] = ()
    """The roles of the episode that generate (`agent.roles` maps each to a policy); empty: one agent."""
    records_turns: bool = False
    """Whether the loop sets `Trajectory.turn_rewards` and `turn_states` (per-turn estimators need them)."""
    compacts_context: ClassVar[bool] = False
    """Whether the loop's episodes can be compacted (`agent.context`): every turn is a `ctx.generate` over the one
    conversation, and whatever the loop keeps about the conversation survives a rewrite of its messages."""
    no_compaction_reason: ClassVar[str | None] = None
    """Why a loop that does not compact refuses `agent.context`, in words, when there is more to say than that."""
    own_reward: ClassVar[str | None] = None
    """What rewards the loop's episodes when that is the environment's own scorer, in words (the verifiers loop:
    "the verifiers environment's rubric"): reward components, which would replace it, are then refused at start.
    None: the run's reward components score the episodes."""
    run_config: AgentRLConfig | None = None
    """The whole run's config when run by `agentrl rollout/train/eval` (None in bare use)."""

    def __init__(self, config: AgentConfig | None = None, **kwargs: Any):
        self.config = config or AgentConfig()
        self.kwargs = {**self.config.kwargs, **kwargs}
        self.options: Any = self.parse_options(self.kwargs)

    @abstractmethod
    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        """Run one trajectory for `sample` and return `ctx.trajectory`."""

    @classmethod
    def plays_several_roles(cls, cfg: AgentRLConfig) -> bool:
        """Whether an episode of the run `cfg` is played by several roles, each trained on its own reward
        (`Segment.player`); default: whether the loop declares two roles or more."""
        return len(cls.roles) >= 2

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """The episode `check_loop` plays to check this loop against the loop contract: its config, sample and the
        scripted policy's replies, and what it needs beyond this process. Override it when the loop needs options,
        tools, an environment or particular replies; the default plays one prompt answered with one reply."""
        return LoopCheckCase()

    @classmethod
    def recipe_check_case(cls, cfg: AgentRLConfig, sample: Sample) -> LoopCheckCase:
        """The episode `agentrl check loop=NAME recipe=R` plays: the recipe's run `cfg` (as `load_config` reads it,
        with `agent.name` this loop) and its task `sample` (its first training sample, or `task=ID`). The default
        plays them with the replies and needs of `check_case()` and `min_turns` at most 1 (those replies were
        written for the loop's own case), every role played by the check's one scripted policy (the recipe's
        `policies:` and `agent.roles` left out). Override it where the replies depend on the task (the
        SWE loop answers with the edit its task's gold patch makes)."""
        own = cls.check_case()
        config = cfg.model_dump(mode="json", by_alias=True, exclude={"policies"})
        config["agent"]["roles"] = {}
        return replace(own, config=config, sample=sample, min_turns=min(own.min_turns, 1), lacks=None)

    def policy_for(self, role: str) -> str | None:
        """The policy that plays `role` (`agent.roles`; None: the run's first policy). Pass it on as
        `ctx.generate(policy=...)`."""
        return self.config.roles.get(role)

    @classmethod
    def samples(cls, cfg: AgentRLConfig, split: str) -> list[Sample] | None:
        """The loop's own `train` or `eval` samples, asked for a split the run gives no data files for (the
        verifiers loop: its environment's dataset). None (the default): the run's data as configured."""
        return None

    @classmethod
    def prepare(cls, cfg: AgentRLConfig, samples: list[Sample]) -> None:
        """Prepare what the run's episodes need and this machine may lack yet (a SWE task's image), once, when
        the run starts and before any server does: idempotent, with progress. The default needs nothing.

        Raises:
            UserError: it cannot be prepared here, saying the command that does it.
        """
        return None

    @classmethod
    def problems(cls, cfg: AgentRLConfig) -> list[str]:
        """What stops the run's episodes that only the loop knows, each with its fix (an environment that does not
        load, say), checked at start after `agent.kwargs` against `Options`. Empty (the default): nothing."""
        return []

    @classmethod
    def environment_form(cls, cfg: AgentRLConfig) -> str:
        """The environment the run reads, in words, with the keys that name it (`agentrl config show` prints it
        first). The default describes the run's data, reasoning-gym dataset or Gymnasium environment."""
        return config_environment_form(cfg)

    @classmethod
    def option_problems(cls, kwargs: dict[str, Any]) -> list[str]:
        """Every problem of `kwargs` against `Options` (none when the loop declares no options)."""
        try:
            cls.parse_options(kwargs)
        except _BadOptions as exc:
            return exc.problems
        return []

    @classmethod
    def parse_options(cls, kwargs: dict[str, Any]) -> BaseModel | None:
        """`kwargs` as the loop's `Options` (None without them).

        Raises:
            UserError: listing every unknown option and bad value.
        """
        if cls.Options is None:
            return None
        try:
            return cls.Options.model_validate(kwargs)
        except ValidationError as exc:
            known = ", ".join(cls.Options.model_fields) or "none"
            raise _BadOptions(
                [
                    f"agent.kwargs.{'.'.join(map(str, e['loc'])) or '(all)'}: {e['msg']} "
                    f"(options of {cls.__name__}: {known})"
                    for e in exc.errors()
                ]
            ) from None


class _BadOptions(UserError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("bad agent loop options:\n  " + "\n  ".join(problems))


def _is_loop_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, AgentLoopBase)


LOOPS: Registry[type[AgentLoopBase]] = Registry(
    "agent loop",
    {
        "single_turn": "agentrl.loops.single_turn:SingleTurnAgentLoop",
        "tool_agent": "agentrl.loops.tool_calling:ToolAgentLoop",
        "swe_agent": "agentrl.loops.swe:SWEAgentLoop",
        "harbor_agent": "agentrl.loops.harbor:HarborAgentLoop",
        "harbor_oracle": "agentrl.loops.harbor:HarborOracleLoop",
        "gui_agent": "agentrl.loops.gui:GUIAgentLoop",
        "gym": "agentrl.loops.gym:GymAgentLoop",
        "referential_game": "agentrl.loops.referential_game:ReferentialGameLoop",
        "textarena": "agentrl.loops.textarena:TextArenaLoop",
        "verifiers": "agentrl.loops.verifiers:VerifiersLoop",
        "verifiers_v1": "agentrl.gateway.verifiers_v1:VerifiersV1Loop",
        "openenv": "agentrl.loops.openenv:OpenEnvLoop",
        "openai_agent": "agentrl.gateway.agent_loop:OpenAIAgentLoop",
    },
    accepts=_is_loop_class,
    expected="an AgentLoopBase subclass",
    example="my_pkg.loops:MyLoop",
)
"""Agent loops by `agent.name` (or a row's `agent_name`)."""


def register_loop(name: str) -> Callable[[L], L]:
    """Class decorator registering an `AgentLoopBase` subclass under `name` (refuses a name already taken)."""
    return LOOPS.register(name)


def get_loop_class(name: str) -> type[AgentLoopBase]:
    """Resolve a registered loop name or a dotted path (`pkg.mod:Class` or `pkg.mod.Class`).

    Raises:
        UserError: unknown name (the message lists the known ones) or a path that is not a loop class.
    """
    return LOOPS.get(name)
