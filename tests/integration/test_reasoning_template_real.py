"""A reasoning chat template through the gateway, with the real `hf` server and the default model: the template
drops an earlier turn's `<think>` block once a new user message follows it, so the gateway prompts the model with,
and records, the template's real rendering as a new step sample; every step sample passes the drift checker.

The 135M model never writes `<think>` itself, so the reasoning comes from the agent's resumed history (an assistant
turn the gateway did not generate, still after the last user message, so at first rendered with its reasoning);
every reply in the test is the real model's."""

from __future__ import annotations

import openai
import pytest

from agentrl.gateway import Gateway
from agentrl.gateway.serve import session_trajectory
from agentrl.loops.chat_template import encode, render
from agentrl.loops.drift import check_drift
from agentrl.loops.reasoning_template import with_reasoning_template
from agentrl.rollout import LLMClient
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Message

pytestmark = pytest.mark.integration

SAMPLING = SamplingParams(temperature=1.0, max_tokens=24, seed=7)
THOUGHT = "Adding 2 and 3 in my head gives 5"
RESUMED = [
    {"role": "system", "content": "You are a helpful assistant. Answer in a few words."},
    {"role": "user", "content": "What is 2+3?"},
    {
        "role": "assistant",
        "content": f'<think>\n{THOUGHT}; let me check.\n</think>\n\n<tool_call>\n{{"name": "add"}}\n</tool_call>',
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "5"},
]


class Recording:
    """The rollout client, keeping each call's prompt and what the server returned for it."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm, self.prompts, self.outputs = llm, [], []

    async def generate(self, prompt_ids, sampling, session_id=None):
        self.prompts.append(list(prompt_ids))
        out = await self.llm.generate(prompt_ids, sampling, session_id=session_id)
        self.outputs.append(out)
        return out


def rendering(tokenizer, messages: list[dict]) -> str:
    as_rendered = [Message(role=m["role"], content=m["content"]) for m in messages]
    return render(tokenizer, as_rendered, add_generation_prompt=True)


async def test_a_template_that_drops_earlier_reasoning_is_recorded_as_it_renders(hf_server_url, default_tokenizer):
    reasoning = with_reasoning_template(default_tokenizer)
    messages = list(RESUMED)
    sent = []
    async with LLMClient([hf_server_url]) as llm:
        recording = Recording(llm)
        async with Gateway(recording, reasoning) as gateway:
            session = gateway.open_session("think", sampling=SAMPLING)
            sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
            for follow_up in ("And 3+4?", "Thanks!", None):
                sent.append(list(messages))
                reply = await sdk.chat.completions.create(model="policy", messages=messages)
                messages.append(reply.choices[0].message.model_dump(exclude_none=True))
                if follow_up:
                    messages.append({"role": "user", "content": follow_up})
            gateway.close_session(session)
    recorder = session.recorder
    assert [c.step for c in recorder.calls] == [0, 1, 1] and recorder.template_rewrites == 1
    assert [c.prefix_matched for c in recorder.calls] == [False, False, True]
    first, rewritten, extended = recording.prompts
    assert THOUGHT in reasoning.decode(first) and THOUGHT not in reasoning.decode(rewritten)
    # what the model saw is the template's rendering: token for token where the gateway rendered the prompt, and
    # as text where it extended the recorded tokens (the model's own tokens, which it may split differently)
    assert first == encode(reasoning, rendering(reasoning, sent[0]))
    assert rewritten == encode(reasoning, rendering(reasoning, sent[1]))
    assert reasoning.decode(extended) == rendering(reasoning, sent[2])
    traj = session_trajectory(session)
    assert traj is not None and len(traj.earlier_steps) == 1
    assert traj.metrics["loop/template_rewrites"] == 1.0
    generated = [list(out.token_ids) for out in recording.outputs]
    for step, outputs in zip(traj.step_samples(), [generated[:1], generated[1:]], strict=True):
        assert [t for s in step.segments if s.trainable for t in s.token_ids] == [t for o in outputs for t in o]
        report = check_drift(reasoning, step)
        assert report.ok or report.kind == "tokenization", str(report)
