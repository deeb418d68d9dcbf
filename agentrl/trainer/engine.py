"""PolicyEngine: the policy model, optionally sharded with FSDP2, computing logprobs and taking optimizer steps.

One engine per rank. With a device mesh of more than one rank, every decoder layer and then the whole model are
wrapped with `fully_shard` (FSDP2) over a torch.distributed group (gloo on CPU, nccl on GPU); each rank gets its
own rows of the batch and gradients are averaged across ranks. Every rank runs the same number of micro-batches
(FSDP2 gathers parameters collectively in each forward), padding with zero-weight ones where it has fewer rows.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.shared_prefix import keep_cache_when_checkpointed, unshareable_reason
from agentrl.trainer.batch import PaddedBatch
from agentrl.trainer.forward import (
    response_logprobs,
    response_logprobs_and_choice_entropy,
    response_logprobs_and_entropy,
    row_spans,
)
from agentrl.trainer.fsdp_gather import release_gathered
from agentrl.trainer.host_memory import map_large_allocations, release_freed_memory
from agentrl.weights_io import tied_aliases

logger = logging.getLogger(__name__)

LossFn = Callable[..., tuple[torch.Tensor, dict[str, float]]]


@dataclass
class EngineConfig:
    """Optimizer and memory settings of the policy engine.

    Attributes:
        dtype: compute dtype of forward/backward (autocast); master weights and optimizer state stay in the
            model's dtype. "auto": bfloat16 on GPU, float32 on CPU.
    """

    lr: float = 1e-6
    weight_decay: float = 0.0
    warmup_steps: int = 0
    total_steps: int = 1000
    lr_schedule: str = "constant"
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    micro_batch_tokens: int = 4096
    dtype: str = "float32"
    gradient_checkpointing: bool = False
    share_prompt_prefix: bool = False
    entropy_choices_weighted: bool = False


def lr_factor(step: int, warmup_steps: int, total_steps: int, schedule: str, min_ratio: float) -> float:
    """LR multiplier of optimizer step `step` (0-based): linear warmup, then constant or decay to `min_ratio`.

    The decay runs from the end of warmup to the last step (`total_steps - 1`), which gets `min_ratio`.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = total_steps - 1 - warmup_steps
    progress = min(1.0, (step - warmup_steps) / span) if span > 0 else 1.0
    if schedule == "linear":
        shape = 1.0 - progress
    elif schedule == "cosine":
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown lr_schedule {schedule!r}; use constant, linear or cosine")
    return min_ratio + (1.0 - min_ratio) * shape


def engine_config(cfg: TrainerConfig) -> EngineConfig:
    """The engine settings of a run's trainer config."""
    return EngineConfig(
        lr=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        total_steps=cfg.steps,
        lr_schedule=cfg.lr_schedule,
        min_lr_ratio=cfg.min_lr_ratio,
        grad_clip=cfg.grad_clip,
        micro_batch_tokens=cfg.micro_batch_tokens,
        dtype=cfg.dtype,
        gradient_checkpointing=cfg.gradient_checkpointing,
        share_prompt_prefix=cfg.share_prompt_prefix,
        entropy_choices_weighted=cfg.entropy_choices_weighted,
    )


class PolicyEngine:
    """Teacher-forced logprobs and policy-gradient steps for a causal LM.

    Args:
        model: a transformers causal LM (or a peft model around one), already on its device.
        config: optimizer/memory settings.
        mesh: a 1-D `DeviceMesh` to shard over with FSDP2; None trains unsharded (one rank).
    """

    def __init__(self, model: torch.nn.Module, config: EngineConfig | None = None, mesh: Any = None):
        self.config = config or EngineConfig()
        self.mesh = mesh
        self.model = model
        self.device = next(model.parameters()).device
        if self.device.type == "cpu":
            map_large_allocations()  # else glibc keeps every step's peak of activations (see host_memory)
        if self.config.gradient_checkpointing:
            _enable_checkpointing(model)
        self.share_prefix = self._can_share_prefix(model)
        self.world_size = mesh.size() if mesh is not None else 1
        if self.world_size > 1:
            shard_model(model, mesh)
        params = [p for p in model.parameters() if p.requires_grad]
        # the fused kernel (CPU and CUDA) is several times faster than the per-tensor loop, same update
        fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
        self.optimizer = torch.optim.AdamW(
            params, lr=self.config.lr, weight_decay=self.config.weight_decay, fused=fused or None
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step_count = 0

    def _lr_factor(self, step: int) -> float:
        c = self.config
        return lr_factor(step, c.warmup_steps, c.total_steps, c.lr_schedule, c.min_lr_ratio)

    @torch.no_grad()
    def logprobs(self, batch: PaddedBatch, model: torch.nn.Module | None = None) -> torch.Tensor:
        """Per-token logprobs of the response tokens, [B, R] (0 on padding), by `model` (default: the policy)."""
        model = model if model is not None else self.model
        model.eval()
        parts = []
        for rows, real in self.micro_batches(batch):  # padding micro-batches run too (FSDP), and are dropped
            logp = response_logprobs(model, batch, rows, self.compute_dtype, share_prefix=self.share_prefix)
            if real:
                parts.append(logp)
        return torch.cat(parts, dim=0)

    def train_step(
        self,
        batch: PaddedBatch,
        loss_fn: LossFn,
        last: bool = True,
        entropy_grad: bool = False,
        entropy_choice_ids: list[int] | None = None,
    ) -> dict[str, float]:
        """One optimizer step over `batch`, cut into micro-batches by the token budget.

        `last=False` (a PPO mini-batch before the batch's last one) leaves the learning-rate schedule and the step
        count where they are: they advance once per training step.

        Args:
            batch: the padded batch of this rank.
            loss_fn: `loss_fn(logprobs [b, R], rows) -> (loss, metrics)` for the rows of one micro-batch; the loss
                must already be normalized by the whole batch's denominators (see `PolicyLoss`'s `num_tokens`),
                so that micro-batch gradients add up to the batch's. Metrics are averaged by token share, except
                `*loss` and `kl`, which are parts of a sum and are added.
            entropy_grad: call `loss_fn(logprobs, rows, entropy=...)` with the policy's entropy at each response
                token [b, R], with its gradient (for an entropy bonus).
            entropy_choice_ids: with `entropy_grad`, the entropy passed is instead the entropy over these tokens
                (renormalized; with `config.entropy_choices_weighted`, times their probability) at the first token
                of each turn, 0 elsewhere (`agentrl.trainer.choices`); its mean over the turns is the
                `choice_entropy` metric.
        """
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        dtype, share = self.compute_dtype, self.share_prefix
        for rows, real in self.micro_batches(batch):
            entropy: list[float] = []
            if entropy_grad and entropy_choice_ids:
                logp, turn_entropy, choice_metric = response_logprobs_and_choice_entropy(
                    self.model,
                    batch,
                    rows,
                    dtype,
                    entropy_choice_ids,
                    entropy_out=entropy,
                    share_prefix=share,
                    weighted=self.config.entropy_choices_weighted,
                )
                loss, micro_metrics = loss_fn(logp, rows, entropy=turn_entropy)
                micro_metrics = {**micro_metrics, "choice_entropy": choice_metric}
            elif entropy_grad:
                logp, token_entropy = response_logprobs_and_entropy(self.model, batch, rows, dtype, share)
                loss, micro_metrics = loss_fn(logp, rows, entropy=token_entropy)
                mask = batch.attention_mask[rows, batch.prompt_len :].bool()
                entropy.append(float(token_entropy.detach()[mask].mean()) if mask.any() else 0.0)
            else:
                logp = response_logprobs(self.model, batch, rows, dtype, entropy_out=entropy, share_prefix=share)
                loss, micro_metrics = loss_fn(logp, rows)
            micro_metrics = {**micro_metrics, "entropy": entropy[0]}
            # FSDP averages gradients over ranks and the loss is a global sum; padding micro-batches weigh 0
            (loss * (self.world_size if real else 0.0)).backward()
            if self.share_prefix and self.world_size > 1:
                release_gathered(self.model)  # a shared-prefix micro-batch kept them gathered through its backward
            if not real:  # same metric keys on every rank (they are reduced together), no values
                micro_metrics = dict.fromkeys(micro_metrics, 0.0)
            _accumulate(metrics, micro_metrics, token_share(batch, rows) if real else 0.0)
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in self.model.parameters() if p.requires_grad], self.config.grad_clip
        )
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]  # the LR this step used
        self.optimizer.step()
        if last:
            self.scheduler.step()
            self.step_count += 1
        metrics["train/grad_norm"] = float(_full(grad_norm))
        if self.device.type == "cpu":
            release_freed_memory()
        return metrics

    def _can_share_prefix(self, model: torch.nn.Module) -> bool:
        """Whether forwards run the rows' shared prompt prefix once: asked for, and the model supports it (with
        gradient checkpointing its layers are told to keep the cache: each forward's is replay-safe)."""
        if not self.config.share_prompt_prefix:
            return False
        reason = unshareable_reason(model, self.config.gradient_checkpointing)
        if reason is not None:
            logger.warning("trainer.share_prompt_prefix is off: %s; every row runs its whole prompt", reason)
            return False
        if self.config.gradient_checkpointing:
            keep_cache_when_checkpointed(model)
        return True

    @property
    def compute_dtype(self) -> torch.dtype:
        """The autocast dtype of forward/backward."""
        name = self.config.dtype
        if name == "auto":
            return torch.bfloat16 if self.device.type == "cuda" else torch.float32
        return getattr(torch, name)

    def micro_batches(self, batch: PaddedBatch) -> list[tuple[slice, bool]]:
        """Contiguous row slices of at most `micro_batch_tokens` padded tokens each, and whether each is real.

        A micro-batch costs its rows x its own longest row (`response_logprobs` trims the batch's padding), so
        rows of similar length belong together: `policy_step` hands the rows over sorted by length. Under FSDP
        every rank must run as many forwards as the others: a rank with fewer micro-batches than the most any
        rank has runs padding ones (row 0, flagged not real).
        """
        slices = token_budget_slices(row_spans(batch.attention_mask, batch.prompt_len), self.config.micro_batch_tokens)
        count = len(slices)
        if self.world_size > 1:
            count = _max_over_ranks(count, self.mesh, self.device)
        return [(rows, True) for rows in slices] + [(slice(0, 1), False)] * (count - len(slices))

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """A snapshot of the full (unsharded) state dict on CPU, which training on leaves unchanged.

        Tied aliases (`lm_head.weight` when tied to the input embeddings) are left out, as `save_pretrained`
        does: loaders re-tie them, and the weights to send shrink (by 17% for SmolLM2-135M). With FSDP every
        rank must call it and only rank 0 gets tensors.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        aliases = tied_aliases(self.model)
        if self.world_size == 1:
            state = self.model.state_dict()
            return {k: v.detach().to("cpu", copy=True) for k, v in state.items() if k not in aliases}
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return {k: v for k, v in get_model_state_dict(self.model, options=options).items() if k not in aliases}

    def full_gradients(self) -> dict[str, torch.Tensor]:
        """The last step's full gradients by parameter name, on CPU (for tests and debugging; collective)."""
        params = [(name, p) for name, p in self.model.named_parameters() if p.grad is not None]
        return {name: _full(p.grad).detach().cpu().clone() for name, p in params}


def _enable_checkpointing(model: torch.nn.Module) -> None:
    """Activation checkpointing, non-reentrant (gradients must reach tensors a layer gets by keyword: a shared
    prefix's keys and values); `activation_checkpointing_enable` where transformers has it (its old name warns)."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def token_budget_slices(spans: list[tuple[int, int]], budget: int) -> list[slice]:
    """Cut rows, in order, into slices whose rows x width stays within `budget` tokens; a row's span is the
    [start, end) of its columns, a slice's width that of the union of its rows' spans (a row wider than the
    budget gets a slice of its own)."""
    out: list[slice] = []
    first = 0
    start, end = 0, 0
    for i, (row_start, row_end) in enumerate(spans):
        if i == first:
            start, end = row_start, row_end
            continue
        wider = min(start, row_start), max(end, row_end)
        if (i - first + 1) * (wider[1] - wider[0]) > budget:
            out.append(slice(first, i))
            first, (start, end) = i, (row_start, row_end)
        else:
            start, end = wider
    if spans:
        out.append(slice(first, len(spans)))
    return out


def batch_to(batch: PaddedBatch, device: torch.device) -> PaddedBatch:
    """The batch with every tensor on `device`."""
    moved = {f.name: getattr(batch, f.name) for f in fields(batch)}
    return replace(batch, **{k: v.to(device) for k, v in moved.items() if isinstance(v, torch.Tensor)})


def shard_model(model: torch.nn.Module, mesh: Any) -> None:
    """FSDP2: `fully_shard` every decoder layer, then the whole model."""
    from torch.distributed.fsdp import fully_shard

    for layer in _decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # unwrap peft
    inner = getattr(inner, "model", inner)
    layers = getattr(inner, "layers", None)
    return list(layers) if layers is not None else []


def _max_over_ranks(value: int, mesh: Any, device: torch.device) -> int:
    import torch.distributed as dist

    t = torch.tensor([value], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=mesh.get_group())
    return int(t.item())


def _accumulate(metrics: dict[str, float], micro: dict[str, float], share: float) -> None:
    for key, value in micro.items():  # losses and kl are already parts of a sum; rates are averaged
        metrics[key] = metrics.get(key, 0.0) + (value if is_additive(key) else value * share)


def is_additive(key: str) -> bool:
    """Whether a loss metric is a part of a global sum (added over micro-batches and ranks), not a rate."""
    name = key.removeprefix("train/")
    return name.endswith("loss") or name in ("kl", "entropy_bonus")


def _full(value: Any) -> torch.Tensor:
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def token_share(batch: PaddedBatch, rows: slice, total_tokens: float | None = None) -> float:
    """A micro-batch's share of the batch's loss tokens (for token-mean aggregation)."""
    total = total_tokens if total_tokens is not None else float(batch.response_mask.sum())
    return float(batch.response_mask[rows].sum()) / max(total, 1.0)


__all__ = [
    "EngineConfig",
    "PolicyEngine",
    "batch_to",
    "engine_config",
    "is_additive",
    "response_logprobs",
    "shard_model",
    "token_share",
]
