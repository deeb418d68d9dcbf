"""A referential game of two roles: a describer who sees the target, and a guesser who sees only the clue.

Each sample names candidate words and a target among them (`extra_info: {candidates, target}`). The describer sees
both and writes a one-word clue; the guesser sees the candidates and the clue, and names one. Both win when the
guess is the target (cooperative). Each role sees only its own conversation: the describer's turn and the
guesser's are two step samples of one trajectory, so each policy trains in the context it saw.

`agent.roles` maps `describer` and `guesser` to policies (`policies:`): two models trained together, or one policy
playing both (self-play). A sample with `extra_info.partner: scripted_guesser` (or `scripted_describer`) replaces
that role by a fixed script, so that held-out rows measure each policy against the same partner whatever the other
learned: the scripted describer says the target; the scripted guesser picks the candidate that is the clue's first word.

Rewards: 1 for each role when the guess is the target, else a small format credit (`format_credit`) for a reply
that is one word (describer) or one of the candidates (guesser), so that a group of all-wrong replies still ranks
them. Each role's tokens train on that role's reward (`Trajectory.player_rewards`), whichever policy plays it; each
policy named in `agent.roles` reports the mean of its roles' rewards (`Trajectory.policy_rewards`, for its reward
curves); the episode's `reward` is the mean of the roles played.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from agentrl.loops.base import AgentLoopBase, LoopOptions
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext
from agentrl.types import Message, Sample, Trajectory

Partner = Literal["scripted_guesser", "scripted_describer"]


class ReferentialGameOptions(LoopOptions):
    format_credit: float = Field(0.2, ge=0, description="reward for a well-formed reply that does not win")


class ReferentialGameLoop(AgentLoopBase):
    """The describer writes a clue for the target, the guesser names a candidate; both win on the target."""

    Options = ReferentialGameOptions
    roles = ("describer", "guesser")

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """One policy plays both roles; the clue is the secret word, and the guess the clue."""
        extra = {"candidates": ["apple", "river", "stone"], "target": "river"}
        return LoopCheckCase(sample=Sample(prompt=[], extra_info=extra), reply=lambda _: "river")

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        candidates, target = _game(sample)
        partner: Partner | None = sample.extra_info.get("partner")
        traj = ctx.trajectory
        if partner == "scripted_describer":
            clue = target
        else:
            ctx.start([Message(role="user", content=describer_prompt(candidates, target))])
            turn = await ctx.generate(policy=self.policy_for("describer"), player="describer", continue_if_cut=True)
            clue = turn.text
        if partner == "scripted_guesser":
            guess = scripted_guess(clue, candidates)
        else:
            messages = [Message(role="user", content=guesser_prompt(candidates, clue))]
            if traj.segments:
                ctx.new_step_sample(messages)  # the guesser's own conversation: it never sees the target
            else:
                ctx.start(messages)
            turn = await ctx.generate(policy=self.policy_for("guesser"), player="guesser", continue_if_cut=True)
            reply = turn.text
            guess = _match(first_word(reply), candidates)
        ctx.finish()
        won = guess == target
        credit = self.options.format_credit
        rewards = {}
        if partner != "scripted_describer":
            rewards["describer"] = float(won) + (0.0 if won else credit * (len(words(clue)) == 1))
        if partner != "scripted_guesser":
            rewards["guesser"] = float(won) + (0.0 if won else credit * (guess is not None))
        traj.player_rewards = rewards
        traj.policy_rewards = self._by_policy(rewards)
        traj.reward = sum(rewards.values()) / len(rewards)
        traj.metrics["game/success"] = float(won)
        traj.metadata["game"] = {"target": target, "clue": clue, "guess": guess, "partner": partner}
        return traj

    def _by_policy(self, rewards: dict[str, float]) -> dict[str, float]:
        """Each mapped policy's reward: the mean of the roles it plays (one policy playing both: self-play)."""
        mine: dict[str, list[float]] = {}
        for role, reward in rewards.items():
            if (policy := self.policy_for(role)) is not None:
                mine.setdefault(policy, []).append(reward)
        return {policy: sum(r) / len(r) for policy, r in mine.items()}


def describer_prompt(candidates: list[str], target: str) -> str:
    return (
        f"Words: {', '.join(candidates)}. The secret word is {target}. Your partner sees the words but not the "
        "secret. Give a one-word clue so your partner picks the secret word. Answer with one word."
    )


def guesser_prompt(candidates: list[str], clue: str) -> str:
    return (
        f"Words: {', '.join(candidates)}. Your partner knows the secret word and gave this clue: "
        f'"{clue.strip()[:80]}". Which word is the secret? Answer with one of the words.'
    )


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def first_word(text: str) -> str:
    found = words(text)
    return found[0] if found else ""


def scripted_guess(clue: str, candidates: list[str]) -> str | None:
    """The candidate the clue's first word is, else None (the rule the guesser's own reply is read by)."""
    return _match(first_word(clue), candidates)


def _match(word: str, candidates: list[str]) -> str | None:
    return word if word in candidates else None


def _game(sample: Sample) -> tuple[list[str], str]:
    info = sample.extra_info
    candidates, target = info.get("candidates"), info.get("target")
    if not isinstance(candidates, list) or target not in candidates:
        raise ValueError(
            "a referential game row needs extra_info.candidates (a list of words) and extra_info.target (one of "
            f"them); got {info!r}"
        )
    return [str(c).lower() for c in candidates], str(target).lower()


__all__ = ["ReferentialGameLoop", "ReferentialGameOptions", "describer_prompt", "guesser_prompt", "scripted_guess"]
