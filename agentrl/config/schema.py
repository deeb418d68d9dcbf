"""The typed configuration tree. At most three levels deep; every field has a one-line description."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


class DataConfig(_Section):
    train_files: list[str] = Field(default_factory=list, description="JSONL/Parquet files of training rows")
    eval_files: list[str] = Field(default_factory=list, description="JSONL/Parquet files of held-out rows")
    batch_size: int = Field(8, ge=1, description="prompts per training step")
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
    num_train_samples: int = Field(1000, ge=1, description="data.reasoning_gym: training questions generated")
    num_eval_samples: int = Field(32, ge=0, description="data.reasoning_gym: held-out questions (other seeds)")


class TreeConfig(_Section):
    branch_turns: list[int] = Field(
        default_factory=list,
        description="tree rollouts: fork each episode (its tokens, loop state, environment and sandbox) at these turn "
        "counts (0: before the first turn); empty (and no every / entropy): no tree, rollout.n independent episodes",
    )
    every: int = Field(
        0, ge=0, description="instead of branch_turns: fork every this many turns, up to max_branch_points times"
    )
    entropy: float | None = Field(
        None,
        gt=0,
        description="instead of branch_turns: fork after a turn whose first entropy_tokens tokens were uncertain, "
        "their mean surprisal (-logprob: an estimate of the policy's entropy there) at least this many nats (as "
        "ARPO branches), up to max_branch_points times",
    )
    entropy_tokens: int = Field(16, ge=1, description="with entropy: the turn's first tokens it averages over")
    max_branch_points: int = Field(2, ge=1, description="with every or entropy: forks along one path at most")
    width: int = Field(2, ge=2, description="children per branch point; a tree has up to width^depth leaves")
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="budget of a tree: once its episodes generated this many tokens in all (a shared prefix "
        "counted once), it forks no more and its running episodes play to their ends",
    )
    max_tool_calls: int | None = Field(
        None, ge=1, description="budget of a tree in tool calls (every node's counted once), as max_tokens"
    )

    @model_validator(mode="after")
    def _one_rule(self) -> TreeConfig:
        turns = self.branch_turns
        if any(t < 0 for t in turns) or turns != sorted(set(turns)):
            raise ValueError(f"rollout.tree.branch_turns must be increasing turn counts >= 0, got {turns}")
        rules = [name for name, on in self._rules().items() if on]
        if len(rules) > 1:
            raise ValueError(
                f"rollout.tree: {' and '.join(rules)} are set; choose one rule of where to branch and unset the others"
            )
        if not rules and (self.max_tokens or self.max_tool_calls):
            raise ValueError(
                "rollout.tree.max_tokens / max_tool_calls budget a tree, but no tree is set: set "
                "rollout.tree.branch_turns, every or entropy"
            )
        return self

    def _rules(self) -> dict[str, bool]:
        return {"branch_turns": bool(self.branch_turns), "every": self.every > 0, "entropy": self.entropy is not None}

    @property
    def enabled(self) -> bool:
        return any(self._rules().values())


class RolloutConfig(_Section):
    backend: Literal["hf", "vllm", "sglang"] = Field("hf", description="rollout server kind")
    urls: list[str] = Field(default_factory=list, description="connect to running servers instead of starting")
    num_replicas: int = Field(1, ge=1, description="servers to start when urls is empty")
    placement: Literal["local", "ray"] = Field(
        "local", description="start the servers as subprocesses here, or each in a Ray actor on a cluster node"
    )
    num_cpus_per_replica: float = Field(1.0, gt=0, description="placement=ray: CPUs reserved by each server actor")
    num_gpus_per_replica: float | None = Field(
        None, ge=0, description="placement=ray: GPUs of each server actor; None: 1 when the cluster has GPUs, else 0"
    )
    replica_resources: dict[str, float] = Field(
        default_factory=dict, description="placement=ray: custom Ray resources each server actor needs"
    )
    lora_adapter: str | None = Field(
        None,
        description="serve the policy as a LoRA adapter of this name over the hf server's model (trainer.lora_rank > "
        "0): requests name it as their model and each push sends the adapter alone; set for you by policies.X.lora_of",
    )
    workers: int = Field(
        0, ge=0, description="rollout worker actors on the Ray cluster running the agent loops; 0: all in this process"
    )
    worker_concurrency: int | None = Field(
        None, ge=1, description="trajectories each worker runs at once; None: max_concurrency / workers"
    )
    num_cpus_per_worker: float = Field(1.0, gt=0, description="CPUs reserved by each rollout worker actor")
    worker_resources: dict[str, float] = Field(
        default_factory=dict, description="custom Ray resources each worker needs, e.g. {docker: 1} for sandbox hosts"
    )
    max_job_retries: int = Field(1, ge=0, description="times a trajectory whose worker died is run again elsewhere")
    worker_max_restarts: int = Field(3, ge=0, description="times Ray restarts a rollout worker actor that died")
    n: int = Field(4, ge=1, description="samples per prompt (the GRPO group size)")
    max_concurrency: int = Field(64, ge=1, description="trajectories in flight at once")
    temperature: float = Field(1.0, ge=0.0, description="sampling temperature; 0 is greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    top_k: int = Field(-1, description="top-k sampling; -1 disables")
    max_tokens: int = Field(256, ge=1, description="tokens per assistant turn")
    max_model_len: int = Field(2048, ge=16, description="context length of the rollout server")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="weights and compute dtype of the servers training starts (not of those reached by rollout.urls); "
        "auto: trainer.dtype, and where that is auto too, bfloat16 on a machine with a GPU, float32 without",
    )
    request_timeout_s: float = Field(600.0, gt=0, description="timeout of one generation request")
    health_check_interval_s: float = Field(
        5.0, gt=0, description="seconds between health checks of a dead replica (it takes traffic again once caught up)"
    )
    seed: int | None = Field(None, description="seed trajectories' sampling (reproducible rollouts); None: random")
    trajectory_timeout_s: float = Field(1800.0, gt=0, description="wall-clock limit of one trajectory")
    shared_weights_dir: str | None = Field(
        None,
        description="a folder this machine and the rollout.urls servers see at the same path (NFS): vLLM/SGLang "
        "servers on other hosts load each push's weights from there",
    )
    weight_transfer: Literal["file", "nccl"] = Field(
        "file",
        description="how vLLM/SGLang servers get weights: a safetensors file they load, or an NCCL broadcast from the "
        "trainer's GPU (GPU only; vLLM is started with --weight-transfer-config)",
    )
    tree: TreeConfig = Field(
        default_factory=TreeConfig,
        description="tree rollouts: rollout.n trees per prompt, each forked at rollout.tree.branch_turns (or every "
        "rollout.tree.every turns, or where the policy was uncertain: rollout.tree.entropy); all the leaves of a "
        "prompt are its group",
    )
    weight_update: Literal["finish", "abort", "resume"] = Field(
        "finish",
        description="generations in flight at a weight push: finish on the old weights, abort (the trajectory ends "
        "as aborted), or resume: interrupted and continued from their exact prefix with the new weights (partial "
        "rollouts; every token keeps the version that generated it)",
    )


class AgentConfig(_Section):
    name: str = Field("single_turn", description="registered loop name or dotted path of an AgentLoopBase")
    max_turns: int = Field(8, ge=1, description="assistant turns before stop_reason=max_turns")
    max_total_tokens: int = Field(2048, ge=1, description="trajectory token budget (prompt + response)")
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


class TrainerConfig(_Section):
    steps: int = Field(10, ge=1, description="training steps")
    mode: Literal["sync", "async", "fully_async"] = Field(
        "sync",
        description="on-policy; async: the next batch rolls out while this one trains; fully_async: rollout never "
        "stops and each step takes the next complete groups, at most max_staleness versions old",
    )
    max_staleness: int = Field(1, ge=0, description="async / fully_async: policy versions a sample may lag")
    stale_samples: Literal["correct", "drop", "regenerate"] = Field(
        "correct",
        description="async / fully_async: samples older than max_staleness at their step are kept with TIS correction, "
        "dropped, or (fully_async) regenerated on the current policy; each is counted in rollout/stale_*",
    )
    tis_cap: float | None = Field(
        None, gt=0, description="truncated importance sampling cap on π_trainer/π_rollout; None: 2.0 in async mode"
    )
    is_level: Literal["token", "sequence", "geometric"] = Field(
        "token",
        description="off-policy correction weight (π_old/π_rollout, on when tis_cap is set) per token, per sequence "
        "(product), or its geometric mean",
    )
    is_mode: Literal["truncate", "mask"] = Field(
        "truncate", description="truncate the weight at tis_cap (TIS), or drop tokens/sequences outside the band"
    )
    is_mask_low: float = Field(0.5, ge=0, description="is_mode=mask: lower bound of the kept band [low, tis_cap]")
    dynamic_sampling: bool = Field(False, description="DAPO: drop zero-variance groups and sample more prompts")
    skip_zero_advantage: bool = Field(
        True,
        description="leave rows whose advantage is 0 out of the forward/backward when kl_coef and entropy_coef are "
        "0: they give no gradient, so the update is the same for less compute (train/ metrics then cover the "
        "trained rows)",
    )
    max_sampling_rounds: int = Field(3, ge=1, description="dynamic sampling: generation rounds per step at most")
    failed_trajectories: Literal["exclude", "zero_reward"] = Field(
        "exclude",
        description="trajectories ended by an infrastructure failure (server, sandbox, loop error, timeout, abort) "
        "are saved and counted, and left out of advantages and the update (exclude), or trained with reward 0",
    )
    max_failed_fraction: float = Field(
        0.5, ge=0, le=1, description="stop the run when a larger share of a step's trajectories failed"
    )
    collapse_warn_ratio: float = Field(
        0.25,
        ge=0,
        lt=1,
        description="warn when the policy's entropy or response length falls below this fraction of its first "
        "steps' (a collapsing policy); 0: never warn",
    )
    overlong_max_tokens: int | None = Field(None, ge=1, description="DAPO overlong penalty: L_max (None: off)")
    overlong_cache_tokens: int = Field(0, ge=0, description="DAPO overlong penalty: L_cache, the soft zone")
    resume: bool = Field(False, description="continue from the last checkpoint in output_dir")
    advantage: str = Field(
        "grpo",
        description="advantage estimator: grpo, dr_grpo, rloo, reinforce++, gspo (one per trajectory), or turn_grpo, "
        "gigpo (one per turn, from the loop's per-turn rewards)",
    )
    turn_discount: float = Field(
        1.0, ge=0, le=1, description="turn_grpo, gigpo: γ of the turn-level return Σ_k γ^(k−t) r_k"
    )
    gigpo_step_weight: float = Field(
        1.0, ge=0, description="gigpo: ω, the weight of the step-level advantage in A = A_episode + ω·A_step"
    )
    gigpo_anchor_scope: Literal["group", "batch"] = Field(
        "group",
        description="gigpo: compare turns from the same state within each prompt's group (the paper), or across "
        "the whole batch (batch: when all prompts play one environment, e.g. random starts on one map)",
    )
    gigpo_step_norm: Literal["std", "none"] = Field(
        "std",
        description="gigpo: divide step-level advantages by their anchor group's std (the paper's default), or not "
        "(none: reward units, so moves that differ only by shaping weigh little)",
    )
    tree_intra_weight: float = Field(
        1.0, ge=0, description="tree_grpo: weight of the intra-tree term (a node against its siblings from one fork)"
    )
    tree_inter_weight: float = Field(
        1.0, ge=0, description="tree_grpo: weight of the inter-tree term (a node against every leaf of its prompt)"
    )
    loss: str = Field("ppo_clip", description="policy loss: ppo_clip, dual_clip, cispo, sapo, gspo")
    ppo_mini_batches: int = Field(
        1, ge=1, description="optimizer steps per batch, each on a 1/N share of its trajectories (PPO mini-batches)"
    )
    ppo_epochs: int = Field(1, ge=1, description="passes over the batch's mini-batches")
    loss_agg: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] | None = (
        Field(None, description="how token losses are aggregated; None: the loss's paper default")
    )
    lr: float = Field(1e-6, gt=0, description="AdamW learning rate")
    warmup_steps: int = Field(0, ge=0, description="linear LR warmup steps")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="LR after warmup: constant, or decayed to lr × min_lr_ratio at the last step"
    )
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="final LR / lr of the linear and cosine schedules")
    grad_clip: float = Field(1.0, gt=0, description="max gradient norm")
    clip_low: float = Field(0.2, ge=0, description="PPO lower clip epsilon")
    clip_high: float | None = Field(None, ge=0, description="PPO upper clip epsilon (DAPO clip-higher); None: clip_low")
    kl_coef: float = Field(0.0, ge=0, description="KL penalty to the reference policy")
    entropy_coef: float = Field(
        0.0,
        ge=0,
        description="entropy bonus: the loss less entropy_coef × the policy's mean entropy over generated tokens; "
        "keeps a policy from settling on one reply before it has seen what the others score (every row trains)",
    )
    entropy_choices: list[str] = Field(
        default_factory=list,
        description="with entropy_coef: the bonus is the entropy of each turn's first token over the first tokens of "
        "these replies (renormalized), e.g. a game's moves [LEFT, DOWN, RIGHT, UP], instead of over the whole "
        "vocabulary at every token; keeps the policy trying every choice without pushing it toward other words. "
        "It is aggregated like the loss, over all generated tokens: with k-token replies it weighs about 1/k",
    )
    num_ranks: int = Field(1, ge=1, description="FSDP ranks (Ray actors)")
    micro_batch_tokens: int = Field(
        4096, ge=1, description="token budget of one micro-batch (fp32 logits take micro_batch_tokens × vocab × 4 B)"
    )
    eval_every: int = Field(0, ge=0, description="evaluate every k steps; 0 disables")
    save_every: int = Field(0, ge=0, description="checkpoint every k steps; 0 disables")
    # policy engine: reference/KL, LoRA, precision and memory (agentrl.trainer.backend)
    use_reference: bool = Field(False, description="frozen initial policy for train/kl (implied by kl_coef > 0)")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="KL estimator of the penalty (k3: GRPO's)")
    lora_rank: int = Field(0, ge=0, description="LoRA rank (peft); 0 trains all weights")
    lora_alpha: float = Field(16.0, gt=0, description="LoRA alpha; adapters are scaled by alpha / rank")
    lora_target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="module names that get LoRA adapters; ['all-linear'] for every linear layer but the head",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="compute dtype (weights and optimizer stay fp32); auto: bf16 on GPU, fp32 on CPU"
    )
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward to save memory")
    share_prompt_prefix: bool = Field(
        False,
        description="run the prompt prefix all rows of a micro-batch share (a system prompt) once rather than once "
        "per row, and a whole prompt several rows repeat (a group's samples, gym turns from one state) once: the same "
        "logprobs and gradients for less compute where replies are short next to their prompts (gym: 8.6x with the "
        "batch in one micro-batch); ignored with gradient_checkpointing or several ranks",
    )


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
