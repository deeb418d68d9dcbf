"""The training loop's parts: data cursor, staleness, batch collection (dynamic sampling, overlong), metrics,
checkpoint folders and config checks."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentrl.config import AgentRLConfig, RewardConfig, RolloutConfig
from agentrl.config.schema import TrainerConfig
from agentrl.errors import AgentRLError, UserError
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.trainer.checkpoint_dir import TrainerState, latest_checkpoint, save_checkpoint
from agentrl.trainer.collect import BatchCollector
from agentrl.trainer.cursor import DataCursor
from agentrl.trainer.loop import eval_metrics, prepare_config
from agentrl.trainer.metrics import rollout_metrics
from agentrl.trainer.staleness import split_stale, staleness, versions_of
from agentrl.types import Message, Sample, Segment, StopReason, Trajectory


def test_cursor_covers_each_epoch_once_in_a_seeded_order():
    cursor = DataCursor(5, seed=3)
    first_epoch = cursor.take(3) + cursor.take(2)
    assert sorted(first_epoch) == [0, 1, 2, 3, 4] and cursor.epoch == 1 and cursor.position == 0
    assert sorted(cursor.take(5)) == [0, 1, 2, 3, 4]
    assert DataCursor(5, seed=3).take(5) == first_epoch


def test_cursor_state_resumes_the_same_batches():
    cursor = DataCursor(7, seed=1)
    cursor.take(4)
    state = cursor.state()
    expected = cursor.take(6)
    resumed = DataCursor(7)
    resumed.load_state(state)
    assert resumed.take(6) == expected
    with pytest.raises(ValueError, match="same data.train_files"):
        DataCursor(8).load_state(state)


def traj_with_versions(*versions, reward=0.0, group="g"):
    t = Trajectory(group_id=group, reward=reward)
    t.segments = [Segment(token_ids=[1], trainable=False)]
    t.segments += [Segment(token_ids=[2, 3], trainable=True, logprobs=[-1.0, -1.0], policy_version=v) for v in versions]
    return t


def test_staleness_counts_versions_behind_the_oldest_segment():
    assert staleness(traj_with_versions(3, 4), current_version=5) == 2
    assert staleness(traj_with_versions(), current_version=5) == 0
    fresh, stale = split_stale([traj_with_versions(5), traj_with_versions(2, 5)], 5, max_staleness=1)
    assert [staleness(t, 5) for t in fresh] == [0] and [staleness(t, 5) for t in stale] == [3]


def test_staleness_counts_the_earlier_step_samples_of_a_gateway_trajectory():
    rewritten = traj_with_versions(5)
    rewritten.earlier_steps = [traj_with_versions(2)]  # trained alongside with the same advantage
    assert staleness(rewritten, current_version=5) == 3 and versions_of(rewritten) == 2
    assert split_stale([rewritten], 5, max_staleness=1) == ([], [rewritten])


def samples(*words):
    return [Sample(prompt=[Message(role="user", content=f"say {w}")], ground_truth=w) for w in words]


def collector(tokenizer, replies, data, trainer: TrainerConfig, n=2, batch_size=2):
    manager = RolloutManager(ScriptedPolicy(tokenizer, replies), tokenizer, rollout=RolloutConfig(n=n))
    rewards = RewardPipeline(RewardConfig(components=[{"name": "hit", "type": "contains"}]))
    return BatchCollector(manager, rewards, data, batch_size, trainer, seed=0)


def test_dynamic_sampling_drops_uniform_groups_and_samples_more(tokenizer):
    # "a" groups always say a (all rewards 1: no variance); "b" groups alternate hit and miss
    calls = {"n": 0}

    def reply(text):
        if "say a" in text:
            return "a"
        calls["n"] += 1
        return "b" if calls["n"] % 2 else "x"

    c = collector(tokenizer, [reply], samples("a", "b"), TrainerConfig(dynamic_sampling=True, max_sampling_rounds=4))
    batch = asyncio.run(c.collect(step=1))
    kept_groups = {t.group_id for t in batch.trajectories}
    assert len(kept_groups) == 2, "refilled up to batch_size informative groups"
    assert all("say b" in t.messages[0].content for t in batch.trajectories)
    assert batch.metrics["rollout/sampling_rounds"] >= 2 and len(batch.generated) > len(batch.trajectories)
    assert all(t.metadata["step"] == 1 for t in batch.generated)


def test_overlong_penalty_is_added_to_the_reward(tokenizer):
    long_reply = "a " * 30
    c = collector(
        tokenizer,
        [long_reply],
        samples("a"),
        TrainerConfig(overlong_max_tokens=20, overlong_cache_tokens=10),
        batch_size=1,
    )
    batch = asyncio.run(c.collect(step=1))
    for t in batch.trajectories:
        assert t.num_generated_tokens > 20
        assert t.reward_components["overlong"] == -1.0 and t.reward == pytest.approx(0.0)


def test_collector_saves_the_data_position_after_each_batch(tokenizer):
    c = collector(tokenizer, ["a"], samples("a", "b", "c"), TrainerConfig(), batch_size=2)
    first = asyncio.run(c.collect(1))
    assert first.cursor_state["position"] == 2
    second = asyncio.run(c.collect(2))
    assert second.cursor_state == {"size": 3, "seed": 0, "epoch": 1, "position": 1}


def test_rollout_metrics_names_and_values():
    a = traj_with_versions(0, reward=1.0)
    a.reward_components = {"hit": 1.0}
    a.stop_reason, a.num_turns = StopReason.DONE, 1
    b = traj_with_versions(0, 0, reward=0.0)
    b.reward_components = {"hit": 0.0}
    b.stop_reason, b.num_turns = StopReason.MAX_TOKENS, 2
    m = rollout_metrics([a, b], rollout_s=2.0)
    assert m["rollout/reward_mean"] == 0.5 and m["rollout/reward_std"] == 0.5 and m["reward/hit"] == 0.5
    assert m["rollout/stop_reason/done"] == 0.5 and m["rollout/stop_reason/max_tokens"] == 0.5
    assert m["rollout/response_tokens_mean"] == 3.0 and m["perf/rollout_tokens_per_s"] == 3.0
    assert eval_metrics([a, b]) == {
        "eval/reward_mean": 0.5,
        "eval/success_rate": 0.5,
        "eval/failed": 0.0,
        "eval/reward/hit": 0.5,
    }


def test_response_length_counts_every_step_sample_of_a_windowed_trajectory():
    windowed = traj_with_versions(0, reward=1.0)
    windowed.earlier_steps = [traj_with_versions(0), traj_with_versions(0, 0)]  # 2 + 4 tokens before the last 2
    assert windowed.num_generated_tokens_in_all_steps() == 8
    m = rollout_metrics([windowed, traj_with_versions(0)], rollout_s=1.0)
    assert m["rollout/response_tokens_mean"] == 5.0 and m["rollout/response_tokens_max"] == 8.0


def test_checkpoints_are_complete_or_invisible_and_only_the_last_two_stay(tmp_path):
    def engine_saver(folder):
        (folder / "weights.bin").write_bytes(b"w")

    for step in (1, 2, 3):
        save_checkpoint(tmp_path, TrainerState(step=step, cursor={"position": step}, version=step), engine_saver)

    def broken(folder):
        raise OSError("disk full")

    with pytest.raises(OSError):
        save_checkpoint(tmp_path, TrainerState(step=4, cursor={}, version=4), broken)
    folder, state = latest_checkpoint(tmp_path)
    assert state.step == 3 and (folder / "engine" / "weights.bin").is_file()
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == ["step_000002", "step_000003"]
    assert json.loads((folder / "trainer_state.json").read_text())["cursor"] == {"position": 3}
    assert latest_checkpoint(tmp_path / "nowhere") is None


def test_prepare_config_checks_and_fills_async_defaults():
    cfg = prepare_config(AgentRLConfig.model_validate({"trainer": {"mode": "async"}}))
    assert cfg.trainer.tis_cap == 2.0
    with pytest.raises(AgentRLError, match="output_dir"):
        prepare_config(AgentRLConfig.model_validate({"trainer": {"resume": True}}))
    with pytest.raises(AgentRLError, match="overlong_cache_tokens"):
        prepare_config(AgentRLConfig.model_validate({"trainer": {"overlong_max_tokens": 8}}))


def test_run_directory_keeps_the_resolved_config(tmp_path):
    from omegaconf import OmegaConf

    from agentrl.config.run_dir import output_dir

    cfg = AgentRLConfig.model_validate({"output_dir": str(tmp_path / "run"), "trainer": {"steps": 3}})
    out = output_dir(cfg, "train")
    saved = OmegaConf.to_container(OmegaConf.load(out / "config.yaml"))
    assert AgentRLConfig.model_validate(saved) == cfg


def test_a_new_training_run_refuses_a_folder_holding_an_earlier_runs_results(tmp_path):
    from agentrl.config.run_dir import output_dir

    def train_into(folder, **trainer):
        return AgentRLConfig.model_validate({"output_dir": str(folder), "trainer": trainer})

    died_at_start = tmp_path / "died"
    died_at_start.mkdir()
    (died_at_start / "metrics.jsonl").touch()  # a run that logged nothing: nothing to lose
    assert output_dir(train_into(died_at_start), "train") == died_at_start
    for what, make in (
        ("metrics", lambda run: (run / "metrics.jsonl").write_text('{"step": 1}\n')),
        ("checkpoints", lambda run: (run / "checkpoints" / "step_000001").mkdir(parents=True)),
    ):
        run = tmp_path / what
        run.mkdir()
        make(run)
        (run / "config.yaml").write_text("the earlier run's\n")
        with pytest.raises(UserError, match=f"holds the {what} of an earlier training run.*trainer.resume=true"):
            output_dir(train_into(run), "train")
        assert (run / "config.yaml").read_text() == "the earlier run's\n", "nothing written is lost"
        if what == "checkpoints":
            assert output_dir(train_into(run, resume=True), "train") == run
        assert output_dir(train_into(run), "eval") == run, "only a new training run is refused"
    with pytest.raises(UserError, match="no checkpoint to resume from"):
        output_dir(train_into(tmp_path / "metrics", resume=True), "train")
    assert output_dir(train_into(tmp_path / "new", resume=True), "train").is_dir(), "nothing there: step 1"
    rolled_out = tmp_path / "rollout"
    rolled_out.mkdir()
    (rolled_out / "trajectories.jsonl").write_text("{}\n")
    for kind in ("rollout", "eval"):
        with pytest.raises(UserError, match="holds the trajectories of an earlier rollout or evaluation"):
            output_dir(train_into(rolled_out), kind)
    assert (rolled_out / "trajectories.jsonl").read_text() == "{}\n"
