"""An entropy bonus over a choice: how evenly the policy spreads the first token of each turn over a few named
replies (a game's moves, a multiple-choice answer's letters), rather than over the whole vocabulary.

A vocabulary-wide bonus keeps every token of every reply uncertain; on a task whose replies are a choice among a
few words, that pushes the policy toward other words (on gym it drove the replies to random tokens), while what
keeps such a policy exploring is an even spread over the choices. `trainer.entropy_choices` names them; the
bonus is then the entropy of the first token's distribution renormalized over the choices' first tokens.

Renormalized, the bonus cannot see a reply that begins with another word: "You're right" names a move but starts
with "You", where the moves' renormalized spread stays wide (near the bonus's maximum) whatever the policy does. A
policy can then settle on one such reply for every state while the bonus still pays in full (on gym: every tree run
of seed 5). `trainer.entropy_choices_weighted` multiplies the entropy by the probability that the first token is
one of the choices, so such a reply earns no bonus, and the bonus pulls replies back onto the choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentrl.errors import UserError


def choice_token_ids(tokenizer: Any, choices: Sequence[str]) -> list[int]:
    """The first token of each choice, in order.

    Raises:
        UserError: a choice is empty or two choices begin with the same token (the bonus could not tell them
            apart).
    """
    ids: list[int] = []
    for choice in choices:
        tokens = tokenizer.encode(choice, add_special_tokens=False)
        if not tokens:
            raise UserError(f"trainer.entropy_choices: {choice!r} has no tokens; list non-empty replies")
        if tokens[0] in ids:
            other = choices[ids.index(tokens[0])]
            raise UserError(
                f"trainer.entropy_choices: {other!r} and {choice!r} begin with the same token "
                f"{tokenizer.decode([tokens[0]])!r}; list replies whose first tokens differ"
            )
        ids.append(tokens[0])
    return ids


def turn_first_tokens(response_mask: torch.Tensor) -> torch.Tensor:
    """1 at the first generated token of each turn (a trainable token whose predecessor is not), else 0; [b, R]."""
    mask = response_mask.bool()
    before = torch.nn.functional.pad(mask[:, :-1], (1, 0), value=False)
    return mask & ~before


def choice_entropy(all_logp: torch.Tensor, choice_ids: Sequence[int], weighted: bool = False) -> torch.Tensor:
    """The entropy of each position's distribution renormalized over `choice_ids`, [b, R] from [b, R, V] log-probs
    (with gradient). `weighted`: times the probability of `choice_ids` at that position (0 where the policy
    begins with another token)."""
    picked = all_logp[..., list(choice_ids)]
    log_mass = picked.logsumexp(-1, keepdim=True)
    renormalized = picked - log_mass
    entropy = -(renormalized.exp() * renormalized).sum(-1)
    return entropy * log_mass.squeeze(-1).exp() if weighted else entropy
