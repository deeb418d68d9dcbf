"""Synchronous continuous-batching steps around one transformers causal LM.

`EngineCore` owns the running batch. `prefill(reqs)` runs the new prompts together (left padded), samples their
first token and merges the survivors into the running batch; `decode()` feeds every running row its last token,
samples the next one and retires finished rows. Both return the requests that finished. Rows of different LoRA
adapters (`adapters.Adapters`) share the batch; their prompts are prefilled per adapter. It is not thread-safe:
`HFEngine` calls it from its single engine thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from agentrl.rollout.servers.hf.adapters import Adapters
from agentrl.rollout.servers.hf.kvcache import KV, PaddedBatch, check_cache_supported, get_kv
from agentrl.rollout.servers.hf.request import Detokenizer, GenRequest
from agentrl.rollout.servers.hf.sampling import sample_next
from agentrl.rollout.servers.hf.stopping import check_stop
from agentrl.shared_prefix import MIN_SHARED_TOKENS, cache_argument, common_prefix, new_cache, prefix_once


class EngineCore:
    """The model, the running requests and their shared left-padded KV cache."""

    def __init__(
        self,
        model: PreTrainedModel,
        eos_ids: frozenset[int],
        detok: Detokenizer | None = None,
        pad_id: int = 0,
    ) -> None:
        self.model = model
        self.eos_ids = eos_ids
        self.detok = detok
        self.pad_id = pad_id
        self.device = next(model.parameters()).device
        self.running: list[GenRequest] = []
        self.batch: PaddedBatch | None = None
        self.adapters = Adapters(model)
        check_cache_supported(DynamicCache(config=model.config))

    def prefill(self, reqs: Sequence[GenRequest]) -> list[GenRequest]:
        """Prefill `reqs` together (those of each adapter together), sample their first token, merge the unfinished
        ones; return the finished.

        A prompt several of them repeat (a group's samples of one prompt, agents in the same state) runs once, and
        so does the prefix all the distinct prompts share.
        """
        by_adapter: dict[str | None, list[GenRequest]] = {}
        for req in reqs:
            by_adapter.setdefault(req.adapter, []).append(req)
        finished = []
        for adapter, group in by_adapter.items():
            with self.adapters.rows(adapter):
                finished += self._prefill(group)
        return finished

    def _prefill(self, reqs: list[GenRequest]) -> list[GenRequest]:
        prompts, row_prompt = _distinct([r.prompt_ids for r in reqs])
        kv, mask, last_logits = self._run_prompts(*self._left_pad(prompts))
        finished, keep = self._sample(last_logits[torch.tensor(row_prompt, device=self.device)], reqs)
        if keep:
            self._join(kv, mask, [row_prompt[i] for i in keep], [reqs[i] for i in keep])
        return finished

    def _run_prompts(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[KV, torch.Tensor, torch.Tensor]:
        """Run left-padded prompts; their keys/values, the mask over those columns, and each one's last logits.

        The prefix every prompt shares (a system prompt, a task's instructions) runs once, not once per prompt.
        """
        position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache, with_cache = new_cache(self.model)
        shared = common_prefix(input_ids, mask, input_ids.shape[1])
        if shared >= MIN_SHARED_TOKENS:
            out, mask, _ = prefix_once(self.model, input_ids, mask, position_ids, shared, cache, 1)
        else:
            out = self.model(
                input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=True, logits_to_keep=1,
                **with_cache,
            )  # fmt: skip
        return get_kv(cache), mask, out.logits[:, -1, :]

    def decode(self) -> list[GenRequest]:
        """One decode step for every running row; return the requests that finished."""
        if self.batch is None or not self.running:
            return []
        last = torch.tensor([[r.output_ids[-1]] for r in self.running], device=self.device)
        mask, position_ids = self.batch.decode_inputs()
        with self.adapters.rows([r.adapter for r in self.running]):
            out = self.model(
                input_ids=last,
                attention_mask=mask,
                position_ids=position_ids,
                **{cache_argument(self.model): self.batch.cache},
                use_cache=True,
            )
        self.batch.advance()
        finished, keep = self._sample(out.logits[:, -1, :], self.running)
        self._keep(keep)
        return finished

    def remove(self, reqs: Sequence[GenRequest]) -> None:
        """Drop `reqs` from the running batch (abort)."""
        gone = {id(r) for r in reqs}
        self._keep([i for i, r in enumerate(self.running) if id(r) not in gone])

    def clear(self) -> list[GenRequest]:
        """Drop every running request and the cache; return the dropped requests."""
        dropped, self.running, self.batch = self.running, [], None
        return dropped

    def _sample(self, logits: torch.Tensor, reqs: list[GenRequest]) -> tuple[list[GenRequest], list[int]]:
        """Sample one token per row; return (finished requests, indices of rows that go on)."""
        sampled = sample_next(logits, reqs)
        finished: list[GenRequest] = []
        keep: list[int] = []
        for i, req in enumerate(reqs):
            req.append(sampled.token_ids[i], sampled.logprobs[i], sampled.top[i])
            if check_stop(req, self.eos_ids, self.detok):
                finished.append(req)
            else:
                keep.append(i)
        return finished, keep

    def _join(self, kv: KV, mask: torch.Tensor, keep: list[int], reqs: list[GenRequest]) -> None:
        """Add the `keep` rows of a prefilled batch (a row may be taken more than once) to the running batch."""
        if keep != list(range(mask.shape[0])):
            rows = torch.tensor(keep, device=self.device)
            kv = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in kv]
            mask = mask.index_select(0, rows)
        positions = mask.sum(dim=1)
        if self.batch is None:
            self.batch = PaddedBatch([kv], [mask], positions)
        else:
            self.batch = self.batch.merge(kv, mask, positions)
        self.running = self.running + reqs

    def _keep(self, keep: list[int]) -> None:
        if len(keep) == len(self.running):
            return
        if not keep:
            self.clear()
            return
        assert self.batch is not None
        self.batch = self.batch.select(torch.tensor(keep, device=self.device))
        self.running = [self.running[i] for i in keep]

    def _left_pad(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-pad token lists into input_ids [B, L] and a 0/1 attention mask [B, L]."""
        length = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), length), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, length - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, length - len(prompt) :] = 1
        return ids.to(self.device), mask.to(self.device)


def _distinct(prompts: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """The distinct prompts, in order of first appearance, and each prompt's index into them."""
    index: dict[tuple[int, ...], int] = {}
    row_prompt = [index.setdefault(tuple(p), len(index)) for p in prompts]
    return [list(p) for p in index], row_prompt
