"""`GymEpisode`: one episode of a gymnasium env played through text, with its return and invalid-action count.

The agent loop (`agentrl.loops.gym`) drives it; it is usable on its own too:

```python
episode = GymEpisode.from_config(EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}))
print(episode.reset(seed=0))          # instructions and the first observation
outcome = episode.act("RIGHT")        # the model's reply
print(outcome.text, episode.reward)   # the next observation, the (discounted) return so far
```
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.toy_text import CliffWalkingEnv, FrozenLakeEnv, TaxiEnv
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

from agentrl.config.schema import EnvConfig, EnvExample
from agentrl.envs.adapter import EnvAdapter, adapter_class, env_label
from agentrl.envs.factory import make_env
from agentrl.envs.spaces import InvalidAction
from agentrl.errors import ForkUnsupportedError, UserError
from agentrl.types import Message

_TOY_TEXT_ENVS = (CliffWalkingEnv, FrozenLakeEnv, TaxiEnv)  # their `P` is built once, in __init__
# The wrappers `gym.make` adds: their state is flags, a step count and references they never write through, so a
# shallow copy of each (around a copy of the env inside) is exact. Matched by exact type: a subclass may add state.
_SCALAR_STATE_WRAPPERS = (OrderEnforcing, PassiveEnvChecker, TimeLimit)
_IMMUTABLE = (str, int, float, bool, type(None))


@dataclass
class StepOutcome:
    """The result of one reply.

    Attributes:
        text: the message for the model: the next observation, or feedback on an invalid reply.
        valid: whether the reply was a valid action (an invalid one does not step the env).
        reward: the env's reward for the step (0 for an invalid reply, whose penalty is counted separately).
        terminated: the episode reached a terminal state.
        truncated: the episode hit its step limit.
    """

    text: str
    valid: bool
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False


class GymEpisode:
    """One episode: `reset(seed)` gives the first message, `act(reply)` each next one.

    Args:
        env: the env (owned by the episode: `close()` closes it).
        adapter: text ↔ env translation (default: the built-in one for the env).
        discount: gamma of the discounted return.
        invalid_action_penalty: subtracted from `reward` per invalid reply.
        max_invalid_actions: invalid replies in a row after which `invalid_limit_reached` is True.
        instructions_role: `user`: `reset` opens the first message with the instructions; `system`: they are
            `system_text` instead, for the loop to make the system message.
        examples: few-shot turns, as messages from `example_messages`; each reply must be a valid action.

    Raises:
        UserError: an example's reply is not a valid action.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        adapter: EnvAdapter | None = None,
        discount: float = 1.0,
        invalid_action_penalty: float = 0.0,
        max_invalid_actions: int = 3,
        instructions_role: str = "user",
        examples: list[EnvExample] | None = None,
    ):
        self.env = env
        self.adapter = adapter or adapter_class(env)(env)
        self.instructions_role = instructions_role
        self.examples = list(examples or [])
        for index, example in enumerate(self.examples):
            try:
                self.adapter.parse_action(example.reply)
            except InvalidAction as error:
                raise UserError(f"env.examples[{index}].reply is not a valid action: {error}") from None
        self.discount = discount
        self.invalid_action_penalty = invalid_action_penalty
        self.max_invalid_actions = max_invalid_actions
        self.steps = 0
        self.episode_return = 0.0
        self.discounted_return = 0.0
        self.invalid_actions = 0
        self.invalid_in_a_row = 0
        self.terminated = False
        self.truncated = False
        self.success = False
        self.last_text = ""
        self.state_text = ""
        self.state_key = ""
        self.turn_rewards: list[float] = []
        self.turn_states: list[str] = []

    @classmethod
    def from_config(cls, cfg: EnvConfig, kwargs: dict[str, Any] | None = None) -> GymEpisode:
        """An episode of the env of `cfg` (`kwargs` merged over `cfg.kwargs`), with `cfg`'s adapter and reward
        settings."""
        env = make_env(cfg, kwargs)
        try:
            adapter = adapter_class(env, cfg.adapter)(env, instructions=cfg.instructions)
            return cls(
                env,
                adapter,
                cfg.discount,
                cfg.invalid_action_penalty,
                cfg.max_invalid_actions,
                cfg.instructions_role,
                cfg.examples,
            )
        except Exception:
            env.close()
            raise

    def fork(self, n: int) -> list[GymEpisode]:
        """`n` copies of the episode as it is now: the env's state and random generator, the adapter, the
        returns and the per-turn records. Given the same replies, each child continues exactly as this episode
        would (a deep copy that shares what the env never writes: `read_only_parts`, `_copy_env`; an adapter whose
        env cannot be copied so sets `forkable = False`).

        Raises:
            ForkUnsupportedError: the env or its adapter cannot be copied (named in the message).
        """
        if not getattr(self.adapter, "forkable", True):
            raise ForkUnsupportedError(
                f"env {env_label(self.env)} cannot be forked: its adapter {type(self.adapter).__name__} says so "
                "(forkable = False); run it without rollout.tree"
            )
        try:
            return [self._copy() for _ in range(n)]
        except Exception as exc:
            raise ForkUnsupportedError(
                f"env {env_label(self.env)} cannot be forked: copying it failed ({type(exc).__name__}: {exc}); "
                "give its adapter a __deepcopy__ that copies the env's state, or run it without rollout.tree"
            ) from exc

    def _copy(self) -> GymEpisode:
        """A deep copy, made faster by sharing what is never written (`read_only_parts`, the examples, the
        adapter's action codec) and by leaving out the walk over attributes that are immutable values."""
        memo = read_only_parts(self.env)
        for part in (self.examples, getattr(self.adapter, "codec", None)):  # set at __init__, never written
            memo[id(part)] = part
        _copy_env(self.env, memo)
        child = copy.copy(self)
        for name, value in vars(self).items():
            if not isinstance(value, _IMMUTABLE):
                setattr(child, name, copy.deepcopy(value, memo))
        return child

    @property
    def system_text(self) -> str | None:
        """The instructions when they make the system message (`instructions_role="system"`), else None."""
        return self.adapter.instructions() if self.instructions_role == "system" else None

    @property
    def user_instructions(self) -> str | None:
        """The instructions when they open the first user message (`instructions_role="user"`), else None."""
        return None if self.instructions_role == "system" else self.adapter.instructions()

    def state_message(self, feedback: str | None = None) -> str:
        """The current state on its own, without the step text that led there: the adapter's `observation_text`
        (the same text for the same state), after `feedback` on an invalid reply if any, ending like a turn's
        message. For prompts that do not carry the episode so far (`env.history_turns`)."""
        text = f"{feedback}\n{self.state_text}" if feedback else self.state_text
        return _ask(text, self.adapter.reply_prompt())

    def example_messages(self) -> list[Message]:
        """The few-shot turns as user/assistant messages, each observation ending like a real turn's."""
        messages = []
        for example in self.examples:
            messages.append(Message(role="user", content=_ask(example.observation, self.adapter.reply_prompt())))
            messages.append(Message(role="assistant", content=example.reply))
        return messages

    @property
    def reward(self) -> float:
        """The trajectory's reward: discounted return minus the invalid-action penalties."""
        return self.discounted_return - self.invalid_action_penalty * self.invalid_actions

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def invalid_limit_reached(self) -> bool:
        return self.invalid_in_a_row >= self.max_invalid_actions

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        """Reset the env; returns the first message: the instructions (unless they are `system_text`), then the
        first observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.last_text = self.state_text = self.adapter.observation_text(obs, info)
        self.state_key = _digest(self.adapter.state_key(obs, info))
        in_system = self.instructions_role == "system"
        opening = self.last_text if in_system else f"{self.adapter.instructions()}\n\n{self.last_text}"
        return _ask(opening, self.adapter.reply_prompt())

    def act(self, reply: str) -> StepOutcome:
        """Parse `reply` into an action and step the env with it, or answer why it is not valid.

        Each call is one turn: it appends the state the turn started from to `turn_states` (a digest of the
        adapter's `state_key`) and the turn's reward to `turn_rewards` (the step reward, or minus the invalid-action
        penalty for an invalid reply, which leaves the state as it was).

        Raises:
            RuntimeError: the episode has already ended.
        """
        if self.done:
            raise RuntimeError("the episode has ended; reset() before acting again")
        self.turn_states.append(self.state_key)
        try:
            action = self.adapter.parse_action(reply)
        except InvalidAction as error:
            self.invalid_actions += 1
            self.invalid_in_a_row += 1
            self.turn_rewards.append(-self.invalid_action_penalty)
            return StepOutcome(text=self.adapter.invalid_text(error), valid=False)
        self.invalid_in_a_row = 0
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward)
        self.turn_rewards.append(reward)
        self.state_key = _digest(self.adapter.state_key(obs, info))
        self.discounted_return += self.discount**self.steps * reward
        self.episode_return += reward
        self.steps += 1
        self.terminated, self.truncated = bool(terminated), bool(truncated)
        if self.terminated or self.truncated:
            self.success = self.adapter.is_success(reward, self.terminated, info)
        self.last_text = self.adapter.step_text(action, obs, reward, info)
        self.state_text = self.adapter.observation_text(obs, info)
        text = self.last_text if self.done else _ask(self.last_text, self.adapter.reply_prompt())
        return StepOutcome(text, True, reward, self.terminated, self.truncated)

    def metrics(self) -> dict[str, float]:
        """Per-episode numbers, recorded on the trajectory as `env/...` metrics."""
        return {
            "env/return": self.episode_return,
            "env/discounted_return": self.discounted_return,
            "env/steps": float(self.steps),
            "env/invalid_actions": float(self.invalid_actions),
            "env/success": float(self.success),
        }

    def close(self) -> None:
        self.env.close()


def fork_problem(cfg: EnvConfig) -> str | None:
    """Why episodes of the env of `cfg` cannot be forked (None if they can): one is made, reset and forked once,
    so an env that holds what cannot be copied (a window, a socket, a process) is named before a run starts."""
    try:
        episode = GymEpisode.from_config(cfg)
    except Exception as exc:  # reported by the env checks with their own message
        return f"env: cannot make the env to check that it can be forked ({exc})"
    try:
        episode.reset(seed=0)
        for child in episode.fork(1):
            child.close()
    except ForkUnsupportedError as exc:
        return str(exc)
    finally:
        episode.close()
    return None


def read_only_parts(env: gym.Env) -> dict[int, Any]:
    """A `copy.deepcopy` memo that shares, rather than copies, what an env never writes after it is made: its
    specs, a toy-text env's transition table `P` (a dict of every state's outcomes), and the attributes its class
    names in `fork_shared`. Sharing them keeps a fork exact and makes it faster; a fresh memo for each copy, so
    that children share nothing else. (An env copied shallowly, `_copy_env`, shares all it does not rebind.)
    """
    unwrapped = env.unwrapped
    shared: list[Any] = [env.spec, unwrapped.spec]
    shared += [getattr(unwrapped, name) for name in getattr(unwrapped, "fork_shared", ())]
    if isinstance(unwrapped, _TOY_TEXT_ENVS):
        shared.append(unwrapped.P)
    return {id(part): part for part in shared if part is not None}


def _copy_env(env: gym.Env, memo: dict[int, Any]) -> gym.Env:
    """A copy of `env` entered in `memo`. A deep copy walks every object the env holds, most of which it never
    writes: the wrappers `gym.make` adds are copied shallowly around a copy of what they wrap, and an env that only
    rebinds its attributes (`_rebinds_only`) shallowly with a copy of its generator; any other env deeply."""
    if type(env) in _SCALAR_STATE_WRAPPERS:
        clone = copy.copy(env)
        clone.env = _copy_env(env.env, memo)
    elif _rebinds_only(env):
        clone = copy.copy(env)
        clone._np_random = memo[id(env._np_random)] = _copy_generator(env._np_random)
    else:
        return copy.deepcopy(env, memo)
    memo[id(env)] = clone
    return clone


def _rebinds_only(env: gym.Env) -> bool:
    """Whether every attribute of `env` but its generator is a value it rebinds and never changes in place, so a
    shallow copy plus a copy of the generator is exact: gymnasium's toy-text envs (their position, last action and
    the like are numbers; their tables and maps are read-only) and env classes that say so themselves
    (`fork_rebinds_only = True` in the class body), when they render to text or not at all (a pygame window cannot
    be shared)."""
    # The class's own flag, not an inherited one: a subclass may change what its parent only rebinds.
    known = type(env) in _TOY_TEXT_ENVS or vars(type(env)).get("fork_rebinds_only", False)
    return known and getattr(env, "render_mode", None) in (None, "ansi")


def _copy_generator(generator: Any) -> Any:
    """An independent copy of a numpy generator in the same state, with a copy of its seed sequence (what
    `copy.deepcopy` gives, at half its cost: a deep copy goes through pickling)."""
    if not isinstance(generator, np.random.Generator) or generator.bit_generator.seed_seq is None:
        return copy.deepcopy(generator)  # None, a RandomState, or legacy seeding (no seed sequence): as it is
    bits = generator.bit_generator
    clone = type(bits)(copy.deepcopy(bits.seed_seq))
    clone.state = bits.state
    return np.random.Generator(clone)


def _ask(text: str, prompt: str) -> str:
    return f"{text}\n{prompt}" if prompt else text


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]
