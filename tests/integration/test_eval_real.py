"""`agentrl eval` against a real rollout server: token-in/out and through its OpenAI-compatible chat API."""

from __future__ import annotations

import json

import pytest

from agentrl.config import load_config
from agentrl.evaluate import EvalOptions, run_eval

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("api", ["tokens", "chat"])
def test_eval_writes_results_trajectories_and_summary(hf_server_url, tmp_path, api):
    overrides = ["recipe=quickstart", f"output_dir={tmp_path}", "rollout.max_tokens=8"]
    opts = EvalOptions(limit=2)
    if api == "tokens":
        overrides.append(f"rollout.urls=[{hf_server_url}]")
    else:
        opts.base_url = f"{hf_server_url}/v1"
    cfg = load_config(overrides=overrides)
    components = {c["name"] for c in cfg.reward.components}
    out = run_eval(cfg, opts)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["stop_reason"] in ("done", "max_tokens") for r in rows)
    assert all(set(r["components"]) == components and r["reward"] is not None for r in rows)
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 2 and summary["api"] == api and summary["resolved_rate"] is None
    assert summary["mean_reward"] == pytest.approx(sum(r["reward"] for r in rows) / 2)
    assert summary["per_task"] == {"quickstart/echo": {"trajectories": 2, "mean_reward": summary["mean_reward"],
                                                       "resolved_rate": None}}  # fmt: skip
