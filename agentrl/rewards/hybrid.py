"""One entry of `reward.components`: its pipeline options (weight, gate, normalization, failure policy, limits)
and the component built from the rest of its keys.

    reward:
      on_failure: skip                 # default policy: skip (renormalize the other weights) or zero
      components:
        - {name: tests, type: command, weight: 1.0, command: "pytest -q", timeout_s: 600}
        - name: judge
          type: judge
          weight: 0.5
          gate: {component: tests, min: 1.0, otherwise: zero}   # judge only when the tests pass
          normalize: {min: 0, max: 1}
          model: openai/judge
          api_base: http://127.0.0.1:8000/v1

Pipeline keys: `weight` (default 1.0; may be 0 or negative), `gate`, `normalize`, `on_failure` (default
`reward.on_failure`), `timeout_s` (per call, default 300 s; none for `command`, which the sandbox times out
itself), `max_concurrency` (per-trajectory calls in flight, default 64), `thread` (run a sync function in a worker
thread so that it does not block the event loop and `timeout_s` can stop waiting for it).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Literal

from agentrl.errors import UserError
from agentrl.rewards.base import RewardComponent
from agentrl.rewards.registry import build_component, check_component, resolve_type

Policy = Literal["zero", "skip"]
PIPELINE_KEYS = ("name", "type", "weight", "gate", "normalize", "on_failure", "timeout_s", "max_concurrency", "thread")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_CONCURRENCY = 64


@dataclass(frozen=True)
class Gate:
    """Run a component only for trajectories whose `component` scored within [`min`, `max`].

    Otherwise the gated component scores 0 (`otherwise: zero`) or is left out with the weights renormalized
    (`otherwise: skip`). A gate component that failed or was itself skipped closes the gate.
    """

    component: str
    min: float | None = 1.0
    max: float | None = None
    otherwise: Policy = "zero"

    def opens(self, score: float | None) -> bool:
        """Whether a gate component's score (None: it has none) lets the gated component run."""
        if score is None:
            return False
        return (self.min is None or score >= self.min) and (self.max is None or score <= self.max)


@dataclass(frozen=True)
class Normalize:
    """Map a raw score into [0, 1]: `sigmoid`, or linearly from [`min`, `max`] (clipped unless `clip: false`)."""

    kind: Literal["sigmoid", "linear"]
    min: float = 0.0
    max: float = 1.0
    clip: bool = True

    def __call__(self, score: float) -> float:
        if self.kind == "sigmoid":
            return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))
        value = (score - self.min) / (self.max - self.min)
        return min(1.0, max(0.0, value)) if self.clip else value


@dataclass
class ComponentSpec:
    """A built component with its pipeline options."""

    name: str
    type: str
    weight: float
    component: RewardComponent
    on_failure: Policy
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    gate: Gate | None = None
    normalize: Normalize | None = None


def parse_spec(entry: dict[str, Any], index: int, default_policy: Policy, build: bool = True) -> ComponentSpec:
    """Build one `reward.components[index]` entry (with `build=False`, only check it: the spec's `component` is
    then None, and nothing is loaded).

    Keys `name, type, weight, gate, normalize, on_failure, timeout_s, max_concurrency, thread` are the pipeline's
    (`max_concurrency` is also passed to components that take it); every other key goes to the component.
    """
    where = f"reward.components[{index}]"
    if not isinstance(entry, dict):
        raise UserError(f"{where} must be a mapping with at least `type`, got {entry!r}")
    entry = dict(entry)
    kind = entry.get("type")
    options = {k: entry.pop(k) for k in PIPELINE_KEYS if k in entry}
    name = str(options.get("name") or kind)
    where = f"{where} ({name})"
    limit = int(options.get("max_concurrency", DEFAULT_MAX_CONCURRENCY))
    if "max_concurrency" in options and _accepts(kind, "max_concurrency"):
        entry["max_concurrency"] = limit
    component: Any = None
    if build:
        component = build_component(kind, entry, where, thread=options.get("thread"))
    elif problem := check_component(kind, entry, where):
        raise UserError(problem)
    default_timeout = getattr(getattr(component, "fn", component), "default_timeout_s", DEFAULT_TIMEOUT_S)
    timeout = options.get("timeout_s", default_timeout)
    return ComponentSpec(
        name=name,
        type=str(kind),
        weight=float(options.get("weight", 1.0)),
        component=component,
        on_failure=_policy(options.get("on_failure", default_policy), where),
        timeout_s=None if timeout is None else float(timeout),
        max_concurrency=limit,
        gate=_gate(options.get("gate"), where),
        normalize=_normalize(options.get("normalize"), where),
    )


def _accepts(kind: Any, param: str) -> bool:
    """Whether the component class a `type` names takes the keyword `param`."""
    try:
        obj = resolve_type(kind, "reward.components")
        return isinstance(obj, type) and param in inspect.signature(obj).parameters
    except (UserError, TypeError, ValueError):
        return False


def _policy(value: Any, where: str) -> Policy:
    if value not in ("zero", "skip"):
        raise UserError(f"{where}: on_failure must be 'zero' or 'skip', got {value!r}")
    return value


def _gate(value: Any, where: str) -> Gate | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not value.get("component"):
        raise UserError(f"{where}: gate must be a mapping like {{component: tests, min: 1.0}}, got {value!r}")
    unknown = set(value) - {"component", "min", "max", "otherwise"}
    if unknown:
        raise UserError(f"{where}: unknown gate keys {sorted(unknown)}; known: component, min, max, otherwise")
    lo = value.get("min", 1.0 if "max" not in value else None)
    hi = value.get("max")
    return Gate(
        component=str(value["component"]),
        min=None if lo is None else float(lo),
        max=None if hi is None else float(hi),
        otherwise=_policy(value.get("otherwise", "zero"), f"{where} gate"),
    )


def _normalize(value: Any, where: str) -> Normalize | None:
    if value is None or value is False:
        return None
    if value == "sigmoid":
        return Normalize("sigmoid")
    if isinstance(value, dict) and "min" in value and "max" in value:
        lo, hi = float(value["min"]), float(value["max"])
        if hi <= lo:
            raise UserError(f"{where}: normalize needs max > min, got {value!r}")
        return Normalize("linear", lo, hi, bool(value.get("clip", True)))
    raise UserError(f"{where}: normalize must be 'sigmoid' or {{min: a, max: b}}, got {value!r}")
