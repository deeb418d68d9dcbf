"""The tool layer: @tool schemas, class-tool lifecycle, ToolSet error handling, output caps, registry."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from agentrl.config import ToolSpec
from agentrl.errors import AgentRLError
from agentrl.tools import Tool, ToolCall, ToolContext, ToolResult, ToolSet, build_tools, get_tool_class, tool
from agentrl.tools import registry as tool_registry
from agentrl.tools.schema import parse_docstring
from agentrl.tools.validation import validate_arguments


@tool
def search(
    query: str,
    limit: int = 5,
    mode: Literal["fast", "exact"] = "fast",
    tags: list[str] | None = None,
    weights: dict[str, float] | None = None,
) -> str:
    """Search the corpus.

    Args:
        query (str): what to look for,
            in plain words.
        limit: the most results to return.
        mode: how to match.

    Returns:
        The hits, one per line.
    """
    return f"{query}|{limit}|{mode}|{tags}|{weights}"


@tool(name="async_echo", timeout_s=2.0)
async def echo(text: str) -> str:
    """Echo the text back."""
    await asyncio.sleep(0)
    return text


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"id_{name}", name=name, arguments=arguments, raw="")


def toolset(*tools: Tool, **kwargs: Any) -> ToolSet:
    return ToolSet(list(tools), trajectory_id="traj-1", **kwargs)


# --- @tool schemas ---------------------------------------------------------------------------------------------


def test_schema_from_hints_and_docstring() -> None:
    function = search.schema()["function"]
    assert search.schema()["type"] == "function"
    assert function["name"] == "search"
    assert function["description"] == "Search the corpus."
    params = function["parameters"]
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for, in plain words."}
    assert props["limit"] == {"type": "integer", "description": "the most results to return.", "default": 5}
    assert props["mode"]["enum"] == ["fast", "exact"] and props["mode"]["type"] == "string"
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "nullable": True, "default": None}
    assert props["weights"]["additionalProperties"] == {"type": "number"}


def test_decorator_options_and_direct_call() -> None:
    assert echo.name == "async_echo" and echo.timeout_s == 2.0
    assert echo.description == "Echo the text back."
    assert search("x") == "x|5|fast|None|None"  # still callable as the plain function


def test_union_and_bool_and_float_hints() -> None:
    @tool
    def f(flag: bool, ratio: float, either: int | str) -> None:
        """F."""

    props = f.parameters["properties"]
    assert props["flag"] == {"type": "boolean"}
    assert props["ratio"] == {"type": "number"}
    assert props["either"] == {"type": ["integer", "string"]}


def test_unsupported_hint_names_the_parameter() -> None:
    with pytest.raises(TypeError, match="parameter 'when'.*'bad'"):

        @tool
        def bad(when: set[int]) -> str:
            return ""


def test_missing_hint_names_the_parameter() -> None:
    with pytest.raises(TypeError, match="parameter 'x'.*no type hint"):

        @tool
        def bad(x) -> str:  # type: ignore[no-untyped-def]
            return ""


def test_docstring_without_sections() -> None:
    assert parse_docstring("Just a summary.\n\nMore text.") == ("Just a summary.\n\nMore text.", {})
    assert parse_docstring(None) == ("", {})


def test_context_parameter_is_injected_not_in_schema() -> None:
    @tool
    def whoami(ctx: ToolContext, prefix: str = "") -> str:
        """Tell the trajectory id."""
        return prefix + ctx.trajectory_id

    assert list(whoami.parameters["properties"]) == ["prefix"]
    result = asyncio.run(toolset(whoami).execute(call("whoami", prefix="id=")))
    assert result.content == "id=traj-1" and not result.is_error


# --- execution ------------------------------------------------------------------------------------------------


async def test_sync_and_async_tools_run() -> None:
    tools = toolset(search, echo)
    sync = await tools.execute(call("search", query="cats", tags=["a"]))
    assert sync.content == "cats|5|fast|['a']|None" and not sync.is_error and sync.call_id == "id_search"
    async_ = await tools.execute(call("async_echo", text="hi"))
    assert async_.content == "hi" and async_.name == "async_echo" and async_.duration_s > 0


async def test_non_string_results_are_json() -> None:
    @tool
    def stats(n: int) -> dict:
        """Stats."""
        return {"n": n, "ok": True}

    assert (await toolset(stats).execute(call("stats", n=2))).content == '{"n": 2, "ok": true}'


async def test_async_tool_times_out() -> None:
    @tool
    async def slow() -> str:
        """Sleep."""
        await asyncio.sleep(10)
        return "done"

    tools = toolset(slow, timeout_s=0.05)
    result = await tools.execute(call("slow"))
    assert result.is_error and result.timed_out
    assert "timed out after 0.05s" in result.content
    assert tools.metrics["tool/timeouts"] == 1


async def test_blocking_sync_tool_times_out() -> None:
    release = threading.Event()

    @tool(timeout_s=0.05)
    def blocking() -> str:
        """Block."""
        release.wait(5)
        return "done"

    start = time.monotonic()
    result = await toolset(blocking, timeout_s=30).execute(call("blocking"))
    release.set()
    assert result.timed_out and result.is_error
    assert time.monotonic() - start < 2  # the per-tool timeout applied, the loop was not blocked


async def test_tool_raising_timeout_error_is_not_a_timeout() -> None:
    @tool
    async def inner() -> str:
        """Raise."""
        raise TimeoutError("upstream slow")

    result = await toolset(inner).execute(call("inner"))
    assert result.is_error and not result.timed_out and "upstream slow" in result.content


async def test_exception_becomes_error_result() -> None:
    @tool
    def divide(a: int, b: int) -> float:
        """Divide."""
        return a / b

    result = await toolset(divide).execute(call("divide", a=1, b=0))
    assert result.is_error
    assert result.content == "Error: tool 'divide' failed: ZeroDivisionError: division by zero"


async def test_unknown_tool_lists_available() -> None:
    tools = toolset(search, echo)
    result = await tools.execute(call("foo"))
    assert result.is_error
    assert result.content == "Error: unknown tool 'foo'. Available tools: search, async_echo."
    assert tools.metrics["tool/unknown"] == 1


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "missing required argument 'query'"),
        ({"query": 3}, "argument 'query' must be string, got integer 3"),
        ({"query": "x", "limit": "5"}, "argument 'limit' must be integer, got string '5'"),
        ({"query": "x", "limit": True}, "argument 'limit' must be integer, got boolean True"),
        ({"query": "x", "mode": "slow"}, "argument 'mode' must be one of 'fast', 'exact', got string 'slow'"),
        ({"query": "x", "tags": ["a", 1]}, "argument 'tags[1]' must be string"),
        ({"query": "x", "weights": {"a": "b"}}, "argument 'weights.a' must be number"),
        ({"query": "x", "colour": "red"}, "unexpected argument 'colour' (allowed: query, limit, mode, tags, weights)"),
    ],
)
async def test_bad_arguments(arguments: dict[str, Any], expected: str) -> None:
    tools = toolset(search)
    result = await tools.execute(call("search", **arguments))
    assert result.is_error and expected in result.content
    assert "Expected: query (string, required), limit (integer)" in result.content
    assert tools.metrics["tool/bad_args"] == 1


def test_valid_arguments_and_nullable() -> None:
    schema = search.parameters
    assert validate_arguments({"query": "x", "tags": None, "limit": 2, "weights": {"a": 1}}, schema) == []
    assert validate_arguments("nope", schema) == ["arguments must be a JSON object, got string"]


# --- output caps, errors and metrics ----------------------------------------------------------------------------


async def test_output_truncated_with_marker_default_estimate() -> None:
    @tool
    def big() -> str:
        """Big."""
        return "x" * 100

    tools = toolset(big, max_output_tokens=10)
    result = await tools.execute(call("big"))
    assert result.truncated and not result.is_error
    assert result.content == "x" * 40 + "\n[output truncated: 15 more tokens]"
    assert tools.metrics["tool/truncated"] == 1


async def test_output_truncated_with_tokenizer_functions() -> None:
    @tool
    def words() -> str:
        """Words."""
        return " ".join(f"w{i}" for i in range(20))

    tools = toolset(
        words,
        max_output_tokens=5,
        count_tokens=lambda s: len(s.split()),
        truncate_tokens=lambda s, n: " ".join(s.split()[:n]),
    )
    result = await tools.execute(call("words"))
    assert result.content == "w0 w1 w2 w3 w4\n[output truncated: 15 more tokens]"


async def test_consecutive_errors_limit_and_reset() -> None:
    tools = toolset(echo, max_consecutive_errors=3)
    await tools.execute(call("nope"))
    tools.record_parse_error("invalid JSON in <tool_call> block")
    assert tools.consecutive_errors == 2 and not tools.error_limit_reached()
    await tools.execute(call("async_echo", text="ok"))
    assert tools.consecutive_errors == 0
    for _ in range(3):
        await tools.execute(call("async_echo"))  # missing argument
    assert tools.error_limit_reached()


async def test_metrics_counted() -> None:
    tools = toolset(echo)
    await tools.execute(call("async_echo", text="a"))
    await tools.execute(call("nope"))
    parse = tools.record_parse_error("missing name")
    assert parse.is_error and parse.content == "Error: missing name"
    metrics = tools.metrics
    assert metrics["tool/calls"] == 2 and metrics["tool/errors"] == 2
    assert metrics["tool/unknown"] == 1 and metrics["tool/parse_errors"] == 1
    assert metrics["tool/time_s"] > 0 and metrics["tool/timeouts"] == 0


def test_toolset_rejects_duplicate_names() -> None:
    with pytest.raises(AgentRLError, match="unique"):
        toolset(echo, echo)


async def test_tool_returning_tool_result() -> None:
    @tool
    def submit(answer: str) -> ToolResult:
        """Submit."""
        return ToolResult(call_id="", name="", content="submitted", metadata={"answer": answer})

    result = await toolset(submit).execute(call("submit", answer="42"))
    assert result.call_id == "id_submit" and result.name == "submit" and result.metadata == {"answer": "42"}
    assert result.to_message().role == "tool"


# --- class tools: lifecycle -------------------------------------------------------------------------------------


class Counter(Tool):
    name = "count"
    description = "Increment a counter."
    events: list[str]

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.events = []

    async def create(self, ctx: ToolContext) -> None:
        await asyncio.sleep(0.01)  # lets parallel first calls overlap
        self.events.append(f"create:{ctx.trajectory_id}")
        ctx.state["n"] = self.config.get("start", 0)

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        ctx.state["n"] += 1
        return str(ctx.state["n"])

    async def release(self, ctx: ToolContext) -> None:
        self.events.append(f"release:{ctx.trajectory_id}")
        if self.config.get("fail_release"):
            raise RuntimeError("release failed")


async def test_class_tool_created_once_on_first_use_and_released_once() -> None:
    counter = Counter({"start": 10})
    tools = toolset(counter)
    assert counter.events == []  # nothing is created before the first call
    results = await asyncio.gather(*(tools.execute(call("count")) for _ in range(3)))
    assert sorted(r.content for r in results) == ["11", "12", "13"]
    await tools.release()
    await tools.release()  # idempotent
    assert counter.events == ["create:traj-1", "release:traj-1"]


async def test_state_is_per_trajectory() -> None:
    counter = Counter()
    first, second = ToolSet([counter], trajectory_id="a"), ToolSet([counter], trajectory_id="b")
    await first.execute(call("count"))
    assert (await first.execute(call("count"))).content == "2"
    assert (await second.execute(call("count"))).content == "1"


async def test_unused_tool_is_not_released() -> None:
    counter = Counter()
    await toolset(counter).release()
    assert counter.events == []


async def test_release_errors_swallowed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    counter = Counter({"fail_release": True})
    tools = toolset(counter)
    await tools.execute(call("count"))
    with caplog.at_level(logging.ERROR, logger="agentrl.tools.toolset"):
        await tools.release()
    assert "releasing tool 'count'" in caplog.text


async def test_create_failure_is_an_error_result() -> None:
    class Broken(Counter):
        name = "broken"

        async def create(self, ctx: ToolContext) -> None:
            raise OSError("no sandbox")

    result = await toolset(Broken()).execute(call("broken"))
    assert result.is_error and "could not start: OSError: no sandbox" in result.content


# --- registry and build_tools -----------------------------------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[None]:
    with tool_registry.TOOLS.scoped():
        yield


def test_register_and_build_by_name_and_dotted_path(registry: None) -> None:
    tool_registry.register_tool("counter")(Counter)
    tool_registry.register_tool("echo")(echo)
    tools = build_tools(
        [
            {"class": "counter", "config": {"start": 3}},
            ToolSpec.model_validate({"class": "echo"}),
            {"class": f"{__name__}:search"},
        ]
    )
    assert [t.name for t in tools] == ["count", "async_echo", "search"]
    assert isinstance(tools[0], Counter) and tools[0].config == {"start": 3}
    assert get_tool_class(f"{__name__}.Counter") is Counter


def test_unknown_tool_name_lists_known(registry: None) -> None:
    tool_registry.register_tool("counter")(Counter)
    with pytest.raises(AgentRLError, match=r"unknown tool 'countr'\. Did you mean 'counter'\? Known tools: .*counter"):
        get_tool_class("countr")


def test_build_tools_reports_every_problem(registry: None) -> None:
    tool_registry.register_tool("counter")(Counter)
    specs = [
        {"class": "nope"},
        {"class": "counter", "extra": 1},
        {"class": "agentrl.tools.missing:Tool"},
        {"class": "counter"},
        {"class": "counter"},
    ]
    with pytest.raises(AgentRLError) as info:
        build_tools(specs)
    message = str(info.value)
    assert "tools[0]: unknown tool 'nope'" in message
    assert "tools[1]: unexpected keys ['extra']" in message
    assert "tools[2]: tool 'agentrl.tools.missing:Tool': cannot import" in message
    assert "two tools are named 'count'" in message


def test_register_rejects_non_tools() -> None:
    with pytest.raises(TypeError, match="must be a Tool subclass"):
        tool_registry.register_tool("x")(object)


def test_tool_config_model_validated() -> None:
    from pydantic import BaseModel

    class Settings(BaseModel):
        depth: int = 1

    class Configured(Counter):
        name = "configured"
        config_model = Settings

    assert Configured({"depth": 3}).cfg == Settings(depth=3)
    with pytest.raises(AgentRLError, match="invalid config of tool 'configured'"):
        Configured({"depth": "deep"})
