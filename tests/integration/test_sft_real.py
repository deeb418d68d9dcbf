"""Supervised fine-tuning for real: demonstrations recorded by `agentrl rollout` (the quickstart's training rows,
played by the real model, kept when they scored), then `trainer.objective=sft` on that file through the whole loop:
every kept reply's tokens trained, the loss falls on the same demonstrations, the recipe's own loop and reward
evaluate the held-out rows before and after, and the run checkpoints as an RL run does."""

from __future__ import annotations

import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration

TRAIN_ROWS = "recipes/quickstart/data/train.jsonl"


def test_an_sft_run_on_recorded_demonstrations_learns_them_and_evaluates_the_task(hf_server_url, tmp_path):
    record = [
        "rollout", "recipe=quickstart", f"rollout.urls=[{hf_server_url}]", "rollout.n=1", "rollout.seed=5",
        f"data.eval_files=[{TRAIN_ROWS}]", f"output_dir={tmp_path / 'teacher'}",
    ]  # fmt: skip
    assert main(record) == 0
    recorded = tmp_path / "teacher" / "trajectories.jsonl"
    episodes = [Trajectory.from_json(line) for line in recorded.read_text().splitlines()]
    scores = sorted({t.reward or 0.0 for t in episodes})  # the untrained model scores low, and unevenly
    threshold = scores[len(scores) // 2]  # the better-scored half of the episodes
    kept = [t for t in episodes if (t.reward or 0.0) >= threshold and not t.failed]
    assert 0 < len(kept) < len(episodes)  # the filter has something to keep and something to leave out
    train = [
        "train", "recipe=quickstart", f"rollout.urls=[{hf_server_url}]", "trainer.objective=sft",
        f"data.demonstrations=[{recorded}]", f"data.min_reward={threshold}", f"data.batch_size={len(kept)}",
        "trainer.steps=2", "trainer.lr=1e-4", "trainer.eval_every=2", "trainer.save_every=2",
        f"output_dir={tmp_path / 'student'}",
    ]  # fmt: skip
    assert main(train) == 0
    run = tmp_path / "student"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "train/loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    generated = sum(t.num_generated_tokens for t in kept)
    assert all(m["train/tokens"] == generated and m["data/demonstrations"] == len(kept) for m in steps)
    assert steps[1]["train/loss"] < steps[0]["train/loss"]  # the same demonstrations, after one step on them
    evaluated = [m["step"] for m in metrics if "eval/reward_mean" in m]
    assert evaluated == [0, 2]  # the quickstart's held-out rows, by its own loop and reward
    assert (run / "checkpoints" / "step_000002").is_dir()
    assert not any(k.startswith("rollout/") for m in steps for k in m)  # nothing was rolled out to train on


async def test_a_real_server_as_the_gateway_s_upstream_records_sft_data(hf_server_url, default_tokenizer, tmp_path):
    """The real `hf` server is the teacher upstream (`gateway.upstream`): an agent's chat completions and Messages
    calls are answered by it, and the saved sessions load as demonstrations whose replies are the teacher's."""
    import anthropic
    import openai

    from agentrl.config.schema import DataConfig
    from agentrl.gateway import Gateway
    from agentrl.gateway.serve import session_trajectory
    from agentrl.gateway.upstream import Upstream
    from agentrl.tools.parsers import get_parser
    from agentrl.trainer.demonstrations import load_demonstrations

    teacher = Upstream(f"{hf_server_url}/v1")
    teacher.check()
    saved = tmp_path / "sessions.jsonl"
    answers = []
    async with Gateway(None, default_tokenizer) as gateway:
        chat, messages = (
            gateway.open_session("chat", upstream=teacher),
            gateway.open_session("messages", upstream=teacher),
        )
        asked = [{"role": "user", "content": "Say hello."}]
        llm = openai.AsyncOpenAI(base_url=chat.base_url, api_key="unused", max_retries=0)
        reply = await llm.chat.completions.create(model="default", messages=asked, max_tokens=12, temperature=0)
        answers.append(reply.choices[0].message.content)
        claude = anthropic.AsyncAnthropic(base_url=messages.base_url.removesuffix("/v1"), api_key="x", max_retries=0)
        said = await claude.messages.create(
            model="default", max_tokens=12, messages=asked, extra_body={"temperature": 0}
        )
        answers.append(said.content[0].text if said.content else "")
        saved.write_text(
            "".join(session_trajectory(gateway.close_session(s)).to_json() + "\n" for s in (chat, messages))
        )
    rows = load_demonstrations(DataConfig(demonstrations=[str(saved)]), default_tokenizer, get_parser("hermes"))
    assert len(rows) == 2 and answers[0] and answers[0] == answers[1]  # greedy: one teacher, one answer
    for row, answer in zip(rows, answers, strict=True):
        (reply_segment,) = [s for s in row.segments if s.trainable]
        assert default_tokenizer.decode(reply_segment.token_ids).startswith(answer.strip()[:10])
        assert reply_segment.logprobs is None
