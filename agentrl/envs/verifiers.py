"""verifiers environments, read unchanged: their dataset as the run's samples (the loop is `agentrl.loops.verifiers`).

`agent.name=verifiers` with `agent.kwargs: {env_id: my-env, env_args: {...}}` loads the environment as verifiers'
own `load_environment` does: the installed module `my_env` (an Environments Hub package, or any module on the path)
and its `load_environment(**env_args)`; an `env_id` ending in `.py` is that file's `load_environment`. With no
`data.train_files`, the training samples are the environment's dataset (`data.num_train_samples` rows) and the
held-out ones its eval dataset (`data.num_eval_samples` rows; none when it has no eval dataset: verifiers would
fall back to the training rows, which is no held-out set). Each sample keeps the row verifiers made (prompt, answer,
info, task, example_id) in `extra_info.verifiers_input`: the loop hands it to the environment as it is.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.registry import MissingPackageError, import_object, import_package
from agentrl.types import Message, Sample

logger = logging.getLogger(__name__)

_LOADED: dict[str, Any] = {}


def import_verifiers() -> Any:
    return import_package("verifiers", "verifiers", "agent.name=verifiers")


def installed_environments() -> list[str]:
    """The verifiers environments installed as packages (distributions that depend on `verifiers`)."""
    names = set()
    for dist in importlib.metadata.distributions():
        requires = dist.requires or []
        if any(r.split(";")[0].strip().lower().startswith("verifiers") for r in requires):
            names.add(dist.metadata["Name"])
    return sorted(names - {"verifiers", "agentrl"})


def load_environment(env_id: str, env_args: dict[str, Any]) -> Any:
    """The `vf.Environment` named `env_id` built with `env_args` (loaded once per process and arguments)."""
    key = f"{env_id}:{json.dumps(env_args, sort_keys=True, default=str)}"
    if key not in _LOADED:
        env = environment_builder(env_id)(**env_args)
        env.env_id = env.env_id or env_id  # as verifiers' own load_environment sets them
        env.env_args = env.env_args or env_args
        _LOADED[key] = env
    return _LOADED[key]


def environment_builder(env_id: str) -> Any:
    """The `load_environment` function of the module `env_id` names (verifiers' own module naming) or of a file.

    Raises:
        UserError: no such module or file, or it has no load_environment.
    """
    import_verifiers()
    if env_id.endswith(".py"):
        return import_object(f"{env_id}:load_environment", "agent.kwargs.env_id")
    from verifiers.utils.env_utils import env_module_name, import_env_module

    try:
        module = import_env_module(env_id)
    except ImportError as exc:
        raise UserError(f"no module {env_module_name(env_id)} ({exc})") from None
    if not callable(build := getattr(module, "load_environment", None)):
        raise UserError(f"module {module.__name__} has no load_environment()")
    return build


def environment_problems(env_id: str, env_args: dict[str, Any]) -> list[str]:
    """What stops `env_id` from loading (a missing package, an unknown name, a load that fails), with the fix."""
    try:
        vf = import_verifiers()
    except MissingPackageError as exc:
        return [str(exc)]
    try:
        environment_builder(env_id)
    except UserError as exc:
        installed = ", ".join(installed_environments()) or "none"
        return [
            f"agent.kwargs.env_id: verifiers cannot load {env_id!r} ({exc}); install its package, put a module "
            f"{env_id.replace('-', '_')}.py with a load_environment() on the path, or name a .py file; the "
            f"installed verifiers environments: {installed}"
        ]
    try:
        env = load_environment(env_id, env_args)
    except Exception as exc:  # the environment's own load_environment failed (bad env_args, a missing dataset)
        return [f"agent.kwargs.env_args: loading verifiers environment {env_id!r} failed: {type(exc).__name__}: {exc}"]
    if not isinstance(env, vf.Environment):
        return [f"agent.kwargs.env_id: {env_id!r} loads a {type(env).__name__}, not a verifiers Environment"]
    return []


def split_samples(cfg: Any, split: str) -> list[Sample]:
    """The `train` or `eval` samples of the run's verifiers environment (see the module docstring)."""
    options = cfg.agent.kwargs
    env_id = options["env_id"]
    env = load_environment(env_id, dict(options.get("env_args") or {}))
    if split == "train":
        rows = env.get_dataset(n=cfg.data.num_train_samples)
    elif env.build_eval_dataset() is None:
        logger.info("verifiers environment %s has no eval dataset: the run has no held-out samples", env_id)
        return []
    else:
        rows = env.get_eval_dataset(n=cfg.data.num_eval_samples)
    return [_sample(env_id, split, _plain(row)) for row in rows]


def _sample(env_id: str, split: str, row: dict[str, Any]) -> Sample:
    prompt = row["prompt"]
    messages = [Message(role="user", content=prompt)] if isinstance(prompt, str) else [Message(**m) for m in prompt]
    return Sample(
        prompt=messages,
        data_source=f"verifiers/{env_id}",
        ground_truth=row.get("answer"),
        extra_info={"verifiers_input": row},
        id=f"{Path(env_id).stem}-{split}-{row.get('example_id')}",
    )


def _plain(value: Any) -> Any:
    """A dataset row as JSON-able data, without the None fields Arrow adds to every message struct."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


__all__ = ["environment_builder", "environment_problems", "installed_environments", "load_environment", "split_samples"]
