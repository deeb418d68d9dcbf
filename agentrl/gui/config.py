"""`GUIConfig`: the GUI agent's options, given as `agent.kwargs` (e.g. `agent.kwargs.max_browsers=2`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrl.errors import UserError


class GUIConfig(BaseModel):
    """Options of the `gui_agent` loop."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(None, description="MiniWoB task of rows that name none (extra_info.task)")
    episode_time_s: float = Field(60.0, gt=0, description="the page's time limit of one episode")
    max_browsers: int = Field(2, ge=1, description="headless browsers open at once in this process")
    max_invalid_actions: int = Field(3, ge=1, description="invalid replies in a row before the episode ends")
    max_elements: int = Field(40, ge=1, description="elements listed to the model per turn")
    modality: Literal["auto", "text", "image"] = Field(
        "auto",
        description="image: screenshots as image_url parts; text: element list only; auto: image if the "
        "chat template takes images",
    )
    screenshots: Literal["inline", "files", "none"] = Field(
        "inline", description="store screenshots in the trajectory (data URLs), as files, or not at all"
    )
    screenshot_dir: str | None = Field(
        None, description="folder of screenshot files (default <output_dir>/screenshots)"
    )


def gui_config(kwargs: dict[str, Any]) -> GUIConfig:
    """Validate the loop's kwargs.

    Raises:
        UserError: an unknown option or a bad value, all problems listed.
    """
    try:
        return GUIConfig.model_validate(kwargs)
    except ValidationError as exc:
        problems = "; ".join(f"agent.kwargs.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        known = ", ".join(GUIConfig.model_fields)
        raise UserError(f"bad gui_agent options: {problems} (options: {known})") from None
