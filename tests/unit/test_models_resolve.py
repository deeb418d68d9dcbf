"""Model spec resolution and the cache layout, with no real model: folders are faked in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl import models
from agentrl.errors import AgentRLError, ModelNotFoundError


def _fake_prepared(cache: Path, *, marker: bool = True) -> Path:
    folder = cache / models.DEFAULT_MODEL
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if marker:
        (folder / models.MARKER).write_text(json.dumps({"files": ["config.json"]}))
    return folder


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AGENTRL_MODEL_CACHE", raising=False)
    assert models.model_cache_dir() == tmp_path / "home/.cache/agentrl/models"
    monkeypatch.setenv("AGENTRL_MODEL_CACHE", str(tmp_path / "env"))
    assert models.model_cache_dir() == tmp_path / "env"
    assert models.model_cache_dir(tmp_path / "arg") == tmp_path / "arg"


def test_model_not_found_is_a_user_facing_error():
    assert issubclass(ModelNotFoundError, AgentRLError)


@pytest.mark.parametrize(
    "alias", ["default", "DEFAULT", "smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"]
)
def test_alias_not_prepared_says_how_to_prepare(tmp_path, alias):
    with pytest.raises(ModelNotFoundError, match=r"not prepared.*agentrl model prepare"):
        models.resolve_model(alias, cache_dir=tmp_path, prepare=False)


def test_alias_resolves_from_env_cache(tmp_path, monkeypatch):
    folder = _fake_prepared(tmp_path)
    monkeypatch.setenv("AGENTRL_MODEL_CACHE", str(tmp_path))
    assert models.resolve_model("Default", prepare=False) == str(folder)


def test_half_prepared_folder_is_not_used(tmp_path):
    folder = _fake_prepared(tmp_path, marker=False)
    with pytest.raises(ModelNotFoundError, match="not prepared"):
        models.resolve_model("default", cache_dir=tmp_path, prepare=False)
    (folder / models.MARKER).write_text(json.dumps({"files": ["config.json", "model.safetensors"]}))
    with pytest.raises(ModelNotFoundError, match="not prepared"):
        models.resolve_model("default", cache_dir=tmp_path, prepare=False)


def test_prepare_is_a_no_op_when_prepared(tmp_path, monkeypatch):
    folder = _fake_prepared(tmp_path)

    def no_download(_: Path) -> Path:
        raise AssertionError("must not download again")

    monkeypatch.setattr(models, "_fetch_gguf", no_download)
    assert models.prepare_default_model(cache_dir=tmp_path) == folder
    assert models.resolve_model("default", cache_dir=tmp_path) == str(folder)


def test_failed_conversion_leaves_nothing_half_prepared(tmp_path, monkeypatch):
    def broken_convert(gguf: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise AgentRLError("conversion interrupted")

    monkeypatch.setattr(models, "_fetch_gguf", lambda downloads: downloads / "model.gguf")
    monkeypatch.setattr(models, "_convert", broken_convert)
    with pytest.raises(AgentRLError, match="interrupted"):
        models.prepare_default_model(cache_dir=tmp_path)
    assert not (tmp_path / models.DEFAULT_MODEL).exists()
    assert not list(tmp_path.glob(f".{models.DEFAULT_MODEL}.tmp-*"))
    with pytest.raises(ModelNotFoundError, match="not prepared"):
        models.resolve_model("default", cache_dir=tmp_path, prepare=False)


def test_local_folder_needs_config_json(tmp_path):
    with pytest.raises(ModelNotFoundError, match="config.json"):
        models.resolve_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert models.resolve_model(str(tmp_path)) == str(tmp_path)


def test_missing_local_path(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        models.resolve_model(str(tmp_path / "nope"))


@pytest.mark.parametrize("spec", ["agentrl-tests/not-a-cached-model", "gpt2", "not a/valid/id"])
def test_unknown_hub_id_explains_the_fix(tmp_path, monkeypatch, spec):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFoundError) as info:
        models.resolve_model(spec)
    message = str(info.value)
    assert spec in message
    assert "no network" in message
    assert "local HF model folder" in message
    assert "default" in message


def test_hub_id_in_local_cache_resolves_to_its_snapshot(tmp_path, monkeypatch):
    repo = tmp_path / "models--org--tiny"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    assert Path(models.resolve_model("org/tiny")) == snapshot


def test_main_path(tmp_path, capsys):
    assert models.main(["path", "--cache-dir", str(tmp_path)]) == 2
    assert "not prepared" in capsys.readouterr().err
    folder = _fake_prepared(tmp_path)
    assert models.main(["path", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(folder)
