"""Policy losses against the papers' formulas, on hand-computed tensors (float64, so numbers are exact enough)."""

import math

import pytest
import torch

from agentrl.errors import AgentRLError
from agentrl.trainer.losses import (
    PolicyLossConfig,
    aggregate,
    get_loss,
    kl_penalty,
    register_loss,
    tis_weights,
)
from agentrl.trainer.registry import LOSSES

F64 = torch.float64


def t(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(list(rows), dtype=F64)


def with_ratios(ratios: list[float], old: list[float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprobs with grad, old_logprobs) such that exp(logp - old) == ratios (one sequence)."""
    old_t = t(old if old is not None else [-1.0] * len(ratios))
    logp = (old_t + torch.log(t(ratios))).detach().requires_grad_(True)
    return logp, old_t


def run(name, ratios, adv, cfg=None, mask=None, **kw):
    logp, old = with_ratios(ratios)
    mask = mask if mask is not None else torch.ones_like(logp, dtype=torch.long)
    loss, metrics = get_loss(name)(logp, old, t(adv), mask, cfg, **kw)
    loss.backward()
    return loss.item(), metrics, logp.grad[0].tolist()


def close(got: torch.Tensor, want: list) -> bool:
    return torch.allclose(got.detach().to(F64), torch.tensor(want, dtype=F64), rtol=1e-9, atol=1e-12)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ---------------------------------------------------------------------------------------------- ppo_clip


def test_ppo_clip_asymmetric_clip_higher():
    cfg = PolicyLossConfig(clip_low=0.2, clip_high=0.28)
    # tokens: (r, Â) = (1.5, +1) clipped high, (0.5, -1) clipped low, (1.1, -1) and (0.7, +1) unclipped
    loss, m, grad = run("ppo_clip", [1.5, 0.5, 1.1, 0.7], [1.0, -1.0, -1.0, 1.0], cfg)
    # ℓ = -min(r Â, clip(r, 0.8, 1.28) Â) = [-1.28, 0.8, 1.1, -0.7]
    assert loss == pytest.approx((-1.28 + 0.8 + 1.1 - 0.7) / 4)
    assert m["clipfrac"] == 0.5 and m["clipfrac_high"] == 0.25 and m["clipfrac_low"] == 0.25
    # gradient of -r Â wrt log π is -r Â where the unclipped term is active, else 0; token-mean divides by 4
    assert grad == pytest.approx([0.0, 0.0, 1.1 / 4, -0.7 / 4])
    assert m["ppo_kl"] == pytest.approx(-(math.log(1.5) + math.log(0.5) + math.log(1.1) + math.log(0.7)) / 4)


def test_ppo_clip_is_symmetric_by_default_and_dapo_clips_higher():
    assert run("ppo_clip", [1.5], [1.0])[0] == pytest.approx(-1.2)
    assert run("dapo", [1.5], [1.0])[0] == pytest.approx(-1.28)
    assert run("dapo", [1.5], [1.0], PolicyLossConfig(clip_high=0.3))[0] == pytest.approx(-1.3)


def test_dual_clip_bounds_negative_advantage_loss():
    cfg = PolicyLossConfig(clip_low=0.2, clip_high=0.2, dual_clip_c=3.0)
    # (r, Â): (5, -1): PPO gives -r Â = 5, dual clip caps at -c Â = 3; (2, -1): 2 < 3, unchanged;
    # (5, +1): the ordinary clip, -1.2
    loss, m, grad = run("dual_clip", [5.0, 2.0, 5.0], [-1.0, -1.0, 1.0], cfg)
    assert loss == pytest.approx((3.0 + 2.0 - 1.2) / 3)
    assert m["dual_clipfrac"] == pytest.approx(1 / 3)
    assert m["clipfrac"] == pytest.approx(1 / 3)  # only the positive-advantage token is PPO-clipped
    assert grad == pytest.approx([0.0, 2.0 / 3, 0.0])
    # plain PPO on the same tokens is unbounded for (5, -1)
    assert run("ppo_clip", [5.0], [-1.0], cfg)[0] == pytest.approx(5.0)


def test_cispo_clips_the_detached_weight_and_keeps_every_gradient():
    cfg = PolicyLossConfig(clip_low=0.2, clip_high=0.28)
    logp = t([-1.0, -2.0, -0.5]).requires_grad_(True)
    old = logp.detach() - torch.log(t([1.5, 0.5, 1.1]))
    adv = t([1.0, -1.0, 2.0])
    loss, m = get_loss("cispo")(logp, old, adv, torch.ones(1, 3), cfg)
    loss.backward()
    # r̂ = clip(r, 0.8, 1.28) = [1.28, 0.8, 1.1];  ℓ = -sg(r̂) Â log π
    assert loss.item() == pytest.approx((-1.28 * 1 * -1.0 - 0.8 * -1 * -2.0 - 1.1 * 2 * -0.5) / 3)
    assert logp.grad[0].tolist() == pytest.approx([-1.28 / 3, 0.8 / 3, -2.2 / 3])
    assert m["clipfrac"] == pytest.approx(2 / 3)


def test_gspo_uses_the_sequence_ratio_and_clips_whole_sequences():
    cfg = PolicyLossConfig(seq_clip_low=0.2, seq_clip_high=0.2)
    old = t([-1.0, -1.0, -1.0, -1.0], [-2.0, -2.0, -2.0, -2.0])
    log_r = t([0.1, -0.2, 0.4, 9.0], [0.5, 0.3, 7.0, 7.0])  # padding log-ratios are garbage, masked out
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    logp = (old + log_r).requires_grad_(True)
    adv = t([1.0] * 4, [2.0] * 4)
    loss, m = get_loss("gspo")(logp, old, adv, mask, cfg)
    loss.backward()
    s0 = math.exp((0.1 - 0.2 + 0.4) / 3)  # 1.105, inside [0.8, 1.2]
    s1 = math.exp((0.5 + 0.3) / 2)  # 1.492, clipped to 1.2 (Â > 0)
    # seq-mean-token-mean (GSPO's default): mean over sequences of the token mean of -min(s Â, clip(s) Â)
    assert loss.item() == pytest.approx((-1.0 * s0 + -2.0 * 1.2) / 2)
    # ∇ = -(1/G) Â_i s_i (1/|y_i|) Σ_t ∇log π: each of the 3 tokens of seq 0 gets -s0/(3·2); seq 1 is clipped
    assert close(logp.grad, [[-s0 / 6] * 3 + [0.0], [0.0] * 4])
    assert m["seq_clipfrac"] == 0.5 and m["clipfrac"] == pytest.approx(2 / 5)
    assert m["seq_ratio_mean"] == pytest.approx((s0 + s1) / 2)


def test_gspo_gradient_equals_the_sequence_level_objective():
    torch.manual_seed(0)
    old = -torch.rand(3, 5, dtype=F64) - 0.5
    logp = (old + 0.05 * torch.randn(3, 5, dtype=F64)).requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0]])
    adv_seq = torch.tensor([0.7, -1.3, 0.4], dtype=F64)
    cfg = PolicyLossConfig(seq_clip_low=1.0, seq_clip_high=10.0)  # nothing clips
    loss, _ = get_loss("gspo")(logp, old, adv_seq[:, None].expand(3, 5), mask, cfg)
    (grad,) = torch.autograd.grad(loss, logp)
    # GSPO Eq. 5 without clipping: J = (1/G) Σ_i s_i Â_i, s_i = exp(mean_t(log π − log π_old)), loss = −J
    logp2 = logp.detach().clone().requires_grad_(True)
    s = torch.exp(((logp2 - old) * mask).sum(-1) / mask.sum(-1))
    (want,) = torch.autograd.grad(-(s * adv_seq).mean(), logp2)
    assert torch.allclose(grad, want, atol=1e-12)
    assert loss.item() == pytest.approx(-(s * adv_seq).mean().item())


def test_gspo_clips_low_for_negative_advantage():
    cfg = PolicyLossConfig(seq_clip_low=0.1, seq_clip_high=0.1)
    loss, m, grad = run("gspo", [0.5, 0.5], [-1.0, -1.0], cfg)
    assert loss == pytest.approx(0.9)  # -min(0.5·(-1), 0.9·(-1)) = 0.9
    assert grad == [0.0, 0.0] and m["seq_clipfrac"] == 1.0


def test_sapo_soft_gate():
    cfg = PolicyLossConfig(tau_pos=1.0, tau_neg=1.05)
    ratios, adv = [1.0, 1.5, 0.5], [1.0, 1.0, -1.0]
    loss, m, grad = run("sapo", ratios, adv, cfg)
    # f(r) = (4/τ) σ(τ (r − 1)), τ = τ_pos for Â > 0 else τ_neg;  ℓ = −f(r) Â
    f = [4 / 1.0 * sigmoid(0.0), 4 / 1.0 * sigmoid(0.5), 4 / 1.05 * sigmoid(1.05 * -0.5)]
    assert loss == pytest.approx((-f[0] * 1 - f[1] * 1 + f[2] * 1) / 3)
    # dℓ/dlog π = −Â · 4 σ(1 − σ) · r
    w = [4 * sigmoid(x) * (1 - sigmoid(x)) for x in (0.0, 0.5, -0.525)]
    assert grad == pytest.approx([-1.0 * w[0] * 1.0 / 3, -1.0 * w[1] * 1.5 / 3, 1.0 * w[2] * 0.5 / 3])
    assert grad[0] == pytest.approx(-1 / 3)  # on-policy the gate weight is 1: the vanilla policy gradient
    assert m["gate_weight_mean"] == pytest.approx(sum(w) / 3) and m["clipfrac"] == 0.0


# ------------------------------------------------------------------------------------------- aggregation


LOSS_MAT = t([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0])
AGG_MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])  # third sequence has no trainable token


@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("token-mean", (1 + 2 + 3 + 10 + 20) / 5),
        ("seq-mean-token-sum", ((1 + 2 + 3) + (10 + 20)) / 2),
        ("seq-mean-token-mean", ((1 + 2 + 3) / 3 + (10 + 20) / 2) / 2),
        ("seq-mean-token-sum-norm", ((1 + 2 + 3) / 4 + (10 + 20) / 4) / 2),
    ],
)
def test_aggregation_modes(mode, want):
    assert aggregate(LOSS_MAT, AGG_MASK, mode).item() == pytest.approx(want)


def test_aggregation_norm_constant_and_micro_batch_denominators():
    got = aggregate(LOSS_MAT, AGG_MASK, "seq-mean-token-sum-norm", norm_constant=10)
    assert got.item() == pytest.approx((6 / 10 + 30 / 10) / 2)
    assert aggregate(LOSS_MAT, AGG_MASK, "token-mean", num_tokens=10).item() == pytest.approx(36 / 10)
    assert aggregate(LOSS_MAT, AGG_MASK, "seq-mean-token-sum", num_seqs=4).item() == pytest.approx(36 / 4)
    # two micro-batches with the mini-batch token count sum to the mini-batch token-mean
    halves = [aggregate(LOSS_MAT[i : i + 1], AGG_MASK[i : i + 1], "token-mean", num_tokens=5) for i in (0, 1)]
    assert sum(h.item() for h in halves) == pytest.approx(36 / 5)
    with pytest.raises(AgentRLError, match="loss_agg_mode"):
        aggregate(LOSS_MAT, AGG_MASK, "sum")  # type: ignore[arg-type]


def test_loss_agg_mode_overrides_the_loss_default():
    cfg = PolicyLossConfig(seq_clip_low=1.0, seq_clip_high=10.0, loss_agg_mode="token-mean")
    logp = t([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    adv = t([1.0] * 3, [4.0] * 3)
    assert get_loss("gspo")(logp, logp, adv, mask, cfg)[0].item() == pytest.approx(-(1 + 1 + 1 + 4) / 4)
    default = get_loss("gspo")(logp, logp, adv, mask, PolicyLossConfig())[0].item()
    assert default == pytest.approx(-(1 + 4) / 2)


# ----------------------------------------------------------------------------------------- KL and TIS


def test_kl_estimators():
    logp, ref = t([-1.0, -2.0]), t([-1.5, -1.0])
    assert close(kl_penalty(logp, ref, "k1"), [[0.5, -1.0]])
    assert close(kl_penalty(logp, ref, "k2"), [[0.5 * 0.25, 0.5 * 1.0]])
    # k3 = exp(ref − logp) − (ref − logp) − 1
    assert close(kl_penalty(logp, ref, "k3"), [[math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1 - 1]])


@pytest.mark.parametrize("kind", ["k1", "k3"])
def test_kl_term_is_added_with_its_coefficient(kind):
    logp = t([-1.0, -2.0]).requires_grad_(True)
    ref = t([-1.5, -1.0])
    cfg = PolicyLossConfig(kl_coef=0.1, kl_type=kind)
    loss, m = get_loss("ppo_clip")(logp, logp.detach(), t([0.0, 0.0]), torch.ones(1, 2), cfg, ref_logprobs=ref)
    loss.backward()
    if kind == "k1":
        kl, dkl = [0.5, -1.0], [1.0, 1.0]
    else:  # d k3 / d logp = 1 − exp(ref − logp)
        kl, dkl = [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 2], [1 - math.exp(-0.5), 1 - math.exp(1.0)]
    assert m["kl"] == pytest.approx(sum(kl) / 2)
    assert loss.item() == pytest.approx(0.1 * sum(kl) / 2) and m["pg_loss"] == 0.0
    assert logp.grad[0].tolist() == pytest.approx([0.1 * d / 2 for d in dkl])


def test_kl_needs_a_reference_and_is_logged_without_coefficient():
    logp = t([-1.0, -2.0])
    with pytest.raises(AgentRLError, match="ref_logprobs"):
        get_loss("ppo_clip")(logp, logp, t([1.0, 1.0]), torch.ones(1, 2), PolicyLossConfig(kl_coef=0.1))
    loss, m = get_loss("ppo_clip")(logp, logp, t([1.0, 1.0]), torch.ones(1, 2), ref_logprobs=t([-1.5, -1.0]))
    assert loss.item() == pytest.approx(-1.0) and m["kl"] == pytest.approx((math.exp(-0.5) - 0.5 + math.e - 2) / 2)


def test_entropy_bonus_is_subtracted_with_its_coefficient_over_the_generated_tokens_only():
    logp = t([-1.0, -2.0, -3.0])
    entropy = t([2.0, 4.0, 100.0]).requires_grad_(True)  # the third token is a tool token: masked
    mask = torch.tensor([[1, 1, 0]])
    cfg = PolicyLossConfig(entropy_coef=0.01)
    loss, m = get_loss("ppo_clip")(logp, logp, t([0.0, 0.0, 0.0]), mask, cfg, entropy=entropy)
    loss.backward()
    assert m["entropy_bonus"] == pytest.approx(3.0)  # token-mean of 2 and 4
    assert loss.item() == pytest.approx(-0.01 * 3.0)
    assert entropy.grad[0].tolist() == pytest.approx([-0.005, -0.005, 0.0])


def test_entropy_bonus_needs_the_entropy_and_is_off_by_default():
    logp = t([-1.0, -2.0])
    with pytest.raises(AgentRLError, match="entropy_grad"):
        get_loss("ppo_clip")(logp, logp, t([1.0, 1.0]), torch.ones(1, 2), PolicyLossConfig(entropy_coef=0.1))
    loss, m = get_loss("ppo_clip")(logp, logp, t([1.0, 1.0]), torch.ones(1, 2), entropy=t([5.0, 5.0]))
    assert loss.item() == pytest.approx(-1.0) and "entropy_bonus" not in m


def test_truncated_importance_sampling():
    old = t([-1.0, -1.0, -1.0])
    rollout = t([-1.5, -0.5, -1.0])
    weights, capped = tis_weights(old, rollout, cap=1.5)
    # w = min(exp(old − rollout), C) = [min(e^0.5, 1.5), e^-0.5, 1]
    assert close(weights, [[1.5, math.exp(-0.5), 1.0]]) and capped.tolist() == [[True, False, False]]
    logp = old.clone().requires_grad_(True)
    cfg = PolicyLossConfig(tis_cap=1.5)
    loss, m = get_loss("ppo_clip")(logp, old, t([1.0, 1.0, 1.0]), torch.ones(1, 3), cfg, rollout_logprobs=rollout)
    loss.backward()
    assert loss.item() == pytest.approx(-(1.5 + math.exp(-0.5) + 1.0) / 3)
    assert logp.grad[0].tolist() == pytest.approx([-1.5 / 3, -math.exp(-0.5) / 3, -1.0 / 3])
    assert m["tis_clipfrac"] == pytest.approx(1 / 3)
    assert m["rollout_logprob_abs_diff"] == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    with pytest.raises(AgentRLError, match="rollout_logprobs"):
        get_loss("ppo_clip")(logp, old, t([1.0, 1.0, 1.0]), torch.ones(1, 3), cfg)


# ------------------------------------------------------------------------------------ masking, registry


@pytest.mark.parametrize("name", ["ppo_clip", "dapo", "dual_clip", "cispo", "gspo", "sapo"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_masked_tool_tokens_get_exactly_zero_gradient(name, mode):
    torch.manual_seed(0)
    # generated, generated, tool output, tool output, generated, padding
    mask = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 1, 1]])
    old = -torch.rand(2, 6, dtype=F64) - 0.1
    logp = old + 0.3 * torch.randn(2, 6, dtype=F64)
    # masked positions hold values that would poison the loss if they were ever used
    logp = torch.where(mask.bool(), logp, t([-math.inf] * 6, [1e4] * 6)).requires_grad_(True)
    old = torch.where(mask.bool(), old, torch.full_like(old, math.nan))
    rollout = torch.where(mask.bool(), old - 0.2, torch.full_like(old, -math.inf))
    ref = torch.where(mask.bool(), old + 0.1, torch.full_like(old, math.inf))
    adv = torch.where(mask.bool(), t([1.0] * 6, [-2.0] * 6), torch.full_like(old, math.nan))
    cfg = PolicyLossConfig(loss_agg_mode=mode, kl_coef=0.1, tis_cap=2.0)
    loss, metrics = get_loss(name)(logp, old, adv, mask, cfg, ref_logprobs=ref, rollout_logprobs=rollout)
    loss.backward()
    assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in metrics.values())
    assert torch.equal(logp.grad[mask == 0], torch.zeros_like(logp.grad[mask == 0]))
    assert (logp.grad[mask == 1] != 0).any()
    assert "clipfrac" in metrics


def test_registry_lists_known_names_on_error():
    assert {"ppo_clip", "dapo", "dual_clip", "cispo", "gspo", "sapo"} <= set(LOSSES.names())
    with pytest.raises(AgentRLError, match=r"unknown policy loss 'grpo'.*cispo.*dual_clip.*gspo.*ppo_clip.*sapo"):
        get_loss("grpo")
    with LOSSES.scoped():

        @register_loss("vanilla_pg", default_agg="seq-mean-token-sum")
        def vanilla(logp, old_logp, adv, mask, cfg):
            return -adv * logp, {}

        loss, m = get_loss("vanilla_pg")(t([-1.0, -3.0]), t([-1.0, -3.0]), t([1.0, 1.0]), torch.ones(1, 2))
        assert loss.item() == pytest.approx(4.0) and m["pg_loss"] == pytest.approx(4.0)
    assert "vanilla_pg" not in LOSSES


def test_built_in_losses_keep_their_paper_aggregation():
    assert get_loss("gspo").default_agg == "seq-mean-token-mean"
    assert get_loss("sapo").default_agg == "seq-mean-token-mean"
    assert get_loss("ppo_clip").default_agg == "token-mean"


@pytest.mark.parametrize(
    "bad",
    [
        {"clip_low": 1.5},
        {"dual_clip_c": 1.0},
        {"tau_neg": -1.0},
        {"kl_coef": -0.1},
        {"loss_agg_mode": "mean"},
        {"kl_type": "k9"},
        {"tis_cap": 0.0},
        {"tau_pos": 0.0},
        {"seq_clip_high": -1e-4},
    ],
)
def test_config_validation(bad):
    with pytest.raises(AgentRLError):
        PolicyLossConfig(**bad)


def test_input_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\[B, R\]"):
        get_loss("ppo_clip")(t([0.0, 0.0]), t([0.0]), t([0.0, 0.0]), torch.ones(1, 2))


# ------------------------------------------------------------------------- off-policy corrections


def test_importance_weights_per_token_sequence_and_geometric_mean():
    from agentrl.trainer.loss_terms import importance_weights

    old = t([-1.0, -1.0, -1.0], [-2.0, -2.0, 0.0])
    rollout = t([-1.5, -0.5, -1.0], [-2.2, -2.2, 0.0])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # token: ρ = exp(old − rollout), capped at C = 1.5
    w, hit = importance_weights(old, rollout, mask, "token", "truncate", cap=1.5)
    assert close(w[0], [1.5, math.exp(-0.5), 1.0]) and hit[0].tolist() == [True, False, False]
    # sequence: ρ_i = Π_t ρ_it = exp(Σ_t log ρ_it): row 0 exp(0.5 − 0.5 + 0) = 1; row 1 exp(0.4) (masked token out)
    w, hit = importance_weights(old, rollout, mask, "sequence", "truncate", cap=1.4)
    assert close(w[0], [1.0, 1.0, 1.0]) and w[1, :2].tolist() == pytest.approx([1.4, 1.4])
    assert hit.tolist() == [[False, False, False], [True, True, False]]  # exp(0.4) = 1.49 > 1.4, per sequence
    # geometric: exp(mean_t log ρ_it) over the sequence's own tokens: row 1 exp(0.2)
    w, _ = importance_weights(old, rollout, mask, "geometric", "truncate", cap=2.0)
    assert w[1, :2].tolist() == pytest.approx([math.exp(0.2)] * 2)


def test_masked_importance_sampling_drops_tokens_and_sequences_outside_the_band():
    from agentrl.trainer.loss_terms import importance_weights

    old = t([-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0])
    rollout = t([-1.5, -0.2, -1.1], [-1.0, -1.0, -1.0])
    mask = torch.ones(2, 3, dtype=torch.bool)
    # token ρ: [e^0.5 = 1.65, e^-0.8 = 0.45, e^0.1 = 1.11]; band [0.5, 1.5]: the first two are masked
    w, hit = importance_weights(old, rollout, mask, "token", "mask", cap=1.5, low=0.5)
    assert w.tolist() == [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]] and hit[0].tolist() == [True, True, False]
    # sequence ρ of row 0: exp(0.5 − 0.8 + 0.1) = e^-0.2 = 0.82: inside, the whole sequence is kept
    w, _ = importance_weights(old, rollout, mask, "sequence", "mask", cap=1.5, low=0.5)
    assert w.tolist() == [[1.0] * 3, [1.0] * 3]


def test_masked_tokens_get_no_gradient_and_the_shares_are_logged():
    old = t([-1.0, -1.0, -1.0])
    rollout = t([-1.5, -0.2, -1.1])
    logp = old.clone().requires_grad_(True)
    cfg = PolicyLossConfig(tis_cap=1.5, is_mode="mask", is_mask_low=0.5)
    loss, m = get_loss("ppo_clip")(logp, old, t([1.0, 1.0, 1.0]), torch.ones(1, 3), cfg, rollout_logprobs=rollout)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([0.0, 0.0, -1.0 / 3])
    assert m["tis_maskfrac"] == pytest.approx(2 / 3) and m["tis_weight_max"] == 1.0
    with pytest.raises(AgentRLError, match="is_mask_low"):
        PolicyLossConfig(tis_cap=0.4, is_mode="mask", is_mask_low=0.5)


def test_decoupled_ppo_clips_against_the_proximal_policy_and_weights_by_the_behaviour_one():
    # AReaL's decoupled objective per token: −min(ρ, C) · min(r Â, clip(r, 1 ± ε) Â), r = π_θ / π_prox,
    # ρ = π_prox / π_behav; here r = e^0.3 (clipped at 1.2 for Â > 0) and ρ = e^0.1 (under C)
    prox, behav = t([-1.0]), t([-1.1])
    logp = t([-0.7]).requires_grad_(True)
    cfg = PolicyLossConfig(clip_low=0.2, tis_cap=2.0)
    loss, m = get_loss("ppo_clip")(logp, prox, t([1.0]), torch.ones(1, 1), cfg, rollout_logprobs=behav)
    assert loss.item() == pytest.approx(-math.exp(0.1) * 1.2)
    assert m["clipfrac"] == 1.0 and m["tis_weight_mean"] == pytest.approx(math.exp(0.1))
