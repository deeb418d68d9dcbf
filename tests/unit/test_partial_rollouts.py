"""Partial rollouts (`rollout.weight_update=resume`) with a FAKE server that aborts generations as a weight push
would: the turn continues from its exact prefix, each piece keeps the version that generated it, the tokens are
the concatenation of what the server sent, and the conversation re-renders to the same tokens."""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.types import Sample, StopReason


@dataclass
class Out:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    policy_version: int


class AbortingServer:
    """Replies `text`; the first `aborts` requests stop after `cut` tokens with finish_reason abort, and every
    abort is followed by a weight push (the version goes up)."""

    def __init__(self, tokenizer, text: str, aborts: int, cut: int = 2) -> None:
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.reply = [*tokenizer.encode(text, add_special_tokens=False), end]
        self.aborts, self.cut, self.version = aborts, cut, 0
        self.calls: list[tuple[list[int], int]] = []
        self.sent: list[list[int]] = []

    async def generate(self, prompt_ids, sampling, session_id=None) -> Out:
        self.calls.append((list(prompt_ids), sampling.max_tokens))
        done = sum(len(s) for s in self.sent)
        rest = self.reply[done:][: sampling.max_tokens]
        if self.aborts:
            self.aborts -= 1
            piece, reason = rest[: self.cut], "abort"
        else:
            piece, reason = rest, "stop" if done + len(rest) == len(self.reply) else "length"
        self.sent.append(piece)
        out = Out(piece, [-0.1 * (self.version + 1)] * len(piece), reason, self.version)
        if reason == "abort":
            self.version += 1  # the push that aborted it
        return out


def run(tokenizer, server, weight_update: str, max_tokens: int = 32):
    rollout = RolloutConfig(n=1, weight_update=weight_update, max_tokens=max_tokens)
    manager = RolloutManager(server, tokenizer, AgentConfig(), rollout)
    sample = Sample(id="s", prompt=[{"role": "user", "content": "say something"}])
    return manager.run([sample])


async def test_an_aborted_generation_resumes_from_its_exact_prefix(tokenizer):
    server = AbortingServer(tokenizer, "the quick brown fox jumps", aborts=2)
    (traj,) = await run(tokenizer, server, "resume")
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 1
    generated = [s for s in traj.segments if s.trainable]
    assert [s.policy_version for s in generated] == [0, 1, 2]
    assert [s.token_ids for s in generated] == server.sent  # exactly what the server generated, in order
    assert [t for s in generated for t in s.token_ids] == server.reply
    prompt = traj.segments[0].token_ids
    assert [c[0] for c in server.calls] == [prompt, prompt + server.sent[0], prompt + server.sent[0] + server.sent[1]]
    assert [c[1] for c in server.calls] == [32, 30, 28]  # the turn's token budget is shared by its pieces
    assert traj.messages[-1].content == "the quick brown fox jumps"
    assert check_drift(tokenizer, traj).ok
    assert traj.metrics["rollout/resumed_generations"] == 2.0


async def test_without_resume_an_abort_ends_the_trajectory(tokenizer):
    server = AbortingServer(tokenizer, "the quick brown fox", aborts=1)
    (traj,) = await run(tokenizer, server, "abort")
    assert traj.stop_reason is StopReason.ABORTED and len(server.calls) == 1


async def test_an_abort_at_the_token_limit_is_a_cut_turn(tokenizer):
    server = AbortingServer(tokenizer, "the quick brown fox jumps over", aborts=1, cut=4)
    (traj,) = await run(tokenizer, server, "resume", max_tokens=4)
    assert traj.stop_reason is StopReason.MAX_TOKENS and len(server.calls) == 1
