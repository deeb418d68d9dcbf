"""Adapters for gymnasium's toy-text envs: actions as words and observations a small model can read.

Picked automatically by env id (`BUILTIN_ADAPTERS` in `agentrl.envs.adapter`); each is also an example of a
small `EnvAdapter` subclass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentrl.envs.adapter import EnvAdapter
from agentrl.envs.observations import strip_ansi


class ToyTextAdapter(EnvAdapter):
    """Ends every message that waits for a reply with the choice of action words."""

    def reply_prompt(self) -> str:
        return f"Choose one: {', '.join(self.action_names or [])}."


class FrozenLakeAdapter(ToyTextAdapter):
    """FrozenLake: the map with `@` where the agent stands and its row and column; after each move only the new
    position, since the map never changes (shorter contexts: cheaper rollouts and training)."""

    action_names = ["LEFT", "DOWN", "RIGHT", "UP"]
    task = (
        "You walk on a frozen lake. Map: S start, F frozen ice (safe), H hole (falling in ends the game), "
        "G goal, @ you. Row 1 is the top row, column 1 the left column. Reach G without falling into a hole."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        row, col = self._position(obs)
        lines = []
        for r, cells in enumerate(self.env.unwrapped.desc):  # type: ignore[attr-defined]
            letters = [c.decode() if isinstance(c, bytes) else str(c) for c in cells]
            if r == row:
                letters[col] = "@"
            lines.append(" ".join(letters))
        return "\n".join(lines) + f"\nYou are at row {row + 1}, column {col + 1}."

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        cell = self._cell(obs)
        if cell == "H":
            return "You fell into a hole."
        if cell == "G":
            return "You reached the goal!"
        row, col = self._position(obs)
        return f"You moved {self.action_text(action)}. You are at row {row + 1}, column {col + 1}."

    def is_success(self, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
        return terminated and self._cell(self.env.unwrapped.s) == "G"  # type: ignore[attr-defined]

    def _cell(self, obs: Any) -> str:
        cell = self.env.unwrapped.desc.flat[int(obs)]  # type: ignore[attr-defined]
        return cell.decode() if isinstance(cell, bytes) else str(cell)

    def _position(self, obs: Any) -> tuple[int, int]:
        row, col = divmod(int(obs), self.env.unwrapped.desc.shape[1])  # type: ignore[attr-defined]
        return row, col


_CELL_WORDS = {"S": "ice", "F": "ice", "H": "hole", "G": "goal"}
_MOVES = {"LEFT": (0, -1), "DOWN": (1, 0), "RIGHT": (0, 1), "UP": (-1, 0)}


def local_view(
    words: np.ndarray, position: tuple[int, int], goal: tuple[int, int], goal_name: str, moves: list[str]
) -> str:
    """`G is 2 DOWN, 1 RIGHT. LEFT: hole. DOWN: ice. ...`: where the goal is from `position` of a grid whose
    cells are named by `words`, and what each move in `moves` (LEFT, DOWN, RIGHT, UP) steps onto."""
    row, col = position
    toward = [_offset(goal[0] - row, "DOWN", "UP"), _offset(goal[1] - col, "RIGHT", "LEFT")]
    seen = [f"{name}: {word}." for name, word, _ in _move_targets(words, position, moves)]
    where = ", ".join(t for t in toward if t) or "here"
    return f"{goal_name} is {where}. " + " ".join(seen)


def move_view(
    words: np.ndarray,
    position: tuple[int, int],
    goal: tuple[int, int],
    goal_name: str,
    moves: list[str],
    safe: str = "ice",
) -> str:
    """`LEFT: edge. DOWN: hole. RIGHT: ice, nearer G. UP: ice, farther from G.`: what each move in `moves` steps
    onto from `position` of a grid whose cells are named by `words`, and for a step onto a `safe` cell whether it
    takes the agent nearer the goal (Manhattan distance) or farther from it."""
    here = _manhattan(position, goal)
    seen = []
    for name, word, cell in _move_targets(words, position, moves):
        if word == safe and cell is not None:
            word += f", nearer {goal_name}" if _manhattan(cell, goal) < here else f", farther from {goal_name}"
        seen.append(f"{name}: {word}.")
    return " ".join(seen)


def _move_targets(
    words: np.ndarray, position: tuple[int, int], moves: list[str]
) -> list[tuple[str, str, tuple[int, int] | None]]:
    """(move, the name of the cell it steps onto or `edge`, that cell or None) for each of `moves`."""
    targets = []
    for name in moves:
        r, c = position[0] + _MOVES[name][0], position[1] + _MOVES[name][1]
        inside = 0 <= r < words.shape[0] and 0 <= c < words.shape[1]
        targets.append((name, str(words[r, c]) if inside else "edge", (r, c) if inside else None))
    return targets


def _manhattan(a: tuple[int, int], b: tuple[int, int]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


class FrozenLakeLocalViewAdapter(FrozenLakeAdapter):
    """FrozenLake seen from where the agent stands, as a text-game room is: what each move steps onto (ice, hole,
    goal, or the edge of the lake) and how far the goal is down/up and right/left. No map.

    The map's layout is what a 135M model reads worst (the cell below it is 8 characters away in the text); the
    local view says the same in words next to each action. Every message carries the whole view, so each turn's
    state is in its own message (GiGPO's anchor states are these texts)."""

    task = (
        "You walk on a frozen lake to the goal G. Falling into a hole ends the game. "
        "Each turn you see what each move steps onto and where G is."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        desc = self.env.unwrapped.desc  # type: ignore[attr-defined]
        words = np.vectorize(lambda c: _CELL_WORDS[c.decode() if isinstance(c, bytes) else str(c)])(desc)
        goal = tuple(int(v) for v in np.argwhere(desc == b"G")[0])
        return self.view(words, self._position(obs), goal, "G", self.action_names or [])

    view = staticmethod(local_view)  # (cell words, position, goal, goal name, moves) -> the observation text

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        return f"You moved {self.action_text(action)}. {self.observation_text(obs, info)}"


class FrozenLakeMoveViewAdapter(FrozenLakeLocalViewAdapter):
    """FrozenLake as a list of moves: what each one steps onto and, onto ice, whether it takes the agent nearer G
    ("LEFT: edge. DOWN: hole. RIGHT: ice, nearer G. UP: ice, farther from G."). No map and no goal clause.

    In `FrozenLakeLocalViewAdapter`'s view a 135M model learns to copy the first direction of the goal clause
    ("G is 2 DOWN, ..."), which walks into the holes on the way from half the start cells, and 20 steps do not
    teach it to weigh that word against the move's own clause. Here each move's clause carries all that decides
    it, so the policy to learn is to pick a move whose clause reads "ice, nearer G" (or "goal"), and to step back
    onto ice where none does. Which move that is changes from cell to cell: the model still has to read.
    Supervised, the 135M model learns that map from this view in 15 steps (35 from the local view). Under RL,
    `recipe=gym` uses it with bare-move replies and prompts of the current state alone (`env.history_turns=0`),
    which holds held-out success at 0.72-0.84 over steps 16-24 on two seeds of three (README, "Recipes")."""

    task = (
        "You walk on a frozen lake to the goal G. Falling into a hole ends the game. "
        "Each turn you see what each move steps onto and whether it takes you nearer to G."
    )

    view = staticmethod(move_view)


def _offset(steps: int, positive: str, negative: str) -> str:
    """`2 DOWN`, `1 UP`, or "" for no offset along this axis."""
    if steps == 0:
        return ""
    return f"{abs(steps)} {positive if steps > 0 else negative}"


TAXI_STANDS = "RGYB"


class TaxiAdapter(ToyTextAdapter):
    """Taxi: the map, the taxi's position, where the passenger is and where they go."""

    action_names = ["SOUTH", "NORTH", "EAST", "WEST", "PICKUP", "DROPOFF"]
    task = (
        "You drive a taxi on a 5x5 grid with four stands R, G, Y and B. Drive to the passenger, PICKUP, drive to "
        "the destination and DROPOFF. Walls (|) block moves east and west. Each step costs 1 point, a delivery "
        "earns 20, a wrong PICKUP or DROPOFF costs 10."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        taxi = self.env.unwrapped
        row, col, passenger, destination = taxi.decode(int(obs))  # type: ignore[attr-defined]
        stands = taxi.locs  # type: ignore[attr-defined]
        where = "is in the taxi" if passenger == 4 else f"waits at {_stand(stands, passenger)}"
        text = (
            f"The taxi is at row {row + 1}, column {col + 1}. The passenger {where}. "
            f"Destination: {_stand(stands, destination)}."
        )
        if self.env.render_mode == "ansi":
            text = strip_ansi(str(self.env.render())).split("\n  (")[0] + "\n" + text
        return text

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        return f"You chose {self.action_text(action)} (reward {reward:g}).\n{self.observation_text(obs, info)}"

    def is_success(self, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
        return terminated  # Taxi terminates only on a successful drop-off


def _stand(stands: list[tuple[int, int]], index: int) -> str:
    row, col = stands[index]
    return f"{TAXI_STANDS[index]} (row {row + 1}, column {col + 1})"


class CliffWalkingAdapter(ToyTextAdapter):
    """CliffWalking: the `ansi` map (x you, C cliff, T target) and the agent's row and column."""

    action_names = ["UP", "RIGHT", "DOWN", "LEFT"]
    task = (
        "You walk on a grid beside a cliff. Map: x you, o safe ground, C cliff, T target. Row 1 is the top row. "
        "Each step costs 1 point; stepping onto the cliff costs 100 and sends you back to the start. Reach T."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        nrow, ncol = self.env.unwrapped.shape  # type: ignore[attr-defined]
        row, col = divmod(int(obs), ncol)
        where = f"You are at row {row + 1}, column {col + 1}; T is at row {nrow}, column {ncol}."
        if self.env.render_mode == "ansi":
            return strip_ansi(str(self.env.render())) + "\n" + where
        return where

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        fell = " You fell off the cliff and are back at the start." if reward <= -100 else ""
        return f"You moved {self.action_text(action)}.{fell}\n{self.observation_text(obs, info)}"

    def is_success(self, reward: float, terminated: bool, info: dict[str, Any]) -> bool:
        return terminated  # CliffWalking terminates only at the target


class CliffWalkingLocalViewAdapter(CliffWalkingAdapter):
    """CliffWalking seen from where the agent stands (as `FrozenLakeLocalViewAdapter` sees FrozenLake): what each
    move steps onto (ground, cliff, target or the edge) and how far the target is. No map."""

    task = (
        "You walk beside a cliff to the target T. Stepping onto the cliff sends you back to the far start. "
        "Each turn you see what each move steps onto and where T is."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        cliff = self.env.unwrapped._cliff  # type: ignore[attr-defined]
        words = np.where(cliff, "cliff", "ground").astype(object)
        target = (cliff.shape[0] - 1, cliff.shape[1] - 1)
        words[target] = "target"
        position = divmod(int(obs), cliff.shape[1])
        return local_view(words, position, target, "T", self.action_names or [])

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        fell_off = getattr(self.env.unwrapped, "fell", reward <= -100)  # CliffWalkingRandomStart rescales rewards
        fell = " You fell off the cliff and are back at the start." if fell_off else ""
        return f"You moved {self.action_text(action)}.{fell} {self.observation_text(obs, info)}"


class BlackjackAdapter(ToyTextAdapter):
    """Blackjack (no `ansi` rendering): the player's total, the dealer's card, and the usable ace in words."""

    action_names = ["STICK", "HIT"]
    task = (
        "You play blackjack against the dealer. HIT draws a card, STICK ends your turn. Get closer to 21 than the "
        "dealer without going over 21. Face cards count 10, an ace 1 or 11."
    )

    def observation_text(self, obs: Any, info: dict[str, Any]) -> str:
        total, dealer, usable_ace = (int(v) for v in np.asarray(obs, dtype=object))
        ace = " (one ace counts as 11)" if usable_ace else ""
        shown = "an ace" if dealer == 1 else str(dealer)
        return f"Your cards total {total}{ace}. The dealer shows {shown}."

    def step_text(self, action: Any, obs: Any, reward: float, info: dict[str, Any]) -> str:
        if int(obs[0]) > 21:
            return f"You went over 21 with {int(obs[0])}. You lose."
        if self.action_text(action) == "STICK":  # the dealer plays out; the episode ends
            outcome = "You win." if reward > 0 else "You lose." if reward < 0 else "It is a draw."
            return f"You stick with {int(obs[0])}. {outcome}"
        return f"You chose HIT.\n{self.observation_text(obs, info)}"
