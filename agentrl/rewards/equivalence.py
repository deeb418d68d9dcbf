"""Numeric and mathematical equivalence rules.

`math` uses Hugging Face's `math-verify` (LaTeX and plain expressions, sets, intervals, equations, units,
\\boxed{} extraction) on top of sympy; `numeric` is a dependency-free numeric comparison for GSM8K-style answers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from agentrl.rewards.base import RewardInput, RewardResult

F = TypeVar("F", bound=Callable[..., Any])


def blocking(fn: F) -> F:
    """Mark a sync rule as CPU-heavy: the pipeline runs it in a worker thread, under its timeout."""
    fn.blocking = True  # type: ignore[attr-defined]
    return fn


@blocking
def math_equiv(inp: RewardInput, float_rounding: int = 6, strict: bool = True) -> RewardResult:
    """1 when the answer is mathematically equivalent to the ground truth (`math-verify`), else 0.

    The answer is extracted from the model's text (the last \\boxed{} first, then LaTeX or plain expressions);
    the ground truth is parsed as given, or as inline LaTeX when that fails. math-verify's own signal-based
    timeouts are off (they only work in the main thread and would cancel other alarms): the pipeline's
    per-component `timeout_s` bounds the time instead.
    """
    from math_verify import parse, verify

    refs = inp.ground_truth if isinstance(inp.ground_truth, list | tuple) else [inp.ground_truth]
    gold: list[Any] = []
    for ref in refs:
        text = str(ref)
        gold = parse(text, parsing_timeout=None) or parse(f"${text}$", parsing_timeout=None)  # type: ignore[arg-type]
        if gold:
            break
    pred = parse(inp.answer, parsing_timeout=None)  # type: ignore[arg-type]
    details: dict[str, Any] = {"gold": [str(g) for g in gold], "parsed": [str(p) for p in pred]}
    if not gold:
        details["error"] = f"ground truth {inp.ground_truth!r} could not be parsed"
        return RewardResult(0.0, details)
    if not pred:
        return RewardResult(0.0, {**details, "reason": "no answer found"})
    ok = verify(gold, pred, float_rounding=float_rounding, strict=strict, timeout_seconds=None)  # type: ignore[arg-type]
    return RewardResult(float(ok), details)


_NUMBER = r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?%?"
_NUMBER_RE = re.compile(rf"(?<![\w.]){_NUMBER}(?![\w])")
_MARKERS = (
    re.compile(r"\\boxed\{([^{}]*)\}"),
    re.compile(r"####\s*([^\n]+)"),
    re.compile(r"answer is[:\s]*([^\n]+)", re.I),
)


def parse_number(text: str) -> float | None:
    """The value of a number written as `-1,234.5`, `$3`, `1/2` or `50%` (50), or None."""
    cleaned = text.strip().replace("$", "").replace(",", "").rstrip("%").strip()
    if not cleaned:
        return None
    try:
        if "/" in cleaned:
            num, den = (p.strip() for p in cleaned.split("/", 1))
            return float(Fraction(int(num), int(den)))
        return float(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def extract_number(text: str) -> float | None:
    """The number the text gives as its answer: the first one in the last \\boxed{}, after `####` or after
    `answer is`; else the text's last number."""
    for marker in _MARKERS:
        found = marker.findall(text)
        if found and (value := _number(found[-1], last=False)) is not None:
            return value
    return _number(text, last=True)


def _number(text: str, last: bool) -> float | None:
    matches = list(_NUMBER_RE.finditer(text))
    for match in reversed(matches) if last else matches:
        if any(c.isdigit() for c in match.group(0)) and (value := parse_number(match.group(0))) is not None:
            return value
    return None


def numeric_match(inp: RewardInput, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> RewardResult:
    """1 when the number the answer gives equals the ground truth within `rel_tol`/`abs_tol`, else 0."""
    gold = inp.ground_truth
    expected = float(gold) if isinstance(gold, int | float) else extract_number(str(gold))
    got = extract_number(inp.answer)
    details = {"expected": expected, "extracted": got}
    if expected is None:
        return RewardResult(0.0, {**details, "error": f"ground truth {gold!r} is not a number"})
    ok = got is not None and math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    return RewardResult(float(ok), details)
