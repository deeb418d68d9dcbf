"""When a request stops: stop token ids, eos, stop strings on the decoded text, max_tokens."""

from __future__ import annotations

from agentrl.rollout.servers.hf.request import Detokenizer, GenRequest

STOP_WINDOW_MARGIN = 8


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
    elif req.sampling.stop and detok is not None and (hit := find_stop_string(req, detok)):
        req.text, stop = hit
        req.finish("stop", stop)
    elif len(req.output_ids) >= req.sampling.max_tokens:
        req.finish("length")
    return req.finish_reason is not None


def find_stop_string(req: GenRequest, detok: Detokenizer) -> tuple[str, str] | None:
    """(text before the stop string, the stop string) if the last token completed one, else None.

    Only a window of tokens is decoded per step (enough for the longest stop string, plus a margin for tokens
    that decode differently without their left context), so the check stays O(1) in the output length. Any
    earlier occurrence would have stopped an earlier step, so the first hit in the full text is the new one.
    """
    stops = [s for s in req.sampling.stop if s]
    if not stops:
        return None
    window = max(len(s) for s in stops) + STOP_WINDOW_MARGIN
    tail = detok.decode(req.output_ids[-window:], skip_special_tokens=True)
    if not any(s in tail for s in stops):
        return None
    text = detok.decode(req.output_ids, skip_special_tokens=True)
    hits = [(text.find(s), s) for s in stops if s in text]
    if not hits:
        return None
    pos, stop = min(hits)
    return text[:pos], stop
