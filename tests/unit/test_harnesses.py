"""The harness machinery without Docker: the bridge forwards a loopback port to the gateway's unix socket and passes
its command's exit code on; the built-in harnesses' command lines and environments are what the docs say; a
sandbox's extra mounts become the container's volumes."""

from __future__ import annotations

import asyncio
import json
import sys
import tomllib
from pathlib import Path

from agentrl.gateway import Gateway
from agentrl.harnesses.builtin import CLAUDE_CODE, CODEX, get_harness
from agentrl.harnesses.run import BRIDGE_PORT, harness_mounts, harness_socket_dir, session_url
from agentrl.harnesses.spec import HOME, Launch
from agentrl.loops.testing import ScriptedPolicy
from agentrl.sandbox.container_options import ExtraMount, add_mounts

BRIDGE = Path(__file__).resolve().parents[2] / "agentrl" / "harnesses" / "bridge.py"
LAUNCH = Launch(prompt="Fix it.", model="policy", base_url=session_url("abc"), args=("--verbose",))


async def test_the_bridge_forwards_its_port_to_the_gateway_socket_and_returns_the_commands_code(tokenizer):
    folder = harness_socket_dir()
    async with Gateway(ScriptedPolicy(tokenizer, ["Hello."]), tokenizer, unix_socket=f"{folder}/gateway.sock") as gw:
        session = gw.open_session()
        url = f"http://127.0.0.1:{BRIDGE_PORT + 1}/s/{session.id}/v1/chat/completions"
        client = (
            "import json, sys, urllib.request\n"
            "body = json.dumps({'model': 'p', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode()\n"
            f"req = urllib.request.Request({url!r}, body, {{'Content-Type': 'application/json'}})\n"
            "reply = json.load(urllib.request.urlopen(req, timeout=30))\n"
            "print(reply['choices'][0]['message']['content']); sys.exit(3)\n"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(BRIDGE), str(BRIDGE_PORT + 1), f"{folder}/gateway.sock", sys.executable, "-c", client,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 3 and stdout.decode().strip() == "Hello."
    assert len(session.recorder.calls) == 1  # the call went through the socket into the session


def test_claude_code_runs_bare_with_three_tools_a_short_prompt_and_no_traffic_but_the_gateway():
    argv, env = CLAUDE_CODE.command(CLAUDE_CODE, LAUNCH), CLAUDE_CODE.env(CLAUDE_CODE, LAUNCH)
    assert argv[0] == "/opt/agentrl/harness/claude_code/claude" and argv[1:3] == ["-p", "Fix it."]
    assert argv[argv.index("--tools") + 1] == "Bash,Edit,Read" and "--bare" in argv and argv[-1] == "--verbose"
    assert "<tool_call>" in argv[argv.index("--system-prompt") + 1]
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{BRIDGE_PORT}/s/abc"  # the SDK adds /v1
    for off in ("DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "DISABLE_AUTOUPDATER", "DISABLE_AUTO_COMPACT"):
        assert env[off] == "1"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["HOME"] == HOME


def test_codex_talks_responses_to_its_session_with_its_features_off():
    argv = CODEX.command(CODEX, LAUNCH)
    settings = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-c")
    provider = tomllib.loads(f"p = {settings['model_providers.agentrl']}")["p"]
    assert provider == {
        "name": "agentrl",
        "base_url": LAUNCH.base_url,
        "wire_api": "responses",
        "env_key": "AGENTRL_KEY",
    }
    assert settings["model_provider"] == "agentrl" and settings["analytics.enabled"] == "false"
    assert settings["web_search"] == '"disabled"' and settings["skills.include_instructions"] == "false"
    disabled = {argv[i + 1] for i, a in enumerate(argv) if a == "--disable"}
    assert {"multi_agent", "goals", "apps", "plugins"} <= disabled
    assert argv[1] == "exec" and argv[-1] == "Fix it." and "--verbose" in argv
    files = CODEX.setup(CODEX, LAUNCH)
    assert json.loads(settings["model_instructions_file"]) in files and f"{HOME}/.codex/config.toml" in files
    assert CODEX.env(CODEX, LAUNCH)["CODEX_HOME"] == f"{HOME}/.codex"


def test_harness_names_images_volumes_and_mounts():
    assert get_harness("codex") is CODEX and CODEX.version == "0.171.0-linux-x64"
    assert CLAUDE_CODE.tag == "agentrl/harness-claude-code:2.1.332"
    mounts = harness_mounts(CLAUDE_CODE, "/tmp/sock")
    assert mounts == [
        ExtraMount("agentrl-harness-claude-code-2.1.332", "/opt/agentrl/harness/claude_code", read_only=True),
        ExtraMount("/tmp/sock", "/run/agentrl", read_only=True),
    ]
    options = add_mounts({"volumes": {"work": {"bind": "/work", "mode": "rw"}}}, mounts)
    assert options["volumes"]["work"]["mode"] == "rw" and options["volumes"]["/tmp/sock"]["mode"] == "ro"
