"""Start or join the Ray cluster that trainer ranks and rollout server actors share."""

from __future__ import annotations

import logging
import os
from typing import Any

from agentrl.config.schema import RayConfig
from agentrl.errors import InfrastructureError

FORWARDED_ENV = ("HF_HUB_OFFLINE", "HF_HOME", "AGENTRL_MODEL_CACHE", "OMP_WAIT_POLICY", "LITELLM_LOCAL_MODEL_COST_MAP")
"""Variables of this process that every actor gets too."""


logger = logging.getLogger(__name__)


class RayClusterError(InfrastructureError):
    """Ray could not be started or joined."""


def init_ray(cfg: RayConfig) -> bool:
    """Start or join Ray (`ray.address`) unless it is running in this process; returns whether this call did."""
    import ray

    if ray.is_initialized():
        return False
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": True}
    if cfg.address is None and not os.environ.get("RAY_ADDRESS"):  # set: ray.init joins that cluster
        kwargs.update(num_cpus=cfg.num_cpus or os.cpu_count(), include_dashboard=False)
    try:
        try:
            ray.init(address=cfg.address, **kwargs)
        except ValueError as error:  # Ray joined a cluster already running on this machine (its default)
            if "existing cluster" not in str(error):
                raise
            kwargs.pop("num_cpus", None)
            kwargs.pop("include_dashboard", None)
            ray.init(address=cfg.address, **kwargs)
            logger.warning(
                "joined the Ray cluster already running on this machine instead of starting one (Ray's default when "
                "ray.address is unset): its CPUs and resources are the ones it was started with. If a killed run "
                "left it behind, `ray stop` ends it."
            )
    except Exception as error:  # ray raises ConnectionError, RuntimeError, ValueError...
        where = f"join the Ray cluster at ray.address={cfg.address!r}" if cfg.address else "start a local Ray"
        raise RayClusterError(
            f"could not {where}: {str(error).rstrip('.')}. Check `ray status`, or unset ray.address to start a "
            "local one."
        ) from None
    return True
