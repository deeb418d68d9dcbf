"""Hybrid composition: weights, gating, normalization, failure policies, limits and the batch API."""

import asyncio
import math

import pytest

from agentrl.config import RewardConfig
from agentrl.errors import AgentRLError
from agentrl.rewards.base import RewardComponent, RewardError, RewardResult
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import Message, Sample, Trajectory


def traj(answer):
    return Trajectory(messages=[Message(role="user", content="q"), Message(role="assistant", content=answer)])


def sample(gt="a"):
    return Sample(prompt=[Message(role="user", content="q")], ground_truth=gt)


def value_of(inp):
    """The answer, read as the score (test component)."""
    if inp.answer == "boom":
        raise RewardError("exploded", {"why": "test"})
    if inp.answer == "nan":
        return math.nan
    if inp.answer == "slow":
        import time

        time.sleep(0.5)
        return 1.0
    return float(inp.answer)


async def async_value_of(inp, offset: float = 0.0):
    await asyncio.sleep(0.01)
    return float(inp.answer) + offset


class Recorder(RewardComponent):
    """Batched test component: records batch sizes, scores `scale * float(answer)`."""

    batched = True

    def __init__(self, scale: float = 1.0, fail: bool = False):
        self.scale, self.fail, self.batches = scale, fail, []

    async def ascore_batch(self, inps):
        self.batches.append(len(inps))
        if self.fail:
            raise RuntimeError("model crashed")
        return [RewardResult(self.scale * float(i.answer), {"batched": True}) for i in inps]


class InFlight(RewardComponent):
    def __init__(self):
        self.now = self.peak = 0

    async def ascore(self, inp):
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.02)
        self.now -= 1
        return RewardResult(1.0)


V = f"{__name__}:value_of"


def pipe(*components, on_failure="zero", function=None):
    return RewardPipeline(RewardConfig(components=list(components), on_failure=on_failure, function=function))


def test_weighted_sum_arithmetic():
    p = pipe(
        {"name": "a", "type": V, "weight": 0.2},
        {"name": "b", "type": f"{__name__}:async_value_of", "weight": 0.3, "offset": 0.5},
        {"name": "c", "type": "exact_match", "weight": 0.5},
    )
    t = traj("0.25")
    assert p.score(t, sample("0.25")) == pytest.approx(0.2 * 0.25 + 0.3 * 0.75 + 0.5 * 1.0)
    assert t.reward_components == {"a": 0.25, "b": 0.75, "c": 1.0}
    assert set(t.reward_details) == {"a", "b", "c"} and "elapsed_s" in t.reward_details["a"]


def test_negative_weights_and_function_entry():
    p = pipe({"name": "penalty", "type": V, "weight": -1.0}, function=f"{__name__}:compute_like")
    t = traj("0.5")
    assert p.score(t, sample()) == pytest.approx(2.0 - 0.5)
    assert t.reward_components == {"compute_score": 2.0, "penalty": 0.5}


def compute_like(data_source, solution_str, ground_truth, extra_info):
    return 2.0


@pytest.mark.parametrize(
    ("policy", "reward", "components"), [("zero", 0.5, {"x": 1.0, "bad": 0.0}), ("skip", 1.0, {"x": 1.0})]
)
@pytest.mark.parametrize("bad", ["boom", "nan", "slow"])
def test_failure_policies(policy, reward, components, bad):
    # a thread can time out; only the slow one should (a loaded machine once took 0.1 s to raise the exception)
    timeout_s = 0.1 if bad == "slow" else 30.0
    bad_spec = {"name": "bad", "type": V, "weight": 0.5, "timeout_s": timeout_s, "thread": True}
    p = pipe({"name": "x", "type": "exact_match", "weight": 0.5}, bad_spec, on_failure=policy)
    t = traj(bad)
    assert p.score(t, sample(bad)) == pytest.approx(reward)
    assert t.reward_components == components
    details = t.reward_details["bad"]
    assert details["policy"] == policy and details["error"]
    if bad == "boom":
        assert "exploded" in details["error"] and details["why"] == "test"
    if bad == "slow":
        assert details["error"] == "timed out after 0.1s (timeout_s)"


def test_per_component_policy_and_skip_renormalization():
    p = pipe(
        {"name": "a", "type": V, "weight": 1.0},
        {"name": "b", "type": V, "weight": 2.0, "on_failure": "skip"},
        {"name": "c", "type": f"{__name__}:Recorder", "weight": 1.0, "fail": True},
        on_failure="zero",
    )
    t = traj("boom")
    assert p.score(t, sample()) == 0.0
    assert t.reward_components == {"a": 0.0, "c": 0.0}
    assert t.reward_details["b"]["policy"] == "skip" and t.reward_details["c"]["error"] == "RuntimeError: model crashed"
    p = pipe(
        {"name": "a", "type": V},
        {"name": "b", "type": V, "weight": 2.0, "on_failure": "skip"},
        {"name": "c", "type": V},
    )
    assert p.score(traj("0.5"), sample()) == pytest.approx(2.0)


def test_everything_skipped_scores_zero():
    p = pipe({"name": "a", "type": V}, on_failure="skip")
    t = traj("boom")
    assert p.score(t, sample()) == 0.0 and t.reward_components == {}


def test_gate_runs_judge_only_when_tests_pass():
    rec = "tests.unit.test_rewards_pipeline:Recorder"
    p = pipe(
        {"name": "tests", "type": "exact_match", "weight": 1.0},
        {"name": "judge", "type": rec, "weight": 0.5, "scale": 0.5, "gate": {"component": "tests", "min": 1.0}},
    )
    judge = p.components[1].component
    ts = [traj("1"), traj("0"), traj("1")]
    rewards = p.score_batch(ts, [sample("1"), sample("1"), sample("0")])
    assert rewards == pytest.approx([1.0 + 0.5 * 0.5, 0.0, 0.0])
    assert judge.batches == [1]  # only the passing trajectory reached the judge
    assert ts[1].reward_components == {"tests": 0.0, "judge": 0.0}
    assert ts[1].reward_details["judge"] == {"gated": True, "gate": "tests", "gate_score": 0.0, "policy": "zero"}


def test_gate_otherwise_skip_and_ranges():
    p = pipe(
        {"name": "g", "type": V},
        {"name": "x", "type": V, "gate": {"component": "g", "max": 0.5, "otherwise": "skip"}},
        {"name": "y", "type": V, "gate": {"component": "x", "min": 0.1, "max": 0.3}},
    )
    assert [s.name for stage in p.stages for s in stage] == ["g", "x", "y"] and len(p.stages) == 3
    t = traj("0.9")
    assert p.score(t, sample()) == pytest.approx(0.9 * 3 / 2)  # x skipped (renormalized), y gated on missing x
    assert t.reward_components == {"g": 0.9, "y": 0.0}
    t = traj("0.2")
    assert p.score(t, sample()) == pytest.approx(0.6)


def test_failed_gate_component_closes_the_gate():
    p = pipe({"name": "g", "type": V}, {"name": "x", "type": V, "gate": {"component": "g", "min": 0.0}})
    t = traj("boom")
    p.score(t, sample())
    assert t.reward_details["x"]["gated"] is True and t.reward_details["x"]["gate_score"] == 0.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"gate": {"component": "nope"}}, "not a component"),
        ({"gate": {"component": "x"}}, "cycle"),
        ({"gate": {"min": 1}}, "gate must be a mapping"),
        ({"gate": {"component": "x", "when": 1}}, "unknown gate keys"),
        ({"normalize": "softmax"}, "normalize must be"),
        ({"normalize": {"min": 1, "max": 1}}, "max > min"),
        ({"on_failure": "retry"}, "on_failure must be"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(AgentRLError, match=message):
        pipe({"name": "x", "type": V, **spec})


def test_duplicate_names_rejected():
    with pytest.raises(AgentRLError, match="used twice"):
        pipe({"type": "exact_match"}, {"type": "exact_match"})


def test_normalization():
    p = pipe(
        {"name": "lin", "type": V, "normalize": {"min": 0, "max": 10}},
        {"name": "sig", "type": V, "normalize": "sigmoid"},
        {"name": "raw", "type": V, "normalize": {"min": 0, "max": 10, "clip": False}},
    )
    t = traj("15")
    p.score(t, sample())
    assert t.reward_components["lin"] == 1.0 and t.reward_components["raw"] == 1.5
    assert t.reward_components["sig"] == pytest.approx(1 / (1 + math.exp(-15)))
    assert t.reward_details["lin"]["raw_score"] == 15.0


async def test_batched_component_gets_the_whole_batch_and_items_run_concurrently():
    p = pipe(
        {"name": "rm", "type": f"{__name__}:Recorder"},
        {"name": "live", "type": f"{__name__}:InFlight", "max_concurrency": 3},
    )
    ts = [traj(str(i)) for i in range(10)]
    rewards = await p.ascore_batch(ts, [sample()] * 10)
    assert rewards == pytest.approx([i + 1.0 for i in range(10)])
    assert p.components[0].component.batches == [10]
    assert p.components[1].component.peak == 3
    assert all(t.reward_details["rm"]["batched"] for t in ts)


async def test_sync_score_works_inside_a_running_loop():
    t = traj("0.5")
    assert pipe({"name": "a", "type": f"{__name__}:async_value_of"}).score(t, sample()) == 0.5


def test_batch_length_mismatch_and_no_components():
    with pytest.raises(AgentRLError, match="one sample"):
        pipe({"type": V}).score_batch([traj("1")], [])
    t = traj("1")
    t.reward = 0.3
    assert RewardPipeline(RewardConfig()).score_batch([t], [sample()]) == [0.3]


def test_details_are_json_safe():
    p = pipe({"name": "m", "type": "math"})
    t = traj("\\boxed{2}")
    p.score(t, sample("2"))
    assert Trajectory.from_json(t.to_json()).reward_details == t.reward_details


def test_default_timeouts():
    p = pipe({"name": "a", "type": V}, {"name": "c", "type": "command"}, {"name": "t", "type": V, "timeout_s": 5})
    assert [c.timeout_s for c in p.components] == [300.0, None, 5.0]
