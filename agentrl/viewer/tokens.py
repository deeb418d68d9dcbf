"""Per-token text for the viewer, decoded at build time when a tokenizer is at hand.

The page runs without a tokenizer, so the text of each token is stored in it. Which tokenizer: the one passed
to `build_viewer` (a tokenizer object or a model spec such as `default`), else, with `"auto"`, the `model` of the
run's saved `config.yaml` / `config.json` when that model is available locally. Without one, the page shows token
ids (still colored by trainable mask and logprob) and the messages' text.
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import AgentRLError
from agentrl.viewer.runs import RunData

TokenizerSpec = Any  # a tokenizer object, a model spec string, "auto", or None


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
        AgentRLError: a tokenizer named explicitly (not "auto") cannot be loaded.
    """
    if spec is None:
        return None, "token texts off (no tokenizer): tokens are shown as ids"
    if not isinstance(spec, str):
        name = getattr(spec, "name_or_path", "") or type(spec).__name__
        return TokenDecoder(spec, name), f"token texts decoded with {name}"
    model = spec
    if spec == "auto":
        models = {str(r.config["model"]) for r in runs if r.config and r.config.get("model")}
        if len(models) != 1:
            why = "runs name different models" if models else "the run directory has no config.yaml naming its model"
            return None, f"tokens are shown as ids: {why}; pass --tokenizer MODEL to decode them"
        model = models.pop()
    try:
        from transformers import AutoTokenizer

        from agentrl.models import resolve_model

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(model, prepare=False), local_files_only=True)
    except Exception as exc:
        if spec != "auto":  # asked for by name: say so rather than build a page without token texts
            raise AgentRLError(f"cannot load the tokenizer of {model!r}: {exc}") from exc
        return None, f"tokens are shown as ids: tokenizer of {model!r} unavailable ({exc})"
    return TokenDecoder(tokenizer, model), f"token texts decoded with the tokenizer of {model!r}"
