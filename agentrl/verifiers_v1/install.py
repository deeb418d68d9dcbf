"""verifiers 0.4's own interpreter: `.venv-verifiers/` in the checkout, with `verifiers` (pinned) and `uv` (its
harnesses run as uv scripts), made by `python -m agentrl.verifiers_v1.install` (`make setup` runs it).

verifiers 0.4 pins `openai<3` and agentrl's environment has openai 3, so the two cannot share one. The first of
`$AGENTRL_VERIFIERS_PYTHON` and the checkout's `.venv-verifiers/bin/python` (once its stamp says it is complete)
runs `episode_server.py`. The install also runs `uv sync` once on the chat program verifiers' `null` and `bash`
harnesses run, so the first episode does not wait on the package registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from agentrl.errors import UserError

VERIFIERS_SPEC = "verifiers==0.4.0"
CHECKOUT_VENV = Path(__file__).resolve().parents[2] / ".venv-verifiers"
READY_STAMP = ".agentrl-ready"
INSTALL_COMMAND = "python -m agentrl.verifiers_v1.install"

_WARM_UV = """
import sys
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
open(sys.argv[1], "w").write(CHAT_PROGRAM_SOURCE)
"""


class VerifiersInstallError(UserError):
    """verifiers 0.4's interpreter is missing or could not be made."""


def verifiers_python() -> str | None:
    """The interpreter that has verifiers 0.4 installed (see the module docstring), or None."""
    explicit = os.environ.get("AGENTRL_VERIFIERS_PYTHON")
    if explicit:
        return explicit
    stamp = CHECKOUT_VENV / READY_STAMP
    ready = stamp.is_file() and stamp.read_text().strip() == VERIFIERS_SPEC
    return str(CHECKOUT_VENV / "bin" / "python") if ready else None


def require_verifiers_python() -> str:
    """`verifiers_python()`, or an error that says how to get one."""
    python = verifiers_python()
    if python is not None and not os.access(python, os.X_OK):
        raise VerifiersInstallError(
            f"AGENTRL_VERIFIERS_PYTHON={python} is not an interpreter here: point it at a python that has "
            f"{VERIFIERS_SPEC}, or unset it and run `{INSTALL_COMMAND}`"
        )
    if python is None:
        raise VerifiersInstallError(
            f"agent.name=verifiers_v1 needs {VERIFIERS_SPEC} in an interpreter of its own: run `{INSTALL_COMMAND}` "
            "(`make setup` does), or point AGENTRL_VERIFIERS_PYTHON at a python that has it"
        )
    return python


def install(venv: Path = CHECKOUT_VENV) -> str:
    """Makes `venv` with verifiers 0.4 and uv (nothing when its stamp says it is done); returns its python."""
    python = venv / "bin" / "python"
    stamp = venv / READY_STAMP
    if stamp.is_file() and stamp.read_text().strip() == VERIFIERS_SPEC:
        print(f"    up to date ({VERIFIERS_SPEC})", flush=True)
        return str(python)
    print(f"    creating {venv.name} and installing {VERIFIERS_SPEC} (a minute or two)", flush=True)
    stamp.unlink(missing_ok=True)  # written last: a half-made environment is never used
    _run([sys.executable, "-m", "venv", "--clear", str(venv)], "making the virtual environment")
    _run([str(python), "-m", "pip", "install", "-q", VERIFIERS_SPEC, "uv"], f"pip install {VERIFIERS_SPEC} uv")
    _warm_chat_program(venv)
    stamp.write_text(VERIFIERS_SPEC + "\n")
    return str(python)


def _warm_chat_program(venv: Path) -> None:
    """uv's cache holds the chat program's packages, so an episode's `uv sync --script` needs no download."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "chat_program.py"
        _run([str(venv / "bin" / "python"), "-c", _WARM_UV, str(script)], "writing verifiers' chat program")
        _run([str(venv / "bin" / "uv"), "sync", "--script", str(script), "-q", "--no-config"], "uv sync")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-2000:]
        raise VerifiersInstallError(f"{what} failed (exit {done.returncode}): {tail}\nrun `{INSTALL_COMMAND}` again")


if __name__ == "__main__":
    try:
        install()
    except VerifiersInstallError as exc:
        sys.exit(f"error: {exc}")
