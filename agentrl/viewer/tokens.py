"""Per-token text for the viewer, decoded at build time when a tokenizer is at hand.

The page runs without a tokenizer, so the text of each token is stored in it. Which tokenizer:
- one passed to `build_viewer`: a tokenizer object, or a model spec (`default`, a folder, a cached hub id);
- `"auto"` (the default): the `model` of the run's saved `config.yaml` / `config.json`, else the default model,
  when available locally, and only if it *fits*: decoding the trajectories' generated segments gives back the
  assistant messages' text (so a run of another model never shows wrong token texts);
- None: no token texts.
Without token texts the page shows token ids (still colored by trainable mask and logprob) and the messages' text.
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import UserError
from agentrl.viewer.runs import RunData

TokenizerSpec = Any  # a tokenizer object, a model spec string, "auto", or None
FIT_CHECK_SEGMENTS = 20


class TokenDecoder:
    """Decodes single tokens, caching each id's text (a vocabulary is small; trajectories repeat tokens).

    Each token is decoded alone, so a character split over several byte-level tokens shows as `�` on each part;
    the message text above the tokens is always exact.
    """

    def __init__(self, tokenizer: Any, name: str):
        self.tokenizer = tokenizer
        self.name = name
        self._cache: dict[int, str] = {}

    def texts(self, token_ids: list[int]) -> list[str]:
        """The text of each token."""
        missing = sorted({t for t in token_ids if t not in self._cache})
        if missing:
            decoded = self.tokenizer.batch_decode(
                [[t] for t in missing], skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
            self._cache.update(zip(missing, decoded, strict=True))
        return [self._cache[t] for t in token_ids]


def resolve_decoder(spec: TokenizerSpec, runs: list[RunData]) -> tuple[TokenDecoder | None, str]:
    """The decoder to use and a note for the page saying where token texts come from (or why there are none).

    Raises:
        UserError: a tokenizer named explicitly (not "auto") cannot be loaded.
    """
    if spec is None:
        return None, "token texts off (no tokenizer): tokens are shown as ids"
    if not isinstance(spec, str):
        name = getattr(spec, "name_or_path", "") or type(spec).__name__
        return TokenDecoder(spec, name), f"token texts decoded with {name}"
    if spec != "auto":
        try:
            return TokenDecoder(load_tokenizer(spec), spec), f"token texts decoded with the tokenizer of {spec!r}"
        except Exception as exc:  # asked for by name: say so rather than build a page without token texts
            raise UserError(f"cannot load the tokenizer of {spec!r}: {exc}") from exc
    models = {str(r.config["model"]) for r in runs if r.config and r.config.get("model")}
    if len(models) > 1:
        return None, "tokens are shown as ids: the runs name different models; pass --tokenizer MODEL"
    source = "the run's model" if models else "the default model (the run directory names no model)"
    model = models.pop() if models else "default"
    try:
        tokenizer = load_tokenizer(model)
    except Exception as exc:  # a missing model only costs the page its token texts
        return None, f"tokens are shown as ids: the tokenizer of {source} is not available here ({exc})"
    if not tokenizer_fits(tokenizer, runs):
        return None, f"tokens are shown as ids: the tokenizer of {source} does not reproduce the assistant messages"
    return TokenDecoder(tokenizer, model), f"token texts decoded with the tokenizer of {source}, {model!r}"


def load_tokenizer(model: str) -> Any:
    """The tokenizer of a local model spec, without preparing or downloading anything."""
    from transformers import AutoTokenizer

    from agentrl.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(model, prepare=False), local_files_only=True)


def tokenizer_fits(tokenizer: Any, runs: list[RunData], limit: int = FIT_CHECK_SEGMENTS) -> bool:
    """True when decoding generated segments gives back their assistant messages (checks up to `limit`).

    An assistant message is the decoded text of its generated tokens less the end-of-turn token, so with the
    right tokenizer each generated segment's text starts with one of its trajectory's assistant messages.
    """
    checked = 0
    for run in runs:
        for step in run.steps:
            for traj in step.trajectories:
                said = [m.content for m in traj.messages if m.role == "assistant" and isinstance(m.content, str)]
                for segment in traj.segments:
                    if not segment.trainable or not segment.token_ids:
                        continue
                    if not tokenizer.decode(segment.token_ids, skip_special_tokens=True).strip():
                        continue  # only an end-of-turn token: nothing to compare
                    text = tokenizer.decode(segment.token_ids, skip_special_tokens=False)
                    if not any(content and text.startswith(content) for content in said):
                        return False
                    checked += 1
                    if checked >= limit:
                        return True
    return checked > 0
