"""Discriminative reward model: a transformers sequence-classification model scoring (prompt, response).

Locally (`model: <folder or cached hub id>`, on CPU or GPU) or behind an HTTP endpoint (`url:`, served by
`python -m agentrl.rewards.server`). The conversation is rendered with the tokenizer's chat template when it
has one (prompt messages + the answer as the assistant turn), else encoded as a (question, answer) text pair.
The score is the logit of a single-label head, or the softmax probability of `label` for a multi-label head.

    - {name: rm, type: reward_model, weight: 0.5, model: /models/my-rm, batch_size: 16, normalize: sigmoid}
"""

from __future__ import annotations

from typing import Any

from agentrl.models import from_pretrained
from agentrl.rewards.base import RewardComponent, RewardError, RewardInput, RewardResult
from agentrl.rewards.hf import LazyModel, chunks, resolve_device, resolve_dtype

Pair = tuple[list[dict[str, Any]], str]
"""(prompt messages as OpenAI dicts, response text)."""


class SequenceClassifierScorer:
    """A local sequence-classification reward model, loaded lazily, scoring batches of (prompt, response).

    Args:
        model: folder (or cached hub id) of an `AutoModelForSequenceClassification` checkpoint.
        device: `auto`, `cpu`, `cuda`, `cuda:1`, ...
        dtype: `auto` (bfloat16 on GPU, float32 on CPU) or a torch dtype name.
        max_length: tokens kept per item (the start of long conversations is cut, the answer kept).
        label: the class whose probability is the score, for heads with several labels (default the last).
    """

    def __init__(
        self, model: str, device: str = "auto", dtype: str = "auto", max_length: int = 2048, label: int | None = None
    ) -> None:
        self.model_name = model
        self.device = device
        self.dtype = dtype
        self.max_length = max_length
        self.label = label
        self._model = LazyModel(self._load)

    def _load(self) -> tuple[Any, Any]:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        device = resolve_device(self.device)
        tokenizer = AutoTokenizer.from_pretrained(self.model_name)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        tokenizer.padding_side = "right"  # positions of real tokens stay those of the unpadded sequence
        tokenizer.truncation_side = "left"
        model = from_pretrained(
            AutoModelForSequenceClassification, self.model_name, dtype=resolve_dtype(self.dtype, device)
        )
        model.config.pad_token_id = tokenizer.pad_token_id
        return tokenizer, model.to(device).eval()

    def score(self, pairs: list[Pair], batch_size: int = 8) -> list[float]:
        """Scores of the pairs, computed `batch_size` at a time (sync; thread-safe)."""
        return self._model.call(self._score, pairs, batch_size)

    async def ascore(self, pairs: list[Pair], batch_size: int = 8) -> list[float]:
        """`score` in a worker thread."""
        return await self._model.acall(self._score, pairs, batch_size)

    def _score(self, state: tuple[Any, Any], pairs: list[Pair], batch_size: int) -> list[float]:
        import torch

        tokenizer, model = state
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][1]) + sum(len(str(m)) for m in pairs[i][0]))
        scores: dict[int, float] = {}
        for idx in chunks(order, batch_size):
            batch = self._encode(tokenizer, [pairs[i] for i in idx]).to(model.device)
            with torch.inference_mode():
                logits = model(**batch).logits.float()
            values = logits[:, 0] if logits.shape[-1] == 1 else logits.softmax(-1)[:, self._label(logits)]
            scores.update(zip(idx, values.tolist(), strict=True))
        return [scores[i] for i in range(len(pairs))]

    def _label(self, logits: Any) -> int:
        return logits.shape[-1] - 1 if self.label is None else self.label

    def _encode(self, tokenizer: Any, pairs: list[Pair]) -> Any:
        common = {"padding": True, "truncation": True, "max_length": self.max_length, "return_tensors": "pt"}
        if getattr(tokenizer, "chat_template", None):
            texts = [
                tokenizer.apply_chat_template([*msgs, {"role": "assistant", "content": resp}], tokenize=False)
                for msgs, resp in pairs
            ]
            return tokenizer(texts, add_special_tokens=False, **common)
        questions = ["\n\n".join(str(m.get("content") or "") for m in msgs) for msgs, _ in pairs]
        return tokenizer(questions, [resp for _, resp in pairs], **{**common, "truncation": "only_first"})


class RewardModelComponent(RewardComponent):
    """The discriminative reward model as a pipeline component (batched).

    Args:
        model: local model folder or cached hub id (give this or `url`).
        url: base URL of a reward-model server (`python -m agentrl.rewards.server`), e.g. http://host:8001.
        batch_size: items per forward pass.
        request_timeout_s: HTTP timeout of one batch request (`url` only).
        device, dtype, max_length, label: see `SequenceClassifierScorer`.
    """

    batched = True

    def __init__(
        self,
        model: str | None = None,
        url: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        max_length: int = 2048,
        label: int | None = None,
        request_timeout_s: float = 300.0,
    ) -> None:
        if (model is None) == (url is None):
            raise ValueError("give exactly one of `model` (a local reward model) or `url` (a reward-model server)")
        self.url = url.rstrip("/") if url else None
        self.batch_size = batch_size
        self.request_timeout_s = request_timeout_s
        self.scorer = SequenceClassifierScorer(model, device, dtype, max_length, label) if model else None

    async def ascore_batch(self, inps: list[RewardInput]) -> list[RewardResult]:
        pairs = [([m.to_openai() for m in inp.prompt_messages], inp.answer) for inp in inps]
        if self.scorer is not None:
            scores = await self.scorer.ascore(pairs, self.batch_size)
        else:
            scores = await self._remote(pairs)
        source = self.url or self.scorer.model_name  # type: ignore[union-attr]
        return [RewardResult(s, {"model": source}) for s in scores]

    async def _remote(self, pairs: list[Pair]) -> list[float]:
        import httpx

        body = {"items": [{"messages": msgs, "response": resp} for msgs, resp in pairs]}
        async with httpx.AsyncClient(timeout=self.request_timeout_s) as client:
            response = await client.post(f"{self.url}/score", json=body)
        if response.status_code != 200:
            raise RewardError(f"reward server answered HTTP {response.status_code}: {response.text[:300]}")
        scores = response.json().get("scores")
        if not isinstance(scores, list) or len(scores) != len(pairs):
            raise RewardError(f"reward server returned {scores!r:.200} for {len(pairs)} items")
        return [float(s) for s in scores]
