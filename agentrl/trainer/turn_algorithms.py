"""Per-turn advantage estimators: one advantage per generated turn, from per-turn rewards.

Where the outcome estimators of `agentrl.trainer.algorithms` give every token of a trajectory the same advantage,
these credit each turn of a multi-turn episode on its own (`agentrl.trainer.turn_credit` maps a turn's
advantage onto exactly that turn's generated tokens). They take the group's `TurnEpisode`s (per-turn rewards
r_1..r_T summing to the trajectory's reward R(τ), and the state key each turn started from) and return a
`TurnAdvantages`. They carry `per_turn = True` (set by `@per_turn`), which is how the trainer tells the two
kinds apart; both kinds live in the one `trainer.advantage` registry.

Conventions as for the outcome estimators: group statistics use the unbiased std, and a degenerate group (one
member, or all values equal) gives exactly 0. γ is `trainer.turn_discount`, ω `trainer.gigpo_step_weight`, and
`anchor_scope` `trainer.gigpo_anchor_scope`.

Built-in names (`agentrl.trainer.registry.ADVANTAGES`): `turn_grpo`, `gigpo`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from agentrl.errors import UserError
from agentrl.trainer.algorithms import DEFAULT_EPS, dr_grpo_advantage, grpo_advantage
from agentrl.trainer.shared_turns import TurnKey, turn_keys, untrained_copies
from agentrl.trainer.turn_credit import TurnEpisode


@dataclass(frozen=True)
class TurnAdvantages:
    """What a per-turn estimator returns.

    Attributes:
        per_turn: one float32 tensor [T_i] per episode: the advantage of each of its turns.
        metrics: the estimator's own `train/*` figures (e.g. `train/gigpo_anchor_share`).
        untrained: per episode, the turns another episode trains instead (a tree's shared prefix, trained once);
            None: every turn is trained.
    """

    per_turn: list[torch.Tensor]
    metrics: dict[str, float] = field(default_factory=dict)
    untrained: list[list[int]] | None = None


AnchorScope = Literal["group", "batch"]
StepNorm = Literal["std", "none"]


class TurnAdvantageEstimator(Protocol):
    """`(episodes, *, discount, step_weight, anchor_scope, step_norm, eps) -> TurnAdvantages`, with
    `per_turn = True`; an estimator may leave out the options it does not use."""

    per_turn: bool

    def __call__(
        self,
        episodes: Sequence[TurnEpisode],
        *,
        discount: float = 1.0,
        step_weight: float = 1.0,
        anchor_scope: AnchorScope = "group",
        step_norm: StepNorm = "std",
        eps: float = DEFAULT_EPS,
    ) -> TurnAdvantages: ...


def per_turn(fn: Callable[..., TurnAdvantages]) -> Any:
    """Mark `fn` as a per-turn estimator (register it with `register_advantage` as well)."""
    fn.per_turn = True  # type: ignore[attr-defined]
    return fn


def is_per_turn(estimator: Any) -> bool:
    """Whether `estimator` credits turns (`TurnAdvantageEstimator`) rather than whole trajectories."""
    return bool(getattr(estimator, "per_turn", False))


def discounted_returns(rewards: Sequence[float], discount: float) -> list[float]:
    """G_t = Σ_{k≥t} γ^{k−t} r_k for each turn t of one episode (backwards: G_t = r_t + γ·G_{t+1})."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + discount * running
        out[t] = running
    return out


@per_turn
def turn_grpo_advantage(
    episodes: Sequence[TurnEpisode],
    *,
    discount: float = 1.0,
    step_weight: float = 1.0,
    anchor_scope: AnchorScope = "group",
    step_norm: StepNorm = "std",
    eps: float = DEFAULT_EPS,
) -> TurnAdvantages:
    """GRPO with process supervision (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300, §4.1.3), over turns.

        r̃_t^(i) = (r_t^(i) − mean(R)) / (std(R) + ε),    R = {r_k^(j)}: every turn reward of the group's episodes
        Â_t^(i) = Σ_{k≥t} γ^{k−t} · r̃_k^(i)

    Each turn's reward is normalised against all the turn rewards of its group, and a turn's advantage is the
    (discounted) return of the normalised rewards from that turn on. With γ = 1 this is the paper's
    Â_{i,t} = Σ_{index(j)≥t} r̃_i^{index(j)}, a turn taking the place of a reasoning step. A group whose turn
    rewards are all equal (or that has a single turn) gives 0. `step_weight`, `anchor_scope` and `step_norm` are
    unused (GiGPO's).
    """
    rewards = torch.tensor([r for e in episodes for r in e.turn_rewards], dtype=torch.float64)
    groups = [e.group_id for e in episodes for _ in e.turn_rewards]
    normalized = grpo_advantage(rewards, groups, eps=eps) if groups else rewards
    per_episode = normalized.split([e.num_turns for e in episodes])
    return TurnAdvantages([_f32(discounted_returns(r.tolist(), discount)) for r in per_episode])


@per_turn
def gigpo_advantage(
    episodes: Sequence[TurnEpisode],
    *,
    discount: float = 1.0,
    step_weight: float = 1.0,
    anchor_scope: AnchorScope = "group",
    step_norm: StepNorm = "std",
    eps: float = DEFAULT_EPS,
) -> TurnAdvantages:
    """GiGPO, Group-in-Group Policy Optimization (Feng et al. 2025, arXiv:2505.10978, §4).

        A^E(τ_i)    = (R(τ_i) − mean_j R(τ_j)) / (std_j R(τ_j) + ε)          episode level, over the group (Eq. 3)
        R_t^(i)     = Σ_{k≥t} γ^{k−t} r_k^(i)                                discounted return from step t (Eq. 5)
        G^S(s̃)     = {(i, t) : s_t^(i) = s̃}                                 anchor-state group, within the group (Eq. 6)
        A^S(i, t)   = (R_t^(i) − mean_{G^S(s̃)} R) / F_norm                 step level, within G^S(s̃) (Eq. 7)
        A(i, t)     = A^E(τ_i) + ω · A^S(i, t)                               (Eq. 8)

    Turns of the group's episodes (a repeated state of one episode included) that start from the same state key
    form an anchor group; a singleton anchor group, or one whose returns are all equal, gives A^S = 0. The paper
    allows F_norm = std_{G^S(s̃)} R + ε (`step_norm="std"`, the default, as `grpo`) or 1 (`step_norm="none"`, as
    `dr_grpo`). It uses γ = 0.95 and ω = 1 in its experiments.

    `step_norm="none"` keeps step advantages in reward units: a state whose moves differ only by a little shaping
    then weighs little, where the std form scales every anchor group to unit spread, so that a shaping tie-break
    pushes as hard as the move that decides success.

    `anchor_scope="batch"` forms anchor groups over the whole batch instead of within each prompt's group: right
    when every prompt plays the same environment (random starts on one map), so an equal key is the same state
    whichever prompt reached it, and the extra members give each state's baseline more samples. Keep "group" when
    prompts are different tasks whose states could share a key.

    On a tree rollout (`rollout.tree`) every leaf holds a copy of each turn played before its branch points. Such a
    turn is one turn (`agentrl.trainer.shared_turns`): it is one member of its anchor group, with the mean of its
    copies' returns R_t, its A^E is the mean of theirs, and one leaf trains it (`TurnAdvantages.untrained`), as
    `tree_grpo` trains a shared prefix. Training each copy instead would count one action k times in its anchor
    group and weigh it k times in the batch.

    Metric: `train/gigpo_anchor_share`, the share of turns (a shared turn once) in an anchor group of two or more.

    Raises:
        UserError: an episode with turns has no state keys (`Trajectory.turn_states`).
    """
    if any(e.turn_states is None and e.num_turns for e in episodes):
        raise UserError(
            "trainer.advantage=gigpo groups turns by the state they start from, but some trajectories record no "
            "Trajectory.turn_states; record them in the loop (the gym loop does) or use trainer.advantage=turn_grpo"
        )
    episode_adv = grpo_advantage(
        torch.tensor([e.reward for e in episodes], dtype=torch.float64), [e.group_id for e in episodes], eps=eps
    ).tolist()
    keys = turn_keys(episodes)
    turns: dict[TurnKey, _Turn] = {}  # each turn once, however many leaves hold a copy of it
    for index, episode in enumerate(episodes):
        returns = discounted_returns(episode.turn_rewards, discount)
        for key, ret, state in zip(keys[index], returns, episode.turn_states or [], strict=True):
            anchor = (episode.group_id if anchor_scope == "group" else None, state)
            turn = turns.setdefault(key, _Turn(anchor))
            turn.returns.append(ret)
            turn.episode_advantages.append(episode_adv[index])
    anchors = [turn.anchor for turn in turns.values()]
    returns_once = torch.tensor([_mean(turn.returns) for turn in turns.values()], dtype=torch.float64)
    centre = grpo_advantage if step_norm == "std" else dr_grpo_advantage
    step_adv = centre(returns_once, anchors, eps=eps) if anchors else returns_once
    advantage = {
        key: _mean(turn.episode_advantages) + step_weight * a_s
        for (key, turn), a_s in zip(turns.items(), step_adv.tolist(), strict=True)
    }
    per_turn = [torch.tensor([advantage[key] for key in mine], dtype=torch.float64).float() for mine in keys]
    untrained = untrained_copies(episodes, keys)
    metrics = {"train/gigpo_anchor_share": _anchor_share(anchors)}
    return TurnAdvantages(per_turn, metrics, untrained if any(untrained) else None)


@dataclass
class _Turn:
    """One turn as GiGPO credits it: its anchor state, and the return and episode advantage of each copy of it."""

    anchor: tuple[Any, str]
    returns: list[float] = field(default_factory=list)
    episode_advantages: list[float] = field(default_factory=list)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _f32(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def _anchor_share(anchors: list[tuple[Any, str]]) -> float:
    """The share of turns whose anchor-state group has two members or more."""
    if not anchors:
        return 0.0
    sizes: dict[tuple[Any, str], int] = {}
    for key in anchors:
        sizes[key] = sizes.get(key, 0) + 1
    return sum(1 for key in anchors if sizes[key] > 1) / len(anchors)
