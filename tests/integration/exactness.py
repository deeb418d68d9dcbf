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
    gap_of = _Gaps()
    for start, seg, sample in rows:
        own = gap_of(models[seg.policy_version], start, seg, sample)
        owns.append(own)
        what = f"a segment of version {seg.policy_version} at temperature {seg.temperature}"
        if dtype == torch.float32:
            assert own < TOLERANCE, f"{what}: its server logprobs are {own:.2e} from its version's weights"
        counts[seg.policy_version] = counts.get(seg.policy_version, 0) + len(seg.token_ids)
        others = [v for v in models if v != seg.policy_version]
        if dtype != torch.float32:  # bf16 noise is per segment: the versions are told apart by which is nearest
            gaps = {v: gap_of(models[v], start, seg, sample) for v in others}
            nearer = {v: round(gap, 3) for v, gap in gaps.items() if gap < own}
            assert not nearer, f"{what}: its server logprobs are {own:.3f} from its version, nearer to {nearer}"
            separable = separable or any(gap > 10 * max(own, 1e-5) for gap in gaps.values())
        else:  # one other version is enough to show the check tells them apart, once
            separable = separable or any(
                gap_of(models[v], start, seg, sample) > 10 * max(own, 1e-5) for v in others[:1]
            )
    if dtype != torch.float32:
        mean = sum(owns) / len(owns)
        assert mean < BF16_TOLERANCE, f"the server logprobs are {mean:.3f} on average from their versions' weights"
    if len(models) > 1 and _weights_differ(list(models.values())):
        assert separable, "the versions' weights give the same logprobs: the check could not tell them apart"
    return counts


def assert_tokens_are_the_base_model_s(trajectories: list[Trajectory], model_path: str) -> int:
    """Check every generated segment of `trajectories`, rolled out by a server holding `model_path`'s weights
    (version 0), against those weights; returns the generated tokens checked."""
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    rows = list(_generated_segments(trajectories))
    assert rows, "the rollout generated nothing"
    assert {seg.policy_version for _, seg, _ in rows} == {0}, "a generated segment has no version, or another one"
    gap_of = _Gaps()
    for start, seg, sample in rows:
        gap = gap_of(base, start, seg, sample)
        assert gap < TOLERANCE, f"a segment at temperature {seg.temperature}: its logprobs are {gap:.2e} off"
    return sum(len(seg.token_ids) for _, seg, _ in rows)


def _weights_differ(models: list[torch.nn.Module]) -> bool:
    """Whether any two of the versions hold different weights (a step with no reward variance changes nothing,
    and then which of those versions a token names makes no difference to what it trains)."""
    first = dict(models[0].named_parameters())
    return any(not torch.equal(first[name], param) for model in models[1:] for name, param in model.named_parameters())


def _generated_segments(trajectories: list[Trajectory]) -> Iterator[tuple[int, Segment, tuple[int, ...]]]:
    """(where it starts, the segment, its step sample's tokens) of each non-empty generated segment of every step
    sample, in step-sample order."""
    for traj in trajectories:
        for sample in traj.step_samples():
            tokens, start = tuple(sample.token_ids), 0
            for seg in sample.segments:
                if seg.trainable and seg.token_ids:
                    yield start, seg, tokens
                start += len(seg.token_ids)


class _Gaps:
    """The mean absolute difference between a segment's recorded logprobs and a model's, from one forward per step
    sample and model, not one per segment over its prefix (a causal model's logits at a position depend only on
    the tokens up to it). Segments come in step-sample order: only the current sample's logits are kept."""

    def __init__(self) -> None:
        self.sample: tuple[int, ...] | None = None
        self.logits: dict[int, torch.Tensor] = {}  # by model id: the models outlive this object

    @torch.no_grad()
    def __call__(self, model: torch.nn.Module, start: int, seg: Segment, sample: tuple[int, ...]) -> float:
        if sample != self.sample:
            self.sample, self.logits = sample, {}
        if id(model) not in self.logits:
            self.logits[id(model)] = model(input_ids=torch.tensor([list(sample)])).logits[0]
        logits = self.logits[id(model)][start - 1 : start + len(seg.token_ids) - 1].float()
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
