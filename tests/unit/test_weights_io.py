"""One writer of weights, one rule for tied weights: an alias of an earlier tensor is left out unless named."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load, load_file

from agentrl.weights_io import save_state_dict, state_dict_bytes, tied_aliases, unique_tensors
from tests.tiny_models import tiny_llama


def test_a_model_s_tied_head_is_an_alias_of_its_embeddings_and_its_state_dict_s_too():
    model = tiny_llama(tie_word_embeddings=True)
    assert tied_aliases(model) == {"lm_head.weight": "model.embed_tokens.weight"}
    assert tied_aliases(model.state_dict()) == {"lm_head.weight": "model.embed_tokens.weight"}  # detached copies
    assert tied_aliases(tiny_llama()) == {}


def test_files_and_bytes_leave_tied_aliases_out_and_keep_named_ones_as_copies(tmp_path: Path):
    embed = torch.arange(6.0).reshape(3, 2)
    state = {"embed": embed, "head": embed, "norm": torch.ones(2), "view": embed.t()}
    assert set(unique_tensors(state)) == {"embed", "norm", "view"}  # the same storage in another shape is kept
    assert set(load(state_dict_bytes(state))) == {"embed", "norm", "view"}
    written = load_file(save_state_dict(state, tmp_path / "w.safetensors", keep=["head"]))
    assert set(written) == {"embed", "head", "norm", "view"} and torch.equal(written["head"], embed)
