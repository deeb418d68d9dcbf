"""Every `agentrl train | rollout | eval | gateway | config show` command in the README and the docs resolves and
validates as written: its recipe, its keys and values, every name it gives, its data files. What needs more than
this machine (vLLM installed, a shared folder, a host name) is checked as far as it allows, and says so."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from agentrl.config import ConfigError, load_config
from agentrl.evaluate import parse_eval_overrides
from agentrl.gateway.serve import parse_gateway_overrides
from agentrl.loops.preflight import validate_episodes
from agentrl.trainer.preflight import validate_run

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CHECKED = ("train", "rollout", "eval", "gateway", "config")
PLACEHOLDERS = {"HOST": "127.0.0.1", "NAME": "default"}
ALLOWED = {
    "rollout.backend=vllm": "no vLLM Python",  # an optional install (scripts/install_vllm.sh)
    "rollout.shared_weights_dir=": "is not a folder on this machine",  # a folder shared with other hosts
    "path/to/": "does not exist",  # the user's own files
    "verifiers_v1": "python -m agentrl.verifiers_v1.install",  # verifiers 0.4's interpreter: made by make setup
}


def documented_commands() -> list[tuple[str, str]]:
    """(page:line, command) of each `agentrl <checked>` line in a code block, continued lines joined."""
    found = []
    for page in PAGES:
        lines, in_code = page.read_text().splitlines(), False
        for i, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            text = line.split("  #")[0].strip()
            if not in_code or not text.startswith("agentrl ") or text.split()[1] not in CHECKED:
                continue
            j = i
            while text.endswith("\\"):
                j += 1
                text = text[:-1] + " " + lines[j].split("  #")[0].strip()
            found.append((f"{page.relative_to(ROOT)}:{i + 1}", text))
    return found


COMMANDS = documented_commands()


def test_the_docs_have_commands_to_check():
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_resolves_and_validates(where: str, command: str):
    words = shlex.split(re.sub(r"\b(HOST|NAME)\b", lambda m: PLACEHOLDERS[m.group()], command))[1:]
    verb, overrides = words[0], [w for w in words[1:] if "=" in w and not w.startswith("-")]
    if verb == "config":
        load_config(overrides=overrides)  # `config show` resolves no names, as the CLI does
        return
    if verb == "eval":
        overrides = parse_eval_overrides(overrides)[1]
    if verb == "gateway":
        overrides = parse_gateway_overrides(overrides)[1]
    preflight = validate_run if verb == "train" else validate_episodes  # as each command checks itself
    try:
        preflight(load_config(overrides=overrides))
    except ConfigError as error:
        unexplained = [p for p in error.problems if not _needs_more_than_this_machine(command, p)]
        assert not unexplained, f"{where}: {command}\n" + "\n".join(unexplained)


def _needs_more_than_this_machine(command: str, problem: str) -> bool:
    return any(flag in command and reason in problem for flag, reason in ALLOWED.items())
