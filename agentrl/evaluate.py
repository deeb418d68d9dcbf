"""`agentrl eval`: roll out a recipe's held-out split with a policy and score it with the recipe's rewards.

    agentrl eval recipe=swe_agent                                        # the recipe's model on the embedded server
    agentrl eval recipe=swe_agent rollout.urls=[http://host:8000]        # running token-in/out servers (hf, vLLM)
    agentrl eval recipe=swe_agent model=my-model rollout.base_url=http://host:8000/v1   # any OpenAI-compatible API
    agentrl eval recipe=swe_agent model=openai/gpt-4o-mini rollout.base_url=default     # a hosted model via litellm

With `rollout.base_url` the policy is reached through `/v1/chat/completions` (with litellm, so provider keys come
from the environment: `OPENAI_API_KEY`, ...; `rollout.api_key_env=NAME` names another variable). Such servers
return text, not tokens: the trajectory's tokens are then those of the recipe's tokenizer (`eval.tokenizer`,
default the default model's) and carry no logprobs — fine for evaluation, not for training.

Eval options (not part of the training config): `eval.split=eval|train`, `eval.limit=N` (first N samples),
`eval.n=K` (samples per task, default 1), `eval.greedy=true` (temperature 0; false keeps the recipe's sampling).

Writes `results.jsonl` (one line per trajectory: id, reward, components, resolved, stop reason, turns, tokens,
errors), `trajectories.jsonl` and `summary.json` (mean reward, per-component means, resolved rate) into the run
directory, and prints the summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentRLConfig, TreeConfig
from agentrl.errors import UserError
from agentrl.loops.hooks import prepare_run, run_samples
from agentrl.loops.preflight import validate_episodes
from agentrl.types import Message, Trajectory


@dataclass
class EvalOptions:
    """What `agentrl eval` adds to a run's config (popped from the overrides before the config is loaded)."""

    split: str = "eval"
    limit: int | None = None
    n: int = 1
    greedy: bool = True
    tokenizer: str = "default"
    base_url: str | None = None
    """OpenAI-compatible chat endpoint (…/v1); "default" for the litellm provider's own."""
    api_key_env: str | None = None


def parse_eval_overrides(overrides: list[str]) -> tuple[EvalOptions, list[str]]:
    """Split `eval.*`, `rollout.base_url` and `rollout.api_key_env` out of the overrides.

    Raises:
        UserError: an unknown `eval.` key or a malformed value.
    """
    opts, rest = EvalOptions(), []
    for item in overrides:
        key, _, value = item.partition("=")
        if key in ("rollout.base_url", "rollout.api_key_env"):
            setattr(opts, key.split(".", 1)[1], value or None)
        elif key.startswith("eval."):
            name = key.removeprefix("eval.")
            try:
                if name == "split" and value in ("eval", "train"):
                    opts.split = value
                elif name in ("limit", "n"):
                    setattr(opts, name, int(value))
                elif name == "greedy":
                    opts.greedy = value.lower() in ("1", "true", "yes")
                elif name == "tokenizer":
                    opts.tokenizer = value
                else:
                    raise ValueError
            except ValueError:
                raise UserError(
                    f"bad eval option {item!r}; eval options: eval.split=eval|train, eval.limit=N, eval.n=K, "
                    "eval.greedy=true|false, eval.tokenizer=MODEL"
                ) from None
        else:
            rest.append(item)
    return opts, rest


def run_eval_from_overrides(overrides: list[str]) -> Path:
    """`agentrl eval ...`: parse the overrides, evaluate, return the run directory."""
    opts, rest = parse_eval_overrides(overrides)
    cfg = load_config(overrides=rest)
    validate_episodes(cfg)
    return run_eval(cfg, opts)


def run_eval(cfg: AgentRLConfig, opts: EvalOptions | None = None) -> Path:
    """Evaluate `cfg`'s policy on its held-out samples; returns the run directory."""
    return asyncio.run(evaluate(cfg, opts or EvalOptions()))


async def evaluate(cfg: AgentRLConfig, opts: EvalOptions) -> Path:
    """Async `run_eval`."""
    from agentrl.config.run_dir import output_dir
    from agentrl.loops.session import rollout_session
    from agentrl.models import load_tokenizer, resolve_model
    from agentrl.rewards.policy_rewards import reward_pipeline

    samples = run_samples(cfg, opts.split)[: opts.limit]
    prepare_run(cfg, samples)
    if not samples:
        raise UserError(f"nothing to evaluate: the {opts.split} split is empty (data.eval_files, eval.split=train)")
    flat = {"n": opts.n, "tree": TreeConfig()}  # a task is scored by its episodes, never forked
    rollout = cfg.rollout.model_copy(update={**flat, **({"temperature": 0.0} if opts.greedy else {})})
    out = output_dir(cfg, "eval")
    chat = opts.base_url is not None
    model_path = resolve_model(opts.tokenizer if chat else cfg.model)
    tokenizer = load_tokenizer(model_path)
    rewards = reward_pipeline(cfg)
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    async with (
        _Policy(cfg, opts, tokenizer) as llm,
        rollout_session(cfg, llm, tokenizer, rollout, show_progress=True, run_id=out.name) as manager,
    ):
        if isinstance(llm, ChatPolicy):
            llm.attach(manager)
        with (out / "trajectories.jsonl").open("w") as trajs, (out / "results.jsonl").open("w") as res:

            async def score(traj: Trajectory) -> None:  # scored as they finish, while others still run
                await rewards.ascore(traj, samples[traj.metadata["sample_position"]])
                trajs.write(traj.to_json() + "\n")
                results.append(result_row(traj))
                res.write(json.dumps(results[-1]) + "\n")
                res.flush()

            scoring = [asyncio.ensure_future(score(t)) async for t in manager.stream(samples)]
            await asyncio.gather(*scoring)
    await rewards.aclose()
    summary = summarize_eval(results, time.perf_counter() - started)
    summary.update({"model": cfg.model, "api": "chat" if chat else "tokens", "split": opts.split})
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    print(f"results written to {out}")
    return out


def result_row(traj: Trajectory) -> dict[str, Any]:
    """One trajectory's outcome, as a line of results.jsonl."""
    return {
        "id": traj.metadata.get("sample_id"),
        "task": str(traj.metadata.get("data_source") or "default"),
        "sample_index": traj.sample_index,
        "reward": traj.reward,
        "components": traj.reward_components,
        "resolved": traj.success,
        "failed": traj.failed,
        "stop_reason": str(traj.stop_reason),
        "turns": traj.num_turns,
        "generated_tokens": traj.num_generated_tokens_in_all_steps(),
        "error": traj.error,
        "trajectory_id": traj.id,
        "timings": {k: round(v, 3) for k, v in traj.timings.items()},
    }


def summarize_eval(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """Mean reward, per-component means, resolved rate (when a component reports `resolved`), stop reasons."""
    n = max(len(rows), 1)
    names = sorted({k for r in rows for k in r["components"]})
    graded = [r["resolved"] for r in rows if r["resolved"] is not None]
    stops: dict[str, int] = {}
    for r in rows:
        stops[r["stop_reason"]] = stops.get(r["stop_reason"], 0) + 1
    return {
        "trajectories": len(rows),
        "mean_reward": sum(r["reward"] or 0.0 for r in rows) / n,
        "components": {k: sum(r["components"].get(k, 0.0) for r in rows) / n for k in names},
        "resolved_rate": (sum(graded) / len(graded)) if graded else None,
        "stop_reasons": stops,
        "mean_turns": sum(r["turns"] for r in rows) / n,
        "errors": sum(r["error"] is not None for r in rows),
        "failed": sum(bool(r.get("failed")) for r in rows),
        "per_task": per_task(rows),
        "wall_s": round(wall_s, 2),
    }


def per_task(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Trajectories, mean reward and resolved rate per task (the rows' `data_source`)."""
    tasks: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        tasks.setdefault(r.get("task") or "default", []).append(r)
    out = {}
    for task, group in sorted(tasks.items()):
        graded = [r["resolved"] for r in group if r["resolved"] is not None]
        out[task] = {
            "trajectories": len(group),
            "mean_reward": sum(r["reward"] or 0.0 for r in group) / len(group),
            "resolved_rate": (sum(graded) / len(graded)) if graded else None,
        }
    return out


# ---- the policy: our token servers, or any chat API ------------------------------------------------------------


class _Policy:
    """Async context manager giving the generator: an `LLMClient` on the run's servers, or a `ChatPolicy`."""

    def __init__(self, cfg: AgentRLConfig, opts: EvalOptions, tokenizer: Any):
        self.cfg, self.opts, self.tokenizer = cfg, opts, tokenizer
        self._stack: Any = None

    async def __aenter__(self) -> Any:
        from agentrl.loops.policy_clients import serve_policies

        self._stack = contextlib.AsyncExitStack()
        if self.opts.base_url is not None:
            key = os.environ.get(self.opts.api_key_env) if self.opts.api_key_env else None
            base = None if self.opts.base_url == "default" else self.opts.base_url
            return ChatPolicy(self.cfg.model, self.tokenizer, base, key, self.cfg.rollout.request_timeout_s)
        llm, _ = await self._stack.enter_async_context(serve_policies(self.cfg))
        return llm

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()


@dataclass
class ChatOutput:
    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: str
    policy_version: int | None = None


class ChatPolicy:
    """A policy behind an OpenAI-compatible chat API, used where loops expect token generation.

    Each call sends the trajectory's messages (found by its id, the `session_id` of the call) and returns the
    reply tokenized with the local tokenizer. Tool results go as user turns in `<tool_response>` tags (the
    assistant turns carry their calls as text, in the format the system prompt asks for).
    """

    def __init__(self, model: str, tokenizer: Any, base_url: str | None, api_key: str | None, timeout_s: float):
        self.model = model if base_url is None or "/" in model else f"openai/{model}"
        self.tokenizer = tokenizer
        self.base_url = base_url
        self.api_key = api_key or ("EMPTY" if base_url else None)
        self.timeout_s = timeout_s
        self._trajectories: dict[str, Trajectory] = {}

    def attach(self, manager: Any) -> None:
        """Let the policy see each trajectory's messages (wraps the manager's context hooks)."""
        setup, teardown = manager.setup_context, manager.teardown_context

        async def on_setup(ctx: Any) -> None:
            self._trajectories[ctx.trajectory.id] = ctx.trajectory
            if setup is not None:
                out = setup(ctx)
                if asyncio.iscoroutine(out):
                    await out

        async def on_teardown(ctx: Any) -> None:
            self._trajectories.pop(ctx.trajectory.id, None)
            if teardown is not None:
                out = teardown(ctx)
                if asyncio.iscoroutine(out):
                    await out

        manager.setup_context, manager.teardown_context = on_setup, on_teardown

    async def generate(self, prompt_ids: list[int], sampling: Any, session_id: str | None = None) -> ChatOutput:
        from agentrl.rewards.judge import _litellm

        traj = self._trajectories.get(session_id or "")
        if traj is None:
            raise UserError("ChatPolicy.generate called for an unknown trajectory; call attach(manager) first")
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(traj.messages),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "timeout": self.timeout_s,
        }
        if sampling.top_p < 1.0:
            kwargs["top_p"] = sampling.top_p
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.api_key:
            kwargs["api_key"] = self.api_key
        response = await _litellm().acompletion(**kwargs)
        choice = response.choices[0]
        text = choice.message.content or ""
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        finish = "length" if choice.finish_reason == "length" else "stop"
        return ChatOutput(token_ids=ids, logprobs=None, finish_reason=finish)


def chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """A trajectory's messages as plain chat messages any API accepts (tool results become user turns; a user
    message's content parts, such as screenshots as `image_url`, pass through unchanged)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "user" and isinstance(m.content, list):
            out.append({"role": "user", "content": m.content})
            continue
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        if m.role == "tool":
            wrapped = f"<tool_response>\n{content}\n</tool_response>"
            last = out[-1]["content"] if out and out[-1]["role"] == "user" else None
            if isinstance(last, str) and last.startswith("<tool_response>"):
                out[-1]["content"] += "\n" + wrapped
            else:
                out.append({"role": "user", "content": wrapped})
        else:
            out.append({"role": m.role, "content": content or ""})
    return out
