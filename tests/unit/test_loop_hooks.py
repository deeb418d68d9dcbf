"""What a loop brings with it (its own dataset, its start-up checks, the environment it reads) is asked of its
class, never of its name: a subclass registered under another name keeps all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.config.loader import load_config
from agentrl.loops.base import register_loop
from agentrl.runner import rollout_samples
from agentrl.trainer.preflight import run_problems

pytest.importorskip("verifiers")
pytest.importorskip("textarena")

from agentrl.loops.textarena import TextArenaLoop
from agentrl.loops.verifiers import VerifiersLoop

ENV_FILE = str(Path(__file__).parents[1] / "verifiers_envs.py")


@register_loop("renamed_verifiers")
class RenamedVerifiersLoop(VerifiersLoop):
    """The verifiers loop under a name of its own, as a user's subclass registers it."""


@register_loop("renamed_textarena")
class RenamedTextArenaLoop(TextArenaLoop):
    """The TextArena loop under a name of its own."""


def test_a_renamed_verifiers_loop_keeps_the_environment_s_dataset():
    cfg = load_config(overrides=["agent.name=renamed_verifiers", f"agent.kwargs.env_id={ENV_FILE}"])
    samples = rollout_samples(cfg)  # no data files: the environment's eval dataset
    assert [s.ground_truth for s in samples] == ["red", "blue"]
    assert all(s.data_source == f"verifiers/{ENV_FILE}" for s in samples)


def test_a_renamed_verifiers_loop_keeps_its_start_up_checks():
    overrides = ["agent.name=renamed_verifiers", "agent.kwargs.env_id=no-such-env", "reward.components=[]"]
    cfg = load_config("quickstart", overrides)  # no components: the environment's rubric is its reward
    (missing,) = run_problems(cfg)
    assert "verifiers cannot load 'no-such-env'" in missing


def test_a_renamed_textarena_loop_is_shown_as_a_textarena_game(capsys):
    assert main(["config", "show", "agent.name=renamed_textarena", "agent.kwargs.env_id=Wordle-v0"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "# environment: TextArena game 'Wordle-v0' (agent.kwargs.env_id)"
