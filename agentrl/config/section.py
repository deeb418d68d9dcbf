"""The base of every configuration section: unknown keys are errors, assignments are validated."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
