"""Where screenshots go: inline in the trajectory as data URLs, or as PNG files beside the run."""

from __future__ import annotations

import base64
from pathlib import Path


def data_url(png: bytes) -> str:
    """A PNG as a `data:image/png;base64,...` URL (what an OpenAI `image_url` part and the viewer take)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_part(url: str) -> dict[str, object]:
    """An OpenAI `image_url` content part."""
    return {"type": "image_url", "image_url": {"url": url}}


def save_png(png: bytes, folder: Path, trajectory_id: str, step: int) -> str:
    """Write `png` as `<folder>/<trajectory_id>/<step>.png`; returns the path."""
    path = folder / trajectory_id / f"{step:03d}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return str(path)
