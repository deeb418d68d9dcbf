"""The chat-completions request fields the gateway honours, ignores and refuses: the one list, which
docs/guides/existing-agent.md quotes (`fields_tables()` writes its tables; a test checks that the page holds them
as written).

Honoured fields shape the reply as they would at OpenAI. Ignored fields change nothing the policy generates (they
are bookkeeping for the provider a client thinks it talks to). Refused fields ask for a reply the gateway cannot
give, or cannot train exactly: a 400 names the field and says what to send instead; their default values, which
ask for nothing, pass. A field in none of the lists is refused too: it may change the reply, and a reply
generated without it is not the one the agent asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HONOURED: dict[str, str] = {
    "messages": "rendered with the policy's chat template; the recorded tokens are reused when they extend the "
    "conversation",
    "model": "with several policies (`policies:`), the policy of that name generates; any other name means the "
    "default policy",
    "tools": "offered to the policy in its chat template; the reply is parsed for tool calls (`agent.tool_parser`)",
    "tool_choice": '`"auto"` (the default) parses the reply for tool calls, `"none"` does not; `"required"` and a '
    "named function are refused: forcing a call would mean constrained decoding, which trains on tokens the policy "
    "did not sample freely",
    "max_tokens": "lowers the run's reply budget (`rollout.max_tokens`), never raises it",
    "max_completion_tokens": "as `max_tokens`",
    "stop": "a string or a list of strings that end the reply; its content is what came before the one that ended "
    "it, as at OpenAI (the recorded tokens keep the ones that completed it)",
    "n": "1 only: one choice per call",
    "stream": "server-sent chunks as the policy generates",
    "stream_options": "`include_usage` adds the usage chunk",
    "temperature": "with `honour_request_sampling` (`agentrl gateway` honours it); else the run's "
    "`rollout.temperature`. 0 (greedy) is refused where the replies are trained: greedy tokens have no sampling "
    "distribution to train on (evaluation, which runs greedily, and `agentrl gateway` take it)",
    "top_p": "with `honour_request_sampling`; else the run's `rollout.top_p`. Below 1 it truncates the sampling "
    "distribution, which the trainer does not: refused where the replies are trained, unless `trainer.tis_cap` "
    "corrects it (then honoured, with a warning, as the run's own `rollout.top_p` is)",
    "top_k": "with `honour_request_sampling`; else the run's `rollout.top_k`. Above 0 it truncates: as `top_p`",
    "seed": "with `honour_request_sampling`; else the run's seed per call",
}
SAMPLING = ("temperature", "top_p", "top_k", "seed")
"""The fields that change the sampling when the session honours the agent's own settings."""
IGNORED: dict[str, str] = {
    "store": "OpenAI's storing of the completion",
    "user": "an end-user id",
    "metadata": "tags for OpenAI's dashboard",
    "service_tier": "OpenAI's processing tier",
    "prompt_cache_key": "OpenAI's prompt-cache routing (the gateway reuses recorded tokens anyway)",
    "safety_identifier": "an end-user id for OpenAI's abuse checks",
    "prediction": "a predicted output speeds OpenAI up without changing the reply",
}


@dataclass(frozen=True)
class Refusal:
    """Why the gateway refuses a field and what to send instead; `passes`: the values that ask for nothing."""

    why: str
    passes: Callable[[Any], bool]


def _unset(*defaults: Any) -> Callable[[Any], bool]:
    return lambda value: value is None or any(value == d and type(value) is type(d) for d in defaults)


_PENALTY = "penalties and biases reshape the sampling distribution, which the trainer cannot reproduce"
REFUSED: dict[str, Refusal] = {
    "frequency_penalty": Refusal(f"{_PENALTY}: omit it (or send 0)", _unset(0, 0.0)),
    "presence_penalty": Refusal(f"{_PENALTY}: omit it (or send 0)", _unset(0, 0.0)),
    "repetition_penalty": Refusal(f"{_PENALTY}: omit it (or send 1)", _unset(1, 1.0)),
    "logit_bias": Refusal(f"{_PENALTY}: omit it", _unset({})),
    "min_p": Refusal("it truncates the sampling distribution: omit it (or send 0)", _unset(0, 0.0)),
    "min_tokens": Refusal("it suppresses the end of the reply: omit it (or send 0)", _unset(0)),
    "ignore_eos": Refusal("it suppresses the end of the reply: omit it", _unset(False)),
    "best_of": Refusal("the gateway samples one reply per call: omit it (or send 1)", _unset(1)),
    "use_beam_search": Refusal("beam search is not sampling: omit it", _unset(False)),
    "logprobs": Refusal("the gateway returns no logprobs (it records them for training): omit it", _unset(False)),
    "top_logprobs": Refusal("the gateway returns no logprobs: omit it", _unset(0)),
    "response_format": Refusal(
        "structured output needs constrained decoding, which the gateway does not do: omit it and ask for the "
        "format in the prompt",
        lambda value: value is None or value == {"type": "text"},
    ),
    "parallel_tool_calls": Refusal(
        "the gateway returns every tool call the policy makes: omit it (or send true)", _unset(True)
    ),
    "functions": Refusal("legacy function calling: omit it and send `tools` instead", _unset([])),
    "function_call": Refusal("legacy function calling: omit it and send `tool_choice` instead", _unset()),
    "reasoning_effort": Refusal("the policy has no reasoning-effort setting: omit it", _unset()),
    "verbosity": Refusal("the policy has no verbosity setting: omit it", _unset()),
    "modalities": Refusal("the policy replies in text only: omit it", lambda value: value in (None, ["text"])),
    "audio": Refusal("the policy replies in text only: omit it", _unset()),
    "web_search_options": Refusal("the gateway has no web search: omit it", _unset()),
}


def forced_tool_choice(choice: Any) -> str | None:
    """Why the gateway refuses a well-formed `tool_choice` that forces a call (`"required"`, a named function), with
    what to send instead; None for one it honours."""
    if choice == "required":
        forced = '`tool_choice: "required"` forces a tool call'
    elif isinstance(choice, dict):
        forced = f"`tool_choice` naming function {choice['function']['name']!r} forces a call to it"
    else:
        return None
    return (
        f"{forced}, which the gateway cannot do without constrained decoding (the policy would be trained on tokens "
        'it did not sample freely): send `"auto"` (or leave `tool_choice` out), name the tool in the prompt, and '
        "check the reply's `tool_calls`"
    )


def untrainable_sampling(body: dict[str, Any], truncation_corrected: bool) -> tuple[str, str] | None:
    """The sampling field of `body` whose replies could not be trained exactly, with what to send instead (for a
    session that trains and honours the agent's sampling); None when they can be. `truncation_corrected`: the
    trainer corrects truncated sampling (`trainer.tis_cap`), so `top_p` < 1 and `top_k` > 0 pass."""
    if body.get("temperature") == 0:
        return "temperature", (
            "`temperature: 0` is greedy decoding: its tokens have no sampling distribution, and this session's "
            "replies are trained on; send a temperature above 0, or leave `temperature` out to sample at the run's "
            "rollout.temperature (greedy decoding is for evaluation, which agentrl runs greedily)"
        )
    truncating = truncated_field(body)
    if truncating is None or truncation_corrected:
        return None
    name, off = truncating
    return name, (
        f"`{name}: {body[name]}` truncates the sampling distribution: the server reports the logprobs of the "
        "truncated one while the trainer scores the whole policy, so this session's trained replies would be off "
        f"the policy; leave it out (or send {off}) to sample the whole distribution, or set trainer.tis_cap (e.g. 2) "
        "to train truncated sampling with a capped importance weight"
    )


def truncated_field(body: dict[str, Any]) -> tuple[str, str] | None:
    """The field of `body` that truncates the sampling distribution (`top_p` < 1, `top_k` > 0) and the value
    that turns it off; None when neither does."""
    if body.get("top_p") is not None and body["top_p"] < 1:
        return "top_p", "1"
    if body.get("top_k") is not None and body["top_k"] > 0:
        return "top_k", "-1"
    return None


def unapplied_field(body: dict[str, Any]) -> tuple[str, str] | None:
    """The first field of `body` the gateway would have to drop (a refused field set to something other than its
    default, or a field in no list), with the message saying what to do; None when there is none."""
    for name, value in body.items():
        if name in HONOURED or name in IGNORED:
            continue
        refusal = REFUSED.get(name)
        if refusal is None:
            return name, (
                f"unknown field `{name}`: the gateway does not apply it, and a field it does not know may change the "
                "reply; remove it (docs/guides/existing-agent.md lists the fields the gateway honours and ignores)"
            )
        if not refusal.passes(value):
            return name, f"`{name}` is not supported: {refusal.why}"
    return None


def fields_tables() -> str:
    """The three lists as the markdown tables the docs quote."""
    rows = {
        "Honoured": HONOURED,
        "Ignored (they change nothing the policy generates)": IGNORED,
        "Refused (a 400 naming the field; their default values pass)": {n: r.why for n, r in REFUSED.items()},
    }
    out = []
    for title, fields in rows.items():
        out += [f"**{title}**", "", *_table(fields), ""]
    out.append("Any other field is refused: it may change the reply, and the gateway does not apply it.")
    return "\n".join(out) + "\n"


def _table(fields: dict[str, str]) -> list[str]:
    return ["| field | |", "|---|---|", *(f"| `{name}` | {text} |" for name, text in fields.items())]


def api_fields_table(fields: dict[str, str]) -> str:
    """The fields of another API the gateway speaks (`messages_api.MESSAGES_FIELDS`, `responses_api.RESPONSES_FIELDS`)
    as the markdown table the docs quote."""
    return "\n".join([*_table(fields), "", "Any other field is refused with a 400 naming it."]) + "\n"
