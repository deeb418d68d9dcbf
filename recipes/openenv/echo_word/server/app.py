"""An OpenEnv environment in openenv-core's own API: reset names a word (drawn from the seed); each step echoes the
message back and rewards 1 when it contains the word; the episode ends on the word or after three steps. A negative
seed is refused (reset raises)."""

from __future__ import annotations

import random
import uuid

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

WORDS = ["apple", "river", "stone", "cloud", "green", "light", "music", "paper"]


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    prompt: str = ""
    echoed_message: str = ""


class EchoWordEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self.word = WORDS[0]

    def reset(self, seed=None, episode_id=None, **kwargs) -> EchoObservation:
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be >= 0, not {seed}")
        self.word = random.Random(seed).choice(WORDS)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(prompt=f"Say the word {self.word}.", reward=0.0, done=False)

    def step(self, action: EchoAction, timeout_s=None, **kwargs) -> EchoObservation:
        self._state.step_count += 1
        said = self.word in action.message.lower()
        done = said or self._state.step_count >= 3
        return EchoObservation(echoed_message=action.message, reward=1.0 if said else 0.0, done=done)

    @property
    def state(self) -> State:
        return self._state


app = create_app(EchoWordEnvironment, EchoAction, EchoObservation, env_name="echo_word", max_concurrent_envs=16)
