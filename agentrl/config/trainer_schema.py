"""`trainer:`: the training loop, its estimator, loss, optimizer and weight sync."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrl.config.section import _Section


class TrainerConfig(_Section):
    steps: int = Field(10, ge=1, description="training steps")
    mode: Literal["sync", "async", "fully_async"] = Field(
        "sync",
        description="on-policy; async: the next batch rolls out while this one trains; fully_async: rollout never "
        "stops and each step takes the next complete groups, at most max_staleness versions old",
    )
    max_staleness: int = Field(1, ge=0, description="async / fully_async: policy versions a sample may lag")
    stale_samples: Literal["correct", "drop", "regenerate"] = Field(
        "drop",
        description="async / fully_async: a sample older than max_staleness at its step is dropped (the bound holds), "
        "regenerated on the current policy (fully_async), or trained anyway with a TIS correction (correct: trains "
        "groups of any age, weighted by at most tis_cap); each is counted in rollout/stale_*",
    )
    on_breach: Literal["stop", "warn"] = Field(
        "stop",
        description="a step whose data breaks the exactness contract (tokens of unknown version, past the staleness "
        "bound) stops the run with what to change (stop), or prints it once and goes on (warn)",
    )
    tis_cap: float | None = Field(
        None,
        gt=0,
        description="truncated importance sampling cap on π_trainer/π_rollout; None: 2.0 in async and fully_async "
        "(their tokens are off-policy within the bound too), no correction in sync",
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
    stall_timeout_s: float | None = Field(
        None,
        gt=0,
        description="stop the run (saving its state, with a report of what each task waits on) when no request, "
        "trajectory or step completes for this long; None: derived from the run's own steps (3x the slowest so far, "
        "at least 300 s; before the first, twice rollout.trajectory_timeout_s)",
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
    tree_prefix_weight: Literal["once", "leaves"] = Field(
        "once",
        description="tree_grpo: a turn shared by several leaves is trained once, at weight one (once), or at the "
        "number of leaves below it (leaves: the paper's weight, as if each leaf trained it)",
    )
    objective: Literal["rl", "sft"] = Field(
        "rl",
        description="rl: the policy gradient on the loop's rollouts (advantage, loss); sft: supervised fine-tuning "
        "on data.demonstrations, the negative log-likelihood of the assistant's tokens (aggregated by loss_agg, "
        "token-mean by default), with held-out evaluation by the recipe's own loop and reward every eval_every steps",
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
    entropy_choices_weighted: bool = Field(
        False,
        description="with entropy_choices: the choices' entropy times the probability that the first token is one "
        "of them. Renormalized alone, a reply that begins with another word and names a choice later (\"You're "
        'right") keeps the full bonus while the policy settles on it everywhere; weighted, it earns none, and the '
        "bonus pulls replies back onto the choices",
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
        "batch in one micro-batch); composes with gradient_checkpointing and several ranks; refused, with a warning, "
        "for models with sliding-window layers",
    )
