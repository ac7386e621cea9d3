"""Names people type (issue 19): a renamed repository's current and old hub ids both resolve offline
(kvsize/models/ALIASES.tsv), and a hub page URL is read as its id (kvsize/resolve.py hub_url_id)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvsize.registry import aliases, find_entry, registry_entries
from kvsize.resolve import hub_url_id, load_model_config


@pytest.mark.parametrize(
    ("typed", "entry"),
    [
        ("meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B"),  # today's name of the registry's entry
        ("meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B"),
        ("META-LLAMA/llama-3.1-405b", "meta-llama/Meta-Llama-3.1-405B"),  # the hub matches ids case-insensitively
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"),  # the other way round
        ("meta-llama/CodeLlama-7b-hf", "codellama/CodeLlama-7b-hf"),
        ("CohereLabs/aya-23-8B", "CohereForAI/aya-23-8B"),
        ("zai-org/chatglm3-6b", "THUDM/chatglm3-6b"),
    ],
)
def test_both_ids_of_a_renamed_repository_resolve(typed: str, entry: str) -> None:
    found = find_entry(typed)
    assert found is not None and found.hub_id == entry
    loaded = load_model_config(typed)
    assert loaded.source == "registry"
    assert loaded.model.lower() == typed.lower()  # printed as typed: the same repository


def test_alias_table_is_consistent() -> None:
    table = aliases()
    for key, other in table.items():
        assert table[other.lower()].lower() == key  # each pair both ways, no id in two pairs
    entries = registry_entries()
    for key in table:
        # every pair reaches a registry entry from either side
        assert key in entries or table[key].lower() in entries, key


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("https://huggingface.co/Qwen/Qwen3-8B", ("Qwen/Qwen3-8B", None)),
        ("https://huggingface.co/Qwen/Qwen3-8B/", ("Qwen/Qwen3-8B", None)),
        ("https://huggingface.co/Qwen/Qwen3-8B/tree/main", ("Qwen/Qwen3-8B", None)),
        ("https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json", ("Qwen/Qwen3-8B", None)),
        ("https://huggingface.co/Qwen/Qwen3-8B/resolve/abc123/config.json", ("Qwen/Qwen3-8B", "abc123")),
        ("https://huggingface.co/Qwen/Qwen3-8B/tree/v1.0", ("Qwen/Qwen3-8B", "v1.0")),
        ("http://www.huggingface.co/Qwen/Qwen3-8B?library=transformers", ("Qwen/Qwen3-8B", None)),
        ("hf.co/Qwen/Qwen3-8B", ("Qwen/Qwen3-8B", None)),
        ("huggingface.co/Qwen/Qwen3-8B#model-card", ("Qwen/Qwen3-8B", None)),
        ("https://huggingface.co/datasets/org/name", None),  # a dataset, not a model
        ("https://huggingface.co/spaces/org/name", None),
        ("https://example.com/Qwen/Qwen3-8B", None),
        ("https://huggingface.co/Qwen", None),  # an organisation page
        ("Qwen/Qwen3-8B", None),
    ],
)
def test_hub_url_to_id(url: str, parsed: tuple[str, str | None] | None) -> None:
    assert hub_url_id(url) == parsed


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
    )


def test_cli_url_and_current_id_offline() -> None:
    url = run("https://huggingface.co/Qwen/Qwen3-8B/tree/main", "--ctx", "8k")
    assert url.returncode == 0 and url.stdout.startswith("Qwen/Qwen3-8B  (registry")
    current = run("meta-llama/Llama-3.1-70B", "--ctx", "8k", "--json")
    assert current.returncode == 0, current.stderr
    # Llama 3.1 70B: 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 327,680 B per token.
    assert '"kv_bytes_per_token": 327680' in current.stdout
    clash = run("https://huggingface.co/Qwen/Qwen3-8B/tree/v1", "--revision", "v2")
    assert clash.returncode == 2 and "revision v1" in clash.stderr and clash.stderr.count("\n") == 1


def test_models_search_typed_without_quotes_is_the_quoted_search() -> None:
    # `kvsize models qwen3 235b` and `kvsize models --search qwen3 235b` (the shell splits the words) list what
    # `--search "qwen3 235b"` lists
    import json as _json

    from typer.testing import CliRunner as _Runner

    from kvsize.cli import app as _app

    def listed(*args: str) -> list[str]:
        result = _Runner().invoke(_app, ["models", *args, "--json"])
        assert result.exit_code == 0, result.output
        return [m["hub_id"] for m in _json.loads(result.stdout)["models"]]

    quoted = listed("--search", "qwen3 235b")
    assert quoted and quoted[0] == "Qwen/Qwen3-235B-A22B"
    assert listed("qwen3", "235b") == quoted
    assert listed("--search", "qwen3", "235b") == quoted
    assert listed("--search", "gemma 4") == listed("gemma", "4") != listed()
