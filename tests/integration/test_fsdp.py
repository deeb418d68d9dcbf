"""2-rank FSDP2 on gloo computes the same loss and gradients as 1 rank, also with the prompt prefix shared and
gradient checkpointing on."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from agentrl.config import TrainerConfig
from agentrl.rollout.servers.process import free_port
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama as tiny_model

pytestmark = pytest.mark.integration


SYSTEM = [(7 * i) % 50 + 3 for i in range(20)]  # a system prompt every row starts with (share_prompt_prefix)


def row(prompt: list[int], response: list[int], group: str, reward: float) -> Trajectory:
    return Trajectory(
        segments=[
            Segment(token_ids=prompt, trainable=False),
            Segment(token_ids=response, trainable=True, logprobs=[-1.0] * len(response), policy_version=0),
        ],
        group_id=group,
        reward=reward,
    )


def repeats(rank0: list[list[int]], rank1: list[list[int]]) -> list[Trajectory]:
    """Each prompt twice (a group of two samples, rewards 1 and 0), replies of different lengths, ordered so that
    rank 0 trains on `rank0`'s rows and rank 1 on `rank1`'s."""

    def samples(prompts: list[list[int]], rank: int) -> list[Trajectory]:
        return [
            row(p, [8 + i, 9][: 1 + i], f"r{rank}g{n}", float(i == 0)) for n, p in enumerate(prompts) for i in (0, 1)
        ]

    return [t for pair in zip(samples(rank0, 0), samples(rank1, 1), strict=True) for t in pair]


S = SYSTEM
# rank r trains on rows r::2 (then sorted by length): the cases choose what each rank's micro-batch holds
CASES = {
    "plain": [row([1, 2, 3], [4, 5, 6], "a", 1.0), row([1, 2], [6, 5], "a", 0.0),
              row([7], [8, 9, 10], "b", 1.0), row([7, 7], [9], "b", 0.0)],
    "shared_prefix": [row([*S, 1, 2, 3], [4, 5, 6], "a", 1.0), row([*S, 1, 2], [6, 5], "a", 0.0),
                      row([*S, 7], [8, 9, 10], "b", 1.0), row([*S, 7, 7], [9], "b", 0.0)],
    # rank 0's rows share a system prompt, rank 1's do not: both run plainly
    "one_rank_shares": [row([*S, 1, 2, 3], [4, 5, 6], "a", 1.0), row([1, 2], [6, 5], "a", 0.0),
                        row([*S, 7], [8, 9, 10], "b", 1.0), row([7, 7], [9], "b", 0.0)],
    # each rank: two prompts under one system prompt, each repeated (3 forward calls each)
    "repeats": repeats([[*S, 1, 5], [*S, 2, 5]], [[*S, 3, 5], [*S, 4, 5]]),
    # rank 0: one prompt repeated (2 calls); rank 1: two prompts under one system prompt (3 calls): both run plainly
    "repeats_differ": repeats([[*S, 1, 5], [*S, 1, 5]], [[*S, 3, 5], [*S, 4, 5]]),
}  # fmt: skip
SHARING = {"shared_prefix", "repeats"}
"""The cases in which rank 0 runs a shared prefix on its own."""


class _Capture(PolicyEngine):
    def train_step(self, batch, loss_fn, **options):
        out = super().train_step(batch, loss_fn, **options)
        self.grads = {
            n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).clone()
            for n, p in self.model.named_parameters()
        }
        return out


def _rank(rank, world, port, out_path, case):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh

    share = case != "plain"
    config = EngineConfig(share_prompt_prefix=share, gradient_checkpointing=share)
    engine = _Capture(tiny_model(), config, mesh=init_device_mesh("cpu", (world,)))
    assert engine.share_prefix == share
    widths = []
    engine.model.register_forward_pre_hook(lambda _, a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    trajs = CASES[case]
    # advantages and loss denominators are global; each rank trains on its own rows
    metrics = policy_step(engine, TrainerConfig(), trajs, 0, shard=(rank, world))
    # metrics come back reduced over the ranks: every rank reports the global loss
    losses = [None] * world
    dist.all_gather_object(losses, metrics["train/loss"])
    if rank == 0:
        saved = {"loss": metrics["train/loss"], "losses": losses, "grads": engine.grads, "widths": widths}
        torch.save(saved, out_path)
    dist.barrier()  # leave together: a rank that tears gloo down while its peer still works aborts (SIGABRT)
    dist.destroy_process_group()
    # Skip the interpreter's teardown: a gloo thread still joinable at exit made a rank die with "terminate called
    # without an active exception" (SIGABRT) in CI after its work was done and saved.
    os._exit(0)


@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_match_one(case, tmp_path):
    """Plain, and with the prompt prefix shared and gradient checkpointing on: a common prefix, repeated prompts,
    and ranks whose rows would run different ways (they agree on a plain forward rather than wait on each other)."""
    single = _Capture(tiny_model())
    ref = policy_step(single, TrainerConfig(), CASES[case], 0)
    port = free_port()  # a pid-derived port could be taken (a gloo rank then aborts)
    mp.spawn(_rank, args=(2, port, str(tmp_path / "r.pt"), case), nprocs=2, join=True)
    got = torch.load(tmp_path / "r.pt")
    diff = max(float((got["grads"][n] - g).abs().max()) for n, g in single.grads.items())
    print(f"loss 1 rank {ref['train/loss']:.6f}, 2 ranks {got['loss']:.6f}; max grad diff {diff:.2e}")
    assert got["loss"] == pytest.approx(ref["train/loss"], abs=1e-5)
    assert got["losses"][0] == got["losses"][1]
    assert diff < 1e-5
    if case != "plain":
        prefix_alone = min(got["widths"]) <= len(SYSTEM)  # rank 0 ran the prefix on its own
        assert prefix_alone == (case in SHARING)
