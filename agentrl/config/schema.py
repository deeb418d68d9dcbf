"""The typed configuration tree. At most three levels deep; every field has a one-line description."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agentrl.config.rollout_schema import RolloutConfig, TreeConfig
from agentrl.config.section import _Section
from agentrl.config.trainer_schema import TrainerConfig

__all__ = [
    "AgentConfig",
    "AgentRLConfig",
    "DataConfig",
    "EnvConfig",
    "EnvExample",
    "LoggingConfig",
    "PolicyConfig",
    "RayConfig",
    "RewardConfig",
    "RolloutConfig",
    "SandboxConfig",
    "ToolSpec",
    "TrainerConfig",
    "TreeConfig",
]


class DataConfig(_Section):
    train_files: list[str] = Field(default_factory=list, description="JSONL/Parquet files of training rows")
    eval_files: list[str] = Field(default_factory=list, description="JSONL/Parquet files of held-out rows")
    batch_size: int = Field(8, ge=1, description="prompts per training step")
    harbor_reader: Literal["auto", "harbor", "agentrl"] = Field(
        "auto",
        description="Harbor task folders read by Harbor's own package (harbor: in a Python 3.12+ environment, "
        ".venv-harbor/ or $AGENTRL_HARBOR_PYTHON), by agentrl's reader (agentrl), or auto: the package when found",
    )
    shuffle: bool = Field(True, description="shuffle training rows each epoch")
    max_prompt_tokens: int = Field(1024, ge=1, description="rows with longer prompts are rejected")
    agent_name: str | None = Field(
        None, description="play every row with this loop (`agent.name`'s config), whatever loop the rows name"
    )
    reasoning_gym: str | None = Field(
        None,
        description="a reasoning-gym dataset name (e.g. basic_arithmetic): its generated questions are the samples "
        "of a split without files, scored by reward type reasoning_gym",
    )
    reasoning_gym_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="reasoning-gym datasets' own options, by dataset name (e.g. {basic_arithmetic: {max_terms: 2}}); "
        "the options of the dataset data.reasoning_gym names are used",
    )
    reasoning_gym_prompt: str = Field(
        "default",
        description="data.reasoning_gym: the system prompt, by its name in reasoning-gym's own SYSTEM_PROMPTS "
        "(default, direct, simple, chain_of_draft, DeepSeekZero)",
    )
    reasoning_gym_shots: int = Field(
        0,
        ge=0,
        description="data.reasoning_gym: worked examples before each question, as earlier turns of the conversation: "
        "that many questions of the dataset (from a seed of their own; a training or held-out question equal to one "
        "is dropped), each answered as data.reasoning_gym_shot_reply says for that dataset",
    )
    reasoning_gym_shot_reply: dict[str, str] = Field(
        default_factory=dict,
        description="data.reasoning_gym_shots: a worked example's reply, by dataset name (as the options are), a "
        "template over the example's entry ({answer}, {question}, {metadata[...]}), e.g. {chain_sum: "
        '"{metadata[expression]} = {answer}\\n<answer>{answer}</answer>"}; a dataset not named here: '
        "<answer>{answer}</answer>",
    )
    demonstrations: list[str] = Field(
        default_factory=list,
        description="trainer.objective=sft: JSONL (or .jsonl.gz) files of demonstrations, agentrl trajectory files (a "
        "rollout's, an eval's or the gateway's; every step sample a row) or chat rows ({messages, tools}: rendered "
        "with the model's chat template as the loops render them); each step trains on the next data.batch_size",
    )
    min_reward: float | None = Field(
        None, description="sft: leave out demonstrations whose reward is below this (chat rows without one are kept)"
    )
    stop_reasons: list[str] = Field(
        default_factory=list,
        description="sft: keep only demonstrations that ended with one of these stop reasons (e.g. [done]); empty: "
        "any that did not fail",
    )
    num_train_samples: int = Field(1000, ge=1, description="data.reasoning_gym: training questions generated")
    num_eval_samples: int = Field(32, ge=0, description="data.reasoning_gym: held-out questions (other seeds)")


class ContextConfig(_Section):
    """Context management for multi-turn loops (`agent.context`): when the conversation would outgrow
    `max_tokens`, a strategy rewrites it and the episode goes on in a new step sample (`docs/guides/context.md`)."""

    max_tokens: int | None = Field(
        None, ge=64, description="the conversation's token budget, below rollout.max_model_len; None: no management"
    )
    strategy: str = Field(
        "drop_tool_outputs",
        description="drop_tool_outputs, window, summarize, a name registered with register_context_strategy, or a "
        "module:function path",
    )
    max_compactions: int = Field(8, ge=1, description="compactions per episode before stop_reason context_exhausted")
    keep_turns: int = Field(2, ge=1, description="window: the last turns kept after the first prompt")
    keep_tool_outputs: int = Field(1, ge=0, description="drop_tool_outputs: the latest tool outputs kept whole")
    placeholder: str = Field(
        "[output removed to save context]", description="drop_tool_outputs: what replaces an old tool output"
    )
    summary_prompt: str = Field(
        "Your context is full. Summarize the task and your progress so far (what you ran, read, learnt and "
        "changed, and what is left to do) so that you can continue from the summary alone.",
        description="summarize: the user message that asks the policy for its summary",
    )
    summary_prefix: str = Field(
        "Summary of your work so far:", description="summarize: what starts the message carrying the summary"
    )
    summary_max_tokens: int = Field(128, ge=8, description="summarize: tokens of the summary (generated, trained)")


class AgentConfig(_Section):
    name: str = Field("single_turn", description="registered loop name or dotted path of an AgentLoopBase")
    max_turns: int = Field(8, ge=1, description="assistant turns before stop_reason=max_turns")
    max_total_tokens: int = Field(
        2048,
        ge=1,
        description="trajectory token budget (prompt + response); with agent.context, the whole episode's (the "
        "first prompt and every token generated or added after it, across compactions)",
    )
    max_parallel_tool_calls: int = Field(4, ge=1, description="tool calls executed per turn")
    max_consecutive_tool_errors: int = Field(3, ge=1, description="errors in a row before stopping")
    on_cut_turn: Literal["stop", "continue"] = Field(
        "stop",
        description="a reply cut at rollout.max_tokens ends the trajectory (stop_reason max_tokens), or the loop "
        "goes on and answers it (tool loops: a parse error or a reminder); a trajectory whose last reply was cut "
        "still ends as max_tokens",
    )
    tool_parser: str = Field("hermes", description="tool-call format: hermes, llama3_json, ...")
    system_prompt: str | None = Field(None, description="system message prepended to every prompt")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="extra options of a custom loop")
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="several policies: the policy (a name under policies:) that plays each of the loop's roles; a "
        "role not named here is played by the first policy",
    )
    context: ContextConfig = Field(default_factory=ContextConfig, description="context management (multi-turn)")


class ToolSpec(_Section):
    class_: str = Field(alias="class", description="registered tool name or dotted path")
    config: dict[str, Any] = Field(default_factory=dict, description="options passed to the tool")


class SandboxConfig(_Section):
    backend: Literal["docker", "local", "none"] = Field("none", description="where tool code runs")
    image: str = Field("agentrl/sandbox:base", description="image of sandbox containers")
    pool_size: int = Field(4, ge=0, description="warm containers kept ready")
    max_containers: int = Field(32, ge=1, description="containers alive at once")
    memory: str = Field("1g", description="memory limit per container")
    cpus: float = Field(1.0, gt=0, description="CPU limit per container")
    pids_limit: int = Field(256, ge=16, description="process limit per container")
    network: bool = Field(False, description="give containers network access")
    exec_timeout_s: float = Field(30.0, gt=0, description="default timeout of one command")
    workdir_size: str = Field("512m", description="size cap of the writable /work")
    tmp_size: str = Field("64m", description="size cap of /tmp")
    max_output_bytes: int = Field(1 << 20, ge=1024, description="stdout/stderr cap per command")


class RewardConfig(_Section):
    components: list[dict[str, Any]] = Field(default_factory=list, description="weighted reward components")
    function: str | None = Field(None, description="dotted path of a compute_score(...) function")
    on_failure: Literal["zero", "skip"] = Field("zero", description="what a failed component scores")


class RayConfig(_Section):
    """Where trainer ranks run when trainer.num_ranks > 1 (one Ray actor per rank)."""

    address: str | None = Field(None, description="Ray cluster to join ('auto', 'ray://host:10001'); None: start one")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a locally started Ray; None: all of this machine's")
    num_cpus_per_rank: float = Field(1.0, gt=0, description="CPUs reserved by each trainer rank actor")
    num_gpus_per_rank: float | None = Field(
        None, ge=0, description="GPUs of each trainer rank; None: 1 when the cluster has GPUs, else 0"
    )


class EnvExample(_Section):
    """A few-shot turn shown before each episode of a `gym` env: an observation and the reply it gets."""

    observation: str = Field(min_length=1, description="the observation text, as the adapter would show it")
    reply: str = Field(min_length=1, description="the reply to it: a valid action (checked when an episode starts)")


class EnvConfig(_Section):
    """A gymnasium environment played by the `gym` agent loop (see agentrl.envs)."""

    id: str | None = Field(None, description="gymnasium env id, e.g. FrozenLake-v1 (or module:Env-v0)")
    entry_point: str | None = Field(None, description="dotted path of a gymnasium.Env class or factory")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="arguments of gymnasium.make / the class")
    max_steps: int = Field(20, ge=1, description="environment steps per episode (truncated after)")
    num_train_seeds: int = Field(64, ge=0, description="training episodes generated from seeds")
    num_eval_seeds: int = Field(16, ge=0, description="held-out episodes generated from seeds")
    train_seed_start: int = Field(0, ge=0, description="first training seed (seeds start, start+1, ...)")
    eval_seed_start: int = Field(1_000_000, ge=0, description="first held-out seed; must not overlap train seeds")
    discount: float = Field(1.0, gt=0, le=1, description="gamma of the episode return that becomes the reward")
    invalid_action_penalty: float = Field(0.0, ge=0, description="subtracted from the reward per invalid action")
    max_invalid_actions: int = Field(3, ge=1, description="invalid actions in a row before the episode ends")
    adapter: str | None = Field(None, description="dotted path of an EnvAdapter subclass; None: built-in")
    render_mode: Literal["auto", "ansi", "none"] = Field(
        "auto", description="auto: ansi text when the env renders it; none: format the observation space"
    )
    instructions: str | None = Field(None, description="task text shown before the first observation")
    instructions_role: Literal["user", "system"] = Field(
        "user",
        description="user: the instructions open the first user message; system: they are the system message "
        "(replacing a chat template's default one, e.g. SmolLM2's)",
    )
    examples: list[EnvExample] = Field(
        default_factory=list,
        description="few-shot turns shown before each episode as earlier user/assistant messages (prompt, "
        "never trained); a small model copies their reply form, and often the reply itself",
    )

    history_turns: int | None = Field(
        None,
        ge=0,
        description="earlier turns each prompt carries (None: the whole episode, one token sequence). With a "
        "number every turn is a step sample of its own (Trajectory.earlier_steps): the instructions, the last "
        "history_turns observation/reply pairs, and the current state as the adapter's observation_text shows "
        "it, so that with 0 the same state is always the same prompt (GiGPO's setting: the policy is a map from "
        "states to moves); a window also keeps long episodes' prompts short",
    )

    @model_validator(mode="after")
    def _check(self) -> EnvConfig:
        problems = []
        if self.id and self.entry_point:
            problems.append("env.id and env.entry_point are both set; set one (an id, or a class by dotted path)")
        train = range(self.train_seed_start, self.train_seed_start + self.num_train_seeds)
        held_out = range(self.eval_seed_start, self.eval_seed_start + self.num_eval_seeds)
        if train and held_out and max(train.start, held_out.start) < min(train.stop, held_out.stop):
            problems.append(
                f"held-out seeds {held_out.start}..{held_out.stop - 1} overlap training seeds "
                f"{train.start}..{train.stop - 1}; move env.eval_seed_start past {train.stop - 1}"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def enabled(self) -> bool:
        """Whether an environment is configured."""
        return bool(self.id or self.entry_point)


class LoggingConfig(_Section):
    tensorboard: bool = Field(True, description="write TensorBoard event files to <run dir>/tensorboard")
    wandb_project: str | None = Field(None, description="log to this Weights & Biases project (needs wandb)")
    wandb_entity: str | None = Field(None, description="W&B team or user; None: your default entity")
    mlflow_tracking_uri: str | None = Field(None, description="log to this MLflow tracking server or folder")
    mlflow_experiment: str = Field("agentrl", description="MLflow experiment name")


class PolicyConfig(_Section):
    model: str | None = Field(None, description="this policy's model; None: the run's `model`")
    trainable: bool = Field(True, description="false: the policy serves but never learns (an opponent, a judge)")
    lora_of: str | None = Field(
        None,
        description="a frozen policy whose hf servers serve this one as a LoRA adapter (trainer.lora_rank > 0): "
        "several policies for one base model's memory",
    )
    trainer: dict[str, Any] = Field(
        default_factory=dict, description="this policy's trainer settings over the run's (lr, loss, advantage, KL...)"
    )
    rollout: dict[str, Any] = Field(
        default_factory=dict, description="this policy's server settings over the run's (backend, urls, replicas...)"
    )
    reward: RewardConfig | None = Field(
        None,
        description="this policy's own reward (components, function), scoring its own last reply; None: the reward "
        "the loop assigns it, else the episode's",
    )


class AgentRLConfig(_Section):
    """The whole configuration of a run: defaults ← recipe ← command-line overrides."""

    recipe: str | None = Field(None, description="recipe name (folder under recipes/)")
    model: str = Field("default", description="model: 'default' (SmolLM2-135M-Instruct), a folder or hub id")
    output_dir: str | None = Field(None, description="run directory; default runs/<recipe>-<timestamp>")
    seed: int = Field(0, description="global random seed")
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    tools: list[ToolSpec] = Field(default_factory=list, description="tools offered to the agent")
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    policies: dict[str, PolicyConfig] = Field(
        default_factory=dict,
        description="several policies in one episode, by name (the first is the default); empty: one policy",
    )
    ray: RayConfig = Field(default_factory=RayConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
