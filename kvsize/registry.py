"""The built-in model registry: real config.json files shipped inside the package, looked up by hub id.

All configs live in one JSON-lines file, kvsize/models/registry.jsonl, one model per line:
`{"hub_id": "org/name", "family": "Llama 3.1", "config": {...}}`. Only the hub id and family are read to list
or find a model (a string scan of each line's head); a config is JSON-decoded only for the model asked.
kvsize/models/SOURCES.tsv says where every config was copied from, and weights.json holds published weight
sizes. The registry works offline and without a token, which matters most for gated repositories.

`suggest` ranks registry ids for a loose name ("qwen3 235b", "llama-3.1-8b", "gpt2"): a pure function used by
the resolve error and by `kvsize models --search`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

REGISTRY_FILE = "registry.jsonl"
_HEAD = re.compile(r'\{"hub_id": "([^"]+)", "family": "([^"]*)", ')


class RegistryEntry(msgspec.Struct, frozen=True):
    hub_id: str
    """The Hugging Face repo id, as the hub spells it."""
    family: str
    """The model family, for `kvsize models --family` ("Llama 3.1", "Qwen 3", "Gemma 2", ...)."""
    line: int
    """1-based line of the entry in kvsize/models/registry.jsonl."""

    @property
    def file_name(self) -> str:
        """Where the config sits, relative to kvsize/models/ (printed as the config's location)."""
        return f"{REGISTRY_FILE}:{self.line}"

    @property
    def name(self) -> str:
        """The repo name without its organisation."""
        return self.hub_id.rsplit("/", 1)[-1]


def _models_dir() -> Path:
    # Beside this module (an installed wheel and a checkout alike); importlib.resources costs ~10 ms to import.
    return Path(__file__).with_name("models")


@lru_cache(maxsize=1)
def _lines() -> tuple[str, ...]:
    return tuple((_models_dir() / REGISTRY_FILE).read_text(encoding="utf-8").splitlines())


@lru_cache(maxsize=1)
def registry_entries() -> dict[str, RegistryEntry]:
    """All entries, keyed by lower-cased hub id, sorted."""
    entries = {}
    for number, line in enumerate(_lines(), start=1):
        head = _HEAD.match(line)
        if head is None:
            raise ValueError(f"kvsize/models/{REGISTRY_FILE}:{number}: a line must start with hub_id and family")
        entries[head[1].lower()] = RegistryEntry(hub_id=head[1], family=head[2], line=number)
    return dict(sorted(entries.items()))


def find_entry(model_id: str) -> RegistryEntry | None:
    """The entry for a hub id, matched case-insensitively."""
    return registry_entries().get(model_id.strip().lower())


def load_registry_config(entry: RegistryEntry) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_lines()[entry.line - 1])["config"]
    return data


@lru_cache(maxsize=1)
def registry_weights() -> dict[str, dict[str, Any]]:
    """Published weight sizes of registry models (weights.json), keyed by lower-cased hub id."""
    path = _models_dir() / "weights.json"
    if not path.is_file():
        return {}
    table: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return {key.lower(): value for key, value in table.items() if not key.startswith("_")}


# --- loose names ------------------------------------------------------------------------------------------

_SEPARATORS = re.compile(r"[\s/\\_.:,+-]+")
_ALPHA_THEN_DIGIT = re.compile(r"(?<=[a-z])(?=\d)")


def name_tokens(text: str) -> list[str]:
    """Lower-case tokens of a model name: split at separators (space - _ . / :) and where letters turn into
    digits, so "Llama-3.1-8B" -> [llama, 3, 1, 8b], "qwen3 235b" -> [qwen, 3, 235b], "gpt2" -> [gpt, 2].
    A size such as "8b" or "235B" stays one token."""
    tokens: list[str] = []
    for part in _SEPARATORS.split(text.strip().lower()):
        tokens.extend(t for t in _ALPHA_THEN_DIGIT.split(part) if t)
    return tokens


def rank_names(query: str, hub_ids: list[str], *, limit: int | None = 5, best_only: bool = False) -> list[str]:
    """`hub_ids` ranked by how well they match a loose `query`, best first; ids matching too little are left out.

    An id matches when at least half of the query's tokens are among its tokens (organisation included, so
    "meta llama 8b" works). Ties go to the id whose repo name has the fewest tokens the query did not ask for
    ("Qwen3-8B" before "Qwen3-8B-FP8"), then to the closer spelling (difflib). When no id matches a token,
    difflib's close matches over whole names are the fallback. Misspelt words are first replaced by the closest
    registry token ("mistrall" -> "mistral"). With `best_only`, only the ids matching the most query tokens."""
    from difflib import SequenceMatcher, get_close_matches

    vocabulary = {t for hub_id in hub_ids for t in name_tokens(hub_id)}
    wanted = {_closest(t, vocabulary) for t in name_tokens(query)}
    if not wanted:
        return []
    squashed = "".join(name_tokens(query))
    scored = []
    for hub_id in hub_ids:
        name = hub_id.rsplit("/", 1)[-1]
        tokens = set(name_tokens(hub_id))
        hits = len(wanted & tokens)
        if 2 * hits < len(wanted):
            continue
        extra = len(set(name_tokens(name)) - wanted)
        closeness = SequenceMatcher(None, squashed, "".join(name_tokens(name))).ratio()
        scored.append((-hits, extra, -closeness, hub_id.lower(), hub_id))
    scored.sort()
    if best_only and scored:
        scored = [item for item in scored if item[0] == scored[0][0]]
    ranked = [item[-1] for item in scored]
    if not ranked:
        by_name = {"".join(name_tokens(h.rsplit("/", 1)[-1])): h for h in sorted(hub_ids, key=str.lower)}
        ranked = [by_name[n] for n in get_close_matches(squashed, list(by_name), n=limit or 10, cutoff=0.6)]
    return ranked if limit is None else ranked[:limit]


def _closest(token: str, vocabulary: set[str]) -> str:
    """A misspelt word ("mistrall", "lama") replaced by the closest known token; sizes and numbers kept."""
    if token in vocabulary or len(token) < 4 or token[0].isdigit():
        return token
    from difflib import get_close_matches

    close = get_close_matches(token, sorted(vocabulary), n=1, cutoff=0.8)
    return close[0] if close else token


def suggest(query: str, *, limit: int | None = 5, best_only: bool = False) -> list[str]:
    """Registry hub ids for a loose or partial name, best first (see `rank_names`)."""
    return rank_names(query, [e.hub_id for e in registry_entries().values()], limit=limit, best_only=best_only)


def select_entries(*, search: str | None = None, family: str | None = None) -> list[RegistryEntry]:
    """Registry entries for `kvsize models`: all (sorted by hub id), or those a loose `search` matches (best
    first), keeping only families whose name contains `family` (case-insensitive)."""
    entries = registry_entries()
    chosen = list(entries.values())
    if search is not None:
        chosen = [entries[hub_id.lower()] for hub_id in suggest(search, limit=None, best_only=True)]
    if family is not None:
        wanted = " ".join(name_tokens(family))
        chosen = [e for e in chosen if wanted in " ".join(name_tokens(e.family))]
    return chosen
