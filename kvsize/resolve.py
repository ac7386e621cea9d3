"""Find a model's config.json: a local file or folder, then the built-in registry, then the hub."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from kvsize.errors import ConfigError, EnvironmentProblem, KvsizeError, ModelNotFound

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # real config.json files are under 100 KiB; refuse anything absurd

ConfigFetcher = Callable[..., Path]


class LoadedConfig(msgspec.Struct, frozen=True):
    """A config.json and where it came from."""

    model: str
    """The name to print: the hub id as spelled by the registry or the user, or the path given."""
    raw: dict[str, Any]
    source: Literal["local", "registry", "hub"]
    location: str
    """The file read (a local path, the registry file, or the HF cache file with the revision)."""
    folder: Path | None = None
    """A local folder that may hold the weights (safetensors index or files)."""
    hub_id: str | None = None

    @property
    def source_label(self) -> str:
        return f"{self.source}: {self.location}"


class AmbiguousKey(ValueError):
    """A JSON object gives one key twice with different values."""


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice with different values: json.loads (and so transformers and the
    engines) keeps the last without a word, and a reviewer reading the file may see the first. The same value
    twice is harmless and kept."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            from kvsize.text import clean, shown

            raise AmbiguousKey(
                f"'{clean(key)[:60]}' is given twice with different values ({shown(out[key])}, then {shown(value)})"
            )
        out[key] = value
    return out


def read_json_file(path: Path, *, what: str = "config.json", max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """A JSON file's content, refusing anything but a regular file under `max_bytes` (kvsize.safe_io) and
    reporting syntax errors on one line."""
    from kvsize.safe_io import read_small_text

    text = read_small_text(path, max_bytes=max_bytes, what=what)
    try:
        return json.loads(text, object_pairs_hook=_one_value_per_key)
    except AmbiguousKey as exc:
        raise ConfigError(f"{path}: {exc}", hint="Keep one of the two; the engines read the last.") from None
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4300-digit limit
        if not isinstance(exc, json.JSONDecodeError):
            raise ConfigError(f"{path}: not a usable config.json ({exc})") from None
        raise ConfigError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint=f"Pass the model's {what}.",
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply") from None


def printable(text: str) -> str:
    """A path as text that any output can carry: the bytes of a non-UTF-8 file name (kept by Python as lone
    surrogates, which JSON encoders and UTF-8 streams refuse) become backslash escapes such as \\xff."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _present(path: Path) -> bool:
    """False only when the file is certainly absent; a permission error is left for the read to report."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


# A model page's address, as users copy it from the browser: https://huggingface.co/org/name, with /tree/REV,
# /blob/REV/FILE or /resolve/REV/FILE after it (hf.co is the hub's short domain).
_HUB_URL = re.compile(
    r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?!datasets/|spaces/)"
    r"(?P<id>[^/?#\s]+/[^/?#\s]+)(?:/(?:tree|blob|resolve)/(?P<rev>[^/?#\s]+)(?:/[^?#\s]*)?)?/?(?:[?#]\S*)?$",
    re.IGNORECASE,
)


def hub_url_id(ref: str) -> tuple[str, str | None] | None:
    """(hub id, revision or None) of a hub page URL; None when `ref` is not one. `main` is no revision."""
    match = _HUB_URL.match(ref.strip())
    if match is None:
        return None
    revision = match.group("rev")
    return match.group("id"), (None if revision in (None, "main") else revision)


def _looks_like_path(ref: str) -> bool:
    return ref.startswith((".", "/", "~", "\\")) or ref.endswith(".json") or ref.count("/") > 1 or "\\" in ref


def _as_object(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a config.json must hold a JSON object, got {type(data).__name__}")
    return data


def did_you_mean(candidates: list[str]) -> str:
    """The hint for a name not found: registry ids to paste, and where to look further."""
    return f"Did you mean: {', '.join(candidates)}? ('kvsize models --search TEXT' searches the built-in models.)"


def with_suggestions(exc: KvsizeError, candidates: list[str]) -> KvsizeError:
    """The same error (same class, so the same exit code) with the registry's candidates added to its hint."""
    hint = f"{exc.hint} {did_you_mean(candidates)}" if exc.hint else did_you_mean(candidates)
    return type(exc)(str(exc), hint=hint)


def load_model_config(
    ref: str, *, revision: str | None = None, token: str | None = None, fetch: ConfigFetcher | None = None
) -> LoadedConfig:
    """Resolve `ref` in order: local config.json or folder; built-in registry (unless a revision is asked
    for); the hub through huggingface_hub (`fetch` replaces it in tests)."""
    from kvsize import registry

    ref = ref.strip()
    if revision is not None and not revision.strip():
        raise ConfigError("empty --revision", hint="Give a branch, tag or commit, or leave --revision out.")
    if revision is not None:
        from kvsize.units import parse_revision

        parse_revision(revision)  # git check-ref-format rules, before any cache path or URL is built from it
    if not ref:
        raise ConfigError("empty model reference", hint="Give a hub id (org/name) or a path to a config.json.")
    from_url = hub_url_id(ref)
    if from_url is not None and not _present(Path(ref)):
        ref, url_revision = from_url
        if url_revision is not None and revision is not None and url_revision != revision:
            raise ConfigError(
                f"the URL names revision {url_revision} and --revision says {revision}",
                hint="Give one of them.",
            )
        revision = revision or url_revision
        if revision is not None:
            from kvsize.units import parse_revision

            parse_revision(revision)
    try:
        path = Path(ref).expanduser()
        exists = path.exists()
    except (OSError, RuntimeError) as exc:  # a name too long for the file system, '~unknown-user/...'
        raise ConfigError(
            f"{ref}: not a usable path ({type(exc).__name__})",
            hint="Give a hub id like org/name, or an existing config.json.",
        ) from None
    if exists:
        config_file = path / "config.json" if path.is_dir() else path
        if path.is_dir() and not _present(config_file):
            raise ConfigError(
                f"{path}: folder has no config.json", hint="Point at the model's config.json or its folder."
            )
        raw = _as_object(read_json_file(config_file), printable(str(config_file)))
        return LoadedConfig(
            model=printable(ref),
            raw=raw,
            source="local",
            location=printable(str(config_file)),
            folder=config_file.parent,
        )
    if _looks_like_path(ref):
        raise ConfigError(
            f"{ref}: no such file or folder",
            hint="Check the path, or give a hub id like org/name ('kvsize models' lists the built-in ones).",
        )
    entry = registry.find_entry(ref) if revision is None else None
    if entry is not None:
        raw = registry.load_registry_config(entry)
        # A renamed repository's other id (ALIASES.tsv) is printed as typed: it names the same repository.
        name = entry.hub_id if entry.hub_id.lower() == ref.lower() else registry.aliases()[entry.hub_id.lower()]
        return LoadedConfig(
            model=name,
            raw=raw,
            source="registry",
            location=f"kvsize/models/{entry.file_name}",
            hub_id=name,
        )
    if fetch is None:
        from kvsize.hub import fetch_config_from_hub

        fetch = fetch_config_from_hub
    if "/" not in ref or any(c.isspace() for c in ref):
        # Not a hub id (org/name): answer at once with the registry's closest names rather than ask the hub.
        candidates = registry.suggest(ref)
        if candidates:
            raise ModelNotFound(f"'{ref}' is not a built-in model or a hub id", hint=did_you_mean(candidates))
    try:
        config_file = fetch(ref, revision=revision, token=token)
    except (ModelNotFound, EnvironmentProblem) as exc:
        candidates = registry.suggest(ref)
        if not candidates:
            raise
        raise with_suggestions(exc, candidates) from None
    raw = _as_object(read_json_file(config_file), f"{ref} config.json")
    return LoadedConfig(
        model=ref,
        raw=raw,
        source="hub",
        location=f"{ref}@{revision or 'main'} ({config_file})",
        folder=config_file.parent,
        hub_id=ref,
    )
