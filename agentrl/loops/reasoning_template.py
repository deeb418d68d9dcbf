"""A reasoning chat template in the style of Qwen3's, for ChatML tokenizers (the default SmolLM2 model).

Reasoning models' templates drop the `<think>...</think>` block from every assistant turn before the last user
message: once the user speaks again, earlier reasoning is no longer shown to the model. Such a template rewrites
history, so the prompt of the next turn is not an extension of the tokens generated so far; agentrl then records
the template's real rendering as a new step sample (`AgentContext.add_messages`, the gateway's recorder). This
template lets tests, and users of a ChatML model trained to reason, exercise exactly that.
"""

from __future__ import annotations

import copy
from typing import Any

THINK_END = "</think>"

REASONING_CHATML_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{%- endif -%}"
    "{%- set content = message['content'] -%}"
    # an answer given before the latest user message loses its reasoning: only the text after </think> stays
    "{%- if message['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\n') -%}"
    "{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
"""ChatML (with SmolLM2's default system message) whose assistant turns before the last user message are rendered
without their `<think>...</think>` reasoning; the turns after it (the current tool-calling exchange) keep theirs."""


def with_reasoning_template(tokenizer: Any) -> Any:
    """A copy of a ChatML `tokenizer` whose chat template is `REASONING_CHATML_TEMPLATE` (the original is unchanged,
    so a shared tokenizer stays as it was)."""
    reasoning = copy.deepcopy(tokenizer)
    reasoning.chat_template = REASONING_CHATML_TEMPLATE
    return reasoning
