"""The built-in `hf` rollout server: a transformers causal LM behind an OpenAI-compatible HTTP API.

- `engine.HFEngine`: asyncio-facing continuous-batching engine (one background thread runs the step loop).
- `app.create_app`: the FastAPI app (`/v1/completions`, `/v1/chat/completions`, `/v1/weights`, ...).
- `launch.launch_hf_server`: start it as a subprocess and wait until `/health` answers.

`python -m agentrl.rollout.servers.hf --model PATH --port P` runs it from the command line.
"""

from agentrl.rollout.servers.hf.launch import HFServerHandle, launch_hf_server

__all__ = ["HFServerHandle", "launch_hf_server"]
