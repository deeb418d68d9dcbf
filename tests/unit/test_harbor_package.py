"""Choosing who reads Harbor tasks (data.harbor_reader): Harbor's package when an interpreter has it, else
agentrl's reader; asked for and missing, a clear refusal at start. (The package itself, for real:
tests/integration/test_harbor_package_real.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentrl.config import load_config
from agentrl.harbor import package
from agentrl.harbor.package import BRIDGE, HarborPackageError, harbor_python, resolve_reader
from agentrl.loops.preflight import data_problems


def test_auto_reads_with_agentrl_when_no_interpreter_has_harbor() -> None:
    assert harbor_python() is None
    assert resolve_reader("auto") == "agentrl" and resolve_reader("agentrl") == "agentrl"


def test_asking_for_harbor_without_it_says_how_to_install_it() -> None:
    with pytest.raises(HarborPackageError, match=r"pip install harbor.*AGENTRL_HARBOR_PYTHON.*harbor_reader=agentrl"):
        resolve_reader("harbor")
    cfg = load_config(overrides=["recipe=harbor", "data.harbor_reader=harbor"])
    (problem, *_) = data_problems(cfg)
    assert problem.startswith("data.train_files[0]: data.harbor_reader=harbor, but no Python has the `harbor`")


def test_an_interpreter_is_found_where_the_setup_finished_or_where_named(tmp_path, monkeypatch) -> None:
    venv = tmp_path / ".venv-harbor"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(package, "CHECKOUT_VENV", venv)
    assert harbor_python() is None  # a half-made environment (no stamp yet) is not used
    (venv / package.READY_STAMP).write_text("harbor==0.26.0\n")
    assert harbor_python() == str(venv / "bin" / "python") and resolve_reader("auto") == "harbor"
    monkeypatch.setenv("AGENTRL_HARBOR_PYTHON", "/opt/py312/bin/python")
    assert harbor_python() == "/opt/py312/bin/python"


def test_an_interpreter_without_harbor_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("AGENTRL_HARBOR_PYTHON", sys.executable)  # agentrl's own Python: no harbor in it
    with pytest.raises(HarborPackageError, match="could not use the `harbor` package.*No module named 'harbor'"):
        package.manifest_names(BRIDGE)


def test_the_bridge_refuses_an_unknown_command() -> None:
    done = subprocess.run([sys.executable, str(BRIDGE), "build"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage: package_bridge.py tasks DIR" in done.stderr
