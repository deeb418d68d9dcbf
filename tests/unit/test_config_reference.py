"""The configuration reference (docs/reference/configuration.md) lists every key of the schema, as generated."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from agentrl.config.reference import config_keys, reference
from agentrl.config.schema import AgentRLConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"


def test_the_reference_in_docs_is_the_generated_one():
    assert DOC.read_text() == reference(), "regenerate: python -m agentrl.config.reference > " + str(DOC)


def test_every_key_of_the_schema_is_listed_with_its_description():
    listed = set(re.findall(r"^\| `([^`]+)` \|", DOC.read_text(), flags=re.M))
    assert listed == set(_schema_keys(AgentRLConfig))
    assert all(info.description for _, info in config_keys())  # every key explained


def _schema_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key, walked independently of `config_keys` (sections, the items of lists of sections, and the
    values of mappings of named sections)."""
    keys = []
    for name, info in model.model_fields.items():
        key, annotation = prefix + (info.alias or name), info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _schema_keys(annotation, key + ".")
            continue
        keys.append(key)
        item = (getattr(annotation, "__args__", None) or [None])[0]
        if getattr(annotation, "__origin__", None) is list and isinstance(item, type) and issubclass(item, BaseModel):
            keys += _schema_keys(item, key + "[].")
        value = (getattr(annotation, "__args__", None) or [None, None])[-1]
        if getattr(annotation, "__origin__", None) is dict and isinstance(value, type) and issubclass(value, BaseModel):
            keys += _schema_keys(value, key + ".<name>.")
    return keys
