"""Rule-based reward components: plain functions `rule(inp, **kwargs) -> RewardResult` (sync or async).

The reward registry (`agentrl.rewards.registry.REWARDS`) names them for YAML `type`. String rules live here; math
and numeric equivalence in `agentrl.rewards.equivalence`; tool-use and sandbox checks in
`agentrl.rewards.agentic`.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

from agentrl.rewards.base import RewardInput, RewardResult

_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lower-case, drop punctuation and collapse whitespace."""
    return " ".join(str(text).lower().translate(_PUNCT).split())


def references(ground_truth: Any) -> list[str]:
    """The accepted answers: a list ground truth accepts any of its items."""
    if isinstance(ground_truth, list | tuple):
        return [str(g) for g in ground_truth]
    return [str(ground_truth)]


def exact_match(inp: RewardInput) -> RewardResult:
    """1 when the answer equals the ground truth exactly (surrounding whitespace ignored)."""
    ok = any(inp.answer.strip() == ref.strip() for ref in references(inp.sample.ground_truth))
    return RewardResult(float(ok), {"answer": inp.answer, "ground_truth": inp.sample.ground_truth})


def normalized_match(inp: RewardInput) -> RewardResult:
    """1 when the answer equals the ground truth after `normalize`."""
    ok = any(normalize(inp.answer) == normalize(ref) for ref in references(inp.sample.ground_truth))
    return RewardResult(float(ok), {"answer": inp.answer, "ground_truth": inp.sample.ground_truth})


def contains(inp: RewardInput) -> RewardResult:
    """1 when a reference appears as whole words in the answer (after `normalize`): partial credit for shaping."""
    answer = f" {normalize(inp.answer)} "
    ok = any(f" {normalize(ref)} " in answer for ref in references(inp.sample.ground_truth))
    return RewardResult(float(ok), {"answer": inp.answer, "ground_truth": inp.sample.ground_truth})


def brevity(inp: RewardInput, max_words: int) -> RewardResult:
    """1 when the answer has at most `max_words` words, else `max_words / words`: graded credit for brevity.

    Graded rather than pass/fail so that a group whose replies are all too long still ranks them (a binary length
    check gives every one the same reward, and GRPO no signal)."""
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    words = len(inp.answer.split())
    return RewardResult(min(1.0, max_words / words) if words else 0.0, {"words": words})


def regex_match(inp: RewardInput, pattern: str) -> RewardResult:
    """1 when `pattern` matches somewhere in the answer."""
    return RewardResult(float(re.search(pattern, inp.answer) is not None), {"pattern": pattern})


_PRESETS = {
    "boxed": r".*\\boxed\{.+\}.*",
    "think": r"\s*<think>.*?</think>\s*\S.*",
    "answer_tag": r".*<answer>.+?</answer>\s*",
}


def format_check(
    inp: RewardInput,
    pattern: str | None = None,
    preset: str | None = None,
    json_keys: list[str] | None = None,
    max_chars: int | None = None,
) -> RewardResult:
    """1 when the whole answer has the required shape, else 0; every given check must hold.

    Args:
        pattern: a regex the whole answer must match (`re.fullmatch`, `.` matching newlines).
        preset: a named pattern: `boxed` (contains \\boxed{...}), `think` (<think>...</think> then an answer),
            `answer_tag` (ends with <answer>...</answer>).
        json_keys: the answer must be a JSON object holding these keys (`[]`: any JSON object).
        max_chars: the answer must be at most this long.
    """
    failed: list[str] = []
    patterns = [p for p in (pattern, _PRESETS.get(preset or "")) if p]
    if preset and preset not in _PRESETS:
        raise ValueError(f"unknown format preset {preset!r}; known: {', '.join(_PRESETS)}")
    failed += [f"pattern {p!r}" for p in patterns if re.fullmatch(p, inp.answer, flags=re.DOTALL) is None]
    if json_keys is not None:
        try:
            obj = json.loads(inp.answer)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            failed.append("not a JSON object")
        elif missing := [k for k in json_keys if k not in obj]:
            failed.append(f"missing JSON keys {missing}")
    if max_chars is not None and len(inp.answer) > max_chars:
        failed.append(f"longer than {max_chars} characters ({len(inp.answer)})")
    return RewardResult(float(not failed), {"failed": failed})
