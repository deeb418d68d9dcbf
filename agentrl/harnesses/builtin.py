"""Claude Code and Codex CLI, pinned, with the flags that make them fit a small model and keep them quiet.

What is shortened, and why, is in docs/guides/harnesses.md: each one's own flags and configuration only, nothing
of the harness patched. Telemetry, error reports, update checks and every request outside the agent's conversation
that a flag can stop are off; the container has no network anyway (its only way out is the gateway's socket).
"""

from __future__ import annotations

import json

from agentrl.harnesses.spec import HOME, Harness, Launch

CLAUDE_CODE_SYSTEM_PROMPT = (
    "You are a software engineer working in the repository in the current directory. Use your tools to read the "
    "code, run it and edit it until the task is done. For example, to list the files, reply with only:\n"
    '<tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call>'
)
CODEX_INSTRUCTIONS = (
    "You are a software engineer working in the repository in the current directory. Use exec_command to read "
    "the code, run it and edit it until the task is done. For example, to list the files, reply with only:\n"
    '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}\n</tool_call>'
)
"""The harnesses' own prompts replaced by a short one with one worked call (a 135M model copies the shape)."""
CODEX_FEATURES_OFF = ("multi_agent", "goals", "image_generation", "apps", "plugins")
"""Codex features whose tools the policy has no use for (sub-agents, goals, images, apps, plugins)."""


def _claude_command(harness: Harness, launch: Launch) -> list[str]:
    return [
        harness.binary, "-p", launch.prompt, "--output-format", "json", "--model", launch.model,
        "--bare",  # no hooks, plugins, CLAUDE.md discovery, attribution, background prefetches
        "--tools", "Bash,Edit,Read",  # the built-in tools a SWE task needs; the rest are ~10k tokens of schemas
        "--system-prompt", CLAUDE_CODE_SYSTEM_PROMPT,  # the default is ~3k tokens
        "--disable-slash-commands", "--strict-mcp-config", "--no-session-persistence",
        "--dangerously-skip-permissions",  # the container is the sandbox: no network, only /work writable
        *launch.args,
    ]  # fmt: skip


def _claude_env(harness: Harness, launch: Launch) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": launch.base_url.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": "agentrl",
        "ANTHROPIC_MODEL": launch.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": launch.model,  # its "small fast model" calls go to the policy too
        "HOME": HOME,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTO_COMPACT": "1",
    }


def _codex_command(harness: Harness, launch: Launch) -> list[str]:
    provider = {"name": "agentrl", "base_url": launch.base_url, "wire_api": "responses", "env_key": "AGENTRL_KEY"}
    provider_toml = "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in provider.items()) + "}"
    disabled = [arg for feature in CODEX_FEATURES_OFF for arg in ("--disable", feature)]
    return [
        harness.binary, "exec", "--skip-git-repo-check", "--json",
        "--dangerously-bypass-approvals-and-sandbox",  # the container is the sandbox: no network, only /work writable
        "-m", launch.model,
        "-c", "model_provider=agentrl", "-c", f"model_providers.agentrl={provider_toml}",
        "-c", 'web_search="disabled"',  # a hosted tool the gateway cannot serve
        "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
        "-c", f"model_instructions_file={json.dumps(HOME + '/instructions.md')}",  # the default is ~4k tokens
        "-c", "skills.include_instructions=false", "-c", "skills.bundled.enabled=false",  # ~600 tokens of skills
        *disabled, *launch.args, launch.prompt,
    ]  # fmt: skip


def _codex_env(harness: Harness, launch: Launch) -> dict[str, str]:
    return {"CODEX_HOME": f"{HOME}/.codex", "HOME": HOME, "AGENTRL_KEY": "agentrl", "NO_COLOR": "1"}


def _codex_setup(harness: Harness, launch: Launch) -> dict[str, str]:
    config = "# written by agentrl: every setting is on the command line (agentrl.harnesses.builtin)\n"
    return {f"{HOME}/instructions.md": CODEX_INSTRUCTIONS + "\n", f"{HOME}/.codex/config.toml": config}


CLAUDE_CODE = Harness(
    name="claude_code",
    package="@anthropic-ai/claude-code-linux-x64@2.1.332",
    executable="claude",
    command=_claude_command,
    env=_claude_env,
    api="messages",
)
CODEX = Harness(
    name="codex",
    package="@openai/codex@0.171.0-linux-x64",
    executable="vendor/x86_64-unknown-linux-musl/bin/codex",
    command=_codex_command,
    env=_codex_env,
    api="responses",
    setup=_codex_setup,
)
HARNESSES = {h.name: h for h in (CLAUDE_CODE, CODEX)}


def get_harness(name: str) -> Harness:
    """The harness named `name`.

    Raises:
        ValueError: no such harness, listing the known ones.
    """
    if name not in HARNESSES:
        raise ValueError(f"unknown harness {name!r}: agent.kwargs.harness takes {', '.join(HARNESSES)}")
    return HARNESSES[name]
