"""Collapse guard: watch the policy's entropy and its response length against the run's first steps, and warn
once when either falls to a fraction of where it started (`trainer.collapse_warn_ratio`).

Multi-turn RL collapses quietly: the policy settles on one reply ("always RIGHT"), its entropy drops to near 0,
every group's rewards become equal and GRPO has no signal left, while the loss looks fine. The ratios are logged
every step (`train/entropy_ratio`, `rollout/length_ratio`) so a report shows the fall before the warning.

The opposite also happens with an entropy bonus (`trainer.entropy_coef`): where every reward is equal the bonus is
the whole gradient and drives the replies toward random tokens, so a rise of the entropy past `ENTROPY_RISE_RATIO`
of its start warns too.
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
REWARD = "rollout/reward_mean"
"""Quoted in the warning next to its own start: a fall that comes with the reward at its best is convergence."""
ENTROPY_RISE_RATIO = 1.5
"""With an entropy bonus, warn when the entropy climbs past this multiple of its start (seen on gym: 3.4 → 8.2 nats
a token in 24 steps, every reply random tokens)."""


class CollapseMonitor:
    """Ratios of entropy and response length to their baseline (the mean of the first `baseline_steps` values
    seen), and one warning per metric when a ratio falls below `warn_ratio` (0 disables the warnings).

    Args:
        warn_ratio: warn when a watched metric is below this fraction of its baseline.
        baseline_steps: steps averaged into the baseline.
        rise_ratio: warn when the entropy is above this multiple of its baseline (0: never; the trainer sets
            `ENTROPY_RISE_RATIO` when an entropy bonus is on). `warn_ratio=0` silences this warning too.
    """

    def __init__(self, warn_ratio: float = 0.25, baseline_steps: int = 2, rise_ratio: float = 0.0) -> None:
        self.warn_ratio = warn_ratio
        self.baseline_steps = baseline_steps
        self.rise_ratio = rise_ratio
        self._first: dict[str, list[float]] = {}
        self.warned: set[str] = set()
        self._reward_start = 0.0
        self._reward_now: float | None = None

    def observe(self, metrics: Mapping[str, Any], step: int) -> dict[str, float]:
        """The ratios for this step's `metrics` (plus `train/collapse_warnings`), warning on a new collapse."""
        out: dict[str, float] = {}
        self._note_reward(metrics)
        for name, (ratio_name, label) in WATCHED.items():
            value = metrics.get(name)
            if not isinstance(value, int | float):
                continue
            baseline = self._baseline(name, float(value))
            if baseline <= 0:
                continue
            out[ratio_name] = value / baseline
            if self.warn_ratio and out[ratio_name] < self.warn_ratio and name not in self.warned:
                self.warned.add(name)
                self._warn(label, value, baseline, step)
        self._check_rise(out.get("train/entropy_ratio"), metrics, step)
        out["train/collapse_warnings"] = float(len(self.warned))
        return out

    def _baseline(self, name: str, value: float) -> float:
        """The mean of `name`'s first `baseline_steps` values, `value` counted while they are still being seen."""
        seen = self._first.setdefault(name, [])
        if len(seen) < self.baseline_steps:
            seen.append(value)
        return sum(seen) / len(seen)

    def _note_reward(self, metrics: Mapping[str, Any]) -> None:
        value = metrics.get(REWARD)
        if isinstance(value, int | float):
            self._reward_start = self._baseline(REWARD, float(value))
            self._reward_now = float(value)

    def _reward_change(self) -> str:
        """`the rollout reward went from A to B` (start: the mean of the first steps), or "" before any reward."""
        if self._reward_now is None:
            return ""
        start = self._reward_start
        return (f" The rollout reward went from {start:.3g} to {self._reward_now:.3g} meanwhile: if that is the "
                "task's best, the policy has converged and this is expected.")  # fmt: skip

    def _check_rise(self, ratio: float | None, metrics: Mapping[str, Any], step: int) -> None:
        rising = self.warn_ratio and self.rise_ratio and ratio is not None and ratio > self.rise_ratio
        if not rising or "entropy_rise" in self.warned:
            return
        self.warned.add("entropy_rise")
        logger.warning(
            "step %d: the policy's entropy rose to %.3g, %.1f× where it started: the entropy bonus may outweigh the "
            "rewards (where every reward in a batch is equal it is the whole gradient, and it drives the replies "
            "toward random tokens). Lower trainer.entropy_coef; trainer.collapse_warn_ratio=0 silences this.",
            step,
            metrics["train/entropy"],
            ratio,
        )

    def _warn(self, label: str, value: float, baseline: float, step: int) -> None:
        logger.warning(
            "step %d: the policy's %s fell to %.3g, %.0f%% of the %.3g it started at: the policy may be collapsing "
            "onto one reply (check rollout/reward_std: equal rewards in every group leave GRPO no signal). Lower "
            "trainer.lr, add trainer.kl_coef or trainer.entropy_coef, or raise rollout.temperature; "
            "trainer.collapse_warn_ratio=0 silences this.%s",
            step,
            label,
            value,
            100 * value / baseline,
            baseline,
            self._reward_change(),
        )
