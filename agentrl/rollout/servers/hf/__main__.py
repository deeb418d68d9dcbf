"""`python -m agentrl.rollout.servers.hf --model PATH --port P`: run the `hf` rollout server."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from agentrl.errors import UserError
from agentrl.rollout.servers.hf.push import WEIGHTS_TOKEN_ENV, is_loopback


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agentrl.rollout.servers.hf", description=__doc__)
    parser.add_argument("--model", required=True, help="HF model folder, or a name agentrl.models resolves")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--max-prefill-tokens", type=int, default=16384)
    parser.add_argument("--dtype", default="float32", help="float32 | bfloat16 | float16")
    parser.add_argument("--device", default=None, help="cpu | cuda[:N] (default: cuda if available)")
    parser.add_argument("--num-threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--policy-version", type=int, default=0, help="version of the initial weights")
    parser.add_argument("--log-level", default="info")
    return parser.parse_args(argv)


def resolve_model_path(model: str) -> str:
    """A local HF folder, or a name `agentrl.models.resolve_model` knows (e.g. `default`)."""
    from agentrl.models import resolve_model

    return resolve_model(model)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Spinning OpenMP workers starve each other (and the HTTP thread) on a busy CPU box: a decode step can get
    # 5-10x slower. Passive waiting costs a few percent when the machine is idle. Must be set before torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import torch
    import uvicorn

    from agentrl.rollout.servers.hf.app import create_app
    from agentrl.rollout.servers.hf.engine import EngineConfig, HFEngine
    from agentrl.rollout.servers.hf.loading import load_model, load_tokenizer

    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    try:
        path = resolve_model_path(args.model)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    config = EngineConfig(
        max_batch_size=args.max_batch_size,
        max_model_len=args.max_model_len,
        max_prefill_tokens=args.max_prefill_tokens,
        policy_version=args.policy_version,
    )
    token = os.environ.get(WEIGHTS_TOKEN_ENV) or None
    if token is None and not is_loopback(args.host):
        print(
            f"error: --host {args.host} lets other hosts reach this server, and so push weights into it: set "
            f"{WEIGHTS_TOKEN_ENV} to a secret in its environment and the trainer's (it sends it), or serve on "
            "127.0.0.1",
            file=sys.stderr,
        )
        raise SystemExit(2)
    engine = HFEngine(load_model(path, args.dtype, args.device), load_tokenizer(path), config)
    app = create_app(engine, args.served_model_name or args.model, weights_token=token)
    uvicorn.run(
        app, host=args.host, port=args.port, log_level=args.log_level, access_log=False, timeout_graceful_shutdown=5
    )


if __name__ == "__main__":
    main()
