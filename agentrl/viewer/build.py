"""`build_viewer`: one self-contained `index.html` for a run directory (or a folder of runs, or a .jsonl file)."""

from __future__ import annotations

from pathlib import Path

from agentrl.viewer.page import render_page
from agentrl.viewer.payload import build_payload
from agentrl.viewer.runs import load_runs
from agentrl.viewer.tokens import TokenizerSpec, resolve_decoder


def build_viewer(run_dir: Path, out: Path | None = None, *, tokenizer: TokenizerSpec = "auto") -> Path:
    """Write the static HTML viewer of a run and return its path.

    The page holds all its data (inlined JSON), CSS and JS: it opens from disk, with no server and no network.

    Args:
        run_dir: a run directory (`agentrl train` or `agentrl rollout` output), a folder of run directories,
            or a trajectories `.jsonl` / `.jsonl.gz` file.
        out: the HTML file to write, or a folder to write `index.html` into. Default: `<run_dir>/index.html`
            (for a file: `<file name>.html` beside it).
        tokenizer: decodes each token's text at build time: a tokenizer object, a model spec (`default`, a
            folder, a cached hub id), `"auto"` (the `model` of the run's `config.yaml`, else the default model,
            if available locally and it reproduces the assistant messages; see `agentrl.viewer.tokens`) or None
            (tokens shown as ids).

    Raises:
        UserError: nothing readable at `run_dir`, or an explicitly named tokenizer cannot be loaded.
    """
    run_dir = Path(run_dir)
    runs = load_runs(run_dir)
    target = _target(run_dir, out)
    target.parent.mkdir(parents=True, exist_ok=True)
    decoder, note = resolve_decoder(tokenizer, runs)
    payload = build_payload(runs, decoder, note, target.parent)
    title = f"agentrl · {runs[0].name}" if len(runs) == 1 else f"agentrl · {run_dir.resolve().name}"
    target.write_text(render_page(payload, title), encoding="utf-8")
    return target


def _target(run_dir: Path, out: Path | None) -> Path:
    if out is not None:
        out = Path(out)
        return out / "index.html" if out.is_dir() or not out.suffix else out
    if run_dir.is_file():
        return run_dir.with_name(run_dir.name.split(".")[0] + ".html")
    return run_dir / "index.html"
