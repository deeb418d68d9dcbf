"""The exactness check of a real training run, from what the run left on disk.

Every trained token's recorded version must name the weights that generated it, and its logprob must be of the
distribution it was sampled from: so the helper recomputes each generated segment's logprobs with the weights of
the version the segment names (version 0: the model folder; version v: the run's checkpoint of step v, so run with
`trainer.save_every=1`), at the segment's temperature, and compares them with the logprobs the rollout server
returned. A token labelled with the wrong version, or a logprob of another distribution (the raw logits at a
temperature of 0.7), is off by far more than the 1e-3 allowed. That the check can tell versions apart at all is
checked too: where the versions' weights differ, some tokens must get measurably different logprobs from another
version's.
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch

from agentrl.types import Segment, Trajectory

TOLERANCE = 1e-3
"""Mean |server − recomputed logprob| allowed per segment (fp32 on both sides: ~1e-6 in practice)."""
BF16_TOLERANCE = 0.15
"""The same in bf16 on both sides, averaged over the run's segments: a server's batched, cached decode and a
recompute round differently. Measured on a 3-step quickstart run at lr 1e-4: 0.008-0.091 per segment from its own
version (once 0.189, in a run whose step had a mean of 0.106), 0.19-2.3 from another's. So in bf16 a segment is
held to its own version by being nearer to it than to every other version, and the run by the mean."""


def keep_every_version(monkeypatch) -> None:
    """Keep the checkpoint of every step but the last (`trainer.save_every=1`): the weights of each version that can
    have generated a trained token. No trained token comes from the last step's weights, and a checkpoint writes
    ~1.6 GB of weights and optimizer state."""
    from agentrl.trainer import checkpoint_dir
    from agentrl.trainer.loop import Trainer

    save = Trainer._checkpoint

    def all_but_the_last(trainer: Trainer, step: int, cursor: dict[str, int]) -> None:
        if step < trainer.cfg.trainer.steps:
            save(trainer, step, cursor)

    monkeypatch.setattr(checkpoint_dir, "KEEP_LAST", 10)
    monkeypatch.setattr(Trainer, "_checkpoint", all_but_the_last)


def trained_trajectories(run_dir: Path, include_failed: bool = False) -> list[Trajectory]:
    """The trajectories of every training step (not the held-out evaluations), with their step samples; the failed
    ones (never trained) too with `include_failed`."""
    out = []
    for path in sorted((run_dir / "trajectories").glob("step_*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            out += [Trajectory.from_json(line) for line in f]
    return [t for t in out if include_failed or not t.failed]


def step_metrics(run_dir: Path) -> list[dict]:
    """The metrics of each training step (lines with `train/` figures)."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [m for m in lines if "rollout/trajectories" in m]


def assert_tokens_are_their_versions(
    run_dir: Path, model_path: str, dtype: torch.dtype = torch.float32
) -> dict[int, int]:
    """Check every generated segment of the run against the weights of its version, cast to the server's `dtype`;
    returns the generated tokens checked per version. The run's checkpoints are deleted afterwards (1.6 GB per
    step: a test session keeps every run directory until it ends)."""
    try:
        return _check_versions(run_dir, model_path, dtype)
    finally:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)


def _check_versions(run_dir: Path, model_path: str, dtype: torch.dtype) -> dict[int, int]:
    from transformers import AutoModelForCausalLM

    _forget_logits()
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    rows = list(_generated_segments(trained_trajectories(run_dir)))
    assert rows, "the run generated nothing"
    unknown = [seg for _, seg, _ in rows if seg.policy_version is None]
    assert not unknown, f"{len(unknown)} generated segments have no version"
    versions = sorted({seg.policy_version for _, seg, _ in rows})
    models = {v: base if v == 0 else checkpoint_model(base, run_dir, v) for v in versions}
    models = {v: model.to(dtype) for v, model in models.items()}  # after every copy of the fp32 base
    counts: dict[int, int] = {}
    separable = False
    owns = []
    for prefix, seg, sample in rows:
        own = _mean_gap(models[seg.policy_version], prefix, seg, sample)
        owns.append(own)
        what = f"a segment of version {seg.policy_version} at temperature {seg.temperature}"
        if dtype == torch.float32:
            assert own < TOLERANCE, f"{what}: its server logprobs are {own:.2e} from its version's weights"
        counts[seg.policy_version] = counts.get(seg.policy_version, 0) + len(seg.token_ids)
        others = [v for v in models if v != seg.policy_version]
        if dtype != torch.float32:  # bf16 noise is per segment: the versions are told apart by which is nearest
            gaps = {v: _mean_gap(models[v], prefix, seg, sample) for v in others}
            nearer = {v: round(gap, 3) for v, gap in gaps.items() if gap < own}
            assert not nearer, f"{what}: its server logprobs are {own:.3f} from its version, nearer to {nearer}"
            separable = separable or any(gap > 10 * max(own, 1e-5) for gap in gaps.values())
        else:  # one other version is enough to show the check tells them apart, once
            separable = separable or any(
                _mean_gap(models[v], prefix, seg, sample) > 10 * max(own, 1e-5) for v in others[:1]
            )
    if dtype != torch.float32:
        mean = sum(owns) / len(owns)
        assert mean < BF16_TOLERANCE, f"the server logprobs are {mean:.3f} on average from their versions' weights"
    _forget_logits()
    if len(models) > 1 and _weights_differ(list(models.values())):
        assert separable, "the versions' weights give the same logprobs: the check could not tell them apart"
    return counts


def assert_tokens_are_the_base_model_s(trajectories: list[Trajectory], model_path: str) -> int:
    """Check every generated segment of `trajectories`, rolled out by a server holding `model_path`'s weights
    (version 0), against those weights; returns the generated tokens checked."""
    from transformers import AutoModelForCausalLM

    _forget_logits()
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    rows = list(_generated_segments(trajectories))
    assert rows, "the rollout generated nothing"
    assert {seg.policy_version for _, seg, _ in rows} == {0}, "a generated segment has no version, or another one"
    for prefix, seg, sample in rows:
        gap = _mean_gap(base, prefix, seg, sample)
        assert gap < TOLERANCE, f"a segment at temperature {seg.temperature}: its logprobs are {gap:.2e} off"
    _forget_logits()
    return sum(len(seg.token_ids) for _, seg, _ in rows)


_LOGITS: dict[int, torch.Tensor] = {}
"""The logits of the step sample `_LOGITS_OF` under each model (by id) that scored it: the latest sample only."""
_LOGITS_OF: list[tuple[int, ...]] = []


def _sample_logits(model: torch.nn.Module, sample: tuple[int, ...]) -> torch.Tensor:
    """The model's logits at every position of a step sample: one forward per step sample and model, not one per
    segment over its prefix (a causal model's logits at a position depend only on the tokens up to it; segments
    come in step-sample order, so only the latest sample's are kept)."""
    if not _LOGITS_OF or _LOGITS_OF[0] != sample:
        _forget_logits()
        _LOGITS_OF.append(sample)
    if id(model) not in _LOGITS:
        _LOGITS[id(model)] = model(input_ids=torch.tensor([list(sample)])).logits[0]
    return _LOGITS[id(model)]


def _forget_logits() -> None:
    """Drop the kept logits (a model's id may be another model's once it is freed)."""
    _LOGITS.clear()
    _LOGITS_OF.clear()


def _weights_differ(models: list[torch.nn.Module]) -> bool:
    """Whether any two of the versions hold different weights (a step with no reward variance changes nothing,
    and then which of those versions a token names makes no difference to what it trains)."""
    first = dict(models[0].named_parameters())
    return any(not torch.equal(first[name], param) for model in models[1:] for name, param in model.named_parameters())


def _generated_segments(trajectories: list[Trajectory]) -> Iterator[tuple[list[int], Segment, tuple[int, ...]]]:
    """(the tokens before it, the segment, its step sample's tokens) of each non-empty generated segment of every
    step sample."""
    for traj in trajectories:
        for sample in traj.step_samples():
            tokens = tuple(sample.token_ids)
            prefix: list[int] = []
            for seg in sample.segments:
                if seg.trainable and seg.token_ids:
                    yield list(prefix), seg, tokens
                prefix += seg.token_ids


@torch.no_grad()
def _mean_gap(model: torch.nn.Module, prefix: list[int], seg: Segment, sample: tuple[int, ...]) -> float:
    """The mean absolute difference between the segment's recorded logprobs and the model's."""
    end = len(prefix) + len(seg.token_ids)
    logits = _sample_logits(model, sample)[len(prefix) - 1 : end - 1].float()
    logp = torch.log_softmax(logits / (seg.temperature or 1.0), dim=-1)
    chosen = logp.gather(-1, torch.tensor(seg.token_ids)[:, None]).squeeze(-1)
    return float((chosen - torch.tensor(seg.logprobs)).abs().mean())


def checkpoint_model(base: torch.nn.Module, run_dir: Path, version: int) -> torch.nn.Module:
    """The policy after `version` steps, from the run's checkpoint of that step."""
    from agentrl.trainer.checkpoint import load_engine
    from agentrl.trainer.engine import PolicyEngine

    folder = run_dir / "checkpoints" / f"step_{version:06d}" / "engine"
    assert folder.is_dir(), f"no checkpoint of step {version} in {run_dir} (train with trainer.save_every=1)"
    model = copy.deepcopy(base)
    load_engine(PolicyEngine(model), folder)
    return model.eval()
