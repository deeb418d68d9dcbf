"""`agentrl gateway`: serve a policy to any OpenAI-speaking agent and record every session's trajectory.

    agentrl gateway recipe=quickstart                                 # the recipe's model, on the embedded server
    agentrl gateway model=runs/x/checkpoints/step_000010/model gateway.port=8100
    agentrl gateway rollout.urls=[http://host:8000] rollout.backend=vllm

Point an agent at `http://HOST:PORT/v1` (one session, `default`) or at `http://HOST:PORT/s/<name>/v1` (a session
per name, opened at its first call); `POST /s/<name>/close` ends a session. Each session's trajectory (token-exact,
its step samples alongside) is appended to `trajectories.jsonl` in the run directory when it is closed, and every
open one when the gateway stops (Ctrl-C); `agentrl view RUN_DIR` opens them.

Gateway options (not part of the training config): `gateway.host` (127.0.0.1), `gateway.port` (8100),
`gateway.upstream` (another model's OpenAI-compatible endpoint, `http://host:port/v1`, answers every call and its
replies are recorded in the model's template as demonstrations: `agentrl.gateway.upstream`; its key from
`AGENTRL_UPSTREAM_API_KEY`; the model's own servers are not started) and `gateway.upstream_model`. A host
other machines reach (`gateway.host=0.0.0.0`) needs `AGENTRL_GATEWAY_TOKEN` in the environment: the agents send it
as their API key (`Authorization: Bearer` or `x-api-key`; see `agentrl.gateway.auth`). The
agent's own temperature (greedy included: nothing is trained here), top_p, top_k and seed are honoured;
`agent.max_turns`, `agent.max_total_tokens` and `rollout.max_tokens` bound each session.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.gateway.auth import GATEWAY_TOKEN_ENV, gateway_token
from agentrl.gateway.server import Gateway
from agentrl.gateway.session import GatewaySession, SessionLimits
from agentrl.gateway.upstream import Upstream
from agentrl.loops.preflight import validate_episodes
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import StopReason, Trajectory


@dataclass
class GatewayOptions:
    host: str = "127.0.0.1"
    port: int = 8100
    token: str | None = field(default=None, repr=False)
    """The API key every call needs (`AGENTRL_GATEWAY_TOKEN`; required off loopback)."""
    upstream: str | None = None
    """Another model's OpenAI-compatible endpoint answers every call (`agentrl.gateway.upstream`)."""
    upstream_model: str | None = None
    """The model asked upstream (None: the agent's own `model`)."""


def parse_gateway_overrides(overrides: list[str]) -> tuple[GatewayOptions, list[str]]:
    """Split `gateway.host` / `gateway.port` out of the overrides; the token comes from `AGENTRL_GATEWAY_TOKEN`.

    Raises:
        UserError: an unknown `gateway.` key, a port that is not a number, or a host other machines reach
            without a token.
    """
    opts, rest = GatewayOptions(), []
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "gateway.host":
            opts.host = value
        elif key == "gateway.port":
            if not value.isdigit():
                raise UserError(f"gateway.port must be a port number, got {value!r}")
            opts.port = int(value)
        elif key == "gateway.upstream":
            opts.upstream = value or None
        elif key == "gateway.upstream_model":
            opts.upstream_model = value or None
        elif key.startswith("gateway."):
            raise UserError(
                f"unknown option {key}: the gateway takes gateway.host, gateway.port, gateway.upstream and "
                "gateway.upstream_model"
            )
        else:
            rest.append(item)
    opts.token = gateway_token(opts.host)
    return opts, rest


def session_trajectory(session: GatewaySession) -> Trajectory | None:
    """A closed session as one trajectory: its last step sample that holds a generation, the earlier ones in
    `earlier_steps`. A session none of whose calls was answered is a failure (saved, never trained on); one that
    made no call is None."""
    if not session.recorder.calls:
        return None
    steps = session.recorder.generated_steps
    if not steps:
        return Trajectory(id=session.id, stop_reason=StopReason.ERROR, error=session.unanswered())
    *earlier, last = steps
    traj = last.model_copy(update={"id": session.id, "earlier_steps": earlier})
    traj.num_turns = sum(1 for call in session.recorder.calls if call.output_ids)
    traj.stop_reason = session.stop_reason or StopReason.DONE
    traj.metrics.update(session.metrics)
    traj.metrics["gateway/prefix_reuse_rate"] = session.recorder.prefix_reuse_rate
    traj.metrics["gateway/step_samples"] = float(len(steps))
    traj.metrics["loop/template_rewrites"] = float(session.recorder.template_rewrites)
    return traj


def serve_gateway_from_overrides(overrides: list[str]) -> int:
    opts, rest = parse_gateway_overrides(overrides)
    cfg = load_config(overrides=rest)
    validate_episodes(cfg)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_gateway(cfg, opts))
    return 0


async def serve_gateway(
    cfg: AgentRLConfig,
    opts: GatewayOptions,
    ready: asyncio.Future[str] | None = None,
    stop: asyncio.Event | None = None,
) -> Path:
    """Serve until `stop` is set (or the process is interrupted); returns the run directory. `ready` gets the
    gateway's URL once it serves."""
    from agentrl.config.run_dir import output_dir
    from agentrl.loops.policy_clients import serve_policies
    from agentrl.models import load_tokenizer, resolve_model

    out = output_dir(cfg, "gateway")
    model_path = resolve_model(cfg.model)
    tokenizer = load_tokenizer(model_path)
    r, agent = cfg.rollout, cfg.agent
    options = {
        "sampling": SamplingParams(temperature=r.temperature, top_p=r.top_p, top_k=r.top_k, max_tokens=r.max_tokens),
        "limits": SessionLimits(
            max_turns=agent.max_turns,
            max_tokens_per_turn=r.max_tokens,
            max_total_tokens=min(agent.max_total_tokens, r.max_model_len),
        ),
        "honour_request_sampling": True,
        "trains": False,  # it serves and records: greedy requests are fine
    }
    if opts.upstream:
        options["upstream"] = Upstream(opts.upstream, opts.upstream_model)
        options["upstream"].check()  # before anything starts
    with (out / "trajectories.jsonl").open("a") as sink:
        async with (
            contextlib.nullcontext((None, None)) if opts.upstream else serve_policies(cfg) as (llm, _),
            Gateway(
                llm,
                tokenizer,
                model_name=str(cfg.model),
                tool_parser=agent.tool_parser,
                host=opts.host,
                port=opts.port,
                on_demand=True,
                on_close=lambda session: _save(session, sink),
                session_options=options,
                token=opts.token,
            ) as gateway,
        ):
            served = f"{opts.upstream} (recorded in {cfg.model}'s template)" if opts.upstream else cfg.model
            print(f"gateway serving {served} at {gateway.url}/v1 (sessions: {gateway.url}/s/<name>/v1)")
            if gateway.token is not None:
                print(f"agents send {GATEWAY_TOKEN_ENV} as their API key (Authorization: Bearer, or x-api-key)")
            print(f"trajectories: {out / 'trajectories.jsonl'}", flush=True)
            if ready is not None:
                ready.set_result(gateway.url)
            await (stop.wait() if stop is not None else asyncio.Event().wait())
    return out


def _save(session: GatewaySession, sink: IO[str]) -> None:
    traj = session_trajectory(session)
    if traj is not None:
        sink.write(traj.to_json() + "\n")
        sink.flush()
