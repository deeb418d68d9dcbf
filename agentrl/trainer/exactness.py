"""The exactness contract of a training run: what is refused at start, and what each step checks.

For every trained token: its logprob is of the distribution it was sampled from (the rollout temperature on both
sides), its version is what the server that generated it reported, and its lag behind the policy being trained is
within `trainer.max_staleness` (or corrected, under `stale_samples=correct`). `exactness_problems` lists what a
config cannot make exact; `exactness_metrics` measures each step's data against the contract.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.config.schema import AgentRLConfig
from agentrl.trainer.batch import check_trainable
from agentrl.types import Trajectory

VERSION_KNOWN = "rollout/version_known"
STALENESS_MAX = "rollout/staleness_max"
"""Logged by `agentrl.trainer.staleness.staleness_metrics`: the largest lag of a trained token."""
MISMATCH_BY_VERSION = "train/mismatch_by_version/"
"""Prefix of `policy_step`'s per-version mismatch metrics (the absolute version), turned into lags here."""


def exactness_problems(cfg: AgentRLConfig) -> list[str]:
    """Settings a training run cannot make exact: each one, with its fix."""
    r, t, problems = cfg.rollout, cfg.trainer, []
    if r.temperature <= 0:
        problems.append(
            "rollout.temperature=0 is greedy decoding: its tokens have no sampling distribution to train on; "
            "train with rollout.temperature > 0 (greedy decoding is for evaluation, which agentrl runs greedily)"
        )
    if t.stale_samples == "regenerate" and t.mode != "fully_async":
        problems.append(
            f"trainer.stale_samples=regenerate restarts stale groups from the stream of trainer.mode=fully_async; "
            f"with trainer.mode={t.mode} use stale_samples=correct or drop"
        )
    return problems


def truncation_warning(cfg: AgentRLConfig) -> str | None:
    """One line when top-p / top-k truncate the sampling distribution (the trainer's is untruncated), else None."""
    r = cfg.rollout
    if r.top_p >= 1.0 and r.top_k <= 0:
        return None
    tis = (
        "trainer.tis_cap corrects it"
        if cfg.trainer.tis_cap is not None
        else "set trainer.tis_cap (e.g. 2) to correct it"
    )
    return (
        f"warning: rollout.top_p={r.top_p:g} / top_k={r.top_k} truncate the sampling distribution: the servers report "
        "logprobs of the truncated one and the trainer computes the untruncated policy's at the same temperature, "
        f"so train/rollout_logprob_abs_diff measures the gap and {tis}; top_p=1 and top_k=-1 train exactly"
    )


def check_batch(trajectories: Sequence[Trajectory], backend: str) -> None:
    """Raise `UntrainableSegmentError`, naming `backend`, for a generated segment that cannot be trained exactly
    (no logprobs, or greedy tokens), before any of the batch is trained."""
    for traj in trajectories:
        for sample in traj.step_samples():
            for segment in sample.segments:
                if segment.trainable and segment.token_ids:
                    check_trainable(sample, segment, f"the {backend} server")


def version_known(trajectories: Sequence[Trajectory]) -> float:
    """The share of the trained tokens of `trajectories` whose version the server reported (must be 1.0)."""
    known = total = 0
    for sample in (s for t in trajectories for s in t.step_samples()):
        for segment in sample.segments:
            if segment.trainable:
                total += len(segment.token_ids)
                known += len(segment.token_ids) if segment.policy_version is not None else 0
    return known / total if total else 1.0


def exactness_metrics(trajectories: Sequence[Trajectory], version: int, step_metrics: dict[str, float]) -> dict:
    """`rollout/version_known` (share of trained tokens whose version the server reported: must be 1.0) and
    `train/mismatch_lag/<k>` (mean |rollout − trainer logprob| of the tokens k versions old), from `policy_step`'s
    per-version figures in `step_metrics` (which are removed from it)."""
    out: dict[str, float] = {VERSION_KNOWN: version_known(trajectories)}
    for key in [k for k in step_metrics if k.startswith(MISMATCH_BY_VERSION)]:
        lag = version - int(key[len(MISMATCH_BY_VERSION) :])
        out[f"train/mismatch_lag/{lag}"] = step_metrics.pop(key)
    return out


def exactness_breaches(metrics: dict[str, float], max_staleness: int, stale_samples: str) -> dict[str, str]:
    """What in a step's `metrics` breaks the contract: {kind: message with what to change} (empty: exact).
    With several policies each one's `rollout/<name>/version_known` is checked."""
    breaches = {}
    unknown = {key: value for key, value in metrics.items() if _is_version_known(key) and value < 1.0}
    if unknown:
        where = ", ".join(f"{1 - value:.1%} ({_policy_of(key)})" for key, value in sorted(unknown.items()))
        breaches["version"] = (
            f"trained tokens have no version from the server that generated them: {where}; use an agentrl server "
            "(hf, or vllm / sglang launched by agentrl), which reports the version of every reply"
        )
    lag = max([v for k, v in metrics.items() if _is_staleness_max(k)], default=0.0)
    if lag > max_staleness and stale_samples != "correct":
        breaches["staleness"] = (
            f"a trained token is {lag:g} versions old, past trainer.max_staleness={max_staleness} with "
            f"stale_samples={stale_samples}: this is a bug in agentrl's staleness bound; please report it"
        )
    return breaches


def _is_version_known(key: str) -> bool:
    return key.startswith("rollout/") and key.endswith("/version_known")


def _is_staleness_max(key: str) -> bool:
    return key.startswith("rollout/") and key.endswith("/staleness_max")


def _policy_of(key: str) -> str:
    """`rollout/<name>/version_known` -> `policy <name>`; the run's one policy for `rollout/version_known`."""
    parts = key.split("/")
    return f"policy {parts[1]}" if len(parts) == 3 else "the policy"


class ExactnessBreachError(RuntimeError):
    """A training step broke the exactness contract (`trainer.on_breach=stop`, the default)."""
