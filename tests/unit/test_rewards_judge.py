"""LLM judge: verdict parsing, cache, retries, concurrency limit and failure fallbacks.

litellm is swapped for a scripted FAKE `acompletion` here (importing litellm takes seconds); the integration
tests go through the real litellm, to the real `hf` server and to the FAKE server for faults.
"""

import asyncio
from types import SimpleNamespace

import pytest

from agentrl.config import RewardConfig
from agentrl.rewards import judge as judge_module
from agentrl.rewards.judge import LLMJudge, VerdictCache
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.verdict import parse_score
from agentrl.types import Message, Sample, Trajectory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Score: 7", 0.7),
        ("score: 7/10", 0.7),
        ("**Score:** 8", 0.8),
        ("Rating = 3 out of 5", 0.6),
        ("The score is 9.", 0.9),
        ("7", 0.7),
        ("7.5 - mostly right", 0.75),
        ('{"score": 6, "reason": "ok"}', 0.6),
        ('Verdict: ```json\n{"rating": "4"}\n```', 0.4),
        ("I'd give it [[10]]", 1.0),
        ("Overall 4/5.", 0.8),
        ("Score: [[2]]", 0.2),
        ("Score: 0", 0.0),
        ("", None),
        (None, None),
        ("great answer", None),
        ("Score: 15", None),
        ("Score: -1", None),
        ("Step 3 of the proof is wrong", None),
        ("2 + 3 = 5", None),
        ("8\nThe response is right", 0.8),
        ("3.", 0.3),
        ('{"score": true}', None),
    ],
)
def test_parse_score(text, expected):
    value = parse_score(text, scale=10)
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_parse_score_other_scales():
    assert parse_score("Score: 1", scale=1) == 1.0
    assert parse_score("4", scale=5) == 0.8


def test_cache_is_an_lru():
    cache = VerdictCache(max_size=2)
    for k in "abc":
        cache.put(k, (1.0, k))
    assert cache.get("a") is None and cache.get("c") == (1.0, "c") and len(cache) == 2


class FakeLiteLLM:
    """FAKE litellm: `acompletion` answers with `reply(messages)` after `delay` seconds."""

    def __init__(self, reply, delay=0.0):
        self.reply, self.delay, self.calls, self.now, self.peak = reply, delay, [], 0, 0

    async def acompletion(self, **kwargs):
        self.calls.append(kwargs)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay)
            content = self.reply(kwargs["messages"])
            if isinstance(content, Exception):
                raise content
            return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=content))])
        finally:
            self.now -= 1


@pytest.fixture
def fake_llm(monkeypatch):
    def install(reply, delay=0.0):
        fake = FakeLiteLLM(reply, delay)
        monkeypatch.setattr(judge_module, "_litellm", lambda: fake)
        return fake

    return install


def answer_in(messages):
    return messages[-1]["content"].split("Response to grade:\n")[1].split("\n")[0]


def traj(answer):
    return Trajectory(
        messages=[Message(role="user", content="What is 2+2?"), Message(role="assistant", content=answer)]
    )


def sample():
    return Sample(prompt=[Message(role="user", content="What is 2+2?")], ground_truth="4")


def judge_pipe(on_failure="zero", **judge):
    spec = {"name": "judge", "type": "judge", "api_base": "http://judge/v1", "backoff_s": 0.0, **judge}
    return RewardPipeline(
        RewardConfig(components=[{"name": "exact", "type": "exact_match"}, spec], on_failure=on_failure)
    )


def test_judge_prompt_and_request(fake_llm):
    fake = fake_llm(lambda m: "Score: 9")
    p = judge_pipe(model="openai/smol", rubric="Be harsh.", max_tokens=16)
    t = traj("4")
    assert p.score(t, sample()) == pytest.approx(1.9)
    call = fake.calls[0]
    assert call["model"] == "openai/smol" and call["api_base"] == "http://judge/v1" and call["api_key"] == "EMPTY"
    assert call["max_tokens"] == 16 and call["temperature"] == 0.0
    user = call["messages"][-1]["content"]
    assert (
        "What is 2+2?" in user
        and "Response to grade:\n4" in user
        and "Be harsh." in user
        and "Reference answer:\n4" in user
    )
    assert t.reward_details["judge"]["verdict"] == "Score: 9" and t.reward_details["judge"]["cached"] is False


def test_custom_template_keeps_other_braces(fake_llm):
    fake = fake_llm(lambda m: '{"score": 5}')
    p = judge_pipe(template='Reply as {"score": N}. Q={prompt} A={response}', system_prompt=None)
    t = traj("4")
    p.score(t, sample())
    assert fake.calls[0]["messages"] == [{"role": "user", "content": 'Reply as {"score": N}. Q=What is 2+2? A=4'}]
    assert t.reward_components["judge"] == 0.5


def test_cache_keyed_by_prompt_response_rubric(fake_llm):
    fake = fake_llm(lambda m: "Score: 6")
    p = judge_pipe()
    ts = [traj("4"), traj("4"), traj("5"), traj("4")]
    p.score_batch(ts, [sample()] * 4)
    assert len(fake.calls) == 2  # "4" judged once (in flight shared), "5" once
    assert [t.reward_components["judge"] for t in ts] == [0.6] * 4
    t = traj("4")
    p.score(t, sample())
    assert len(fake.calls) == 2 and t.reward_details["judge"]["cached"] is True
    judge_pipe(rubric="Other rubric").score(traj("4"), sample())
    assert len(fake.calls) == 3
    judge_pipe(cache=False).score_batch([traj("4"), traj("4")], [sample()] * 2)
    assert len(fake.calls) == 5


def test_retries_then_success(fake_llm):
    replies = iter([RuntimeError("502 bad gateway"), "no idea", "Score: 8"])
    fake = fake_llm(lambda m: next(replies))
    t = traj("4")
    judge_pipe(retries=2).score(t, sample())
    assert len(fake.calls) == 3 and t.reward_components["judge"] == 0.8 and t.reward_details["judge"]["attempts"] == 3


@pytest.mark.parametrize(("policy", "judged"), [("zero", {"exact": 1.0, "judge": 0.0}), ("skip", {"exact": 1.0})])
def test_garbage_verdicts_fall_back_and_batch_completes(fake_llm, policy, judged):
    fake_llm(lambda m: "Score: 7" if answer_in(m) == "fine" else "lol what")
    p = judge_pipe(on_failure=policy, retries=1)
    ts = [traj("4"), traj("fine")]
    rewards = p.score_batch(ts, [sample(), sample()])
    assert ts[0].reward_components == judged
    assert rewards[0] == (1.0 if policy == "zero" else 2.0)
    details = ts[0].reward_details["judge"]
    assert details["policy"] == policy and details["attempts"] == 2 and "unreadable verdict" in details["errors"][0]
    assert ts[1].reward_components["judge"] == pytest.approx(0.7)


def test_timeouts_fall_back(fake_llm):
    fake_llm(lambda m: "Score: 7", delay=1.0)
    t = traj("4")
    assert judge_pipe(request_timeout_s=0.05, retries=1).score(t, sample()) == 1.0
    assert t.reward_details["judge"]["errors"] == ["timed out", "timed out"]
    t = traj("4")  # the pipeline's own per-component limit also holds
    assert judge_pipe(timeout_s=0.05, on_failure="skip").score(t, sample()) == 2.0
    assert "timed out after 0.05s" in t.reward_details["judge"]["error"]


async def test_concurrency_limit(fake_llm):
    fake = fake_llm(lambda m: "Score: 1", delay=0.02)
    p = judge_pipe(max_concurrency=3, cache=False)
    assert p.components[1].component.limit.limit == 3
    await p.ascore_batch([traj(str(i)) for i in range(12)], [sample()] * 12)
    assert fake.peak == 3 and len(fake.calls) == 12


def test_judge_standalone_uses_env_key(monkeypatch, fake_llm):
    fake = fake_llm(lambda m: "Score: 10")
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test")
    judge = LLMJudge(model="gpt-4o-mini", api_key_env="MY_JUDGE_KEY")
    from agentrl.rewards.base import RewardInput

    result = asyncio.run(judge.ascore(RewardInput(traj("4"), sample(), "4")))
    assert result.score == 1.0 and fake.calls[0]["api_key"] == "sk-test" and "api_base" not in fake.calls[0]
