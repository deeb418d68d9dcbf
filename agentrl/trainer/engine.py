"""PolicyEngine: the policy model, optionally sharded with FSDP2, computing logprobs and taking optimizer steps.

One engine per rank. With a device mesh of more than one rank, every decoder layer and then the whole model are
wrapped with `fully_shard` (FSDP2) over a torch.distributed group (gloo on CPU, nccl on GPU); each rank gets its
own rows of the batch and gradients are averaged across ranks. Every rank runs the same number of micro-batches
(FSDP2 gathers parameters collectively in each forward), padding with zero-weight ones where it has fewer rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.trainer.batch import PaddedBatch
from agentrl.trainer.choices import choice_entropy, turn_first_tokens
from agentrl.trainer.host_memory import map_large_allocations, release_freed_memory
from agentrl.trainer.shared_prefix import MIN_SHARED_TOKENS, common_prefix, forward_with_shared_prefix

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
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
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
                (renormalized) at the first token of each turn, 0 elsewhere (`agentrl.trainer.choices`); its mean
                over the turns is the `choice_entropy` metric.
        """
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        dtype, share = self.compute_dtype, self.share_prefix
        for rows, real in self.micro_batches(batch):
            entropy: list[float] = []
            if entropy_grad and entropy_choice_ids:
                logp, turn_entropy, choice_metric = response_logprobs_and_choice_entropy(
                    self.model, batch, rows, dtype, entropy_choice_ids, entropy_out=entropy, share_prefix=share
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

    @property
    def share_prefix(self) -> bool:
        """Whether forwards run the rows' shared prompt prefix once: asked for, one rank (two forwards before a
        backward are untested under FSDP) and no gradient checkpointing (a checkpointed model drops the cache)."""
        return self.config.share_prompt_prefix and not self.config.gradient_checkpointing and self.world_size == 1

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
        slices = token_budget_slices(_row_spans(batch.attention_mask, batch.prompt_len), self.config.micro_batch_tokens)
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


def response_logprobs(
    model: torch.nn.Module,
    batch: PaddedBatch,
    rows: slice,
    dtype: torch.dtype,
    entropy_out: list[float] | None = None,
    share_prefix: bool = False,
) -> torch.Tensor:
    """log π(response token | prefix) for `rows` of `batch`, [b, R] in float32, 0 on padding.

    With `entropy_out`, the mean entropy of the policy over the rows' real response tokens is appended to it.
    `share_prefix`: run the prompt prefix all the rows share once (the same result, less compute).
    """
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    if entropy_out is not None:
        entropy_out.append(_mean_entropy(all_logp, real))
    return _pad_to_batch(logp * real, batch)


def response_logprobs_and_entropy(
    model: torch.nn.Module, batch: PaddedBatch, rows: slice, dtype: torch.dtype, share_prefix: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """`response_logprobs`, and the policy's entropy H(π(· | prefix)) at each response position [b, R], both
    with their gradient, 0 on padding. The entropy keeps a [b, R, V] product for the backward pass."""
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    entropy = -(all_logp.exp() * all_logp).sum(-1)
    return _pad_to_batch(logp * real, batch), _pad_to_batch(entropy * real, batch)


def response_logprobs_and_choice_entropy(
    model: torch.nn.Module,
    batch: PaddedBatch,
    rows: slice,
    dtype: torch.dtype,
    choice_ids: list[int],
    entropy_out: list[float] | None = None,
    share_prefix: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """`response_logprobs`; the entropy over `choice_ids` (renormalized) at the first generated token of each
    turn, 0 elsewhere, [b, R] with its gradient; and that entropy's mean over the turns. With `entropy_out`, the
    vocabulary-wide mean entropy is appended to it, as `response_logprobs` does."""
    all_logp, logp, real = _response_forward(model, batch, rows, dtype, share_prefix)
    if entropy_out is not None:
        entropy_out.append(_mean_entropy(all_logp, real))
    firsts = turn_first_tokens(batch.response_mask[rows, : logp.shape[1]]).to(logp.dtype) * real
    entropy = choice_entropy(all_logp, choice_ids) * firsts
    mean = float(entropy.detach().sum() / firsts.sum()) if firsts.any() else 0.0
    return _pad_to_batch(logp * real, batch), _pad_to_batch(entropy, batch), mean


def _response_forward(
    model: torch.nn.Module, batch: PaddedBatch, rows: slice, dtype: torch.dtype, share_prefix: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The log-distributions [b, R', V] at the response positions of `rows`, the response tokens' logprobs
    [b, R'] and their real-token mask, over the filled columns only (R' ≤ R). `share_prefix`: run the prompt
    prefix all the rows share once (`agentrl.trainer.shared_prefix`)."""
    # Only the columns some row of `rows` fills are run: the batch is padded to its longest row, and a
    # micro-batch of short rows would otherwise pay for that row's length in padding.
    start, end = _filled_columns(batch.attention_mask[rows], batch.prompt_len)
    input_ids = batch.input_ids[rows, start:end]
    p = batch.prompt_len - start
    mask, positions = batch.attention_mask[rows, start:end], batch.position_ids[rows, start:end]
    # The LM head runs only where a response token is predicted: over a long prompt it was most of the logits'
    # compute and memory (vocabulary-sized rows that were sliced off unused).
    keep = input_ids.shape[1] - p + 1
    shared = common_prefix(input_ids, mask, p) if share_prefix else 0
    with torch.autocast(input_ids.device.type, dtype=dtype, enabled=dtype != torch.float32):
        if shared >= MIN_SHARED_TOKENS:
            out = forward_with_shared_prefix(model, input_ids, mask, positions, shared, keep)
        else:
            out = model(
                input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False, logits_to_keep=keep
            )
    all_logp = torch.log_softmax(out.logits[:, :-1, :].float(), dim=-1)
    logp = all_logp.gather(-1, input_ids[:, p:].unsqueeze(-1)).squeeze(-1)
    real = batch.attention_mask[rows, batch.prompt_len : end].to(logp.dtype)
    return all_logp, logp, real


def _pad_to_batch(values: torch.Tensor, batch: PaddedBatch) -> torch.Tensor:
    """[b, R'] response values padded with 0 to the batch's response width R."""
    width = batch.input_ids.shape[1] - batch.prompt_len
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))


def _row_spans(attention_mask: torch.Tensor, prompt_len: int) -> list[tuple[int, int]]:
    """Each row's `_filled_columns`, computed for all rows at once (one device sync, not one per row)."""
    width = attention_mask.shape[1]
    real = attention_mask.bool()
    filled = real.any(dim=1)
    first = torch.where(filled, real.int().argmax(dim=1), width)
    last = torch.where(filled, width - 1 - real.int().flip(1).argmax(dim=1), prompt_len)
    starts = first.clamp(max=prompt_len - 1)
    ends = torch.maximum(last + 1, torch.full_like(last, prompt_len + 1)).clamp(max=width)
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _filled_columns(attention_mask: torch.Tensor, prompt_len: int) -> tuple[int, int]:
    """[start, end) of the columns where some row has a real token; always the prompt's last column and the
    first response column (left-padded prompts end at `prompt_len`, right-padded responses start there)."""
    filled = attention_mask.any(dim=0).nonzero().flatten().tolist()
    start = min(filled[0], prompt_len - 1) if filled else prompt_len - 1
    end = max(filled[-1] + 1, prompt_len + 1) if filled else prompt_len + 1
    return start, min(end, attention_mask.shape[1])


@torch.no_grad()
def _mean_entropy(all_logp: torch.Tensor, real: torch.Tensor) -> float:
    """Mean entropy over the real tokens of log-distributions [b, R, V], one row at a time (bounded memory)."""
    total = sum(float((-(row.exp() * row).sum(-1) * mask).sum()) for row, mask in zip(all_logp, real, strict=True))
    return total / max(float(real.sum()), 1.0)


def tied_aliases(model: torch.nn.Module) -> set[str]:
    """State-dict names whose tensor is the very parameter of an earlier name (tied weights)."""
    seen: set[int] = set()
    aliases = set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:
            aliases.add(name)
        seen.add(id(tensor))
    return aliases


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
    "tied_aliases",
    "token_share",
]
