"""Where a tree rollout branches and how much it may spend: `TreeShape` (the rule and the width) and `TreeBudget`
(the tokens and tool calls a tree has generated so far, shared by its running episodes).

Three rules, one per tree:

- fixed turns (`branch_turns=(1, 3)`): fork at those turn counts;
- every k turns (`every=k`): fork at turns k, 2k, … up to `max_branch_points` forks along a path;
- uncertainty (`entropy=h`): fork after a turn whose first `entropy_tokens` tokens have a mean surprisal
  (−logprob of the sampled tokens, a one-sample estimate of the policy's entropy there) of at least `h` nats, up
  to `max_branch_points` forks along a path; the surprisal of the tokens the policy actually sampled is what a
  server returns for every turn. After such a turn the children share it and differ only in what follows. With
  `resample_uncertain` the fork is at the state *before* the uncertain turn, as ARPO (arXiv 2507.19849) branches
  where the entropy rises after a tool call: the turn as played is the first child's, and the others sample it
  again. An uncertain turn is known only once played, so each turn that may fork copies the episode's state first
  (`TreeShape.snapshots_before`), and the copy is freed when the turn was certain.

With `fill`, a tree keeps its count of leaves: an episode that ends before a branch point below it hands back the
leaves it would have grown (its quota: a node's share of the tree's width^depth leaves), and the tree starts that
many more first branches from the prompt (with `every` or `entropy`, whose root need not fork before its first
turn, the root's episode then becomes the first of those branches). Without it, such a tree simply has fewer leaves
(and costs less).

A budget (`max_tokens`, `max_tool_calls`) makes a tree comparable with flat episodes at equal cost: once a tree's
episodes have generated that much in all (a shared prefix counted once), it forks no more, and the episodes that
are running play to their ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.config.schema import TreeConfig
from agentrl.errors import UserError
from agentrl.types import Trajectory


@dataclass(frozen=True)
class TreeShape:
    """Where and how wide a tree branches, and its budget (see the module docstring).

    Attributes:
        branch_turns: the turn counts at which the episode forks (0: before the first turn), increasing.
        width: children per branch point (2 or more).
        every: fork every this many turns instead (0: off).
        entropy: fork after an uncertain turn instead: the mean surprisal, in nats, that makes a turn uncertain.
        entropy_tokens: the first tokens of a turn its surprisal is averaged over.
        max_branch_points: forks along one path at most, with `every` or `entropy`.
        max_tokens: the tree forks no more once its episodes generated this many tokens (None: no budget).
        max_tool_calls: the same in tool calls.
        fill: hand the leaves an episode that ended early would have grown back to the tree (branch_turns must
            start with 0; with every or entropy, a root that did not fork at 0 becomes the first of the branches).
        child_temperature: the temperature the children of a fork after a turn sample at (None: the rollout's).
        resample_uncertain: with `entropy`, fork at the state before the uncertain turn, not after it.
    """

    branch_turns: tuple[int, ...] = ()
    width: int = 2
    every: int = 0
    entropy: float | None = None
    entropy_tokens: int = 16
    max_branch_points: int = 2
    max_tokens: int | None = None
    max_tool_calls: int | None = None
    fill: bool = False
    child_temperature: float | None = None
    resample_uncertain: bool = False

    def __post_init__(self) -> None:
        turns = self.branch_turns
        if self.width < 2:
            raise UserError(f"a tree branches into 2 children or more, not {self.width}")
        if any(t < 0 for t in turns) or list(turns) != sorted(set(turns)):
            raise UserError(f"branch turns must be increasing turn counts >= 0, got {list(turns)}")
        rules = sum((bool(turns), self.every > 0, self.entropy is not None))
        if rules != 1:
            raise UserError(
                "a tree needs exactly one rule of where to branch: branch_turns, every or entropy "
                f"(got {rules} of them)"
            )
        if self.fill and turns and turns[0] != 0:
            raise UserError(f"a tree that fills starts new branches from the prompt: it must branch at 0, not {turns}")
        if self.resample_uncertain and self.entropy is None:
            raise UserError("resample_uncertain forks before an uncertain turn: it needs the entropy rule")
        if self.child_temperature is not None and self.child_temperature <= 0:
            raise UserError(f"children sample at a temperature > 0 (0 is greedy), not {self.child_temperature}")

    @classmethod
    def of(cls, tree: TreeConfig) -> TreeShape:
        """The shape `rollout.tree` gives."""
        return cls(
            tuple(tree.branch_turns),
            tree.width,
            tree.every,
            tree.entropy,
            tree.entropy_tokens,
            tree.max_branch_points,
            tree.max_tokens,
            tree.max_tool_calls,
            tree.fill,
            tree.child_temperature,
            tree.resample_uncertain,
        )

    @property
    def depth(self) -> int:
        """Forks along a path at most."""
        return len(self.branch_turns) if self.branch_turns else self.max_branch_points

    @property
    def leaves(self) -> int:
        """Leaves of a tree whose episodes all branch as often as they may."""
        return self.width**self.depth

    def capacity(self, taken: tuple[int, ...]) -> int:
        """Leaves an episode that forked at the turns `taken` can still grow into."""
        return self.width ** (self.depth - len(taken))

    def branches_here(self, traj: Trajectory, taken: tuple[int, ...]) -> bool:
        """Whether the episode of `traj`, which forked at the turn counts `taken` so far, forks now."""
        turn = traj.num_turns
        if (taken and taken[-1] == turn) or len(taken) >= self.depth:
            return False  # a child starts where its parent forked
        if self.branch_turns:
            return turn == self.branch_turns[len(taken)]
        if self.every:
            return turn > 0 and turn % self.every == 0
        return turn > 0 and not self.resample_uncertain and self.uncertain(traj)

    def snapshots_before(self, traj: Trajectory, taken: tuple[int, ...]) -> bool:
        """With `resample_uncertain`: whether the episode's state is copied before its next turn, to fork there
        should the turn be uncertain (not where the episode was forked: its siblings sample that turn already)."""
        turn = traj.num_turns
        return self.resample_uncertain and len(taken) < self.depth and not (taken and taken[-1] == turn)

    def uncertain(self, traj: Trajectory) -> bool:
        """Whether the episode's last turn was uncertain (the entropy rule)."""
        assert self.entropy is not None
        return last_turn_surprisal(traj, self.entropy_tokens) >= self.entropy

    def branches_after_next_turn(self, traj: Trajectory, taken: tuple[int, ...]) -> bool:
        """Whether the episode will fork once its next turn is played, as far as the rule knows in advance (fixed
        turns and every k turns do; an uncertain turn is known only once played)."""
        turn = traj.num_turns + 1
        if len(taken) >= self.depth:
            return False
        if self.branch_turns:
            return turn == self.branch_turns[len(taken)]
        return self.every > 0 and turn % self.every == 0


def last_turn_surprisal(traj: Trajectory, tokens: int) -> float:
    """The mean −logprob of the first `tokens` tokens of the last generated turn (0 when it has no logprobs), in
    whichever step sample holds it (a loop with a history window starts a new one after each turn)."""
    for sample in reversed(traj.step_samples()):
        for segment in reversed(sample.segments):
            if segment.trainable:
                logprobs = (segment.logprobs or [])[:tokens]
                return -sum(logprobs) / len(logprobs) if logprobs else 0.0
    return 0.0


@dataclass
class TreeBudget:
    """What one tree's episodes generated so far, all nodes together: each episode adds what its steps add."""

    shape: TreeShape
    tokens: int = 0
    tool_calls: int = 0

    def add(self, before: tuple[int, int], traj: Trajectory) -> None:
        """Count what `traj` generated since `usage(traj)` was `before`."""
        tokens, calls = usage(traj)
        self.tokens += tokens - before[0]
        self.tool_calls += calls - before[1]

    @property
    def spent(self) -> bool:
        """The tree may fork no more."""
        s = self.shape
        return (s.max_tokens is not None and self.tokens >= s.max_tokens) or (
            s.max_tool_calls is not None and self.tool_calls >= s.max_tool_calls
        )


def usage(traj: Trajectory) -> tuple[int, int]:
    """Tokens generated and tool calls made by the episode so far."""
    return traj.num_generated_tokens_in_all_steps(), int(traj.metrics.get("tool/calls", 0))
