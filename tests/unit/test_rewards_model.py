"""Model-based rewards on a TINY RANDOM model (no hub, no real weights): batching, heads, HTTP, similarity."""

import socket
import threading
import time

import pytest

from agentrl.config import RewardConfig
from agentrl.errors import AgentRLError
from agentrl.rewards.model import SequenceClassifierScorer
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.similarity import encoder_path
from agentrl.rewards.testing import build_tiny_reward_model
from agentrl.types import Message, Sample, Trajectory
from tests.unit.chatml import chatml_tokenizer

PAIRS = [([{"role": "user", "content": "What is 2+2?" * (i % 3 + 1)}], "It is four. " * (i % 4 + 1)) for i in range(9)]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    return build_tiny_reward_model(chatml_tokenizer(), tmp_path_factory.mktemp("rm"))


@pytest.fixture(scope="module")
def tiny_rm_no_template(tmp_path_factory):
    tok = chatml_tokenizer()
    tok.chat_template = None
    return build_tiny_reward_model(tok, tmp_path_factory.mktemp("rm_pair"), num_labels=3)


def test_batch_scores_equal_one_by_one(tiny_rm):
    scorer = SequenceClassifierScorer(tiny_rm, device="cpu")
    batched = scorer.score(PAIRS, batch_size=4)
    single = [scorer.score([p], batch_size=1)[0] for p in PAIRS]
    assert batched == pytest.approx(single, rel=1e-5, abs=1e-5)
    assert len(set(round(s, 4) for s in batched)) > 3  # inputs really differ


def test_pair_encoding_and_multi_label_probability(tiny_rm_no_template):
    last = SequenceClassifierScorer(tiny_rm_no_template).score(PAIRS[:4], batch_size=2)
    first = SequenceClassifierScorer(tiny_rm_no_template, label=0).score(PAIRS[:4], batch_size=3)
    assert all(0.0 < p < 1.0 for p in last + first)
    assert last != first


def trajectories():
    ts, ss = [], []
    for msgs, resp in PAIRS:
        prompt = [Message(**m) for m in msgs]
        ts.append(Trajectory(messages=[*prompt, Message(role="assistant", content=resp)]))
        ss.append(Sample(prompt=prompt))
    return ts, ss


def test_reward_model_component_in_a_pipeline(tiny_rm):
    pipe = RewardPipeline(
        RewardConfig(
            components=[
                {"name": "rm", "type": "reward_model", "model": tiny_rm, "batch_size": 4, "normalize": "sigmoid"}
            ]
        )
    )
    ts, ss = trajectories()
    pipe.score_batch(ts, ss)
    expected = SequenceClassifierScorer(tiny_rm).score(PAIRS)
    assert [t.reward_details["rm"]["raw_score"] for t in ts] == pytest.approx(expected, rel=1e-5, abs=1e-5)
    assert all(0.0 < t.reward < 1.0 for t in ts)


def test_reward_model_needs_model_or_url():
    with pytest.raises(AgentRLError, match="exactly one"):
        RewardPipeline(RewardConfig(components=[{"type": "reward_model"}]))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_reward_server_matches_local(tiny_rm):
    import uvicorn

    from agentrl.rewards.server import build_app

    scorer = SequenceClassifierScorer(tiny_rm)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(scorer, 4), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 20
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        remote = RewardPipeline(
            RewardConfig(components=[{"name": "rm", "type": "reward_model", "url": f"http://127.0.0.1:{port}/"}])
        )
        ts, ss = trajectories()
        remote.score_batch(ts, ss)
        assert [t.reward for t in ts] == pytest.approx(scorer.score(PAIRS), rel=1e-5, abs=1e-5)
        assert ts[0].reward_details["rm"]["model"] == f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    t = trajectories()[0][0]
    remote.score(t, trajectories()[1][0])  # server gone: recorded, not raised
    assert t.reward == 0.0 and "ConnectError" in t.reward_details["rm"]["error"]


def test_similarity_plumbing_on_a_tiny_encoder(tiny_rm):
    pipe = RewardPipeline(
        RewardConfig(
            components=[{"name": "sim", "type": "similarity", "model": tiny_rm, "batch_size": 2}], on_failure="skip"
        )
    )
    answers = ["the cat sat", "something else entirely", "x", "y"]
    gts = ["the cat sat", ["nope", "something else entirely"], None, ""]
    ts = [Trajectory(messages=[Message(role="assistant", content=a)]) for a in answers]
    ss = [Sample(prompt=[Message(role="user", content="q")], ground_truth=g) for g in gts]
    pipe.score_batch(ts, ss)
    assert ts[0].reward_components["sim"] == pytest.approx(1.0, abs=1e-5)
    assert ts[1].reward_components["sim"] == pytest.approx(1.0, abs=1e-5)  # best of the references
    for t in ts[2:]:
        assert "sim" not in t.reward_components and "no reference" in t.reward_details["sim"]["error"]


def test_encoder_path(tmp_path):
    assert encoder_path(str(tmp_path)) == str(tmp_path)
    with pytest.raises(AgentRLError, match="neither a folder nor an installed package"):
        encoder_path("no-such-encoder-package")
    with pytest.raises(AgentRLError, match="holds no model folder"):
        encoder_path("json")
