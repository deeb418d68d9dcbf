"""`EnvAdapter`: what the model reads of a gymnasium env, and how its replies become actions.

The default adapter works from the env's spaces alone: observations from `render()` when the env renders in
`ansi` mode, else a structured text of the observation; actions through the codec of the action space. Override
one method to change one thing, and name the class with `env.adapter=pkg.module:MyAdapter`:

```python
class CartPoleAdapter(EnvAdapter):
    action_names = ["LEFT", "RIGHT"]
    task = "Balance the pole on the cart as long as you can."

    def observation_text(self, obs, info):
        x, v, angle, spin = obs
        return f"Cart at {x:.2f}, pole leaning {'right' if angle > 0 else 'left'} by {abs(angle):.2f} rad."
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym

from agentrl.envs.observations import format_observation, strip_ansi
from agentrl.envs.spaces import ActionCodec, InvalidAction, codec_for
from agentrl.errors import UserError
from agentrl.registry import import_object


class EnvAdapter:
    """Turns one gymnasium env into text for the model, and the model's replies into actions.

    Attributes:
        action_names: names of the actions of a `Discrete` action space, in index order (None: integers).
        task: a paragraph describing the game, shown before the first observation ("" : a generic one).
        forkable: a deep copy of the env (and this adapter) copies the episode's whole state, so a tree
            rollout may fork it; set False for an env whose state lives outside Python (a simulator process).
    """

    action_names: ClassVar[Sequence[str] | None] = None
    task: ClassVar[str] = ""
    forkable: ClassVar[bool] = True

    def __init__(self, env: gym.Env[Any, Any], instructions: str | None = None):
        self.env = env
        self.codec: ActionCodec = codec_for(env.action_space, self.action_names)
        self._instructions = instructions

    def instructions(self) -> str:
        """Shown once, before the first observation: the task and the form of a valid reply."""
        if self._instructions:
            return self._instructions
        task = self.task or f"You are playing the environment {env_label(self.env)}. Maximize your total reward."
        return f"{task}\nEach turn, reply with {self.codec.describe()}."

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        """The observation as text: the `ansi` rendering when the env has one, else the structured form."""
        if self.env.render_mode == "ansi":
            rendered = self.env.render()
            if isinstance(rendered, str) and rendered.strip():
                return strip_ansi(rendered)
        return format_observation(self.env.observation_space, obs)

    def state_key(self, obs: Any, info: dict[str, Any]) -> str:
        """The env state as text, for GiGPO's anchor-state groups: turns that start from equal keys are compared
        with each other. Default: `observation_text`; override it when that text carries more than the state (a
        step counter, the last action) or less (a partially observed env whose full state you can read)."""
        return self.observation_text(obs, info)

    def reply_prompt(self) -> str:
        """A line ending every message that waits for a reply ("" for none); small models follow a question
        placed last better than instructions given once at the top."""
        return ""

    def parse_action(self, text: str) -> Any:
        """The action a reply names; raises `InvalidAction` with feedback naming the valid form."""
        return self.codec.parse(text)

    def action_text(self, action: Any) -> str:
        """The reply that names `action` (the inverse of `parse_action`; `check_env` tests the round trip)."""
        return self.codec.format(action)

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        """The message after a valid step that did not end the episode."""
        return f"Reward: {reward:g}\n{self.observation_text(obs, info)}"

    def invalid_text(self, error: InvalidAction) -> str:
        """The message after a reply that is not a valid action."""
        return str(error)

    def is_success(self, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
        """Whether the episode ended in success: `info["is_success"]` when the env sets it, else a positive
        final reward on termination."""
        if "is_success" in info:
            return bool(info["is_success"])
        return terminated and reward > 0


# Adapters for gymnasium's toy-text envs, by the env id's name (the id without namespace and version); an env made
# from a class (env.entry_point) finds its adapter by the name of its class or of a base class, less "Env".
BUILTIN_ADAPTERS: dict[str, str] = {
    "FrozenLake": "agentrl.envs.toy_text:FrozenLakeAdapter",
    "Taxi": "agentrl.envs.toy_text:TaxiAdapter",
    "CliffWalking": "agentrl.envs.toy_text:CliffWalkingAdapter",
    "Blackjack": "agentrl.envs.toy_text:BlackjackAdapter",
}


def adapter_class(env: gym.Env[Any, Any], path: str | None = None) -> type[EnvAdapter]:
    """The adapter class for `env`: `path` (a dotted path) if given, else a built-in one for the env's id or
    class, else `EnvAdapter`.

    Raises:
        UserError: `path` cannot be imported or is not an `EnvAdapter` subclass.
    """
    if path is None:
        names = [env.spec.name] if env.spec is not None else []
        names += [cls.__name__.removesuffix("Env") for cls in type(env.unwrapped).__mro__]
        path = next((BUILTIN_ADAPTERS[n] for n in names if n in BUILTIN_ADAPTERS), None)
        if path is None:
            return EnvAdapter
    return load_adapter(path)


def load_adapter(path: str) -> type[EnvAdapter]:
    """The `EnvAdapter` subclass at the dotted path `path` (`env.adapter`).

    Raises:
        UserError: `path` cannot be imported or is not an `EnvAdapter` subclass.
    """
    cls = import_object(path, "env.adapter")
    if not (isinstance(cls, type) and issubclass(cls, EnvAdapter)):
        raise UserError(
            f"env.adapter={path} is not an EnvAdapter subclass; subclass agentrl.envs.EnvAdapter and override "
            "the methods you need"
        )
    return cls


def env_label(env: gym.Env[Any, Any]) -> str:
    """The env's id, or its class name when it was not made from a registered id."""
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__
