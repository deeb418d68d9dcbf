"""Supervised fine-tuning (`trainer.objective=sft`): the loss is transformers' own cross-entropy over the assistant's
tokens and moves nothing else; micro-batching changes no loss; a chat row renders to the tokens a loop records,
its tool calls in the parser's format; demonstration files are read, filtered and refused as the config says."""

from __future__ import annotations

import copy
import gzip
import json

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.config.schema import DataConfig
from agentrl.errors import UserError
from agentrl.loops.builder import TrajectoryBuilder
from agentrl.loops.chat_template import encode
from agentrl.tools.parsers import get_parser
from agentrl.trainer.batch import collate
from agentrl.trainer.demonstrations import load_demonstrations, render_chat
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.forward import response_logprobs
from agentrl.trainer.sft import sft_loss, sft_step
from agentrl.types import Message, Segment, StopReason, Trajectory
from tests.tiny_models import tiny_llama

HERMES = get_parser("hermes")


def demonstration(prompt, reply, tool=None, second=None, reward=1.0):
    """Segments as a loop records them, the replies without logprobs (a demonstrator's)."""
    segments = [Segment(token_ids=prompt, trainable=False), Segment(token_ids=reply, trainable=True)]
    if tool:
        segments += [Segment(token_ids=tool, trainable=False, role="tool"), Segment(token_ids=second, trainable=True)]
    return Trajectory(segments=segments, reward=reward, stop_reason=StopReason.DONE)


DEMOS = [
    demonstration([1, 2, 3], [4, 5, 6], tool=[10, 11, 12], second=[7, 8]),
    demonstration([9], [13, 14]),
    demonstration([3, 3, 2, 1], [15]),
]


def transformers_loss(model, demos) -> torch.Tensor:
    """The model's own `labels` loss over the same rows: every non-target token labelled -100 (ignored)."""
    width = max(t.num_tokens for t in demos)
    ids = torch.zeros((len(demos), width), dtype=torch.long)
    labels = torch.full((len(demos), width), -100)
    mask = torch.zeros((len(demos), width), dtype=torch.long)
    for row, traj in enumerate(demos):
        at = 0
        for segment in traj.segments:
            n = len(segment.token_ids)
            ids[row, at : at + n] = torch.tensor(segment.token_ids)
            if segment.trainable:
                labels[row, at : at + n] = torch.tensor(segment.token_ids)
            at += n
        mask[row, :at] = 1
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss


def test_the_loss_is_transformers_cross_entropy_over_the_assistant_tokens():
    model = tiny_llama()
    batch = collate(DEMOS, pad_token_id=0, require_logprobs=False)
    with torch.no_grad():
        logp = response_logprobs(model, batch, slice(None), torch.float32)
        ours, metrics = sft_loss(logp, batch.response_mask)
        theirs = transformers_loss(model, DEMOS)
    assert float(ours) == pytest.approx(float(theirs), abs=1e-5)
    assert metrics["nll"] == pytest.approx(float(theirs), abs=1e-5)


def test_only_the_assistant_tokens_get_a_gradient():
    """The gradient of the loss reaches the logprob of every assistant token and of no prompt, tool or padding
    token (those are context)."""
    engine = PolicyEngine(tiny_llama())
    batch = collate(DEMOS, pad_token_id=0, require_logprobs=False)
    seen = {}

    def loss_fn(logp, rows, entropy=None):
        logp.retain_grad()
        seen["logp"] = logp
        return sft_loss(logp, batch.response_mask[rows])

    engine.train_step(batch, loss_fn)
    grad = seen["logp"].grad
    assert torch.all(grad[batch.response_mask == 0] == 0)  # the tool tokens [10, 11, 12] and padding
    assert torch.all(grad[batch.response_mask == 1] != 0)
    assert int(batch.response_mask.sum()) == sum(t.num_generated_tokens for t in DEMOS) == 8


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_micro_batches_change_no_loss_and_no_gradient(mode):
    """A step cut into micro-batches of a few tokens (`micro_batch_tokens`) is the step of the whole batch."""

    def step(micro_batch_tokens):
        engine = PolicyEngine(tiny_llama(), EngineConfig(lr=1e-2, micro_batch_tokens=micro_batch_tokens))
        metrics = sft_step(engine, TrainerConfig(objective="sft", loss_agg=mode), copy.deepcopy(DEMOS), 0)
        return metrics, engine.full_gradients()

    (whole, whole_grads), (cut, cut_grads) = step(4096), step(8)
    assert cut["train/loss"] == pytest.approx(whole["train/loss"], abs=1e-6)
    assert cut["train/grad_norm"] == pytest.approx(whole["train/grad_norm"], rel=1e-5)
    assert whole["train/tokens"] == 8.0 and whole["train/rows_trained"] == 3.0
    assert whole_grads.keys() == cut_grads.keys()
    for name, grad in whole_grads.items():
        assert torch.allclose(grad, cut_grads[name], atol=1e-6), name


def loop_recording(tokenizer, messages, replies, results):
    """A trajectory as a tool-calling loop records it: the model's replies as generated tokens (end token
    included), each tool result the template's suffix."""
    builder = TrajectoryBuilder(tokenizer, Trajectory(id="loop"))
    builder.start(messages)
    for i, reply in enumerate(replies):
        ids = encode(tokenizer, reply + "<|im_end|>")
        builder.add_generation(ids, [-0.5] * len(ids), 0)
        if i < len(results):
            builder.add_messages([Message(role="tool", content=results[i], tool_call_id=f"call_{i}")])
    return builder.trajectory


def test_a_chat_row_renders_to_the_tokens_a_loop_records(tokenizer):
    prompt = [Message(role="system", content="Use the tools."), Message(role="user", content="What is 2+3?")]
    replies = ['<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>', "It is 5."]
    recorded = loop_recording(tokenizer, prompt, replies, ["5"])
    row = [m.model_dump(exclude_none=True) for m in recorded.messages]
    rendered = render_chat(row, tokenizer, HERMES)
    assert rendered.token_ids == recorded.token_ids
    assert [s.trainable for s in rendered.segments] == [s.trainable for s in recorded.segments]
    assert [s.token_ids for s in rendered.segments] == [s.token_ids for s in recorded.segments]
    assert all(s.logprobs is None for s in rendered.segments)


def test_tool_calls_of_a_chat_row_are_written_in_the_parser_s_format_and_parse_back(tokenizer):
    calls = [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "alpha"}'}}]
    row = [
        {"role": "user", "content": "Look alpha up."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "alpha is 42"},
    ]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    rendered = render_chat(row, tokenizer, HERMES, tools=tools)
    first, second = [s for s in rendered.segments if s.trainable]
    text = tokenizer.decode(first.token_ids)
    assert text.endswith("<|im_end|>")
    parsed = HERMES.parse(text.removesuffix("<|im_end|>"))
    assert [(c.name, c.arguments) for c in parsed.calls] == [("lookup", {"key": "alpha"})] and not parsed.errors
    assert tokenizer.decode(second.token_ids) == "alpha is 42<|im_end|>"
    assert "lookup" in tokenizer.decode(rendered.segments[0].token_ids)  # described in the system prompt


def write_jsonl(path, rows):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


def test_demonstration_files_are_read_and_filtered_by_reward_and_stop_reason(tokenizer, tmp_path):
    good, poor = copy.deepcopy(DEMOS[0]), demonstration([1], [2], reward=0.0)
    cut = demonstration([1], [3], reward=1.0)
    cut.stop_reason = StopReason.MAX_TOKENS
    failed = demonstration([1], [4], reward=1.0)
    failed.stop_reason = StopReason.SERVER_ERROR
    early = demonstration([5], [6])  # an earlier step sample of a conversation that rewrote its context
    good.earlier_steps = [early]
    trajectories = write_jsonl(tmp_path / "run.jsonl.gz", [json.loads(t.to_json()) for t in (good, poor, cut, failed)])
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    chat = write_jsonl(tmp_path / "chat.jsonl", [{"messages": said}])
    data = DataConfig(demonstrations=[trajectories, chat], min_reward=0.5, stop_reasons=["done"])
    rows = load_demonstrations(data, tokenizer, HERMES)
    assert [r.token_ids for r in rows[:2]] == [early.token_ids, good.token_ids]  # every step sample a row
    assert len(rows) == 3 and tokenizer.decode(rows[2].segments[-1].token_ids) == "hello<|im_end|>"
    everything = load_demonstrations(DataConfig(demonstrations=[trajectories]), tokenizer, HERMES)
    assert len(everything) == 4  # all but the failed one


def test_bad_demonstrations_are_refused_with_what_to_do(tokenizer, tmp_path):
    with pytest.raises(UserError, match="data.demonstrations lists none"):
        load_demonstrations(DataConfig(), tokenizer, HERMES)
    with pytest.raises(UserError, match="is not a file"):
        load_demonstrations(DataConfig(demonstrations=[str(tmp_path / "none.jsonl")]), tokenizer, HERMES)
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"prompt": "hi"}])
    with pytest.raises(UserError, match="line 1 of .*odd.jsonl is neither an agentrl trajectory"):
        load_demonstrations(DataConfig(demonstrations=[odd]), tokenizer, HERMES)
    mute = write_jsonl(tmp_path / "mute.jsonl", [{"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(UserError, match="at least one assistant message"):
        load_demonstrations(DataConfig(demonstrations=[mute]), tokenizer, HERMES)
    poor = write_jsonl(tmp_path / "poor.jsonl", [json.loads(demonstration([1], [2], reward=0.0).to_json())])
    with pytest.raises(UserError, match="none of the 1 rows .* is left to train on"):
        load_demonstrations(DataConfig(demonstrations=[poor], min_reward=0.5), tokenizer, HERMES)


def test_an_sft_run_without_demonstrations_or_in_an_async_mode_is_refused_at_start():
    from agentrl.config import load_config
    from agentrl.trainer.preflight import trainer_problems

    problems = trainer_problems(load_config("quickstart", ["trainer.objective=sft", "trainer.mode=async"]))
    assert any("list their files in data.demonstrations" in p for p in problems), problems
    assert any("trainer.objective=sft trains in trainer.mode=sync" in p for p in problems), problems
    assert not trainer_problems(load_config("quickstart", ["trainer.objective=sft", "data.demonstrations=[x.jsonl]"]))


def test_a_lora_policy_learns_demonstrations_in_its_adapters_only():
    from agentrl.trainer.lora import apply_lora

    model = apply_lora(tiny_llama(), rank=2, alpha=4.0, target_modules=["q_proj", "v_proj"])
    engine = PolicyEngine(model, EngineConfig(lr=1e-2))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    first = sft_step(engine, TrainerConfig(objective="sft", lora_rank=2), copy.deepcopy(DEMOS), 0)
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert changed and all("lora_" in name for name in changed)  # the base model stays as it was
    second = sft_step(engine, TrainerConfig(objective="sft", lora_rank=2), copy.deepcopy(DEMOS), 0)
    assert second["train/loss"] < first["train/loss"]  # the same demonstrations, after a step on them


async def test_a_resumed_run_trains_on_the_demonstrations_the_interrupted_one_would_have():
    from agentrl.trainer.sft_batches import DemonstrationBatches

    rows = [demonstration([1], [i]) for i in range(2, 9)]
    whole, resumed = DemonstrationBatches(rows, 3, seed=1), DemonstrationBatches(rows, 3, seed=1)
    first = await whole.collect(1)
    resumed.cursor.load_state(first.cursor_state)  # what step 1's checkpoint holds
    assert [t.token_ids for t in (await resumed.collect(2)).trajectories] == [
        t.token_ids for t in (await whole.collect(2)).trajectories
    ]
    assert first.generated == [] and first.metrics["data/demonstrations"] == 3.0  # nothing rolled out
