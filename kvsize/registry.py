"""The built-in model registry: real config.json files shipped inside the package, looked up by hub id.

Files live in kvsize/models/<org>--<name>.json (SOURCES.tsv there says where each came from), so that the
tool works offline and without a token for gated repositories.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any


@dataclass(frozen=True)
class RegistryEntry:
    hub_id: str
    """The Hugging Face repo id, as the hub spells it."""
    file_name: str


def _models_dir() -> Traversable:
    return files("kvsize") / "models"


@lru_cache(maxsize=1)
def registry_entries() -> dict[str, RegistryEntry]:
    """All entries, keyed by lower-cased hub id."""
    entries = {}
    for item in _models_dir().iterdir():
        if item.name.endswith(".json") and "--" in item.name:
            hub_id = item.name.removesuffix(".json").replace("--", "/", 1)
            entries[hub_id.lower()] = RegistryEntry(hub_id=hub_id, file_name=item.name)
    return dict(sorted(entries.items()))


def find_entry(model_id: str) -> RegistryEntry | None:
    """The entry for a hub id, matched case-insensitively."""
    return registry_entries().get(model_id.strip().lower())


def load_registry_config(entry: RegistryEntry) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_models_dir() / entry.file_name).read_text(encoding="utf-8"))
    return data


@lru_cache(maxsize=1)
def registry_weights() -> dict[str, dict[str, Any]]:
    """Published weight sizes of registry models (weights.json), keyed by lower-cased hub id."""
    path = _models_dir() / "weights.json"
    if not path.is_file():
        return {}
    table: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return {key.lower(): value for key, value in table.items() if not key.startswith("_")}
