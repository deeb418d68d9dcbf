"""A reply ended by a stop sequence: clients of every API the gateway speaks get the text before it (as Anthropic
and OpenAI return it; Messages also names the sequence), streamed or not, through the official `anthropic` and
`openai` SDKs, while the recording keeps the stopping tokens (token-exact) and the next call, which sends back the
text without the sequence, still extends it."""

from __future__ import annotations

import anthropic
import openai
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.protocol import SamplingParams
from tests.unit.test_gateway import trainable_ids

SAID = "one two END three"
"""What the scripted policy would say: a server stops it at `END`, the token that completes it kept."""
BEFORE = "one two "


def anthropic_client(session) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=session.base_url.removesuffix("/v1"), api_key="unused", max_retries=0)


def openai_client(session) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)


def assert_recorded_exactly(tokenizer, session, policy) -> None:
    """Both calls in one step sample that holds the stopping tokens as generated."""
    (step,) = session.recorder.steps
    stopped = tokenizer.encode("one two END", add_special_tokens=False)
    assert session.recorder.calls[0].output_ids == stopped and trainable_ids(step)[: len(stopped)] == stopped
    replies = [m.content for m in step.messages if m.role == "assistant"]
    assert replies[0] == "one two END"  # the model's own text, as its tokens say
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True]
    assert policy.calls[1][: len(policy.calls[0]) + len(stopped)] == policy.calls[0] + stopped
    assert check_drift(tokenizer, step).ok


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_returns_the_text_before_the_stop_sequence_and_names_it(tokenizer, stream):
    policy = ScriptedPolicy(tokenizer, [SAID, "Done."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = anthropic_client(session)
        messages: list = [{"role": "user", "content": "Count."}]
        ask = {"model": "p", "max_tokens": 32, "messages": messages, "stop_sequences": ["STOP", "END"]}
        if stream:
            async with llm.messages.stream(**ask) as events:
                texts = [text async for text in events.text_stream]
                reply = await events.get_final_message()
            assert "".join(texts) == BEFORE
        else:
            reply = await llm.messages.create(**ask)
        assert [b.type for b in reply.content] == ["text"] and reply.content[0].text == BEFORE
        assert (reply.stop_reason, reply.stop_sequence) == ("stop_sequence", "END")
        messages += [{"role": "assistant", "content": BEFORE}, {"role": "user", "content": "Go on."}]
        await llm.messages.create(model="p", max_tokens=32, messages=messages)
    assert_recorded_exactly(tokenizer, session, policy)


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_return_the_text_before_the_stop_sequence(tokenizer, stream):
    policy = ScriptedPolicy(tokenizer, [SAID, "Done."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = openai_client(session)
        messages: list = [{"role": "user", "content": "Count."}]
        if stream:
            chunks = await llm.chat.completions.create(model="p", messages=messages, stop=["END"], stream=True)
            pieces = [c async for c in chunks]
            content = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
            finish = [c.choices[0].finish_reason for c in pieces if c.choices and c.choices[0].finish_reason]
        else:
            reply = await llm.chat.completions.create(model="p", messages=messages, stop="END")
            content, finish = reply.choices[0].message.content, [reply.choices[0].finish_reason]
        assert (content, finish) == (BEFORE, ["stop"])
        messages += [{"role": "assistant", "content": content}, {"role": "user", "content": "Go on."}]
        await llm.chat.completions.create(model="p", messages=messages)
    assert_recorded_exactly(tokenizer, session, policy)


async def test_a_stop_sequence_split_across_tokens_is_never_streamed(tokenizer):
    """A stream holds back what may begin a stop sequence: no part of it reaches the client."""
    policy = ScriptedPolicy(tokenizer, ["alpha beta<<<STOP>>> gamma"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        chunks = await openai_client(session).chat.completions.create(
            model="p", messages=[{"role": "user", "content": "Go."}], stop=["<<<STOP>>>"], stream=True
        )
        deltas = [c.choices[0].delta.content for c in [c async for c in chunks] if c.choices]
    assert len(tokenizer.encode("<<<STOP>>>", add_special_tokens=False)) > 1
    assert "".join(d or "" for d in deltas) == "alpha beta" and not any("<" in (d or "") for d in deltas)


async def test_the_responses_api_returns_the_text_before_a_stop_sequence_of_the_run(tokenizer):
    """The Responses API takes no `stop` (nor does OpenAI's); a run's own stop sequences end its replies alike."""
    policy = ScriptedPolicy(tokenizer, [SAID])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(sampling=SamplingParams(stop=["END"]))
        llm = openai_client(session)
        reply = await llm.responses.create(model="p", input="Count.")
        with pytest.raises(openai.BadRequestError, match="stop"):
            await llm.responses.create(model="p", input="Count.", extra_body={"stop": ["END"]})
    assert reply.output_text == BEFORE
    assert session.recorder.calls[0].output_ids == tokenizer.encode("one two END", add_special_tokens=False)
