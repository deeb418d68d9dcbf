"""A small HTTP server for a discriminative reward model, so rollout workers can share one (GPU) copy.

    python -m agentrl.rewards.server --model /models/my-rm --port 8001 [--device cuda --batch-size 32]

`POST /score` with `{"items": [{"messages": [...prompt...], "response": "..."}]}` answers `{"scores": [...]}`;
`GET /health` answers 200 once the model is loaded. Use it with `{type: reward_model, url: http://host:8001}`.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, Field

from agentrl.rewards.model import SequenceClassifierScorer


class ScoreItem(BaseModel):
    messages: list[dict[str, Any]] = Field(description="the prompt, as OpenAI chat messages")
    response: str = Field(description="the model's answer")


class ScoreRequest(BaseModel):
    items: list[ScoreItem]


def build_app(scorer: SequenceClassifierScorer, batch_size: int = 8) -> Any:
    """The FastAPI app serving `scorer`."""
    from fastapi import FastAPI

    app = FastAPI(title="agentrl reward model")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/score")
    async def score(request: ScoreRequest) -> dict[str, list[float]]:
        pairs = [(item.messages, item.response) for item in request.items]
        return {"scores": await scorer.ascore(pairs, batch_size)}

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="folder or cached hub id of the reward model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=2048)
    args = parser.parse_args(argv)

    import uvicorn

    scorer = SequenceClassifierScorer(args.model, args.device, args.dtype, args.max_length)
    scorer.score([([{"role": "user", "content": "warm up"}], "ok")])  # load before answering /health
    uvicorn.run(build_app(scorer, args.batch_size), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
