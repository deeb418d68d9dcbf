"""Collapse guard: watch the policy's entropy and its response length against the run's first steps, and warn
once when either falls to a fraction of where it started (`trainer.collapse_warn_ratio`).

Multi-turn RL collapses quietly: the policy settles on one reply ("always RIGHT"), its entropy drops to near 0,
every group's rewards become equal and GRPO has no signal left, while the loss looks fine. The ratios are logged
every step (`train/entropy_ratio`, `rollout/length_ratio`) so a report shows the fall before the warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

WATCHED = {
    "train/entropy": ("train/entropy_ratio", "entropy"),
    "rollout/response_tokens_mean": ("rollout/length_ratio", "response length"),
}
"""metric → (its ratio to the baseline, what it is called in the warning)."""


class CollapseMonitor:
    """Ratios of entropy and response length to their baseline (the mean of the first `baseline_steps` values
    seen), and one warning per metric when a ratio falls below `warn_ratio` (0 disables the warnings).

    Args:
        warn_ratio: warn when a watched metric is below this fraction of its baseline.
        baseline_steps: steps averaged into the baseline.
    """

    def __init__(self, warn_ratio: float = 0.25, baseline_steps: int = 2) -> None:
        self.warn_ratio = warn_ratio
        self.baseline_steps = baseline_steps
        self._first: dict[str, list[float]] = {}
        self.warned: set[str] = set()

    def observe(self, metrics: Mapping[str, Any], step: int) -> dict[str, float]:
        """The ratios for this step's `metrics` (plus `train/collapse_warnings`), warning on a new collapse."""
        out: dict[str, float] = {}
        for name, (ratio_name, label) in WATCHED.items():
            value = metrics.get(name)
            if not isinstance(value, int | float):
                continue
            seen = self._first.setdefault(name, [])
            if len(seen) < self.baseline_steps:
                seen.append(float(value))
            baseline = sum(seen) / len(seen)
            if baseline <= 0:
                continue
            out[ratio_name] = value / baseline
            if self.warn_ratio and out[ratio_name] < self.warn_ratio and name not in self.warned:
                self.warned.add(name)
                self._warn(label, value, baseline, step)
        out["train/collapse_warnings"] = float(len(self.warned))
        return out

    def _warn(self, label: str, value: float, baseline: float, step: int) -> None:
        logger.warning(
            "step %d: the policy's %s fell to %.3g, %.0f%% of the %.3g it started at: the policy may be collapsing "
            "onto one reply (check rollout/reward_std: equal rewards in every group leave GRPO no signal). Lower "
            "trainer.lr, add trainer.kl_coef or trainer.entropy_coef, or raise rollout.temperature; "
            "trainer.collapse_warn_ratio=0 silences "
            "this.",
            step,
            label,
            value,
            100 * value / baseline,
            baseline,
        )
