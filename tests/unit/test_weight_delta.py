"""Delta weight pushes (`agentrl.weight_delta`): bit-exact application, bases, the `hf` engine's side and
`WeightSync`'s choice between a delta and a full push."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import httpx
import pytest
import torch
import zstandard

from agentrl.rollout.servers.hf import scheduler
from agentrl.rollout.servers.hf.app import create_app
from agentrl.rollout.servers.hf.weights import base_state, payload_weights_id, read_state_dict
from agentrl.trainer.sync import WeightSync
from agentrl.weight_delta import (
    CODES,
    LONG_GAP,
    VALUES,
    DeltaBaseMismatchError,
    DeltaError,
    SparseDiff,
    WeightDelta,
    _tensors_of,
    apply_delta,
    cast_state,
    check_delta,
    decode_delta,
    encode_delta,
    is_delta,
    weights_digest,
)
from agentrl.weights_io import unique_tensors
from tests.unit.test_hf_engine import make_engine, tiny_llama


def adam_like_step(state: dict[str, torch.Tensor], lr: float, seed: int) -> dict[str, torch.Tensor]:
    """Every element moved by `lr` (Adam's first steps), tied aliases left out (they would come untied)."""
    gen = torch.Generator().manual_seed(seed)
    return {k: v + lr * torch.sign(torch.randn(v.shape, generator=gen)) for k, v in unique_tensors(state).items()}


def fp32_state(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    state = {"a": torch.randn(64, 32, generator=gen) * 0.05, "b": torch.randn(300, generator=gen) * 0.05}
    state["frozen"] = torch.ones(7)
    state["b"][:5] = torch.tensor([1e-30, -1e-30, 0.0, float("inf"), -0.0])  # sign crossings, specials
    return state


def delta_of(new, old, base_id="base", new_id="new", version=1):
    return encode_delta(new, old, base_id=base_id, base_version=version - 1, new_id=new_id, version=version)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_delta_turns_the_old_cast_into_the_new_bit_for_bit(dtype: torch.dtype) -> None:
    old_fp32 = fp32_state()
    new_fp32 = adam_like_step(old_fp32, 3e-5, seed=1)
    new_fp32["frozen"] = old_fp32["frozen"].clone()
    new_fp32["b"][:5] = torch.tensor([-1e-30, 1e-30, -0.0, -float("inf"), 5.0])
    old, new = cast_state(old_fp32, dtype), cast_state(new_fp32, dtype)
    blob = delta_of(new, old)
    assert is_delta(blob)
    delta = decode_delta(blob)
    assert (delta.base_id, delta.new_id, delta.version) == ("base", "new", 1)
    assert "frozen" not in delta.diff, "an unchanged tensor is left out"
    held = {k: v.clone() for k, v in old.items()}
    check_delta(delta, held, "base")
    apply_delta(delta, held)
    for name in new:
        assert torch.equal(held[name].view(torch.uint8), new[name].view(torch.uint8)), name
    assert weights_digest(held) == weights_digest(new) != weights_digest(old)


def test_a_bf16_delta_is_sparse_at_half_width_and_what_does_not_fit_travels_as_escapes() -> None:
    old_fp32 = fp32_state()
    new_fp32 = adam_like_step(old_fp32, 3e-5, seed=1)
    new_fp32["b"][:2] = torch.tensor([-1e-30, 1e-30])  # signs that flip: their bits move by about 2**15
    old, new = cast_state(old_fp32, torch.bfloat16), cast_state(new_fp32, torch.bfloat16)
    delta = decode_delta(delta_of(new, old))
    assert set(delta.sparse) == {"a", "b"} and not delta.diff, "a few changed: only those travel"
    for name in ("a", "b"):
        full = new[name].view(torch.int16).view(-1) - old[name].view(torch.int16).view(-1)
        changed = full.nonzero().view(-1)
        sparse = delta.sparse[name]
        assert torch.equal(sparse.positions(), changed) and sparse.values.dtype == torch.int8
        moved = full[changed]
        beyond_one_step = moved[moved.abs() != 1]
        assert torch.equal(sparse.codes & 3, torch.where(moved.abs() == 1, (moved + 1) // 2, 2).to(torch.uint8))
        assert torch.equal(sparse.values, beyond_one_step.to(torch.int8)), "the rest, wrapped to a byte"
    index, value = delta.escapes["b"]
    assert index[:2].tolist() == [0, 1] and value.dtype == torch.int16, "the first two values: the flipped signs"
    escaped_in_a = delta.escapes["a"][0].numel() if "a" in delta.escapes else 0
    assert escaped_in_a < 0.01 * new["a"].numel(), "only a value crossing zero needs an escape"
    without_escapes = {k: v.clone() for k, v in old.items()}
    apply_delta(WeightDelta(**{**vars(delta), "escapes": {}}), without_escapes)
    assert not torch.equal(without_escapes["b"], new["b"]), "the escapes carry what the narrow differences cannot"
    out_of_range = WeightDelta(**{**vars(delta), "escapes": {"b": (index + 10_000, value)}})
    with pytest.raises(DeltaError, match="differences for"):
        check_delta(out_of_range, old, "base")
    with pytest.raises(DeltaError, match="positions up to"):
        check_delta(delta, {**old, "b": old["b"][:100].clone()}, "base")  # positions past its end


def test_positions_far_apart_travel_as_long_gaps_and_malformed_gaps_are_refused() -> None:
    old = {"w": torch.zeros(100_000, dtype=torch.bfloat16)}
    new = {"w": old["w"].clone()}
    new["w"][[3, 300, 99_999]] = 1.0  # gaps of 4, 297 and 99_699
    blob = delta_of(new, old)
    held = {"w": old["w"].clone()}
    apply_delta(decode_delta(blob), held)
    assert torch.equal(held["w"], new["w"])
    raw = zstandard.ZstdDecompressor().decompress(blob)
    tensors = {k: v.clone() for k, v in _tensors_of(raw).items()}
    assert (tensors["w" + CODES] >> 2).tolist() == [4, 0, 0] and tensors["w" + LONG_GAP].tolist() == [297, 99_699]
    codes, values, long_gaps = tensors["w" + CODES], tensors["w" + VALUES], tensors["w" + LONG_GAP]
    assert codes.numel() == values.numel() == 3, "1.0 from 0.0 is no rounding step: each difference is a value"

    def code(gap: int, kind: int = 2) -> int:
        return gap << 2 | kind

    malformed = {
        "a long gap missing": SparseDiff(codes, values, long_gaps[:1]),
        "a long gap left over": SparseDiff(
            torch.tensor([code(4), code(0), code(3)], dtype=torch.uint8), values, long_gaps
        ),
        "a long gap that is short": SparseDiff(codes, values, torch.tensor([297, 20])),
        "a code 3": SparseDiff(torch.tensor([code(4), code(0, 3), code(0)], dtype=torch.uint8), values, long_gaps),
        "a value missing": SparseDiff(codes, values[:2], long_gaps),
    }
    for what, sparse in malformed.items():
        with pytest.raises(DeltaError, match="malformed codes"):
            check_delta(WeightDelta("base", 0, "new", 1, sparse={"w": sparse}), held, "base")
        assert torch.equal(held["w"], new["w"]), f"{what}: refused before anything changed"
    escapes_not_increasing = (torch.tensor([1, 0]), torch.tensor([1, 1], dtype=torch.int16))
    twice = WeightDelta("base", 0, "new", 1, sparse={"w": SparseDiff(codes, values, long_gaps)})
    twice.escapes["w"] = escapes_not_increasing
    with pytest.raises(DeltaError, match="malformed codes"):
        check_delta(twice, held, "base")
    both = WeightDelta("base", 0, "new", 1, diff={"w": torch.zeros(100_000, dtype=torch.int16)}, sparse=twice.sparse)
    with pytest.raises(DeltaError, match="w: sent both dense and sparse"):
        check_delta(both, held, "base")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("share", [0.001, 0.02, 0.3, 0.34, 0.9])
def test_any_share_of_changed_elements_and_any_spread_of_them_applies_bit_for_bit(dtype, share) -> None:
    """Random changes at random places (long runs of unchanged ones, sign flips, specials), tensors of every size
    from one element up: sparse up to a third changed, dense beyond; each case applied exactly."""
    gen = torch.Generator().manual_seed(int(share * 1000))
    old = {f"t{n}": torch.randn(n, generator=gen).to(dtype) for n in (1, 7, 63, 64, 65, 576, 5000, 70_001)}
    new = {}
    for name, tensor in old.items():
        changed = torch.rand(tensor.numel(), generator=gen) < share
        moved = tensor.float() * (1 + torch.randn(tensor.numel(), generator=gen) * 0.01)
        moved[torch.rand(tensor.numel(), generator=gen) < 0.05] *= -1  # signs that flip
        new[name] = torch.where(changed, moved.to(dtype), tensor)
    new["t576"][-1] = float("nan")
    delta = decode_delta(delta_of(new, old))
    changed_tensors = {k for k in new if not torch.equal(new[k].view(torch.uint8), old[k].view(torch.uint8))}
    assert set(delta.sparse) | set(delta.diff) == changed_tensors and not set(delta.sparse) & set(delta.diff)
    held = {k: v.clone() for k, v in old.items()}
    check_delta(delta, held, "base")
    apply_delta(delta, held)
    assert weights_digest(held) == weights_digest(new)
    if share <= 0.02:
        assert not delta.diff and delta.sparse, "few changed: sparse"
    if share == 0.9:
        assert {k for k in delta.diff if new[k].numel() > 100} == {k for k in new if new[k].numel() > 100}


def test_an_fp32_delta_under_adam_is_dense_at_half_width_with_escapes() -> None:
    old_fp32 = fp32_state()
    new_fp32 = adam_like_step(old_fp32, 3e-5, seed=1)
    new_fp32["b"][:2] = torch.tensor([-1e-30, 1e-30])
    delta = decode_delta(delta_of(new_fp32, old_fp32))
    assert not delta.sparse and delta.diff["a"].dtype == delta.diff["b"].dtype == torch.int16
    index, value = delta.escapes["b"]
    assert index[:2].tolist() == [0, 1] and value.dtype == torch.int32
    full = new_fp32["b"].view(torch.int32) - old_fp32["b"].view(torch.int32)
    assert torch.equal(delta.diff["b"][index].to(torch.int32) + value, full[index]), "narrow + escape = difference"
    out_of_range = WeightDelta(**{**vars(delta), "escapes": {"b": (index + 10_000, value)}})
    with pytest.raises(DeltaError, match="difference of"):
        check_delta(out_of_range, old_fp32, "base")


def test_bf16_delta_at_a_training_learning_rate_is_small() -> None:
    old_fp32 = {"w": torch.randn(512, 512) * 0.03}
    old = cast_state(old_fp32, torch.bfloat16)
    new = cast_state(adam_like_step(old_fp32, 2e-5, seed=3), torch.bfloat16)
    full_bytes = old["w"].numel() * 2
    assert len(delta_of(new, old)) < 0.25 * full_bytes


def test_a_delta_is_refused_on_other_weights_and_checked_before_anything_changes() -> None:
    old = cast_state(fp32_state(), torch.bfloat16)
    new = cast_state(adam_like_step(fp32_state(), 1e-3, seed=2), torch.bfloat16)
    delta = decode_delta(delta_of(new, old))
    with pytest.raises(DeltaBaseMismatchError, match="push the full weights"):
        check_delta(delta, old, "another-id")
    with pytest.raises(DeltaError, match="not a tensor of this model"):
        check_delta(delta, {k: v for k, v in old.items() if k != "a"}, "base")
    with pytest.raises(DeltaError, match="difference of"):
        check_delta(delta, {**old, "a": torch.zeros(10, dtype=torch.bfloat16)}, "base")
    with pytest.raises(DeltaError, match="same tensors"):
        delta_of({"a": new["a"]}, old)
    with pytest.raises(DeltaError, match="cannot read"):
        decode_delta(b"\x28\xb5\x2f\xfd not a frame")


async def test_the_engine_applies_a_delta_on_its_own_weights_only(tokenizer) -> None:
    engine = make_engine(tokenizer)
    try:
        engine.model.to(torch.bfloat16)
        trainer = tiny_llama(seed=5).state_dict()
        full = cast_state(trainer, torch.bfloat16)
        assert await engine.update_weights(full, 1, weights_id="v1") == 1
        assert engine.weights_id == "v1" and engine.weights_dtype == "bfloat16"
        stepped = cast_state(adam_like_step(trainer, 3e-5, seed=6), torch.bfloat16)
        stale = decode_delta(delta_of(stepped, full, base_id="v0", new_id="v2", version=2))
        with pytest.raises(DeltaBaseMismatchError):
            await engine.update_weights(stale)
        assert (engine.policy_version, engine.weights_id) == (1, "v1"), "a refused delta changes nothing"
        delta = decode_delta(delta_of(stepped, full, base_id="v1", new_id="v2", version=2))
        assert await engine.update_weights(delta) == 2
        assert engine.weights_id == "v2"
        assert engine.weights_digest() == weights_digest(stepped)
    finally:
        engine.shutdown()


async def test_the_http_app_answers_409_for_a_stale_delta_and_401_without_its_token(tokenizer, tmp_path) -> None:
    engine = make_engine(tokenizer)
    app = create_app(engine, "tiny", weights_token="s3cret")
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hf") as http:
            state = cast_state(engine.model.state_dict(), torch.float32)
            delta = delta_of(adam_like_step(state, 1e-3, seed=1), state, base_id="not-held", version=3)
            headers = {"content-type": "application/octet-stream", "x-policy-version": "3"}
            assert (await http.post("/v1/weights", content=delta, headers=headers)).status_code == 401
            answer = await http.post(
                "/v1/weights", content=delta, headers={**headers, "authorization": "Bearer s3cret"}
            )
            assert answer.status_code == 409 and "push the full weights" in answer.json()["error"]["message"]
            digest = (await http.get("/v1/weights/digest")).json()
            assert digest["digest"] == weights_digest(base_state(engine.model)) and digest["policy_version"] == 0
    finally:
        engine.shutdown()


class EngineHandle:
    """A fake rollout server handle over an in-process `hf` engine: what `HFServer` does over HTTP (the file is
    read as the server reads it; a refused delta raises `DeltaBaseMismatchError`)."""

    backend = "hf"
    weights_via = "file"

    def __init__(self, engine, url: str) -> None:
        self.engine, self.url, self.policy_version, self.payloads = engine, url, 0, []

    def weights_dtype(self) -> str:
        return self.engine.weights_dtype

    def update_weights(self, weights, version, in_flight="finish", timeout=600.0) -> None:
        state = read_state_dict(path=weights)
        self.payloads.append("delta" if is_delta(Path(weights).read_bytes()[:4]) else "full")
        named = payload_weights_id(path=weights)
        served = asyncio.run(self.engine.update_weights(state, version, in_flight, weights_id=named))
        assert served == version
        self.policy_version = version


def test_weight_sync_sends_deltas_and_falls_back_to_full_where_the_server_holds_other_weights(tokenizer) -> None:
    engines = [make_engine(tokenizer, seed=i) for i in range(2)]
    try:
        for engine in engines:
            engine.model.to(torch.bfloat16)
        handles = [EngineHandle(e, f"http://s{i}") for i, e in enumerate(engines)]
        sync = WeightSync(handles)  # type: ignore[arg-type]
        trainer = tiny_llama(seed=9).state_dict()
        for version in (1, 2, 3):
            sync.push(trainer, version=version)
            for engine in engines:
                assert engine.weights_digest() == weights_digest(cast_state(trainer, torch.bfloat16))
            trainer = adam_like_step(trainer, 3e-5, seed=version)
        assert [h.payloads for h in handles] == [["full", "delta", "delta"]] * 2
        full_bf16_bytes = sum(t.numel() * 2 for t in cast_state(trainer, torch.bfloat16).values())
        assert 0 < sync.last.delta_bytes < 0.25 * full_bf16_bytes
        engines[1].scheduler.weights_id = "restarted"  # holds other weights now (a restart, another trainer)
        sync.push(trainer, version=4)
        assert [h.payloads[-1] for h in handles] == ["delta", "full"]
        assert sync.last.full_servers == 1 and sync.last.delta_servers == 1
        assert engines[1].weights_digest() == weights_digest(cast_state(trainer, torch.bfloat16))
        sync.close()
    finally:
        for engine in engines:
            engine.shutdown()


async def test_a_delta_that_fails_half_applied_leaves_no_base_for_the_next_one(tokenizer, monkeypatch) -> None:
    engine = make_engine(tokenizer)
    applied = scheduler.apply_delta

    def half_then_fail(delta: WeightDelta, target) -> None:
        first = next(iter(delta.diff or delta.sparse))
        part = {kind: {first: changes[first]} if first in changes else {} for kind, changes in
                (("diff", delta.diff), ("sparse", delta.sparse), ("escapes", delta.escapes))}  # fmt: skip
        applied(dataclasses.replace(delta, **part), target)  # one tensor changed, the others not
        raise MemoryError("out of memory while applying the delta")

    try:
        engine.model.to(torch.bfloat16)
        trainer = tiny_llama(seed=5).state_dict()
        full = cast_state(trainer, torch.bfloat16)
        await engine.update_weights(full, 1, weights_id="v1")
        stepped = cast_state(adam_like_step(trainer, 3e-5, seed=6), torch.bfloat16)
        delta = decode_delta(delta_of(stepped, full, base_id="v1", new_id="v2", version=2))
        monkeypatch.setattr(scheduler, "apply_delta", half_then_fail)
        with pytest.raises(MemoryError):
            await engine.update_weights(delta)
        monkeypatch.setattr(scheduler, "apply_delta", applied)
        assert engine.weights_id != "v1", "half-applied weights are no longer the weights v1"
        with pytest.raises(DeltaBaseMismatchError, match="push the full weights"):
            await engine.update_weights(delta)  # sent again (a retry, another trainer): refused, so pushed full
        assert await engine.update_weights(stepped, 2, weights_id="v2") == 2
        assert engine.weights_id == "v2" and engine.weights_digest() == weights_digest(stepped)
    finally:
        engine.shutdown()


def test_weight_sync_without_deltas_pushes_the_trainers_state_as_it_is(tokenizer) -> None:
    engine = make_engine(tokenizer)
    try:
        handle = EngineHandle(engine, "http://s0")
        sync = WeightSync([handle], delta="never")  # type: ignore[arg-type]
        trainer = tiny_llama(seed=9).state_dict()
        sync.push(trainer, version=1)
        sync.push(adam_like_step(trainer, 1e-3, seed=1), version=2)
        assert handle.payloads == ["full", "full"] and engine.policy_version == 2
        sync.close()
    finally:
        engine.shutdown()


def test_a_push_deadline_follows_the_runs_own_pushes() -> None:
    from agentrl.deadline import AdaptiveDeadline

    deadline = AdaptiveDeadline()
    assert deadline.seconds() == 600.0  # the first push pays for a cold start
    deadline.observe(2.0)
    deadline.observe(3.0)
    assert deadline.seconds() == 30.0  # 5 x 3 s is under the floor
    deadline.observe(20.0)
    assert deadline.seconds() == 100.0
    assert AdaptiveDeadline(explicit=7.0).seconds() == 7.0


def test_a_server_reachable_from_other_hosts_refuses_to_start_without_a_weights_token(monkeypatch, capsys) -> None:
    from agentrl.rollout.servers.hf import __main__ as hf_main
    from agentrl.rollout.servers.hf.push import is_loopback, weights_headers

    monkeypatch.delenv("AGENTRL_WEIGHTS_TOKEN", raising=False)
    monkeypatch.setattr(hf_main, "resolve_model_path", lambda model: model)
    with pytest.raises(SystemExit) as stopped:
        hf_main.main(["--model", "/nowhere", "--host", "0.0.0.0"])
    assert stopped.value.code == 2 and "AGENTRL_WEIGHTS_TOKEN" in capsys.readouterr().err
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and not is_loopback("10.0.0.2")
    assert weights_headers(None) == {}
    monkeypatch.setenv("AGENTRL_WEIGHTS_TOKEN", "t0k")
    assert weights_headers(None) == {"authorization": "Bearer t0k"}


def test_auto_sends_the_full_cast_to_a_server_reading_this_machines_shared_memory(tokenizer) -> None:
    engine = make_engine(tokenizer)
    try:
        engine.model.to(torch.bfloat16)
        local, remote = EngineHandle(engine, "http://local"), EngineHandle(engine, "http://remote")
        local.shares_files = True  # type: ignore[attr-defined]  # it reads our /dev/shm file: a delta would not pay
        trainer = tiny_llama(seed=9).state_dict()
        for kind, handle in (("full", local), ("delta", remote)):
            sync = WeightSync([handle])  # type: ignore[arg-type]
            sync.push(trainer, version=1)
            sync.push(adam_like_step(trainer, 3e-5, seed=1), version=2)
            assert handle.payloads == ["full", kind]
            sync.close()
        with pytest.raises(ValueError, match="auto, always or never"):
            WeightSync([local], delta="yes")  # type: ignore[arg-type]
    finally:
        engine.shutdown()


def test_auto_sends_an_fp32_server_the_trainers_state_as_it_is(tokenizer) -> None:
    engine = make_engine(tokenizer)  # fp32: under Adam every element moves each step, a delta would not pay
    try:
        handle = EngineHandle(engine, "http://remote")
        sync = WeightSync([handle])  # type: ignore[arg-type]
        trainer = tiny_llama(seed=9).state_dict()
        sync.push(trainer, version=1)
        sync.push(adam_like_step(trainer, 3e-5, seed=1), version=2)
        assert handle.payloads == ["full", "full"] and engine.policy_version == 2
        assert engine.weights_digest() == weights_digest(cast_state(adam_like_step(trainer, 3e-5, 1), torch.float32))
        sync.close()
    finally:
        engine.shutdown()
