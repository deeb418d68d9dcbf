"""The token checks of `check_loop`: generated tokens appended verbatim, a drift of 0 per step sample, and each
generated token carrying the logprob, version, temperature and role that produced it (the context each reply was
generated from: `prompts`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentrl.loops.conformance.play import TEMPERATURE, Episode
from agentrl.loops.conformance.policy import VERSION
from agentrl.loops.drift import check_drift

VERBATIM_FIX = (
    "append each reply with ctx.generate (it keeps the tokens and logprobs the server returned); never re-tokenize "
    "a reply's text"
)


def verbatim_problems(episode: Episode) -> list[str]:
    """Every token the policy generated is in a step sample as a generated (trainable) token, once, with its own
    logprob; no trainable token is one the policy did not generate."""
    expected = {lp: tok for r in episode.policy.generated for tok, lp in zip(r.token_ids, r.logprobs, strict=True)}
    seen: Counter[float] = Counter()
    foreign = 0
    for step in episode.trajectory.step_samples():
        for seg in step.segments:
            if not seg.trainable:
                continue
            for token, logprob in zip(seg.token_ids, seg.logprobs or [None] * len(seg.token_ids), strict=True):
                if logprob in expected and expected[logprob] == token:
                    seen[logprob] += 1
                else:
                    foreign += 1
    problems = []
    if foreign:
        problems.append(f"tokens: {foreign} trainable tokens are not the policy's tokens as it returned them")
    if missing := len(expected) - len(seen):
        problems.append(f"tokens: {missing} of the {len(expected)} generated tokens are not in the trajectory")
    if twice := sum(1 for count in seen.values() if count > 1):
        problems.append(f"tokens: {twice} generated tokens are trainable in more than one place (trained twice)")
    return [f"{p}: {VERBATIM_FIX}" for p in problems]


def drift_problems(episode: Episode, tokenizer: Any) -> list[str]:
    """Each step sample's tokens are its messages as the chat template renders them (a drift of 0)."""
    problems = []
    for index, step in enumerate(episode.trajectory.step_samples()):
        report = check_drift(tokenizer, step, episode.tools)
        if not report.ok:
            problems.append(
                f"drift: step sample {index} differs from its messages re-rendered ({report}): add observations "
                "with ctx.add_messages (the template's exact suffix) and start a new token sequence with "
                "ctx.new_step_sample, never by editing segments or messages"
            )
    return problems


def attribution_problems(episode: Episode, roles: tuple[str, ...]) -> list[str]:
    """Every generated token carries its logprob, the version the server reported for it (each piece of a reply
    that an abort cut and the loop resumed: its own), the temperature its reply was sampled at and, in a loop with
    several roles, the role that generated it."""
    made_by = {lp: g for g in episode.policy.generated for lp in g.logprobs}
    counts: Counter[str] = Counter()
    for step in episode.trajectory.step_samples():
        for seg in (s for s in step.segments if s.trainable and s.token_ids):
            counts["logprobs"] += seg.logprobs is None
            makers = [made_by[lp] for lp in seg.logprobs or [] if lp in made_by]
            counts["version"] += any(g.version != seg.policy_version for g in makers)
            counts["temperature"] += seg.temperature != (makers[0].temperature if makers else TEMPERATURE)
            counts["role"] += len(roles) > 1 and seg.player not in roles
    fixes = {
        "logprobs": "have no logprobs: keep the server's (ctx.generate does)",
        "version": (
            f"carry another version than the one the server reported for their tokens (the check's policy reports "
            f"{VERSION}, {VERSION + 1}, ... one per generation, a resumed reply's pieces each their own): keep each "
            "piece's policy_version as ctx.generate records it, never a cached or merged one"
        ),
        "temperature": "do not carry the temperature they were sampled at: keep the turn's",
        "role": f"carry no role of the loop's {roles}: pass player=ROLE to ctx.generate",
    }
    return [f"attribution: {n} generated segments {fixes[what]}" for what, n in counts.items() if n]


__all__ = ["attribution_problems", "drift_problems", "verbatim_problems"]
