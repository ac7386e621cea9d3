"""The built-in model registry: real config.json files shipped inside the package, looked up by hub id.

All configs live in one JSON-lines file, kvsize/models/registry.jsonl, one model per line:
`{"hub_id": "org/name", "family": "Llama 3.1", "config": {...}}`. Only the hub id and family are read to list
or find a model (a string scan of each line's head); a config is JSON-decoded only for the model asked.
kvsize/models/SOURCES.tsv says where every config was copied from, and weights.json holds published weight
sizes. The registry works offline and without a token, which matters most for gated repositories.

Every line is read through `validate_entry` (the head by `head_entry`, the whole line for the model asked), and
the maintainer tool kvsize/models/add.py checks a new line with the same function before it writes anything, so
an entry it accepts is one every lookup can read. A damaged line is one ConfigError naming registry.jsonl:line.

`suggest` ranks registry ids for a loose name ("qwen3 235b", "llama-3.1-8b", "gpt2"): a pure function used by
the resolve error and by `kvsize models --search`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from kvsize.errors import ConfigError

REGISTRY_FILE = "registry.jsonl"
MAX_REGISTRY_BYTES = 64 * 1024 * 1024  # the file is ~400 KB; refuse anything absurd (kvsize.safe_io)
MAX_WEIGHTS_TABLE_BYTES = 16 * 1024 * 1024
MAX_FAMILY_CHARS = 60
MAX_CONFIG_DEPTH = 32  # real configs nest 3 or 4 levels (text_config.rope_scaling...)
_HEAD = re.compile(r'\{"hub_id": "([^"\\]*)", "family": "([^"\\]*)", ')
# Each half of org/name as the hub's validator takes it (huggingface_hub utils.validate_repo_id: ASCII word
# characters, '-' and '.', beginning and ending with a letter, digit or '_', at most 96 characters).
_ID_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"{_ID_PART}/{_ID_PART}", re.ASCII)
_ID_HINT = "A registry id is the hub's org/name: ASCII letters, digits, '-', '_', '.'; no '--' or '..'."


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


# --- one entry, as every reader and the add tool (kvsize/models/add.py) take it ------------------------------


def _where(number: int) -> str:
    return f"kvsize/models/{REGISTRY_FILE}:{number}"


def _bad(number: int, problem: str) -> ConfigError:
    error = ConfigError(
        f"{_where(number)}: {problem}",
        hint="The built-in registry is damaged: reinstall kvsize, or rewrite the entry with kvsize.models.add.",
    )
    error.line = number
    return error


def _shown(text: str) -> str:
    from kvsize.text import clean

    shown = clean(text)
    return repr(shown[:60] + "..." if len(shown) > 60 else shown)


def hub_id_problem(hub_id: object) -> str | None:
    """Why `hub_id` cannot be a registry id (None when it can): a lookup strips, lower-cases and routes names
    (kvsize.resolve), so only an exact org/name that the hub itself would accept finds its entry again."""
    if not isinstance(hub_id, str):
        return f"the hub id must be a string, got {type(hub_id).__name__}"
    if not _HUB_ID.fullmatch(hub_id) or "--" in hub_id or ".." in hub_id:
        return f"hub id {_shown(hub_id)} is not shaped org/name"
    if hub_id.lower().endswith((".git", ".json")):  # the hub refuses '.git'; '.json' is taken for a file path
        return f"hub id {_shown(hub_id)} ends in {hub_id.rsplit('.', 1)[-1]!r}"
    return None


def family_problem(family: object) -> str | None:
    """Why `family` cannot be a registry family (None when it can)."""
    from kvsize.text import _UNSAFE

    if not isinstance(family, str):
        return f"the family must be a string, got {type(family).__name__}"
    if not family.strip() or family != family.strip():
        return f"family {_shown(family)} is empty or has spaces at its ends"
    if len(family) > MAX_FAMILY_CHARS or '"' in family or "\\" in family or _UNSAFE.search(family):
        return f"family {_shown(family)} must be at most {MAX_FAMILY_CHARS} printable characters without quotes"
    return None


def config_problem(config: object) -> str | None:
    """Why `config` cannot be stored (None when it can): a JSON object of plain JSON values (Infinity and NaN
    included: Mamba2 configs write `"time_step_limit": [0.0, Infinity]`, and json reads them), nested at most
    MAX_CONFIG_DEPTH deep, with no control, bidi or line-separator character in any key or string
    (kvsize.text._UNSAFE)."""
    from kvsize.text import _UNSAFE

    if not isinstance(config, dict):
        return f"the config must be a JSON object, got {type(config).__name__}"
    stack: list[tuple[str, object, int]] = [("config", config, 0)]
    while stack:
        path, value, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            return f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels"
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or _UNSAFE.search(key):
                    return f"{path}: key {_shown(str(key))} is not plain text"
                stack.append((f"{path}.{key}", item, depth + 1))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if _UNSAFE.search(value):
                return f"{path}: {_shown(value)} holds a control, bidi or line-separator character"
        elif value is not None and not isinstance(value, (bool, int, float)):
            return f"{path}: a {type(value).__name__} is not a JSON value"
    return None


def head_entry(line: str, number: int) -> RegistryEntry:
    """The entry a line's head names (hub_id, family: read without decoding the config), checked."""
    head = _HEAD.match(line)
    if head is None:
        raise _bad(number, 'a line must start with {"hub_id": "...", "family": "...", ')
    problem = hub_id_problem(head[1]) or family_problem(head[2])
    if problem:
        raise _bad(number, problem)
    return RegistryEntry(hub_id=head[1], family=head[2], line=number)


def validate_entry(line: str, number: int) -> tuple[RegistryEntry, dict[str, Any]]:
    """One registry.jsonl line read in full, exactly as a lookup reads it: its head, then the whole line as
    JSON holding hub_id, family and config (the same id and family as the head), the config plain data.
    Raises one ConfigError naming registry.jsonl:line."""
    entry = head_entry(line, number)
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5000-digit integer, deep nesting
        raise _bad(number, f"not valid JSON ({' '.join(str(exc).split())[:100]})") from None
    if not isinstance(data, dict) or set(data) != {"hub_id", "family", "config"}:
        raise _bad(number, "a line must hold exactly hub_id, family and config")
    if (data["hub_id"], data["family"]) != (entry.hub_id, entry.family):
        raise _bad(number, "hub_id and family must be written plainly, without escapes")
    problem = config_problem(data["config"])
    if problem:
        raise _bad(number, problem)
    return entry, data["config"]


def read_entries(lines: Sequence[str]) -> dict[str, RegistryEntry]:
    """The entries of registry.jsonl's lines, keyed by lower-cased hub id and sorted; one ConfigError naming
    the line for a bad head or an id given twice (ignoring case: lookups do)."""
    entries: dict[str, RegistryEntry] = {}
    for number, line in enumerate(lines, start=1):
        entry = head_entry(line, number)
        earlier = entries.setdefault(entry.hub_id.lower(), entry)
        if earlier is not entry:
            raise _bad(number, f"hub id {_shown(entry.hub_id)} repeats line {earlier.line} (ids ignore case)")
    return dict(sorted(entries.items()))


def split_lines(text: str) -> tuple[str, ...]:
    """registry.jsonl's lines, split at '\n' only: str.splitlines would also split at U+2028, U+0085 and other
    separators that json.dumps(ensure_ascii=False) leaves inside strings."""
    lines = text.split("\n")
    return tuple(lines[:-1] if lines and lines[-1] == "" else lines)


@lru_cache(maxsize=1)
def _lines() -> tuple[str, ...]:
    from kvsize.safe_io import read_small_text

    path = _models_dir() / REGISTRY_FILE
    return split_lines(read_small_text(path, max_bytes=MAX_REGISTRY_BYTES, what="built-in model registry"))


@lru_cache(maxsize=1)
def registry_entries() -> dict[str, RegistryEntry]:
    """All entries, keyed by lower-cased hub id, sorted."""
    return read_entries(_lines())


ALIASES_FILE = "ALIASES.tsv"


@lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """Lower-cased hub id -> the other id of the same repository (kvsize/models/ALIASES.tsv: the hub renamed
    it and redirects the old id), in both directions."""
    from kvsize.safe_io import read_small_text

    out: dict[str, str] = {}
    for line in read_small_text(_models_dir() / ALIASES_FILE, max_bytes=1024 * 1024, what=ALIASES_FILE).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        old, current = line.split("\t")[:2]
        out[old.lower()] = current
        out[current.lower()] = old
    return out


def find_entry(model_id: str) -> RegistryEntry | None:
    """The entry for a hub id, matched case-insensitively; a renamed repository's other id finds it too."""
    key = model_id.strip().lower()
    entries = registry_entries()
    found = entries.get(key)
    if found is None and key in aliases():
        found = entries.get(aliases()[key].lower())
    return found


def load_registry_config(entry: RegistryEntry) -> dict[str, Any]:
    """A fresh copy of the entry's config (validate_entry: a damaged line is one error naming it)."""
    return validate_entry(_lines()[entry.line - 1], entry.line)[1]


_WEIGHT_COUNTS = ("weights_bytes", "num_parameters")


@lru_cache(maxsize=1)
def registry_weights() -> dict[str, dict[str, Any]]:
    """Published weight sizes of registry models (weights.json), keyed by lower-cased hub id; a value that is
    no size (a string, a negative or zero count) is one ConfigError naming the model."""
    from kvsize.resolve import read_json_file

    path = _models_dir() / "weights.json"
    if not os.path.lexists(path):  # anything else there (a FIFO, a folder) is refused by kvsize.safe_io
        return {}
    table = read_json_file(path, what="published weights table", max_bytes=MAX_WEIGHTS_TABLE_BYTES)
    if not isinstance(table, dict):
        raise ConfigError(f"kvsize/models/weights.json: must hold a JSON object, got {type(table).__name__}")
    checked: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if key.startswith("_"):
            continue
        fields = value if isinstance(value, dict) else {"weights_bytes": 0}
        counts = [fields.get(name) for name in _WEIGHT_COUNTS]
        usable = all(c is None or (type(c) is int and c > 0) for c in counts)
        if not usable or not isinstance(fields.get("weights_dtype"), (str, type(None))):
            raise ConfigError(f"kvsize/models/weights.json: entry {_shown(key)} holds no usable size")
        checked[key.lower()] = value
    return checked


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
