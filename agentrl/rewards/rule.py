"""Rule-based reward components."""

from __future__ import annotations

import re
import string

from agentrl.rewards.base import RewardInput, RewardResult

_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lower-case, drop punctuation and collapse whitespace."""
    return " ".join(str(text).lower().translate(_PUNCT).split())


def exact_match(inp: RewardInput) -> RewardResult:
    """1 when the answer equals the ground truth exactly (surrounding whitespace ignored)."""
    ok = inp.answer.strip() == str(inp.sample.ground_truth).strip()
    return RewardResult(float(ok), {"answer": inp.answer, "ground_truth": inp.sample.ground_truth})


def normalized_match(inp: RewardInput) -> RewardResult:
    """1 when the answer equals the ground truth after `normalize`."""
    ok = normalize(inp.answer) == normalize(str(inp.sample.ground_truth))
    return RewardResult(float(ok), {"answer": inp.answer, "ground_truth": inp.sample.ground_truth})


def regex_match(inp: RewardInput, pattern: str) -> RewardResult:
    """1 when `pattern` matches somewhere in the answer."""
    return RewardResult(float(re.search(pattern, inp.answer) is not None), {"pattern": pattern})


RULES = {"exact_match": exact_match, "normalized_match": normalized_match, "regex": regex_match}
