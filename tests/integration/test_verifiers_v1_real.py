"""verifiers 0.4 (`verifiers.v1`), for real: the recipe's taskset, written in verifiers' own API, played by the
default model on the shared `hf` server through verifiers' own episode (its `null` harness, its interception server)
and agentrl's gateway, one training step; the reward is the taskset's own, each reward function's score recomputed
here from the reply the model gave. And the loop contract, checked against its check taskset."""

import gzip
import json
import re

import pytest

from agentrl.cli import main
from agentrl.loops.conformance.check import loop_problems
from agentrl.loops.drift import check_drift
from agentrl.types import Trajectory
from agentrl.verifiers_v1.install import verifiers_python

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(verifiers_python() is None, reason="no verifiers 0.4 interpreter: make setup makes it"),
]

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def expected_scores(traj: Trajectory) -> dict[str, float]:
    """The recipe's reward functions (recipes/verifiers_v1/taskset.py), applied to the recorded reply."""
    reply = traj.messages[-1].content or ""
    a, b = (int(x) for x in re.findall(r"\d", str(traj.messages[1].content)))
    found = ANSWER.search(reply)
    return {
        "correct_sum": float(found is not None and found.group(1).strip() == str(a + b)),
        "answer_format": float(found is not None),
    }


def test_a_verifiers_0_4_taskset_trains_a_step_with_its_own_reward(hf_server_url, default_tokenizer, tmp_path):
    args = [
        "train",
        "recipe=verifiers_v1",
        "data.batch_size=2",
        "rollout.n=2",
        "trainer.steps=1",
        "trainer.eval_every=0",
        "trainer.skip_zero_advantage=false",  # a step is trained whatever the rewards are
        f"rollout.urls=[{hf_server_url}]",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0
    (metrics,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    with gzip.open(tmp_path / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        played = [Trajectory.from_json(line) for line in f]
    assert metrics["rollout/trajectories"] == 4.0 and metrics["train/tokens"] > 0
    for traj in played:
        assert not traj.failed and traj.num_turns == 1 and traj.metrics["gateway/calls"] == 1.0
        assert traj.messages[0].content.startswith("Add the numbers.")  # the taskset's own system prompt
        scores = expected_scores(traj)
        assert traj.reward_components == scores
        assert traj.reward == pytest.approx(scores["correct_sum"] + 0.2 * scores["answer_format"])
        # verifiers' trace holds the reply stripped of surrounding whitespace; the recorded message keeps it
        assert traj.metrics["verifiers/reply_chars"] == len((traj.messages[-1].content or "").strip())
        # the recorded tokens render back to what the model saw (a sampled non-canonical split of the same text is
        # "tokenization" drift, which the token-exact record keeps as generated)
        assert check_drift(default_tokenizer, traj).kind != "template"


def test_the_verifiers_v1_loop_keeps_the_loop_contract(default_tokenizer):
    assert loop_problems("verifiers_v1", default_tokenizer)[1] == []
