"""Tool-call parsers (hermes, llama3_json), their registry, and how tool schemas reach the prompt."""

from __future__ import annotations

import json

import pytest

from agentrl.errors import AgentRLError
from agentrl.tools import add_tool_instructions, get_parser, template_has_tools_slot, tool, tools_system_prompt
from agentrl.tools.base import ToolCall
from agentrl.tools.parsers.hermes import HermesParser
from agentrl.tools.parsers.llama3_json import Llama3JsonParser
from agentrl.types import Message
from tests.unit.chatml import CHATML, chatml_tokenizer


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


def block(obj: object) -> str:
    return f"<tool_call>\n{json.dumps(obj)}\n</tool_call>"


# --- hermes -----------------------------------------------------------------------------------------------------


def test_hermes_single_call_with_text_around() -> None:
    raw = block({"name": "add", "arguments": {"a": 2, "b": 3}})
    parsed = HermesParser().parse(f"Let me add.\n{raw}\nDone.")
    assert parsed.content == "Let me add.\nDone."
    assert parsed.errors == []
    [call] = parsed.calls
    assert (call.id, call.name, call.arguments, call.raw) == ("call_0", "add", {"a": 2, "b": 3}, raw)


def test_hermes_multiple_calls_and_tolerated_variants() -> None:
    text = (
        block({"name": "add", "arguments": {"a": 1}})
        + block({"name": "add", "parameters": {"a": 2}})
        + block({"name": "add", "arguments": json.dumps({"a": 3}), "id": "x9"})
        + '<tool_call>```json\n{"name": "add", "arguments": {"a": 4}}\n```</tool_call>'
    )
    parsed = get_parser("hermes").parse(text)
    assert [c.arguments["a"] for c in parsed.calls] == [1, 2, 3, 4]
    assert [c.id for c in parsed.calls] == ["call_0", "call_1", "x9", "call_3"]
    assert parsed.content == "" and parsed.errors == []


def test_hermes_no_calls() -> None:
    parsed = HermesParser().parse("  The answer is 4.  ")
    assert (parsed.content, parsed.calls, parsed.errors) == ("The answer is 4.", [], [])


def test_hermes_invalid_json_is_an_error_and_other_calls_survive() -> None:
    text = '<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>' + block({"name": "add", "arguments": {}})
    parsed = HermesParser().parse(text)
    assert len(parsed.calls) == 1 and len(parsed.errors) == 1
    assert "invalid JSON (Expecting property name enclosed in double quotes at line 1 column 38)" in parsed.errors[0]
    assert '<tool_call>\n{"name": "<tool name>"' in parsed.errors[0]  # tells the model the expected format


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"arguments": {"a": 1}}, 'missing "name"'),
        ({"name": 3}, 'missing "name"'),
        ({"name": "add", "arguments": [1, 2]}, 'the arguments of "add" must be a JSON object, got [1, 2]'),
        ({"name": "add", "arguments": "a=1"}, 'the arguments of "add" must be a JSON object, got "a=1"'),
        (["add"], 'a tool call must be a JSON object, got ["add"]'),
    ],
)
def test_hermes_malformed_calls(body: object, message: str) -> None:
    parsed = HermesParser().parse(block(body))
    assert parsed.calls == []
    assert len(parsed.errors) == 1 and message in parsed.errors[0]


def test_hermes_text_after_json_is_an_error() -> None:
    parsed = HermesParser().parse('<tool_call>{"name": "add"} and more</tool_call>')
    assert parsed.calls == [] and "unexpected text after the JSON object" in parsed.errors[0]


def test_hermes_unterminated_tag_is_an_error() -> None:
    text = "Sure. " + block({"name": "add", "arguments": {"a": 1}}) + '<tool_call>{"name": "add", "arguments": {"a"'
    parsed = HermesParser().parse(text)
    assert [c.arguments for c in parsed.calls] == [{"a": 1}]
    assert parsed.errors == [parsed.errors[0]] and parsed.errors[0].startswith("unterminated <tool_call> block")
    assert parsed.content == "Sure."


def test_hermes_missing_arguments_means_none() -> None:
    [call] = HermesParser().parse(block({"name": "now"})).calls
    assert call.arguments == {}


# --- llama3_json ------------------------------------------------------------------------------------------------


def test_llama3_single_call() -> None:
    text = '{"name": "add", "parameters": {"a": 2, "b": 3}}'
    parsed = Llama3JsonParser().parse(text)
    assert parsed.errors == [] and parsed.content == ""
    [call] = parsed.calls
    assert (call.id, call.name, call.arguments, call.raw) == ("call_0", "add", {"a": 2, "b": 3}, text)


def test_llama3_python_tag_and_several_calls() -> None:
    text = '<|python_tag|>{"name": "add", "parameters": {"a": 1}}; {"name": "echo", "arguments": {"s": "x;y"}}'
    parsed = get_parser("llama3_json").parse(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("add", {"a": 1}), ("echo", {"s": "x;y"})]
    assert parsed.calls[1].raw == '{"name": "echo", "arguments": {"s": "x;y"}}'
    assert parsed.errors == []


def test_llama3_plain_text_is_content() -> None:
    parsed = Llama3JsonParser().parse("The answer is {4}.\n")
    assert (parsed.content, parsed.calls, parsed.errors) == ("The answer is {4}.", [], [])


def test_llama3_text_after_calls_is_content() -> None:
    parsed = Llama3JsonParser().parse('{"name": "add", "parameters": {"a": 1}}\nI will now add.')
    assert len(parsed.calls) == 1 and parsed.content == "I will now add."


def test_llama3_malformed() -> None:
    bad_json = Llama3JsonParser().parse('{"name": "add", "parameters": {"a": }}')
    assert bad_json.calls == [] and bad_json.errors[0].startswith("invalid JSON in tool call (Expecting value")
    no_name = Llama3JsonParser().parse('{"parameters": {"a": 1}}; {"name": "add", "parameters": {}}')
    assert [c.name for c in no_name.calls] == ["add"] and 'missing "name"' in no_name.errors[0]
    bare_tag = Llama3JsonParser().parse("<|python_tag|>print(1)")
    assert bare_tag.calls == [] and "expected a JSON tool call after <|python_tag|>" in bare_tag.errors[0]
    truncated = Llama3JsonParser().parse('{"name": "add", "parameters": {"a": 1}}; {"name": "ad')
    assert len(truncated.calls) == 1 and "invalid JSON" in truncated.errors[0]


# --- registry and instructions ----------------------------------------------------------------------------------


def test_unknown_parser_lists_known() -> None:
    with pytest.raises(
        AgentRLError, match="unknown tool-call parser 'hermez'. Did you mean 'hermes'.*hermes, llama3_json"
    ):
        get_parser("hermez")


def test_parser_by_dotted_path_and_instance() -> None:
    assert isinstance(get_parser("agentrl.tools.parsers.hermes:HermesParser"), HermesParser)
    parser = Llama3JsonParser()
    assert get_parser(parser) is parser


@pytest.mark.parametrize("parser", ["hermes", "llama3_json"])
def test_format_instructions_round_trip(parser: str) -> None:
    """The instructions name the tool and show the format the same parser reads back."""
    text = get_parser(parser).format_instructions([add.schema()])
    assert '"name": "add"' in text and "Add two integers." in text
    example = {
        "hermes": block({"name": "add", "arguments": {"a": 1}}),
        "llama3_json": '{"name": "add", "parameters": {"a": 1}}',
    }
    assert get_parser(parser).parse(example[parser]).calls[0].arguments == {"a": 1}


# --- prompt -----------------------------------------------------------------------------------------------------

QWEN_LIKE = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}{%- for tool in tools %}{{ tool | tojson }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}" + CHATML
)


class FakeTokenizer:
    def __init__(self, chat_template: object) -> None:
        self.chat_template = chat_template


def test_template_tools_slot_detection() -> None:
    assert not template_has_tools_slot(FakeTokenizer(CHATML))
    assert template_has_tools_slot(FakeTokenizer(QWEN_LIKE))
    assert template_has_tools_slot(FakeTokenizer({"default": CHATML, "tool_use": QWEN_LIKE}))
    assert not template_has_tools_slot(FakeTokenizer("{{ message['tool_calls'] }}"))  # "tools" as a word only
    assert not template_has_tools_slot(FakeTokenizer(None))


def test_tools_system_prompt_fallback_and_slot() -> None:
    schemas = [add.schema()]
    assert tools_system_prompt(FakeTokenizer(QWEN_LIKE), schemas, "hermes") is None
    assert tools_system_prompt(FakeTokenizer(CHATML), [], "hermes") is None
    text = tools_system_prompt(FakeTokenizer(CHATML), schemas, "hermes")
    assert text == HermesParser().format_instructions(schemas)


def test_add_tool_instructions_merges_or_prepends() -> None:
    user = Message(role="user", content="2+3?")
    system = Message(role="system", content="Be brief.")
    assert add_tool_instructions([user], "TOOLS") == [Message(role="system", content="TOOLS"), user]
    merged = add_tool_instructions([system, user], "TOOLS")
    assert merged[0].content == "Be brief.\n\nTOOLS" and merged[1] is user
    assert system.content == "Be brief."  # input untouched
    parts = Message(role="system", content=[{"type": "text", "text": "Hi"}])
    assert add_tool_instructions([parts], "T")[0].content == [
        {"type": "text", "text": "Hi"},
        {"type": "text", "text": "T"},
    ]


def test_fallback_renders_through_a_real_template_without_tools_slot(tokenizer: object) -> None:
    """With a ChatML template like SmolLM2's, `tools=` is dropped, so the fallback puts them in the system turn."""
    schemas = [add.schema()]
    dropped = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=schemas, tokenize=False)
    assert "add" not in dropped
    text = tools_system_prompt(tokenizer, schemas, "hermes")
    messages = add_tool_instructions([Message(role="user", content="2+3?")], text)
    rendered = tokenizer.apply_chat_template([m.to_openai() for m in messages], tokenize=False)
    assert rendered.startswith("<|im_start|>system\n# Tools")
    assert '"name": "add"' in rendered and "<tool_call>" in rendered


def test_real_template_with_tools_slot_renders_schemas() -> None:
    tok = chatml_tokenizer()
    tok.chat_template = QWEN_LIKE
    assert tools_system_prompt(tok, [add.schema()], "hermes") is None
    rendered = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=[add.schema()], tokenize=False)
    assert '"name": "add"' in rendered


@pytest.mark.parametrize("name", ["hermes", "llama3_json"])
def test_formatted_calls_parse_back_to_the_same_calls(name):
    parser = get_parser(name)
    calls = [ToolCall("a", "add", {"a": 2, "b": 3}), ToolCall("b", "echo", {"text": "héllo; {x}"})]
    parsed = parser.parse(parser.format_calls(calls))
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in calls]
    assert parsed.errors == []


def test_the_streamable_content_stops_where_a_call_may_begin():
    hermes, llama = get_parser("hermes"), get_parser("llama3_json")
    assert hermes.content_length("Let me add.\n<tool_call>\n{") == len("Let me add.\n")
    assert hermes.content_length("Let me add.\n<tool_") == len("Let me add.\n")  # may be an opening tag
    assert hermes.content_length("a <") == 2 and hermes.content_length("a < b") == 5
    assert llama.content_length('{"name": "add"') == 0 and llama.content_length("  <|python") == 0
    assert llama.content_length("It is 5.") == len("It is 5.")
