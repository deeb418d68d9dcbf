"""N ranks as Ray actors (FSDP2 on gloo) train exactly like one rank, resume exactly, and fail clearly."""

import time

import pytest

from agentrl.trainer.backend import LocalBackend, make_backend
from agentrl.trainer.workers import RayBackend, TrainBackendError
from tests.trainer_cases import batch_of_trajectories, run_config, scored, tiny_model_dir

pytestmark = pytest.mark.integration

COMPARED = ("train/loss", "train/pg_loss", "train/kl", "train/grad_norm", "train/clipfrac", "train/lr")
TOL = 1e-5


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def config(**trainer):
    # 2 ranks of half a CPU each fit the 2-core machine; a tiny token budget gives the ranks unequal numbers of
    # micro-batches (5 rows: 3 on rank 0, 2 on rank 1), which FSDP must pad
    cfg = run_config(num_ranks=2, kl_coef=0.1, warmup_steps=3, micro_batch_tokens=12, **trainer)
    return cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"num_cpus_per_rank": 0.5})})


def max_diff(a, b):
    assert set(a) == set(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def assert_same(got, want, what):
    diffs = {k: abs(got[k] - want[k]) for k in COMPARED}
    print(f"{what}: " + ", ".join(f"{k} {want[k]:.6f} |diff| {d:.1e}" for k, d in diffs.items()))
    assert all(d < TOL for d in diffs.values()), diffs


@pytest.mark.parametrize("lora_rank", [0, 4], ids=["full", "lora"])
def test_two_ray_ranks_match_one_rank(ray_cluster, tmp_path, lora_rank):
    model = tiny_model_dir(tmp_path / "model")
    cfg = config(lora_rank=lora_rank, lora_alpha=8.0)
    local = LocalBackend(cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"num_ranks": 1})}), model, 0)
    ranks = make_backend(cfg, model, pad_token_id=0)
    assert isinstance(ranks, RayBackend)
    try:
        for step, trajectories in enumerate([batch_of_trajectories(), batch_of_trajectories()[::-1]]):
            want, got = local.step(trajectories), ranks.step(trajectories)
            assert_same(got, want, f"step {step + 1}")
            grad_diff = max_diff(ranks.gradients(), local.gradients())
            print(f"step {step + 1}: max |grad diff| 2 ranks vs 1 = {grad_diff:.2e}")
            assert grad_diff < TOL
        # fewer trajectories than ranks: rank 1 runs a masked row and nothing hangs
        lonely = [scored([1, 2], [3, 4], "solo", 1.0)]
        assert_same(ranks.step(lonely), local.step(lonely), "one trajectory")
        weights_diff = max_diff(ranks.state_dict(), local.state_dict())
        print(f"max |weight diff| after 3 steps = {weights_diff:.2e}")
        assert weights_diff < 1e-4  # Adam divides by sqrt(v): gradients near 0 amplify 1e-8 differences
    finally:
        ranks.close()


def test_two_ray_ranks_resume_exactly(ray_cluster, tmp_path):
    model, ckpt = tiny_model_dir(tmp_path / "model"), tmp_path / "ckpt"
    cfg = config()
    batches = [batch_of_trajectories(), batch_of_trajectories()[::-1]]
    first = make_backend(cfg, model, pad_token_id=0)
    try:
        first.step(batches[0])
        first.save(ckpt)
        expected = first.step(batches[1])
    finally:
        first.close()
    assert sorted(p.name for p in ckpt.iterdir()) == ["engine.pt", "policy", "rng_rank0.pt", "rng_rank1.pt"]
    resumed = make_backend(cfg, model, pad_token_id=0)
    try:
        resumed.load(ckpt)
        assert_same(resumed.step(batches[1]), expected, "resumed on 2 ranks")
    finally:
        resumed.close()
    # the sharded checkpoint loads into one rank too
    single = LocalBackend(cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"num_ranks": 1})}), model, 0)
    single.load(ckpt)
    assert_same(single.step(batches[1]), expected, "resumed on 1 rank")


def test_a_failing_rank_gives_a_clear_error_and_stops_the_actors(ray_cluster, tmp_path):
    import ray

    with pytest.raises(TrainBackendError, match="building the ranks.*ModelNotFoundError"):
        make_backend(config(), str(tmp_path / "missing"), pad_token_id=0)
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2.0 and time.monotonic() < deadline:
        time.sleep(0.2)  # Ray returns a killed actor's CPUs asynchronously
    assert ray.available_resources().get("CPU", 0) == pytest.approx(2.0)  # no rank actor left


def test_ranks_that_do_not_fit_the_cluster_are_refused(ray_cluster, tmp_path):
    cfg = config()
    cfg = cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"num_cpus_per_rank": 2.0})})
    with pytest.raises(TrainBackendError, match="lower ray.num_cpus_per_rank"):
        make_backend(cfg, tiny_model_dir(tmp_path / "model"), pad_token_id=0)
