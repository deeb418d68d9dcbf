"""What runs where, for real: every built-in loop × trainer mode × one or two policies (where the loop has roles) ×
backend (`hf`, vLLM), with the real model on one server per backend for the whole module.

- Each cell is first put to the run's start-up check (`run_problems`): a cell it refuses is recorded with the reason
  it gives, and must be refused (`REFUSED` says which and why, so a refusal that appears or goes away fails).
- The accepted cells of a loop, policies and backend roll out one sample with the smallest budgets (the loop's
  check case; its recipe's setup where it needs Docker, a browser or a server of its own) at version 0, untrained;
  the trainer mode does not change an episode, so one rollout stands for the three modes' cells (the page marks
  each "1 episode played"). Every generated token passes the per-version logprob recompute
  (`tests/integration/exactness.py`) against the weights the server holds.
- One optimizer step per backend and mode, not per cell: a 2-step quickstart run at temperature 0.7, every trained
  token checked against the weights of the version it names (`WITH_WORKERS`: over two Ray rollout workers; in
  `fully_async` with partial rollouts, weights pushed while generations are in flight); the quickstart's loop is
  the only one whose cells say "trained".
- `docs/what-runs-where.md` is rendered from the cells (`render_page`); the last test fails when the committed page
  differs from what ran (`AGENTRL_WRITE_MATRIX=1` rewrites it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentrl.cli import main
from agentrl.config import AgentRLConfig, load_config
from agentrl.loops.base import LOOPS, get_loop_class
from agentrl.loops.conformance.play import merged
from agentrl.loops.conformance.recipe import CHECK_RECIPES
from agentrl.loops.hooks import run_samples
from agentrl.loops.policy_clients import PolicyClients
from agentrl.loops.session import rollout_session
from agentrl.rollout.client import client_api
from agentrl.rollout.handles import HFServer
from agentrl.trainer.preflight import run_problems
from agentrl.types import Sample
from tests.integration.conftest import on_folder_weights
from tests.integration.exactness import (
    assert_tokens_are_the_base_model_s,
    assert_tokens_are_their_versions,
    keep_every_version,
    step_metrics,
)

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "what-runs-where.md"
MODES = ("sync", "async", "fully_async")
BACKENDS = ("hf", "vllm")
RECIPES = {loop: CHECK_RECIPES[loop] for loop in LOOPS.builtin_names() if get_loop_class(loop).check_case().lacks}
"""The loops that need Docker, a browser or a server of their own play their recipe's setup (`CHECK_RECIPES`,
as `agentrl check` plays them)."""
REFUSED: dict[tuple[str, str], str] = {}
"""(loop, policies) -> what the start-up check says, for the cells it refuses (in every mode and backend)."""
CELLS: dict[tuple[str, str, str, str], str] = {}
"""(loop, policies, backend, mode) -> "played" (its one episode, untrained) or "refused: <reason>", filled as the
cells run."""
TRAINED_CASE = (load_config("quickstart").agent.name, "one")
"""The loop and policies the training steps train (the quickstart's): their cells say "trained"."""


def policy_settings(loop: str) -> list[str]:
    return ["one", "two"] if len(get_loop_class(loop).roles) >= 2 else ["one"]


CASES = [(loop, policies) for loop in LOOPS.builtin_names() for policies in policy_settings(loop)]


def cell_config(loop: str, policies: str, backend: str, mode: str, url: str, rows: Path, sample: Sample) -> dict:
    """The cell's run config: the loop's own setup, the smallest budgets, the backend's server by URL."""
    own = setup_config(loop)
    rows.write_text(sample.to_json() + "\n")
    cell = {
        "agent": {"name": loop, "max_turns": 2},
        "rollout": {"backend": backend, "urls": [url], "n": 1, "max_tokens": 12, "temperature": 0.7, "workers": 0},
        "trainer": {"mode": mode, "steps": 1},
        "data": {"train_files": [str(rows)], "eval_files": [], "batch_size": 1},
    }
    if policies == "two":
        roles = get_loop_class(loop).roles
        cell["policies"] = {"first": {}, "second": {}}
        cell["agent"]["roles"] = {roles[0]: "first", roles[1]: "second"}
    return merged(own, cell)


def setup_config(loop: str) -> dict[str, Any]:
    if loop in RECIPES:
        data = load_config(RECIPES[loop]).model_dump(mode="json", by_alias=True)
        data.pop("policies", None)
        return data
    return merged({"reward": {"components": []}}, get_loop_class(loop).check_case().config)


def setup_sample(loop: str, easy_task: Any) -> Sample:
    if loop == "swe_agent":
        return easy_task.to_sample()
    if loop in RECIPES:
        samples = run_samples(load_config(RECIPES[loop]), "train")
        wanted = {"harbor": "agentrl/hello-file", "gui_agent": "click-test"}.get(RECIPES[loop])
        return next(s for s in samples if wanted in (None, s.id, s.extra_info.get("task")))
    return get_loop_class(loop).check_case().sample


@pytest.fixture(scope="module")
def server_urls() -> dict[str, str]:
    """The module's server of each backend, by URL, once it served the model folder's weights (version 0)."""
    return {}


@pytest.fixture
def servers(server_urls, hf_server_url, default_model_path, request):
    """The URL of the module's server of a backend (the session's; vLLM started on first use), serving the model
    folder's weights when the module first asks for it. Through each test's own request: a module-scoped
    fixture's request cannot start a fixture after its own setup."""

    def url(backend: str) -> str:
        if backend not in server_urls:
            if backend == "hf":
                server = on_folder_weights(HFServer(hf_server_url), default_model_path)
            else:
                request.getfixturevalue("vllm_installed")
                server = on_folder_weights(request.getfixturevalue("vllm_session_server"), default_model_path)
            server_urls[backend] = server.base_url
        return server_urls[backend]

    return url


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("loop", "policies"), CASES)
async def test_each_loop_rolls_out_exactly_where_the_start_up_check_lets_it(
    loop, policies, backend, servers, easy_task, default_tokenizer, default_model_path, tmp_path
):
    url, sample = servers(backend), setup_sample(loop, easy_task)
    accepted = None
    for mode in MODES:
        data = cell_config(loop, policies, backend, mode, url, tmp_path / "rows.jsonl", sample)
        problems = run_problems(AgentRLConfig.model_validate(data))
        expected = REFUSED.get((loop, policies))
        if expected is not None:
            assert any(expected in p for p in problems), (loop, policies, mode, problems)
            CELLS[(loop, policies, backend, mode)] = f"refused: {expected}"
            continue
        assert not problems, (loop, policies, backend, mode, problems)
        accepted = data
    if accepted is None:
        return
    cfg = AgentRLConfig.model_validate(accepted)
    llm = _client([url], backend, policies)
    async with _opened(llm), rollout_session(cfg, llm, default_tokenizer) as manager:
        (traj,) = await manager.run([sample])
    assert not traj.failed, (traj.stop_reason, traj.error)
    if loop != "harbor_oracle":  # the reference solution asks the policy nothing
        assert assert_tokens_are_the_base_model_s([traj], default_model_path) > 0
    for mode in MODES:
        CELLS[(loop, policies, backend, mode)] = "played"


def _client(urls: list[str], backend: str, policies: str) -> Any:
    from agentrl.rollout.client import LLMClient

    if policies == "one":
        return LLMClient(urls, api=client_api(backend))
    return PolicyClients({name: LLMClient(urls, api=client_api(backend)) for name in ("first", "second")})


@contextlib.asynccontextmanager
async def _opened(llm: Any) -> AsyncIterator[None]:
    clients = llm.clients.values() if isinstance(llm, PolicyClients) else [llm]
    try:
        yield
    finally:
        for client in clients:
            await client.aclose()


WITH_WORKERS = {("hf", "fully_async"), ("vllm", "sync")}
"""The training steps whose episodes run on two Ray rollout workers (the others in the trainer's process)."""
WITH_DELTAS = {("vllm", "sync")}
"""The training steps whose pushes after the first are weight deltas (`rollout.weight_delta=always`: the fp32
server takes them in its own dtype), each checked bit for bit against the trainer's weights."""
TRAINED: dict[tuple[str, str], dict[int, int]] = {}
"""(backend, mode) -> the trained tokens checked per version, filled by the training steps."""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_optimizer_step_per_backend_and_mode_trains_exactly(
    backend, mode, servers, local_ray, default_model_path, tmp_path, monkeypatch
):
    keep_every_version(monkeypatch)  # each version's weights, for the token-by-token check
    args = ["train", "recipe=quickstart", f"rollout.backend={backend}", f"rollout.urls=[{servers(backend)}]"]
    args += [f"trainer.mode={mode}", "trainer.steps=2", "trainer.save_every=1", "trainer.lr=1e-4"]
    args += ["data.batch_size=2", "rollout.n=2", "rollout.max_tokens=16", "rollout.temperature=0.7"]
    args += ["data.eval_files=[]", "trainer.skip_zero_advantage=false", f"output_dir={tmp_path}"]
    if mode == "fully_async":
        args += ["rollout.weight_update=resume"]  # pushes while generations are in flight: partial rollouts
    if (backend, mode) in WITH_WORKERS:
        args += ["rollout.workers=2", "rollout.num_cpus_per_worker=0.5"]
    digests = record_digests(monkeypatch) if (backend, mode) in WITH_DELTAS else None
    if digests is not None:
        args += ["rollout.weight_delta=always"]
    assert main(args) == 0
    for m in step_metrics(tmp_path):
        assert m["rollout/version_known"] == 1.0 and m.get("train/mismatch_lag/0", 0.0) < 1e-3
        assert m["rollout/staleness_max"] <= (0 if mode == "sync" else 1)
        if mode == "sync":  # every row trained, also in a step whose groups all have equal rewards
            assert m["train/rows_trained"] == 4.0 and m["train/tokens"] > 0
        if digests is not None:  # the first push (version 0) was full, every later one a delta
            assert m["perf/weight_sync_delta_servers"] == 1.0
    if digests is not None:
        assert len(digests) == 3 and all(served == trainer for served, trainer in digests), digests
    assert (tmp_path / "report.md").is_file() and (tmp_path / "tensorboard").is_dir()
    TRAINED[(backend, mode)] = assert_tokens_are_their_versions(tmp_path, default_model_path)


def record_digests(monkeypatch) -> list[tuple[str, str]]:
    """After every push to a server that takes deltas: (its weights' digest, the digest of the trainer's weights
    cast to its dtype)."""
    from agentrl.trainer.sync import WeightSync
    from agentrl.weight_delta import weights_digest

    digests: list[tuple[str, str]] = []
    update = WeightSync._update

    def update_then_compare(sync: WeightSync, server: Any, weights: Any) -> None:
        update(sync, server, weights)
        dtype = sync._delta_dtype(server)
        if dtype is not None:
            digests.append((server.weights_digest(), weights_digest(sync._held[dtype].state)))

    monkeypatch.setattr(WeightSync, "_update", update_then_compare)
    return digests


def test_the_what_runs_where_page_is_what_ran():
    expected = [(loop, pol, backend, mode) for loop, pol in CASES for backend in BACKENDS for mode in MODES]
    if set(CELLS) != set(expected) or len(TRAINED) != len(BACKENDS) * len(MODES):
        pytest.skip("not every cell ran in this session (a -k selection, or vLLM missing)")
    page = render_page(CELLS, TRAINED)
    if os.environ.get("AGENTRL_WRITE_MATRIX"):
        PAGE.write_text(page)
    assert PAGE.read_text() == page, "docs/what-runs-where.md differs from what ran: AGENTRL_WRITE_MATRIX=1 rewrites it"


def render_page(cells: dict[tuple[str, str, str, str], str], trained: dict[tuple[str, str], dict[int, int]]) -> str:
    """The page: one row per loop and policies, one column per backend and mode."""
    columns = [(b, m) for b in BACKENDS for m in MODES]
    lines = [
        "# What runs where",
        "",
        "<!-- generated by tests/integration/test_matrix_real.py from the cells that ran: do not edit by hand -->",
        "",
        "Every built-in loop, in every trainer mode, with one policy or (a loop with roles) two, on each backend,",
        "run for real on CPU by the integration tests (`tests/integration/test_matrix_real.py`). Each cell says what",
        "ran. *trained*: the start-up check accepted it and a 2-step quickstart run trained in that mode on that",
        f"backend (the quickstart's loop, `{TRAINED_CASE[0]}`, only), every trained token checked against the weights",
        "its version names. *1 episode played*: the start-up check accepted it and one episode of the loop was",
        "played with the real model at version 0 (the untrained weights), every generated token's logprob matching",
        "them; the trainer mode decides how rollout and training overlap, not what an episode is, so that one",
        "episode stands for the three mode cells of its loop, policies and backend, and nothing of the loop was",
        "trained. *refused*: at start, with the reason the check gives. Nothing here ran on a GPU: every cell is",
        "not verified on a GPU.",
        "",
        "| loop | policies | " + " | ".join(f"{b} {m}" for b, m in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    reasons: dict[str, int] = {}
    for loop, policies in CASES:
        row = []
        for backend, mode in columns:
            status = cells[(loop, policies, backend, mode)]
            if status.startswith("refused: "):
                note = reasons.setdefault(status.removeprefix("refused: "), len(reasons) + 1)
                status = f"refused ({note})"
            elif (loop, policies) == TRAINED_CASE and (backend, mode) in trained:
                status = "trained"
            else:
                status = "1 episode played"
            row.append(status)
        lines.append(f"| `{loop}` | {policies} | " + " | ".join(row) + " |")
    if reasons:
        lines += ["", "Refusals:", "", *[f"{n}. {reason}" for reason, n in reasons.items()]]
    else:
        lines += ["", "No cell is refused."]
    lines += ["", "Training steps (quickstart, 2 steps, trained tokens checked per version):", ""]
    lines += [f"- {b} {m}: trained" for b, m in columns if (b, m) in trained]
    lines += [
        "",
        "Trees (`rollout.tree`) are not a column: they train in `trainer.mode=sync` with one policy, on forkable",
        "loops (the start-up check refuses the rest); LoRA adapters are served by the `hf` backend only. Which runs",
        "check exactness token by token: [Exactness](concepts/exactness.md).",
        "",
    ]
    return "\n".join(lines)
