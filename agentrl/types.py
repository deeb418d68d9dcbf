"""The nouns every part of agentrl passes around: messages, token segments, trajectories, samples.

Token ids are the source of truth of a `Trajectory`: the segments hold exactly the tokens the policy saw and
produced, in order. Messages are the readable view of the same conversation.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["system", "user", "assistant", "tool"]


class StopReason(StrEnum):
    """Why a trajectory ended.

    The model's own endings (`done`, `max_turns`, `max_tokens`, `context_overflow`, `context_exhausted` when context
    management could not make room (`agent.context`), `tool_error_limit` from its malformed calls, `time_budget` of
    the agent's own clock) are trained on. Infrastructure failures (`error`:
    the loop raised; `server_error`: no rollout server answered; `sandbox_error`; `timeout`: the trajectory's
    wall-clock limit; `aborted`: the request was cancelled; `worker_lost`: its rollout worker died more often than
    `rollout.max_job_retries`) are saved and counted but not trained on by default
    (`trainer.failed_trajectories`); see `is_failure`.
    """

    DONE = "done"
    MAX_TURNS = "max_turns"
    MAX_TOKENS = "max_tokens"
    CONTEXT_OVERFLOW = "context_overflow"
    CONTEXT_EXHAUSTED = "context_exhausted"
    TOOL_ERROR_LIMIT = "tool_error_limit"
    TIME_BUDGET = "time_budget"
    SANDBOX_ERROR = "sandbox_error"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    ABORTED = "aborted"
    WORKER_LOST = "worker_lost"
    ERROR = "error"

    @property
    def is_failure(self) -> bool:
        """Whether the trajectory ended because the infrastructure failed, not because of what the model did."""
        return self in _FAILURES


_FAILURES = frozenset(
    {
        StopReason.SANDBOX_ERROR,
        StopReason.SERVER_ERROR,
        StopReason.TIMEOUT,
        StopReason.ABORTED,
        StopReason.WORKER_LOST,
        StopReason.ERROR,
    }
)


class Message(BaseModel):
    """One chat message, in the OpenAI shape."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = ""
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The message as a plain dict, without unset optional fields."""
        return self.model_dump(exclude_none=True)


class Segment(BaseModel):
    """A contiguous run of tokens with one origin.

    Attributes:
        token_ids: the tokens, exactly as the tokenizer or the rollout server produced them.
        trainable: True for tokens the policy generated (they get gradient), False for prompt, tool output,
            user turns and environment observations.
        logprobs: per-token log-probabilities from the rollout engine, for trainable segments.
        policy_version: version of the weights that generated these tokens (None for non-generated tokens).
        role: the chat role the tokens belong to.
        temperature: the sampling temperature the tokens were drawn at, for generated tokens: their `logprobs` are
            of that tempered distribution, and the trainer computes its own at the same temperature (None: 1.0).
        policy: the name of the policy (`policies:`) that generated these tokens; None: the run's first policy
            (the only one of a run without `policies:`).
        player: the role of the episode (`AgentLoopBase.roles`: a game's `player` and `opponent`) that generated
            these tokens; None: the episode's one agent. Each role's tokens are trained on its own reward
            (`Trajectory.player_rewards`), also when one policy plays several roles (self-play).
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")  # a -inf logprob survives a JSON round trip

    token_ids: list[int]
    trainable: bool
    logprobs: list[float] | None = None
    policy_version: int | None = None
    role: Role = "assistant"
    temperature: float | None = None
    policy: str | None = None
    player: str | None = None

    @model_validator(mode="after")
    def _check_lengths(self) -> Segment:
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"segment has {len(self.token_ids)} tokens but {len(self.logprobs)} logprobs; "
                "pass one logprob per token or none"
            )
        return self


class Trajectory(BaseModel):
    """One conversation of an agent with its environment, as tokens and as messages.

    The first segment(s) up to the first trainable one are the prompt; everything after is the response,
    in which only trainable segments are trained on.
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    group_id: str = ""
    sample_index: int = 0
    agent_name: str = ""
    segments: list[Segment] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    reward_details: dict[str, Any] = Field(default_factory=dict)
    policy_rewards: dict[str, float] = Field(default_factory=dict)
    """Each policy's own reward, where the episode's roles are rewarded apart (`policies:`: a zero-sum game, a
    judge and a solver); a policy not named here is trained on `reward`."""
    player_rewards: dict[str, float] = Field(default_factory=dict)
    """Each role's own reward (`Segment.player`), where the episode's roles are rewarded apart: a role's tokens
    are trained on it whatever policy plays the role (self-play included); it comes before `policy_rewards`."""
    stop_reason: StopReason | None = None
    error: str | None = None
    num_turns: int = 0
    timings: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    earlier_steps: list[Trajectory] = Field(default_factory=list)
    """Step samples before this one, when the agent rewrote its history mid-run (the gateway's black-box agents, a
    history window) or the chat template did (a reasoning template dropping earlier `<think>` blocks): each
    token-exact on its own messages, trained with this trajectory's advantage."""
    turn_rewards: list[float] | None = None
    """The reward of each generated turn (see `turn_index`; with earlier step samples, their turns first, in
    `step_samples()` order), for per-turn credit (`trainer.advantage=turn_grpo` or
    `gigpo`): e.g. the env's step reward of a Gym turn, with the invalid-action penalty on the turn that caused
    it. None: the loop records none."""
    turn_states: list[str] | None = None
    """A key of the environment state each generated turn started from (equal keys: the same state), for GiGPO's
    anchor-state groups. None: the loop records none."""

    @property
    def token_ids(self) -> list[int]:
        """All tokens of the conversation, in order."""
        return [t for s in self.segments for t in s.token_ids]

    @property
    def num_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.segments)

    @property
    def success(self) -> bool | None:
        """The environment's or grader's own success flag, when the trajectory has one: a `<source>/success`
        metric (`env/success` of Gym envs, `gui/success` of GUI pages), else every `resolved` flag its reward
        components reported (SWE-bench grading); None when it has neither."""
        flags = [v >= 0.5 for k, v in self.metrics.items() if k.endswith("/success")]
        if flags:
            return all(flags)
        resolved = [d["resolved"] for d in self.reward_details.values() if isinstance(d, dict) and "resolved" in d]
        return all(bool(r) for r in resolved) if resolved else None

    @property
    def failed(self) -> bool:
        """Whether an infrastructure failure ended it (`StopReason.is_failure`): data, not training data."""
        return self.stop_reason is not None and self.stop_reason.is_failure

    @property
    def num_generated_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.segments if s.trainable)

    def turn_index(self) -> list[int | None]:
        """For each segment, the index of the generated turn it belongs to (None for non-generated segments).

        A turn is a maximal run of consecutive trainable segments: the reply of one `ctx.generate`, which is
        several segments when it was resumed after weight pushes (one per policy version) or cut and continued
        with no message in between. Any non-trainable segment (prompt, observation, tool result, user turn) ends
        the turn; the next trainable segment starts the next one. A reply of another policy (`Segment.policy`) or
        role (`Segment.player`) is another turn.
        """
        out: list[int | None] = []
        turns, in_turn, author = 0, False, (None, None)
        for seg in self.segments:
            if seg.trainable and (not in_turn or (seg.policy, seg.player) != author):
                turns += 1
            in_turn, author = seg.trainable, (seg.policy, seg.player)
            out.append(turns - 1 if seg.trainable else None)
        return out

    @property
    def num_generated_turns(self) -> int:
        """Turns in the sense of `turn_index` (one reward each in `turn_rewards`)."""
        return 1 + max((i for i in self.turn_index() if i is not None), default=-1)

    def step_samples(self) -> list[Trajectory]:
        """The token sequences that make up the conversation and generated anything, in order: the earlier step
        samples, then this one (just `[self]` for a conversation that never rewrote its context; `[]` when
        nothing was generated). These are the rows training sees."""
        return [s for s in [*self.earlier_steps, self] if s.num_generated_tokens]

    def num_turns_in_all_steps(self) -> int:
        """Generated turns of every step sample together (one reward each in `turn_rewards`)."""
        return sum(s.num_generated_turns for s in self.step_samples())

    def num_generated_tokens_in_all_steps(self) -> int:
        """Generated tokens of every step sample together: the reply length of the whole conversation."""
        return sum(s.num_generated_tokens for s in self.step_samples())

    def append(self, segment: Segment) -> None:
        """Append a segment; segments are never edited once appended (but for a generation prompt nothing was
        generated from, `TrajectoryBuilder` takes off the end before more messages follow)."""
        self.segments.append(segment)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        return cls.model_validate_json(text)


class Sample(BaseModel):
    """One dataset row: the prompt and what is needed to run and score it."""

    model_config = ConfigDict(extra="forbid")

    prompt: list[Message]
    agent_name: str | None = None
    data_source: str = "default"
    ground_truth: Any = None
    reward_spec: dict[str, Any] = Field(default_factory=dict)
    extra_info: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json(cls, text: str) -> Sample:
        return cls.model_validate_json(text)
