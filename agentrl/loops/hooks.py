"""What a run asks of its loop's class: the loop that plays its rows, its samples, its environment in words.

The hooks are classmethods of `AgentLoopBase` (`samples`, `problems`, `environment_form`) that a loop overrides, so
a subclass registered under another name keeps them. `agentrl.data` and `agentrl.config` sit below the loops and
never resolve a loop; the run's loop class is resolved here and its answers passed down.
"""

from __future__ import annotations

from agentrl import data
from agentrl.config.environment_form import environment_form as config_environment_form
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.base import LOOPS, AgentLoopBase
from agentrl.types import Sample


def loop_name(cfg: AgentRLConfig) -> str:
    """The loop the run's training rows play: `agent.name`, or the one named on rows generated from env seeds."""
    seeded = cfg.env.enabled and not cfg.data.train_files
    return cfg.data.agent_name or (data.env_rows_loop(cfg) if seeded else None) or cfg.agent.name


def run_loop(cfg: AgentRLConfig) -> type[AgentLoopBase]:
    """The class of the loop the run's rows play (`loop_name`).

    Raises:
        UserError: the name is unknown (the known ones listed) or its module does not import.
    """
    return LOOPS.get(loop_name(cfg))


def run_samples(cfg: AgentRLConfig, split: str) -> list[Sample]:
    """The samples of the run's `train` or `eval` split: for a split without data files, the loop's own dataset
    when it has one (`AgentLoopBase.samples`); otherwise as `agentrl.data.run_samples` reads them.

    Raises:
        UserError: the loop is unknown; `DatasetError` for a train split without data.
    """
    return data.run_samples(cfg, split, run_loop(cfg).samples)


def prepare_run(cfg: AgentRLConfig, *splits: list[Sample]) -> None:
    """What the run's samples need prepared on this machine, by their loop (`AgentLoopBase.prepare`)."""
    run_loop(cfg).prepare(cfg, [sample for split in splits for sample in split])


def environment_form(cfg: AgentRLConfig) -> str:
    """The run's environment in words (`AgentLoopBase.environment_form` of its loop); a loop name that does not
    resolve is described from the config alone (`agentrl config show` shows a config without checking it)."""
    try:
        loop = run_loop(cfg)
    except UserError:
        return config_environment_form(cfg)
    return loop.environment_form(cfg)


__all__ = ["environment_form", "loop_name", "run_loop", "run_samples"]
