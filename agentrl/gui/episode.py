"""The record of one GUI episode: steps, invalid replies, screenshots, outcome, and what goes on the trajectory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.gui.browser import Screen
from agentrl.gui.elements import format_elements
from agentrl.gui.screenshots import data_url, save_png
from agentrl.types import Trajectory

ACTIONS_LINE = (
    'Reply with exactly one action: click(ID), click(X, Y), type("text"), type(ID, "text"), press("Enter"), '
    "scroll(DX, DY) or done()."
)


@dataclass
class GUIEpisode:
    """What happened in one episode; `record` writes it onto the trajectory.

    Attributes:
        task: the MiniWoB task.
        seed: the episode's seed.
        modality: `text` (element list only) or `image` (screenshot parts too).
        screenshot_mode: `inline`, `files` or `none` (see `GUIConfig.screenshots`).
        screenshot_dir: where `files` go.
    """

    task: str
    seed: int | None
    modality: str
    screenshot_mode: str = "inline"
    screenshot_dir: Path | None = None
    steps: int = 0
    invalid_actions: int = 0
    invalid_in_a_row: int = 0
    done: bool = False
    raw_reward: float = 0.0
    reason: str | None = None
    actions: list[str] = field(default_factory=list)
    screenshots: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        """The page scored the episode a full success."""
        return self.done and self.raw_reward >= 1.0

    @property
    def reward(self) -> float:
        """MiniWoB's raw reward clipped to [0, 1] (failure and unfinished episodes score 0, partial credit kept)."""
        return max(0.0, min(1.0, self.raw_reward)) if self.done else 0.0

    def keep_screenshot(self, screen: Screen, trajectory_id: str) -> str | None:
        """Store the screen's screenshot as configured; returns its URL or path (None when not kept)."""
        if not screen.png or self.screenshot_mode == "none":
            return None
        if self.screenshot_mode == "files" and self.screenshot_dir is not None:
            ref = save_png(screen.png, self.screenshot_dir, trajectory_id, len(self.screenshots))
        else:
            ref = data_url(screen.png)
        self.screenshots.append(ref)
        return ref

    def observe(self, screen: Screen) -> None:
        if screen.done:
            self.done, self.raw_reward, self.reason = True, screen.reward, screen.reason

    def record(self, traj: Trajectory) -> None:
        """The episode's reward, metrics and outcome on the trajectory (also when a budget ended it)."""
        traj.reward = self.reward
        traj.reward_components["env"] = self.reward
        traj.reward_details["env"] = {"resolved": self.success, "task": self.task, "raw_reward": self.raw_reward}
        traj.metrics.update(
            {
                "gui/success": float(self.success),
                "gui/steps": float(self.steps),
                "gui/invalid_actions": float(self.invalid_actions),
            }
        )
        traj.metadata["gui"] = {
            "task": self.task,
            "seed": self.seed,
            "modality": self.modality,
            "done": self.done,
            "success": self.success,
            "raw_reward": self.raw_reward,
            "reason": self.reason,
            "actions": self.actions,
            "screenshots": self.screenshots,
        }


def observation_text(screen: Screen, header: str = "") -> str:
    """The user turn the model reads: what happened, the task, the elements, and the action forms."""
    lines = [header] if header else []
    lines += [f"Task: {screen.instruction}", "Elements ([id] kind text at (x,y)):", format_elements(screen.elements)]
    lines.append(ACTIONS_LINE)
    return "\n".join(lines)


def user_content(text: str, screenshot: str | None, modality: str) -> Any:
    """A user message's content: text, or text and the screenshot as an `image_url` part (image modality)."""
    if modality != "image" or screenshot is None:
        return text
    from agentrl.gui.screenshots import image_part

    url = screenshot if screenshot.startswith("data:") else Path(screenshot).resolve().as_uri()
    return [{"type": "text", "text": text}, image_part(url)]
