"""When a request stops: stop token ids, eos, stop strings on the decoded text, max_tokens."""

from __future__ import annotations

from agentrl.rollout.servers.hf.request import Detokenizer, GenRequest


def check_stop(req: GenRequest, eos_ids: frozenset[int], detok: Detokenizer | None) -> bool:
    """Decide, after a token was appended, whether `req` is finished; record the reason. True if finished.

    The order follows vLLM: stop token ids, then eos (unless `ignore_eos`), then stop strings, then length.
    The stopping token stays in `output_ids`; a matched stop string is cut from the text.
    """
    token = req.output_ids[-1]
    if token in req.sampling.stop_token_ids:
        req.finish("stop", token)
    elif token in eos_ids and not req.ignore_eos:
        req.finish("stop")
    elif req.sampling.stop and detok is not None and _match_stop_string(req, detok):
        pass
    elif len(req.output_ids) >= req.sampling.max_tokens:
        req.finish("length")
    return req.finish_reason is not None


def _match_stop_string(req: GenRequest, detok: Detokenizer) -> bool:
    """Search the newly decoded text for a stop string; on a hit truncate the text and finish."""
    text = detok.decode(req.output_ids, skip_special_tokens=True)
    longest = max(len(s) for s in req.sampling.stop)
    start = max(0, req.checked_text_len - longest + 1)
    req.checked_text_len = len(text)
    hits = [(pos, s) for s in req.sampling.stop if s and (pos := text.find(s, start)) >= 0]
    if not hits:
        return False
    pos, stop = min(hits)
    req.text = text[:pos]
    req.finish("stop", stop)
    return True
