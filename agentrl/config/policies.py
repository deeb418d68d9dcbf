"""Several policies in one run (`policies:`): each policy's view of the run's config, and what may differ.

A policy has its own model, trainer settings (learning rate, loss, advantage, KL, LoRA, ranks) and rollout servers
(backend, urls, replicas, placement). What belongs to the episode or to the run stays one for all: the sampling
(`rollout.n`, temperature, token budgets), the steps, the mode, evaluation and checkpoints.

A policy with `lora_of: B` is a LoRA adapter over frozen policy B's model, served by B's `hf` servers (its requests
name the adapter): its view has B's model and servers, `rollout.lora_adapter` set to its own name, and its own
trainer settings.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentrl.config.schema import RolloutConfig, TrainerConfig

if TYPE_CHECKING:
    from agentrl.config.schema import AgentRLConfig

DEFAULT_POLICY = "policy"
"""The name of the one policy of a run without `policies:`."""

RUN_TRAINER_KEYS = frozenset(
    {
        "steps",
        "mode",
        "max_staleness",
        "stale_samples",
        "dynamic_sampling",
        "max_sampling_rounds",
        "failed_trajectories",
        "max_failed_fraction",
        "resume",
        "eval_every",
        "save_every",
    }
)
"""Trainer keys of the run as a whole: one batch a step for every policy, evaluated and saved together."""

POLICY_ROLLOUT_KEYS = frozenset(
    {
        "backend",
        "urls",
        "num_replicas",
        "placement",
        "num_cpus_per_replica",
        "num_gpus_per_replica",
        "replica_resources",
        "max_model_len",
        "dtype",
        "request_timeout_s",
        "health_check_interval_s",
        "shared_weights_dir",
        "weight_transfer",
        "weight_update",
    }
)
"""Rollout keys of a policy's own servers; the rest (sampling, `n`, workers, trees) belong to the episode."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def policy_names(cfg: AgentRLConfig) -> list[str]:
    """The run's policies in order (the first is the default): `policies:`'s names, else `[DEFAULT_POLICY]`."""
    return list(cfg.policies) or [DEFAULT_POLICY]


def trainable_policies(cfg: AgentRLConfig) -> list[str]:
    """The policies that learn (all but those with `trainable: false`)."""
    if not cfg.policies:
        return [DEFAULT_POLICY]
    return [name for name, policy in cfg.policies.items() if policy.trainable]


def policy_config(cfg: AgentRLConfig, name: str) -> AgentRLConfig:
    """The run's config as policy `name` sees it: its model, and its trainer and rollout settings over the run's.
    A run without `policies:` is its own (and only) policy's config."""
    if not cfg.policies:
        return cfg
    policy = cfg.policies[name]
    trainer = TrainerConfig.model_validate({**cfg.trainer.model_dump(), **policy.trainer})
    served_by = cfg.policies.get(policy.lora_of or "")
    if served_by is not None:
        servers = {**served_by.rollout, "lora_adapter": name}
        model = served_by.model
    else:
        servers, model = policy.rollout, policy.model
    rollout = RolloutConfig.model_validate({**cfg.rollout.model_dump(), **servers})
    update: dict[str, Any] = {"trainer": trainer, "rollout": rollout, "policies": {}}
    if model is not None:
        update["model"] = model
    return cfg.model_copy(update=update)


def policy_problems(cfg: AgentRLConfig) -> list[str]:
    """What is wrong with `policies:`, each with its fix: names, keys a policy cannot set, values, a frozen policy
    with trainer settings."""
    problems: list[str] = []
    for name, policy in cfg.policies.items():
        where = f"policies.{name}"
        if not _NAME.match(name):
            problems.append(
                f"{where}: a policy name is a letter followed by letters, digits, _ or - (it names "
                "metrics and checkpoint folders)"
            )
        problems += _key_problems(f"{where}.trainer", policy.trainer, TrainerConfig, RUN_TRAINER_KEYS, "trainer")
        problems += _rollout_problems(f"{where}.rollout", policy.rollout)
        if not policy.trainable and policy.trainer:
            problems.append(
                f"{where} is trainable: false but sets trainer settings ({', '.join(policy.trainer)}); a frozen "
                "policy never trains: remove them, or set trainable: true"
            )
        problems += _value_problems(where, cfg, policy.trainer, policy.rollout)
        if policy.lora_of is not None:
            problems += _adapter_problems(cfg, name)
    if not cfg.policies:
        problems += lora_adapter_problems(cfg)
    elif cfg.rollout.lora_adapter is not None:
        problems.append("rollout.lora_adapter: with policies:, make a policy an adapter with policies.X.lora_of")
    if cfg.policies and not any(p.trainable for p in cfg.policies.values()):
        problems.append("every policy under policies: is trainable: false; set trainable: true on the one to train")
    return problems


def _adapter_problems(cfg: AgentRLConfig, name: str) -> list[str]:
    """`policies.X.lora_of: B`: B is a frozen policy served by `hf` servers of this process's own, X brings only
    its trainer settings, with a LoRA rank."""
    policy, where = cfg.policies[name], f"policies.{name}.lora_of"
    base = cfg.policies.get(policy.lora_of or "")
    if base is None or base.lora_of is not None or policy.lora_of == name:
        servers = [n for n, p in cfg.policies.items() if p.lora_of is None and n != name]
        return [
            f"{where}={policy.lora_of!r}: name the policy whose model and servers the adapter sits on, one without "
            f"lora_of of its own: {', '.join(servers) or 'add one, e.g. base: {trainable: false}'}"
        ]
    problems = []
    if base.trainable:
        problems.append(
            f"{where}={policy.lora_of}: policies.{policy.lora_of} trains its full weights, which would change the "
            f"base under the adapter; set policies.{policy.lora_of}.trainable: false (it then serves the base model "
            "and can play a fixed partner)"
        )
    if policy.rollout:
        problems.append(
            f"policies.{name}.rollout: an adapter is served by policies.{policy.lora_of}'s servers; set "
            f"{', '.join(policy.rollout)} under policies.{policy.lora_of}.rollout"
        )
    if policy.model is not None and policy.model != (base.model or cfg.model):
        problems.append(
            f"policies.{name}.model={policy.model!r}: an adapter sits on policies.{policy.lora_of}'s model "
            f"({base.model or cfg.model}); remove model, or serve this model as a policy of its own"
        )
    if not policy.trainable:
        problems.append(
            f"policies.{name}: a frozen adapter is its base model itself; remove lora_of, or use "
            f"policies.{policy.lora_of} for that role"
        )
    own = policy_config(cfg, name)
    return problems + lora_adapter_problems(own, f"policies.{name}.lora_of", f"policies.{name}.trainer")


def lora_adapter_problems(
    cfg: AgentRLConfig, where: str = "rollout.lora_adapter", trainer: str = "trainer"
) -> list[str]:
    """A policy served as a LoRA adapter (`rollout.lora_adapter`) trains LoRA and is served by `hf` servers this
    process reaches directly, weights by file."""
    r = cfg.rollout
    if r.lora_adapter is None:
        return []
    problems = []
    if not cfg.trainer.lora_rank:
        problems.append(f"{where}: an adapter trains LoRA: set {trainer}.lora_rank (e.g. 8)")
    if r.backend != "hf":
        problems.append(f"{where}: LoRA adapters are served by the hf backend; got rollout.backend={r.backend}")
    if r.placement != "local":
        problems.append(f"{where}: LoRA adapters are served by servers started here: set rollout.placement=local")
    if r.weight_transfer == "nccl":
        problems.append(f"{where}: an adapter's weights go by file; set rollout.weight_transfer to its default")
    return problems


def _key_problems(
    where: str, settings: dict[str, Any], section: type[Any], run_keys: frozenset[str], top: str
) -> list[str]:
    problems = []
    known = set(section.model_fields)
    for key in settings:
        if key in run_keys:
            problems.append(f"{where}.{key}: {top}.{key} is the run's, the same for every policy; set it under {top}:")
        elif key not in known:
            problems.append(f"{where}.{key}: unknown {top} key; known: {', '.join(sorted(known - run_keys))}")
    return problems


def _rollout_problems(where: str, settings: dict[str, Any]) -> list[str]:
    problems = []
    for key in settings:
        if key in POLICY_ROLLOUT_KEYS:
            continue
        if key == "lora_adapter":
            problems.append(f"{where}.lora_adapter: serve a policy as a LoRA adapter with its lora_of: POLICY")
        elif key in RolloutConfig.model_fields:
            problems.append(
                f"{where}.{key}: rollout.{key} belongs to the episode, the same for every policy; set it under "
                f"rollout: (a policy sets only its servers: {', '.join(sorted(POLICY_ROLLOUT_KEYS))})"
            )
        else:
            known = ", ".join(sorted(POLICY_ROLLOUT_KEYS))
            problems.append(f"{where}.{key}: unknown rollout key; a policy sets {known}")
    return problems


def _value_problems(where: str, cfg: AgentRLConfig, trainer: dict[str, Any], rollout: dict[str, Any]) -> list[str]:
    problems = []
    checks = (("trainer", TrainerConfig, cfg.trainer, trainer), ("rollout", RolloutConfig, cfg.rollout, rollout))
    for top, section, base, settings in checks:
        known = {k: v for k, v in settings.items() if k in section.model_fields}
        if not known:
            continue
        try:
            section.model_validate({**base.model_dump(), **known})
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                problems.append(f"{where}.{top}.{loc}: {err['msg']} (got {err.get('input')!r})")
    return problems


__all__ = [
    "DEFAULT_POLICY",
    "POLICY_ROLLOUT_KEYS",
    "RUN_TRAINER_KEYS",
    "lora_adapter_problems",
    "policy_config",
    "policy_names",
    "policy_problems",
    "trainable_policies",
]
