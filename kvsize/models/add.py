"""Maintainer tool: add a real config.json to the built-in registry (kvsize/models/registry.jsonl).

    python -m kvsize.models.add ORG/NAME path/to/config.json \
        --source-repo OWNER/REPO --source-path PATH --source-commit SHA --notes "how it was checked" \
        [--family "Qwen 3"]

Writes the config as one line of registry.jsonl (sorted by hub id, replacing an existing line for that id) and
its provenance as one row of SOURCES.tsv. Not imported by kvsize itself.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

HERE = Path(__file__).parent
REGISTRY = HERE / "registry.jsonl"
SOURCES = HERE / "SOURCES.tsv"
SOURCES_HEADER = "hub_id\tsource_repo\tsource_path\tsource_commit_or_note\tnotes"

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


def registry_line(hub_id: str, family: str, config: dict[str, object]) -> str:
    """One registry.jsonl line: hub_id and family first (kvsize.registry reads them without decoding the rest)."""
    if '"' in hub_id or '"' in family or "\\" in hub_id + family:
        raise ValueError("hub id and family must not contain quotes or backslashes")
    return json.dumps({"hub_id": hub_id, "family": family, "config": config}, ensure_ascii=False)


def write_sorted(path: Path, rows: dict[str, str], header: str | None = None) -> None:
    body = [rows[key] for key in sorted(rows, key=str.lower)]
    path.write_text("\n".join(([header] if header else []) + body) + "\n", encoding="utf-8")


def add(hub_id: str, config: dict[str, object], family: str, source: list[str]) -> None:
    lines = {json.loads(line)["hub_id"]: line for line in REGISTRY.read_text(encoding="utf-8").splitlines() if line}
    lines[hub_id] = registry_line(hub_id, family, config)
    write_sorted(REGISTRY, lines)
    rows = {line.split("\t", 1)[0]: line for line in SOURCES.read_text(encoding="utf-8").splitlines()[1:] if line}
    rows[hub_id] = "\t".join([hub_id, *source])
    write_sorted(SOURCES, rows, SOURCES_HEADER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hub_id")
    parser.add_argument("config", type=Path)
    parser.add_argument("--source-repo", required=True)
    parser.add_argument("--source-path", required=True)
    parser.add_argument("--source-commit", required=True, help="the commit, or why none is known")
    parser.add_argument("--notes", required=True, help="what was checked, and any doubt")
    parser.add_argument("--family", help="defaults to a guess from the hub id (FAMILY_RULES)")
    args = parser.parse_args()
    config = json.loads(args.config.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        parser.error("a config.json holds a JSON object")
    family = args.family or guess_family(args.hub_id)
    add(args.hub_id, config, family, [args.source_repo, args.source_path, args.source_commit, args.notes])
    print(f"added {args.hub_id} ({family}); now add its entry to tests/expected_kv.py and run the registry tests")


if __name__ == "__main__":
    main()
