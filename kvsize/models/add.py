"""Maintainer tool: add a real config.json to the built-in registry (kvsize/models/registry.jsonl).

    python -m kvsize.models.add ORG/NAME path/to/config.json \
        --source-repo OWNER/REPO --source-path PATH --source-commit SHA --notes "how it was checked" \
        [--family "Qwen 3"]

Writes the config as one line of registry.jsonl (sorted by hub id, replacing an existing line for that id) and
its provenance as one row of SOURCES.tsv. The new line is checked as every lookup will read it (kvsize.registry
validate_entry, kvsize's config parser, the parameter count); a refusal is one `Error:` line, exit 2, and
writes nothing. --models-dir names another folder (tests use a copy). Not imported by kvsize itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from kvsize.errors import ConfigError, EnvironmentProblem, KvsizeError, UsageError
from kvsize.registry import (
    MAX_REGISTRY_BYTES,
    config_problem,
    family_problem,
    hub_id_problem,
    read_entries,
    split_lines,
    validate_entry,
)
from kvsize.resolve import read_json_file
from kvsize.safe_io import read_small_text
from kvsize.text import _UNSAFE, clean

HERE = Path(__file__).parent
REGISTRY = HERE / "registry.jsonl"
SOURCES = HERE / "SOURCES.tsv"
SOURCES_HEADER = "hub_id\tsource_repo\tsource_path\tsource_commit_or_note\tnotes"
SOURCE_FIELDS = ("source-repo", "source-path", "source-commit", "notes")
_HINT = "Give the hub's own org/name, a plain family name, and the config.json as the hub serves it."

# First match wins: (pattern on the lower-cased hub id, family label).
FAMILY_RULES: list[tuple[str, str]] = [
    (r"nemotron-h|nemotron-3", "Nemotron-H"),
    (r"nemotron", "Nemotron"),
    (r"codellama", "CodeLlama"),
    (r"llama-2|llama2", "Llama 2"),
    (r"llama-3\.1|llama-3_1|meta-llama-3\.1", "Llama 3.1"),
    (r"llama-3\.2", "Llama 3.2"),
    (r"llama-3\.3", "Llama 3.3"),
    (r"llama-4", "Llama 4"),
    (r"meta-llama-3|llama-3", "Llama 3"),
    (r"tinyllama", "TinyLlama"),
    (r"llava", "LLaVA"),
    (r"mixtral", "Mixtral"),
    (r"mamba-codestral|codestral", "Codestral"),
    (r"devstral", "Devstral"),
    (r"ministral", "Ministral"),
    (r"pixtral", "Pixtral"),
    (r"mistral", "Mistral"),
    (r"qwq", "QwQ"),
    (r"r1-distill", "DeepSeek-R1 distill"),
    (r"qwen1\.5", "Qwen 1.5"),
    (r"qwen2\.5-vl|qwen2-vl|qwen3-vl", "Qwen-VL"),
    (r"qwen2\.5", "Qwen 2.5"),
    (r"qwen2", "Qwen 2"),
    (r"qwen3\.[5-9]", "Qwen 3.5"),
    (r"qwen3-next", "Qwen3-Next"),
    (r"qwen3-coder", "Qwen-Coder"),
    (r"qwen3", "Qwen 3"),
    (r"deepseek-v2|deepseek-moe|deepseek-llm|deepseek-coder", "DeepSeek V2 and earlier"),
    (r"deepseek-v4", "DeepSeek V4"),
    (r"deepseek", "DeepSeek V3"),
    (r"gemma-4", "Gemma 4"),
    (r"gemma-3n", "Gemma 3n"),
    (r"gemma-3", "Gemma 3"),
    (r"gemma-2", "Gemma 2"),
    (r"paligemma", "PaliGemma"),
    (r"gemma", "Gemma"),
    (r"phi-4|phi-3|phi-2|phi-1|phi3|phi4", "Phi"),
    (r"gpt-oss", "gpt-oss"),
    (r"glm", "GLM"),
    (r"kimi", "Kimi"),
    (r"minimax", "MiniMax"),
    (r"falcon-h1", "Falcon-H1"),
    (r"falcon-mamba", "Falcon-Mamba"),
    (r"falcon", "Falcon"),
    (r"jamba", "Jamba"),
    (r"zamba", "Zamba2"),
    (r"mamba", "Mamba"),
    (r"granite", "Granite"),
    (r"olmo", "OLMo"),
    (r"smollm", "SmolLM"),
    (r"yi-", "Yi"),
    (r"internlm", "InternLM"),
    (r"baichuan", "Baichuan"),
    (r"aya|command-r|c4ai", "Command-R / Aya"),
    (r"exaone", "EXAONE"),
    (r"starcoder|santacoder", "StarCoder"),
    (r"whisper", "Whisper"),
    (r"t5", "T5"),
    (r"bart", "BART"),
    (r"openai-gpt|gpt2|gpt-j|redpajama", "GPT-2 / GPT-J / NeoX"),
    (r"mimo", "MiMo"),
    (r"lfm2", "LFM2"),
    (r"cogvlm", "CogVLM"),
    (r"pythia", "Pythia"),
    (r"bloom", "BLOOM"),
    (r"facebook/opt-", "OPT"),
    (r"allam", "ALLaM"),
]


def guess_family(hub_id: str) -> str:
    lowered = hub_id.lower()
    for pattern, family in FAMILY_RULES:
        if re.search(pattern, lowered):
            return family
    return hub_id.split("/", 1)[0]


def registry_line(hub_id: str, family: str, config: dict[str, Any]) -> str:
    """One registry.jsonl line: hub_id and family first (kvsize.registry reads them without decoding the rest).
    Raises ConfigError for a value no lookup could read back (kvsize.registry's checks)."""
    problem = hub_id_problem(hub_id) or family_problem(family) or config_problem(config)
    if problem:
        raise ConfigError(problem, hint=_HINT)
    try:
        return json.dumps({"hub_id": hub_id, "family": family, "config": config}, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:  # an integer past Python's 4300-digit limit
        raise ConfigError(f"the config cannot be written as JSON ({' '.join(str(exc).split())[:100]})") from None


def _source_row(hub_id: str, source: list[str]) -> str:
    for name, cell in zip(SOURCE_FIELDS, source, strict=True):
        if not cell.strip() or _UNSAFE.search(cell):  # a tab or a line break would shift SOURCES.tsv's columns
            raise ConfigError(f"--{name} must be one line of printable text", hint="Give the provenance plainly.")
    return "\t".join([hub_id, *source])


def plan_add(
    hub_id: str,
    family: str,
    config: dict[str, Any],
    source: list[str],
    registry_text: str,
    sources_text: str,
    origin: str = "the config",
) -> tuple[str, str]:
    """The new texts of registry.jsonl and SOURCES.tsv with the entry added, or replacing the entry of the same
    id. The whole new registry is read back as lookups read it (kvsize.registry.read_entries and
    validate_entry on every line) and the new config goes through kvsize's parser and parameter count, as a
    registry run does; any refusal raises KvsizeError before anything is written. `origin` names the config
    in the parser's errors."""
    from kvsize.config import parse_config
    from kvsize.params import estimate_parameters

    new_line = registry_line(hub_id, family, config)
    row = _source_row(hub_id, source)
    lines = split_lines(registry_text)
    existing = read_entries(lines)  # the file as it stands must be sound: it is rewritten whole
    same = existing.get(hub_id.lower())
    if same is not None and same.hub_id != hub_id:
        raise ConfigError(
            f"'{hub_id}' differs only in case from the registry's '{same.hub_id}' (line {same.line})",
            hint="Lookups ignore case: use the registry's spelling to replace that entry.",
        )
    by_id = {entry.hub_id: lines[entry.line - 1] for entry in existing.values()}
    by_id[hub_id] = new_line
    ordered = [by_id[key] for key in sorted(by_id, key=str.lower)]
    read_entries(ordered)
    for number, line in enumerate(ordered, start=1):
        entry, stored = validate_entry(line, number)
        if entry.hub_id == hub_id:
            parse_config(stored, source=f"{origin} (as {entry.file_name})")
            estimate_parameters(stored)
    header, *body = sources_text.split("\n")
    if header != SOURCES_HEADER:
        raise ConfigError(f"{SOURCES.name}: the first line must be the header {SOURCES_HEADER!r}")
    rows = {line.split("\t", 1)[0].lower(): line for line in body if line}
    rows[hub_id.lower()] = row
    sources = "\n".join([header, *(rows[key] for key in sorted(rows))]) + "\n"
    return "\n".join(ordered) + "\n", sources


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder: a failure leaves the old file."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot write {path} ({exc.strerror or type(exc).__name__})") from None


def add(
    hub_id: str, config: dict[str, Any], family: str, source: list[str], models_dir: Path = HERE, origin: str = ""
) -> None:
    """Add (or replace) the entry in `models_dir`'s registry.jsonl and SOURCES.tsv; nothing is written when
    any check refuses it."""
    registry, sources = models_dir / REGISTRY.name, models_dir / SOURCES.name
    registry_text, sources_text = plan_add(
        hub_id,
        family,
        config,
        source,
        read_small_text(registry, max_bytes=MAX_REGISTRY_BYTES, what="model registry"),
        read_small_text(sources, max_bytes=MAX_REGISTRY_BYTES, what="registry sources table"),
        origin or "the config",
    )
    _replace(registry, registry_text)
    _replace(sources, sources_text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one Error: line and exit 2, as kvsize's own commands
        raise UsageError(message, hint="python -m kvsize.models.add --help shows the usage.")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hub_id")
    parser.add_argument("config", type=Path)
    parser.add_argument("--source-repo", required=True)
    parser.add_argument("--source-path", required=True)
    parser.add_argument("--source-commit", required=True, help="the commit, or why none is known")
    parser.add_argument("--notes", required=True, help="what was checked, and any doubt")
    parser.add_argument("--family", help="defaults to a guess from the hub id (FAMILY_RULES)")
    parser.add_argument("--models-dir", type=Path, default=HERE, help="the registry's folder (default: kvsize's)")
    try:
        args = parser.parse_args(argv)
        config = read_json_file(args.config)
        if not isinstance(config, dict):
            raise ConfigError(f"{args.config}: a config.json holds a JSON object, got {type(config).__name__}")
        family = args.family if args.family is not None else guess_family(args.hub_id)
        source = [args.source_repo, args.source_path, args.source_commit, args.notes]
        add(args.hub_id, config, family, source, args.models_dir, str(args.config))
    except KvsizeError as exc:
        hint = f" {exc.hint}" if exc.hint else ""
        print(clean(f"Error: {exc}{'' if str(exc).endswith(('.', ')')) else '.'}{hint}"), file=sys.stderr)
        return int(exc.exit_code)
    print(f"added {args.hub_id} ({family}); now add its entry to tests/expected_kv.py and run the registry tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
