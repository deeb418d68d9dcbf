"""Recipe loading: defaults ← recipes/<name>/config.yaml ← dotted `key=value` overrides, validated at start."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from agentrl.config.errors import ConfigError
from agentrl.config.policies import policy_problems
from agentrl.config.schema import AgentRLConfig


def recipes_dir() -> Path:
    """Where recipes live: $AGENTRL_RECIPES_DIR, else ./recipes, else the checkout's recipes/ folder."""
    if env := os.environ.get("AGENTRL_RECIPES_DIR"):
        return Path(env)
    local = Path.cwd() / "recipes"
    if local.is_dir():
        return local
    return Path(__file__).resolve().parents[2] / "recipes"


def available_recipes() -> list[str]:
    root = recipes_dir()
    return sorted(p.parent.name for p in root.glob("*/config.yaml")) if root.is_dir() else []


def find_recipe(recipe: str) -> Path:
    """The config.yaml of a recipe given by name, folder or YAML path."""
    candidate = Path(recipe)
    if candidate.is_file():
        return candidate
    if (candidate / "config.yaml").is_file():
        return candidate / "config.yaml"
    named = recipes_dir() / recipe / "config.yaml"
    if named.is_file():
        return named
    known = ", ".join(available_recipes()) or "(none found)"
    raise ConfigError([f"recipe {recipe!r} not found in {recipes_dir()}; available recipes: {known}"])


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """Turn `a.b=c x.y=[1,2]` into a nested dict, with YAML typing of values."""
    bad = [o for o in overrides if "=" not in o or not o.split("=", 1)[0].strip()]
    if bad:
        raise ConfigError([f"override {o!r} is not of the form key=value (e.g. trainer.steps=20)" for o in bad])
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist(list(overrides)), resolve=False)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise ConfigError([f"cannot parse overrides {overrides}: {exc}"]) from None


def load_config(recipe: str | None = None, overrides: list[str] | None = None) -> AgentRLConfig:
    """Resolve a run's configuration and validate it against the schema.

    The names it gives (loops, tools, rewards, estimators, data files, backends) are resolved by each entry
    point's preflight: `agentrl.trainer.preflight.validate_run` for training, `agentrl.loops.preflight.
    validate_episodes` for rollouts, evaluation and the gateway.

    Args:
        recipe: a recipe name (folder under recipes/), a recipe folder, or a YAML file; None for defaults only.
        overrides: dotted `key=value` strings; `recipe=NAME` among them selects the recipe too.

    Raises:
        ConfigError: listing every unknown key and wrong value at once, with the valid keys near each.
    """
    overrides = list(overrides or [])
    recipe_override = [o for o in overrides if o.startswith("recipe=")]
    if recipe_override:
        recipe = recipe_override[-1].split("=", 1)[1]
        overrides = [o for o in overrides if not o.startswith("recipe=")]
    layers = [OmegaConf.create(AgentRLConfig().model_dump(by_alias=True))]
    recipe_path = None
    if recipe:
        recipe_path = find_recipe(recipe)
        layers.append(_load_yaml(recipe_path))
    layers.append(OmegaConf.create(parse_overrides(overrides)))
    try:
        merged = OmegaConf.to_container(OmegaConf.merge(*layers), resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError([f"cannot merge configuration: {exc}"]) from None
    assert isinstance(merged, dict)
    if recipe_path is not None:
        merged["recipe"] = recipe_path.parent.name
        _resolve_data_paths(merged, recipe_path.parent)
    return validate(merged)


def validate(raw: dict[str, Any]) -> AgentRLConfig:
    """Validate a plain dict into the typed config, reporting all problems at once (`policies:` included: what
    each policy sets over the run's settings)."""
    try:
        cfg = AgentRLConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([_describe(err) for err in exc.errors()]) from None
    problems = policy_problems(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def _load_yaml(path: Path) -> Any:
    try:
        loaded = OmegaConf.load(path)
    except (OSError, OmegaConfBaseException, ValueError) as exc:
        raise ConfigError([f"cannot read {path}: {exc}"]) from None
    if not OmegaConf.is_dict(loaded):
        raise ConfigError([f"{path} must hold a mapping of config keys, not a list or scalar"])
    return loaded


def _resolve_data_paths(merged: dict[str, Any], recipe_dir: Path) -> None:
    """Data files named relative to a recipe are found inside the recipe folder; so is a loop option naming a
    Python file or a folder there (`agent.kwargs.env_id: env.py`, `agent.kwargs.env_dir: echo_word`), and a tool
    in a Python file there (`tools: [{class: tools.py:lookup}]`)."""
    data = merged.get("data")
    if isinstance(data, dict):
        for key in ("train_files", "eval_files"):
            files = data.get(key)
            if isinstance(files, list):
                data[key] = [_relative_to(f, recipe_dir) for f in files]
    agent = merged.get("agent")
    kwargs = agent.get("kwargs") if isinstance(agent, dict) else None
    if isinstance(kwargs, dict):
        for key, value in kwargs.items():
            names_a_path = isinstance(value, str) and (value.endswith(".py") or key.endswith("_dir"))
            if names_a_path and (recipe_dir / value).exists():
                kwargs[key] = _relative_to(value, recipe_dir)
    for spec in merged.get("tools") or []:
        name = spec.get("class") if isinstance(spec, dict) else None
        if isinstance(name, str) and ".py:" in name:
            file, _, attr = name.rpartition(":")
            if (recipe_dir / file).exists():
                spec["class"] = f"{_relative_to(file, recipe_dir)}:{attr}"


def _relative_to(name: Any, base: Path) -> Any:
    if not isinstance(name, str) or Path(name).is_absolute() or Path(name).exists():
        return name
    return str(base / name)


def _describe(err: Any) -> str:
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return _unknown_key(err["loc"])
    got = err.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return f"{loc}: {err['msg']} (got {shown})"


def _unknown_key(loc: tuple[Any, ...]) -> str:
    section: type[BaseModel] | None = AgentRLConfig
    for part in loc[:-1]:
        field = section.model_fields.get(str(part)) if section else None
        annotation = field.annotation if field else None
        section = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    key = str(loc[-1])
    where = ".".join(str(p) for p in loc)
    if section is None:
        return f"{where}: unknown key"
    valid = sorted(f.alias or name for name, f in section.model_fields.items())
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"did you mean {'.'.join([*map(str, loc[:-1]), close[0]])!r}? " if close else ""
    return f"{where}: unknown key; {hint}valid keys here: {', '.join(valid)}"
