"""The unmodified `mini-swe-agent` (PyPI) as an `openai_agent` entry point, its shell inside agentrl's sandbox.

`run` builds mini-swe-agent's own `DefaultAgent` and text-based litellm model, pointed at the trajectory's gateway
URL, with `SandboxEnvironment` as its environment: every command it issues runs in the task's container (no
network, resource limits, removed afterwards), never on the host. The agent's config is mini-swe-agent's
packaged `mini_textbased.yaml` unless `config_file` names another.

```yaml
agent:
  name: openai_agent
  kwargs: {entry_point: agentrl.swe.mini_swe_agent:run, task_sandbox: swe_task}
```
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from agentrl.sandbox.base import SandboxError
from agentrl.sandbox.blocking import BlockingSandbox
from agentrl.types import Sample

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The gateway's refusals (budgets) are final, and the rollout client already retries server failures: without
# this, mini-swe-agent would retry a refused call 10 times with up to a minute between tries.
os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")

COMMAND_TIMEOUT_S = 60
FINISHED = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class SandboxEnvironment:
    """mini-swe-agent's `Environment` over an agentrl sandbox (commands run in the sandbox's working folder).

    Args:
        sandbox: the trajectory's sandbox.
        timeout: seconds per command (the config's `environment.timeout`).
        env: environment variables of every command (the config's `environment.env`: PAGER=cat and the like).
    """

    def __init__(
        self, sandbox: BlockingSandbox, timeout: int = COMMAND_TIMEOUT_S, env: dict[str, str] | None = None
    ) -> None:
        self.sandbox, self.timeout = sandbox, timeout
        self.env = {k: str(v) for k, v in (env or {}).items()}

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run one action's command; raise mini-swe-agent's `Submitted` when the agent submits. A command the
        sandbox could not run comes back as an observation (returncode -1), as mini-swe-agent's own
        environments report it."""
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        try:
            result = self.sandbox.exec(command, timeout=timeout or self.timeout, workdir=cwd or None, env=self.env)
        except SandboxError as exc:
            return {"output": "", "returncode": -1, "exception_info": f"the sandbox could not run the command: {exc}"}
        output = result.stdout + result.stderr
        info = f"the command timed out after {timeout or self.timeout} s" if result.timed_out else ""
        lines = output.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == FINISHED and result.exit_code == 0:
            submission = "".join(lines[1:])
            extra = {"exit_status": "Submitted", "submission": submission}
            raise Submitted({"role": "exit", "content": submission, "extra": extra})
        return {"output": output, "returncode": result.exit_code, "exception_info": info}

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {"system": "Linux", "release": "", "version": "", "machine": "x86_64", "cwd": self.sandbox.workdir}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment_type": f"{__name__}.SandboxEnvironment"}}}


def agent_config(config_file: str | None = None) -> dict[str, Any]:
    """mini-swe-agent's config: its packaged `mini_textbased.yaml`, or `config_file`."""
    if config_file is None:
        import minisweagent

        config_file = str(Path(minisweagent.__file__).parent / "config" / "mini_textbased.yaml")
    return yaml.safe_load(Path(config_file).read_text())


def run(base_url: str, model: str, sample: Sample, sandbox: BlockingSandbox | None, **options: Any) -> dict[str, Any]:
    """Solve `sample`'s task (its `problem_statement`, else its prompt) with mini-swe-agent; returns its exit
    status and submission."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    if sandbox is None:
        raise ValueError("mini-swe-agent needs a sandbox: set agent.kwargs.task_sandbox=swe_task or sandbox.backend")
    config = agent_config(options.get("config_file"))
    model_config = {
        **config.get("model", {}),
        "model_name": f"openai/{model}",
        "model_kwargs": {"api_base": base_url, "api_key": "agentrl", "drop_params": True},
        "cost_tracking": "ignore_errors",
    }
    agent_settings = {**config.get("agent", {}), "cost_limit": 0.0}
    env_config = config.get("environment") or {}
    environment = SandboxEnvironment(sandbox, env_config.get("timeout") or COMMAND_TIMEOUT_S, env_config.get("env"))
    agent = DefaultAgent(LitellmTextbasedModel(**model_config), environment, **agent_settings)
    task = sample.extra_info.get("problem_statement") or _prompt_text(sample)
    result = agent.run(task)
    return {"exit_status": result.get("exit_status", ""), "submission": result.get("submission", "")}


def _prompt_text(sample: Sample) -> str:
    return "\n\n".join(str(m.content) for m in sample.prompt if m.role == "user")
