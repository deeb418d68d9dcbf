"""`rollout:`: the servers, sampling, scheduling and tree rollouts (`rollout.tree`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentrl.config.section import _Section


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
        "their mean surprisal (-logprob: an estimate of the policy's entropy there) at least this many nats (or "
        "before it, as ARPO branches: resample_uncertain), up to max_branch_points times",
    )
    entropy_tokens: int = Field(16, ge=1, description="with entropy: the turn's first tokens it averages over")
    resample_uncertain: bool = Field(
        False,
        description="with entropy: fork at the state before the uncertain turn rather than after it, so that the "
        "children sample that turn again (ARPO's partial sampling; the turn as played is the first child's). Each "
        "turn that may fork copies the episode's state first (a container's filesystem with a sandbox), and the "
        "copy is freed when the turn was certain",
    )
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
    child_temperature: float | None = Field(
        None,
        gt=0,
        description="sample the children of a branch point after a turn (not those before the first turn, which "
        "are first turns as flat's are) at this temperature rather than rollout.temperature, so that siblings from "
        "one state differ more; their tokens keep it, and the trainer scores them at it",
    )
    fill: bool = Field(
        False,
        description="keep each tree at width^depth leaves: an episode that ends before a branch point below it "
        "hands the leaves it would have grown back, and the tree starts that many more first branches from the "
        "prompt (branch_turns must start with 0; with every or entropy, a root that did not fork before its first "
        "turn becomes the first of those branches); a full tree then has as many episodes as flat rollout.n would, "
        "at no more tokens",
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
        if self.fill and not rules:
            raise ValueError(
                "rollout.tree.fill keeps a tree's leaves, but no tree is set: set rollout.tree.branch_turns (starting "
                "with 0, e.g. [0,1]), every or entropy, or unset fill"
            )
        if self.fill and turns and turns[0] != 0:
            raise ValueError(
                "rollout.tree.fill starts new first branches from the prompt, so the tree must branch there: set "
                f"rollout.tree.branch_turns to start with 0 (e.g. [0,1]), got {turns}"
            )
        if self.resample_uncertain and self.entropy is None:
            raise ValueError(
                "rollout.tree.resample_uncertain forks before a turn the policy was uncertain of, but no "
                "rollout.tree.entropy is set: set it (e.g. rollout.tree.entropy=1.0) or unset resample_uncertain"
            )
        if not rules and self.child_temperature is not None:
            raise ValueError(
                "rollout.tree.child_temperature samples the children of a fork, but no tree is set: set "
                "rollout.tree.branch_turns, every or entropy, or unset child_temperature"
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
    job_timeout_s: float | None = Field(
        None,
        gt=0,
        description="deadline of one job on a rollout worker: past it the worker is taken as stuck, restarted, and "
        "its jobs run elsewhere; None: 5x the slowest job so far, at least twice trajectory_timeout_s",
    )
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
    stall_timeout_s: float | None = Field(
        None,
        gt=0,
        description="seconds a replica may hold requests open without completing any before it is cut off (marked "
        "dead, its requests retried on another replica, caught up when it answers); None: derived from the requests' "
        "own durations (5x the slowest so far, at least 60 s; request_timeout_s before the first completes)",
    )
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
    weight_delta: Literal["auto", "always", "never"] = Field(
        "auto",
        description="hf servers (and vLLM servers agentrl starts: its worker extension) get the weights cast to their "
        "dtype, and after the first push only what changed since "
        "the weights each holds, bit for bit (agentrl.weight_delta; a full push where it holds other weights). auto: "
        "deltas to bf16/fp16 servers where the weights travel (an upload over HTTP, the object store, "
        "rollout.shared_weights_dir), else the full cast (in fp32 every element changes each step; through this "
        "machine's shared memory a file is cheaper than a delta); always: deltas everywhere; never: the trainer's full "
        "weights every push",
    )
    weight_push_timeout_s: float | None = Field(
        None,
        gt=0,
        description="deadline of one server's weight push; a server past it is routed around and caught up when it "
        "answers again. None: derived from the run's own pushes (5x the slowest so far, at least 30 s; first 600 s)",
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

    @model_validator(mode="after")
    def _job_outlives_its_trajectories(self) -> RolloutConfig:
        if self.job_timeout_s is not None and self.job_timeout_s < self.trajectory_timeout_s:
            raise ValueError(
                f"rollout.job_timeout_s ({self.job_timeout_s:g} s) is below rollout.trajectory_timeout_s "
                f"({self.trajectory_timeout_s:g} s): a healthy worker would be killed mid-trajectory; set it to at "
                "least the trajectory limit, or leave it unset (derived from the run's own jobs)"
            )
        return self
