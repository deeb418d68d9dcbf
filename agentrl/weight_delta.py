"""Delta weight pushes: only what changed since the weights a server holds, in the server's dtype, bit for bit.

The trainer keeps the weights it last pushed, cast to the server's dtype (`cast_state`), and sends the next push as
a delta against them (`encode_delta`): an unchanged tensor is left out; a changed one is sent as the difference of
its raw bits, `new_bits - old_bits` in the values' own integer width (modular, so adding it back is exact whatever
it wrapped to). A bf16 element whose bf16 value did not change has a difference of 0, one that moved by a rounding
step ±1, and at the recipes' learning rates about 90 % did not change. So a tensor where at most a third changed
is sent sparse: a code byte per changed element, its gap from the one before and whether it moved -1, +1 or by a
difference in the values beside (half width, int8 for bf16; the few that do not fit, a sign that flipped near zero,
beside as escapes: where, and what the wrapped value left out), with the rare long gaps whole. One that mostly
changed (fp32 under Adam) is sent dense, every difference at half width with the same escapes. Applying it adds the
differences to the server's bits (`apply_delta`): the result equals the trainer's cast exactly, which
`weights_digest` checks on both sides. The sparse entries are made, checked and applied by compiled single-pass
loops (`agentrl.delta_kernels`, where the code byte is laid out), tensors in parallel threads.

A delta names the weights it applies to (`base_id`, the id the server got with them, and `base_version`) and the
id the result gets; a server holding anything else refuses it, and the trainer then pushes in full.
"""

from __future__ import annotations

import json
import os
import struct
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agentrl.weights_io import unique_tensors

FORMAT = "agentrl-delta-4"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_HALF = {torch.int16: torch.int8, torch.int32: torch.int16, torch.int64: torch.int32}
DIFF, NARROW, ESCAPE_INDEX, ESCAPE_VALUE = "::diff", "::narrow", "::escape_index", "::escape_value"
"""Suffixes of a changed tensor's entries: its full-width differences, or its half-width ones with the escapes."""
CODES, LONG_GAP, VALUES = "::codes", "::long_gap", "::values"
"""Suffixes of a sparse tensor's entries: a code byte per changed element (`agentrl.delta_kernels`), the gaps too
long for it (int64), the differences that are not ±1 (half width, with the escapes)."""
SPARSE_AT_MOST = 1 / 3
"""The largest share of changed elements a tensor is sent sparse with (two bytes each, against one per element)."""


class DeltaError(ValueError):
    """A delta that cannot be applied: another base, other names or sizes."""


class DeltaBaseMismatchError(DeltaError):
    """The server does not hold the weights the delta was computed against: it needs a full push."""


@dataclass
class SparseDiff:
    """A tensor's changed elements: a code byte each (its gap from the one before, the first's from -1, and whether
    it moved -1, +1 or by the next of `values`), the gaps too long for a code, and the differences that are not ±1
    at half width (with the tensor's escapes, indexed into `values`)."""

    codes: torch.Tensor
    values: torch.Tensor
    long_gaps: torch.Tensor

    def positions(self) -> torch.Tensor:
        """The changed elements' positions (int64, increasing)."""
        gaps = (self.codes >> 2).to(torch.int64)
        gaps[gaps == 0] = self.long_gaps
        return gaps.cumsum(0) - 1


@dataclass
class WeightDelta:
    """A decoded delta: the weights it applies to, the id and version they become, and what changed."""

    base_id: str
    base_version: int
    new_id: str
    version: int
    diff: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per changed tensor, `new_bits - old_bits`, flat: in the integer type of the values' width, or of half of it
    (wrapped where a difference does not fit; `escapes` holds the rest)."""
    escapes: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    """Per tensor sent at half width with elements that did not fit: their positions (in `diff`, or in the sparse
    values), and at each what the wrapped half-width difference left out (full width): the two added give it."""
    sparse: dict[str, SparseDiff] = field(default_factory=dict)
    """Per changed tensor sent sparse: where its changed elements are and their differences (with `escapes`)."""


def cast_state(state: Mapping[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The state's unique tensors (tied aliases left out) cast to `dtype`, on CPU, each its own copy."""
    return {
        name: tensor.to(dtype) if tensor.is_floating_point() and tensor.dtype != dtype else tensor.clone()
        for name, tensor in unique_tensors(state).items()
    }


def encode_delta(
    new: Mapping[str, torch.Tensor],
    old: Mapping[str, torch.Tensor],
    *,
    base_id: str,
    base_version: int,
    new_id: str,
    version: int,
    level: int = 1,
) -> bytes:
    """The compressed delta that turns `old` into `new` (both from `cast_state`, the same names and shapes)."""
    if set(new) != set(old):
        raise DeltaError(f"a delta needs the same tensors on both sides; differ: {sorted(set(new) ^ set(old))[:5]}")
    tensors: dict[str, torch.Tensor] = {}
    largest_first = sorted(new, key=lambda name: -new[name].numel())
    for entries in _in_threads(lambda name: _encode_tensor(name, new[name], old[name]), largest_first):
        tensors.update(entries)
    meta = {"format": FORMAT, "base_id": base_id, "base_version": base_version, "new_id": new_id, "version": version}
    return _compress_safetensors(tensors, {k: str(v) for k, v in meta.items()}, level)


def is_delta(data: bytes) -> bool:
    """Whether a weights payload is a delta (a zstandard frame) rather than a plain safetensors file."""
    return data[:4] == ZSTD_MAGIC


def decode_delta(data: bytes) -> WeightDelta:
    """Read a delta made by `encode_delta`."""
    import zstandard

    try:
        raw = zstandard.ZstdDecompressor().decompress(data)  # the frame holds its size: one allocation
        meta = safetensors_metadata(raw)
        tensors = _tensors_of(raw)
    except Exception as exc:  # zstandard raises its own errors, a bad header any of several
        raise DeltaError(f"cannot read the weight delta: {exc}") from exc
    if meta.get("format") != FORMAT:
        raise DeltaError(f"not an agentrl weight delta (format {meta.get('format')!r}, expected {FORMAT!r})")
    delta = WeightDelta(meta["base_id"], int(meta["base_version"]), meta["new_id"], int(meta["version"]))
    for key, tensor in tensors.items():
        if key.endswith((DIFF, NARROW)):
            delta.diff[key.removesuffix(DIFF).removesuffix(NARROW)] = tensor
        elif key.endswith(CODES):
            name = key.removesuffix(CODES)
            values = tensors.get(name + VALUES, torch.zeros(0, dtype=torch.int8))
            long_gaps = tensors.get(name + LONG_GAP, torch.zeros(0, dtype=torch.int64))
            if tensor.dtype != torch.uint8 or long_gaps.dtype != torch.int64:
                raise DeltaError(f"cannot read the weight delta: {name}'s codes are {tensor.dtype}, {long_gaps.dtype}")
            delta.sparse[name] = SparseDiff(tensor, values, long_gaps)
        elif key.endswith(ESCAPE_INDEX):
            name = key.removesuffix(ESCAPE_INDEX)
            if name + ESCAPE_VALUE not in tensors:
                raise DeltaError(f"cannot read the weight delta: {name} has escape positions but no values")
            delta.escapes[name] = (tensor, tensors[name + ESCAPE_VALUE])
    return delta


def check_delta(delta: WeightDelta, target: Mapping[str, torch.Tensor], held_id: str) -> None:
    """Raise unless `delta` applies to `target` (the server's tensors by name) holding the weights `held_id`."""
    if delta.base_id != held_id:
        raise DeltaBaseMismatchError(
            f"this delta applies to weights {delta.base_id} (version {delta.base_version}); the server holds "
            f"{held_id}: push the full weights"
        )
    problems = [f"{name}: sent both dense and sparse" for name in sorted(set(delta.diff) & set(delta.sparse))]
    for name, diff in delta.diff.items():
        have = target.get(name)
        if have is None:
            problems.append(f"{name}: not a tensor of this model")
        elif diff.numel() != have.numel() or not have.is_contiguous() or not _fits(diff, have, delta.escapes.get(name)):
            problems.append(f"{name}: a {diff.dtype} difference of {diff.numel()} for {have.dtype} {tuple(have.shape)}")
    names = sorted(delta.sparse, key=lambda name: -delta.sparse[name].codes.numel())
    extents = dict(
        zip(
            names,
            _in_threads(lambda name: _sparse_extent(delta.sparse[name], delta.escapes.get(name)), names),
            strict=True,
        )
    )
    for name, sparse in delta.sparse.items():
        have = target.get(name)
        escapes = delta.escapes.get(name)
        if have is None:
            problems.append(f"{name}: not a tensor of this model")
        elif not have.is_contiguous() or not _fits_sparse(sparse, have, escapes):
            problems.append(f"{name}: {sparse.values.dtype} differences for {have.dtype} {tuple(have.shape)}")
        elif (last := extents[name]) < -1:
            problems.append(f"{name}: malformed codes (long gaps, values or escapes that do not add up)")
        elif last >= have.numel():
            problems.append(f"{name}: differences at positions up to {last} for {have.dtype} {tuple(have.shape)}")
    if problems:
        raise DeltaError("the weight delta does not fit this model: " + "; ".join(problems[:5]))


@torch.no_grad()
def apply_delta(delta: WeightDelta, target: Mapping[str, torch.Tensor]) -> None:
    """Apply `delta` to `target` in place (call `check_delta` first); tensors on an accelerator are changed on a
    host copy and copied back."""
    names = sorted([*delta.diff, *delta.sparse], key=lambda name: -target[name].numel())
    list(_in_threads(lambda name: _on_host(target[name], lambda bits: _apply_tensor(delta, name, bits)), names))


def _apply_tensor(delta: WeightDelta, name: str, bits: torch.Tensor) -> None:
    """Apply `delta`'s change of tensor `name` to `bits` (its raw bits, flat, on the host)."""
    escapes = delta.escapes.get(name)
    if name in delta.diff:
        bits.add_(delta.diff[name])  # modular integer add (a half-width difference is widened by it): exact
        if escapes is not None:
            bits.index_add_(0, *escapes)
        return
    from agentrl import delta_kernels

    sparse = delta.sparse[name]
    escape_at, escape_value = _numpy_escapes(escapes, bits.dtype)
    width = bits.element_size() * 8
    codes, values, long_gaps = sparse.codes.numpy(), sparse.values.numpy(), sparse.long_gaps.numpy()
    delta_kernels.apply_sparse(bits.numpy(), width, codes, values, long_gaps, escape_at, escape_value)


def _on_host(tensor: torch.Tensor, change: Callable[[torch.Tensor], None]) -> None:
    """Run `change` on the tensor's raw bits (flat) in place: on a host copy copied back if it is not on the CPU."""
    on_cpu = tensor.device.type == "cpu"
    host = tensor.detach() if on_cpu else tensor.detach().cpu()
    change(_bits(host).view(-1))
    if not on_cpu:
        tensor.detach().copy_(host)


def _sparse_extent(sparse: SparseDiff, escapes: tuple[torch.Tensor, torch.Tensor] | None) -> int:
    """The last position `sparse` changes (-1: none; -2: malformed gaps, long gaps or escapes)."""
    from agentrl import delta_kernels

    escape_at, _ = _numpy_escapes(escapes, torch.int64)
    codes, values, long_gaps = sparse.codes.numpy(), sparse.values.numpy(), sparse.long_gaps.numpy()
    return int(delta_kernels.sparse_extent(codes, values, long_gaps, escape_at))


def _numpy_escapes(escapes: tuple[torch.Tensor, torch.Tensor] | None, width: torch.dtype) -> tuple[np.ndarray, ...]:
    if escapes is None:
        return np.zeros(0, np.int64), np.zeros(0, _NUMPY[width])
    return escapes[0].to(torch.int64).numpy(), escapes[1].numpy()


def _in_threads(work: Callable[[str], Any], names: Iterable[str]) -> list:
    """`work` for each tensor name, in threads (the compiled loops and torch's ops release the GIL); results in the
    order of `names` (give the largest first)."""
    names = list(names)
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1, 8))) as pool:
        return list(pool.map(work, names))


def weights_digest(state: Mapping[str, torch.Tensor]) -> str:
    """A hash of the tensors' names, dtypes, shapes and raw bytes (tied aliases counted once)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(unique_tensors(state).items()):
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _encode_tensor(name: str, new: torch.Tensor, old: torch.Tensor) -> dict[str, torch.Tensor]:
    if new.shape != old.shape or new.dtype != old.dtype:
        raise DeltaError(f"{name}: {new.dtype} {tuple(new.shape)} against {old.dtype} {tuple(old.shape)}")
    new_bits, old_bits = _bits(new).view(-1), _bits(old).view(-1)
    if new_bits.dtype in (torch.int16, torch.int32):
        sparse = _sparse_entries(name, new_bits, old_bits)
        if sparse is not None:
            return sparse
    elif torch.equal(new_bits, old_bits):
        return {}
    diff = new_bits - old_bits  # modular: adding it back is exact, whatever it wrapped to
    half = _HALF.get(diff.dtype)
    if half is None:
        return {name + DIFF: diff}
    return _narrowed(name, diff, half)


def _sparse_entries(name: str, new: torch.Tensor, old: torch.Tensor) -> dict[str, torch.Tensor] | None:
    """The sparse entries of the elements that changed (none: unchanged), or None when more than
    `SPARSE_AT_MOST` of them did (the tensor goes dense)."""
    from agentrl import delta_kernels

    limit = int(SPARSE_AT_MOST * new.numel())
    half, width = _HALF[new.dtype], new.element_size() * 8
    codes, values = torch.empty(limit, dtype=torch.uint8), torch.empty(limit, dtype=half)
    long_gaps = torch.empty(min(limit, new.numel() // delta_kernels.SHORTEST_LONG_GAP) + 1, dtype=torch.int64)
    escape_at, escape_value = torch.empty(limit, dtype=torch.int64), torch.empty(limit, dtype=new.dtype)
    buffers = [t.numpy() for t in (codes, values, long_gaps, escape_at, escape_value)]
    changed, valued, long, escaped = delta_kernels.encode_sparse(new.numpy(), old.numpy(), width, limit, *buffers)
    if changed < 0:
        return None
    if changed == 0:
        return {}
    entries = {name + CODES: codes[:changed]}  # views: the rest of each buffer is never touched
    if valued:
        entries[name + VALUES] = values[:valued]
    if long:
        entries[name + LONG_GAP] = long_gaps[:long]
    if escaped:
        entries.update({name + ESCAPE_INDEX: escape_at[:escaped].clone(), name + ESCAPE_VALUE: escape_value[:escaped]})
    return entries


def _narrowed(name: str, diff: torch.Tensor, half: torch.dtype) -> dict[str, torch.Tensor]:
    """A dense `diff` at half width (wrapped), with escapes for the elements that do not fit; at full width when
    most would be escapes."""
    narrow = diff.to(half)  # wraps: exact where the difference fits
    index = (narrow != diff).nonzero().view(-1)
    if index.numel() * 2 > diff.numel():  # mostly escapes: the full width is smaller
        return {name + DIFF: diff}
    if not index.numel():
        return {name + NARROW: narrow}
    remainder = diff[index] - narrow[index]  # what the wrapped narrow value left out: adding both gives `diff`
    return {name + NARROW: narrow, name + ESCAPE_INDEX: index, name + ESCAPE_VALUE: remainder}


def _fits(
    diff: torch.Tensor, have: torch.Tensor, escapes: tuple[torch.Tensor, torch.Tensor] | None, dense: bool = True
) -> bool:
    """Whether `diff` (full or half width, with its `escapes`; dense or sparse) is a difference for `have`'s values."""
    width = _bits(have).dtype
    if diff.dtype == width:
        return escapes is None
    if _HALF.get(width) != diff.dtype:
        return False
    if escapes is None:
        return True
    index, value = escapes
    size = have.numel() if dense else diff.numel()
    inside = index.numel() == 0 or (int(index.min()) >= 0 and int(index.max()) < size)
    positions = index.dtype in (torch.int32, torch.int64)
    return positions and index.numel() == value.numel() and value.dtype == width and inside


def _fits_sparse(sparse: SparseDiff, have: torch.Tensor, escapes: tuple[torch.Tensor, torch.Tensor] | None) -> bool:
    """Whether `sparse`'s values (with `escapes`) are differences for `have`'s values (none at all: any width)."""
    if not sparse.values.numel() and escapes is None:
        return sparse.codes.dtype == torch.uint8
    return _fits(sparse.values, have, escapes, dense=False)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(_BITS[tensor.element_size()])


_NUMPY = {torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64}

_ST_DTYPES = {torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64"}


def _compress_safetensors(tensors: dict[str, torch.Tensor], meta: dict[str, str], level: int) -> bytes:
    """The safetensors file of `tensors` (flat integer tensors), compressed as it is written: the tensors' memory
    goes to the compressor as it is, with no uncompressed copy of the file."""
    import zstandard

    header: dict[str, object] = {"__metadata__": meta}
    offset = 0
    for name, tensor in tensors.items():
        span = [offset, offset + tensor.nbytes]
        header[name] = {"dtype": _ST_DTYPES[tensor.dtype], "shape": [tensor.numel()], "data_offsets": span}
        offset += tensor.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    compressor = zstandard.ZstdCompressor(level=level, threads=-1).compressobj(size=8 + len(head) + offset)
    parts = [compressor.compress(struct.pack("<Q", len(head)) + head)]
    parts += [compressor.compress(tensor.contiguous().view(torch.uint8).numpy().data) for tensor in tensors.values()]
    parts.append(compressor.flush())
    return b"".join(parts)


def _tensors_of(raw: bytes) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file made by `_compress_safetensors`, as views of `raw` (no copy)."""
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    by_name = {v: k for k, v in _ST_DTYPES.items()}
    buffer = memoryview(raw)[8 + size :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        dtype = by_name[entry["dtype"]]
        if end > len(buffer) or start >= end:
            raise ValueError(f"{name}: its bytes {start}-{end} are not in the data ({len(buffer)} bytes)")
        with warnings.catch_warnings():  # read only: torch warns that `raw` (bytes) is not writable
            warnings.simplefilter("ignore", UserWarning)
            out[name] = torch.frombuffer(buffer[start:end], dtype=torch.uint8).view(dtype)
    return out


def safetensors_metadata(raw: bytes) -> dict[str, str]:
    """The `__metadata__` of a safetensors file's bytes (its header is read, nothing else)."""
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + size]).get("__metadata__") or {}


WEIGHTS_ID_KEY = "agentrl_weights_id"
"""The metadata key of a full push's safetensors file that names its weights (a later delta's base)."""
