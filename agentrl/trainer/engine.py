"""PolicyEngine: the policy model, optionally sharded with FSDP2, computing logprobs and taking optimizer steps.

One engine per rank. With a device mesh of more than one rank, every decoder layer and then the whole model are
wrapped with `fully_shard` (FSDP2) over a torch.distributed group (gloo on CPU, nccl on GPU); each rank gets its
own rows of the batch and gradients are averaged across ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.trainer.batch import PaddedBatch

LossFn = Callable[..., tuple[torch.Tensor, dict[str, float]]]


@dataclass
class EngineConfig:
    """Optimizer and memory settings of the policy engine."""

    lr: float = 1e-6
    weight_decay: float = 0.0
    warmup_steps: int = 0
    total_steps: int = 1000
    grad_clip: float = 1.0
    micro_batch_tokens: int = 8192
    dtype: str = "float32"
    gradient_checkpointing: bool = False


class PolicyEngine:
    """Teacher-forced logprobs and policy-gradient steps for a causal LM.

    Args:
        model: a transformers causal LM (already on its device).
        config: optimizer/memory settings.
        mesh: a 1-D `DeviceMesh` to shard over with FSDP2; None trains unsharded (one rank).
    """

    def __init__(self, model: torch.nn.Module, config: EngineConfig | None = None, mesh: Any = None):
        self.config = config or EngineConfig()
        self.mesh = mesh
        self.model = model
        if self.config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        if mesh is not None and mesh.size() > 1:
            _shard(model, mesh)
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step_count = 0
        self.world_size = mesh.size() if mesh is not None else 1

    def _lr_factor(self, step: int) -> float:
        warmup = self.config.warmup_steps
        return min(1.0, (step + 1) / warmup) if warmup else 1.0

    @torch.no_grad()
    def logprobs(self, batch: PaddedBatch) -> torch.Tensor:
        """Per-token logprobs of the response tokens, [B, R] (0 on padding)."""
        self.model.eval()
        parts = [self._response_logprobs(batch, rows) for rows in self._micro_batches(batch)]
        return torch.cat(parts, dim=0)

    def train_step(self, batch: PaddedBatch, loss_fn: LossFn) -> dict[str, float]:
        """One optimizer step over `batch`, cut into micro-batches by the token budget.

        Args:
            batch: the padded batch of this rank.
            loss_fn: `loss_fn(logprobs [b, R], rows) -> (loss, metrics)` for the rows of one micro-batch; the loss
                must already be normalized by the whole batch's denominators (see `PolicyLoss`'s `num_tokens`),
                so that micro-batch gradients add up to the batch's. Metrics are averaged by token share.
        """
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        metrics: dict[str, float] = {}
        for rows in self._micro_batches(batch):
            logp = self._response_logprobs(batch, rows)
            loss, micro_metrics = loss_fn(logp, rows)
            (loss * self.world_size).backward()  # FSDP averages gradients over ranks; the loss is a global sum
            share = token_share(batch, rows)
            for key, value in micro_metrics.items():  # losses are already parts of a sum; rates are averaged
                metrics[key] = metrics.get(key, 0.0) + (value if key.endswith("loss") else value * share)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.step_count += 1
        metrics["train/grad_norm"] = float(_full(grad_norm))
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]
        return metrics

    def _micro_batches(self, batch: PaddedBatch) -> Iterator[slice]:
        seq_len = batch.input_ids.shape[1]
        rows_per_micro = max(1, self.config.micro_batch_tokens // max(seq_len, 1))
        for start in range(0, batch.input_ids.shape[0], rows_per_micro):
            yield slice(start, min(start + rows_per_micro, batch.input_ids.shape[0]))

    def _response_logprobs(self, batch: PaddedBatch, rows: slice) -> torch.Tensor:
        input_ids = batch.input_ids[rows]
        out = self.model(
            input_ids=input_ids,
            attention_mask=batch.attention_mask[rows],
            position_ids=batch.position_ids[rows],
            use_cache=False,
        )
        p = batch.prompt_len
        logits = out.logits[:, p - 1 : -1, :].float()
        targets = input_ids[:, p:]
        logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        real = batch.attention_mask[rows][:, p:].to(logp.dtype)
        return logp * real

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The full (unsharded) state dict on CPU; with FSDP only rank 0 receives the tensors."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        if self.mesh is None or self.mesh.size() == 1:
            return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(self.model, options=options)


def _shard(model: torch.nn.Module, mesh: Any) -> None:
    from torch.distributed.fsdp import fully_shard

    for layer in _decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    inner = getattr(model, "model", model)
    layers = getattr(inner, "layers", None)
    return list(layers) if layers is not None else []


def _full(value: Any) -> torch.Tensor:
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def token_share(batch: PaddedBatch, rows: slice, total_tokens: float | None = None) -> float:
    """A micro-batch's share of the batch's loss tokens (for token-mean aggregation)."""
    total = total_tokens if total_tokens is not None else float(batch.response_mask.sum())
    return float(batch.response_mask[rows].sum()) / max(total, 1.0)


__all__ = ["EngineConfig", "PolicyEngine", "token_share"]
