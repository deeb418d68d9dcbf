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


def trajectories(systems: tuple[list[int], ...] = ([],) * 4):
    """Two groups of two rows; each row's prompt starts with its own of `systems`."""

    def t(prompt, response, group, reward):
        system = systems[len(rows)]
        return Trajectory(
            segments=[
                Segment(token_ids=[*system, *prompt], trainable=False),
                Segment(token_ids=response, trainable=True, logprobs=[-1.0] * len(response), policy_version=0),
            ],
            group_id=group,
            reward=reward,
        )

    rows: list[Trajectory] = []
    for row in (
        ([1, 2, 3], [4, 5, 6], "a", 1.0),
        ([1, 2], [6, 5], "a", 0.0),
        ([7], [8, 9, 10], "b", 1.0),
        ([7, 7], [9], "b", 0.0),
    ):
        rows.append(t(*row))
    return rows


class _Capture(PolicyEngine):
    def train_step(self, batch, loss_fn, **options):
        out = super().train_step(batch, loss_fn, **options)
        self.grads = {
            n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).clone()
            for n, p in self.model.named_parameters()
        }
        return out


# rank r trains on rows r::2: in the last case rank 0's rows share a system prompt and rank 1's do not
PROMPTS = {"plain": ([],) * 4, "shared_prefix": (SYSTEM,) * 4, "one_rank_shares": (SYSTEM, [], SYSTEM, [])}


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
    trajs = trajectories(PROMPTS[case])
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


@pytest.mark.parametrize("case", list(PROMPTS))
def test_two_ranks_match_one(case, tmp_path):
    """Plain; with the prompt prefix shared and gradient checkpointing on; and with only one rank's rows sharing a
    prefix (where the ranks' rows differ, they agree on a plain forward rather than wait on each other)."""
    single = _Capture(tiny_model())
    ref = policy_step(single, TrainerConfig(), trajectories(PROMPTS[case]), 0)
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
        assert prefix_alone == (case == "shared_prefix")
