"""The static trajectory viewer: `agentrl view RUN_DIR` → one self-contained `index.html`.

Runs → steps → groups → trajectories; each trajectory shows its conversation (tool calls, tool outputs,
screenshots), its tokens colored by trainable mask or per-token logprob, reward components, stop reason, timings
and a drift warning; filters by reward, stop reason, loop kind and task. Modules: `runs` (reading run
directories), `messages` and `tokens` (what a message / token looks like in the page), `payload` (the page's
data), `page` (HTML assembly, assets in `static/`), `build` (`build_viewer`), `serve` (`--serve`).
"""

from agentrl.viewer.build import build_viewer
from agentrl.viewer.serve import make_server, serve

__all__ = ["build_viewer", "make_server", "serve"]
