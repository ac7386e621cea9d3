"""The built-in registry: every config parses to the numbers in expected_kv.py (hand-worked, or derived by its
independent calculator); its sources and refusals are recorded; loose names find their models."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from expected_kv import EXPECTED, HAND_WORKED, derive
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.errors import EnvironmentProblem, ModelNotFound
from kvsize.registry import (
    find_entry,
    load_registry_config,
    name_tokens,
    rank_names,
    registry_entries,
    registry_weights,
    select_entries,
    suggest,
)
from kvsize.resolve import load_model_config
from kvsize.spec import ArchSpec, AttentionKind

MODELS = Path(__file__).resolve().parents[1] / "kvsize" / "models"
REGISTRY_FILE = MODELS / "registry.jsonl"
REFUSED_CONFIGS = Path(__file__).resolve().parent / "data" / "registry_refused.jsonl"

PER_TOKEN = {AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA}


def _spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config(load_registry_config(entry), source=hub_id)


def test_registry_holds_every_expected_model() -> None:
    assert {e.hub_id for e in registry_entries().values()} == set(EXPECTED)


@pytest.mark.parametrize("hub_id", sorted(EXPECTED))
def test_layers_match_hand_computed(hub_id: str) -> None:
    spec, expected = _spec(hub_id), EXPECTED[hub_id]
    assert dict(Counter(layer.kind for layer in spec.layers)) == expected.kinds
    assert spec.attention_label == expected.attention
    attn = [layer.attention for layer in spec.layers if layer.attention is not None]
    assert sum(a.elements_per_token for a in attn if a.kind in PER_TOKEN) == expected.elements_per_token
    assert sum(a.own_indexer_dim for a in attn) == expected.indexer_elements_per_token
    windows = Counter(f"{a.kind.value}:{a.window}" for a in attn if a.window is not None)
    assert dict(windows) == expected.windows
    states = [layer.state for layer in spec.layers if layer.state is not None]
    assert sum(s.conv_elements + s.ssm_elements for s in states) == expected.state_elements_per_request
    # cross-attention: Mllama's cross layers (attention kind CROSS) and encoder-decoder layers' second attention
    cross = [a for a in attn if a.kind is AttentionKind.CROSS] + [x.cross for x in spec.layers if x.cross is not None]
    assert sum(a.elements_per_token for a in cross) == expected.cross_elements_per_token
    assert max((a.encoder_tokens or 0 for a in cross), default=0) == expected.encoder_tokens
    assert spec.max_context == expected.max_context


@pytest.mark.parametrize("hub_id", sorted(EXPECTED))
def test_formula_bytes_follow_from_elements(hub_id: str) -> None:
    """At bf16 and a context inside every window, bytes = 2 x (per-token elements x ctx + fixed elements)."""
    spec, expected = _spec(hub_id), EXPECTED[hub_id]
    if any(a.kind is AttentionKind.COMPRESSED for a in (x.attention for x in spec.layers) if a is not None):
        # DeepSeek-V4's compressed layers hold floor(T / ratio) entries and a partial buffer besides their window:
        # not linear in T below it; hand-worked at several lengths in tests/test_deepseek_v4.py
        return
    ctx = 100  # below the smallest window of any registry model (gpt-oss: 128)
    est = get_engine("formula").estimate(spec, ctx=ctx, batch=3, kv_dtype=KvDtype.BF16)
    per_token = expected.elements_per_token + expected.indexer_elements_per_token  # indexer keys at bf16 too
    assert est.kv_bytes_per_token == 2 * per_token
    fixed = expected.state_elements_per_request + expected.cross_elements_per_token * expected.encoder_tokens
    assert est.kv_cache_bytes == 3 * 2 * (per_token * ctx + fixed)


# --- the independent calculator agrees with the hand-worked entries it covers --------------------------------


def _raw_configs() -> dict[str, dict[str, object]]:
    lines = REGISTRY_FILE.read_text(encoding="utf-8").splitlines()
    return {entry["hub_id"]: entry["config"] for entry in map(json.loads, lines)}


def test_bulk_calculator_reproduces_the_hand_worked_entries() -> None:
    raw = _raw_configs()
    covered = 0
    for hub_id, expected in HAND_WORKED.items():
        try:
            derived = derive(raw[hub_id])
        except AssertionError:  # a family the calculator does not read (fields left to class defaults)
            continue
        if derived is not None:
            covered += 1
            assert derived == expected, hub_id
    assert covered >= 40


# --- the registry file, its sources and its refusals ------------------------------------------------------


def _tsv(name: str) -> list[list[str]]:
    return [line.split("\t") for line in (MODELS / name).read_text(encoding="utf-8").splitlines()[1:] if line]


def test_registry_lines_are_sorted_unique_and_name_a_family() -> None:
    ids = [entry["hub_id"] for entry in map(json.loads, REGISTRY_FILE.read_text(encoding="utf-8").splitlines())]
    assert ids == sorted(ids, key=str.lower)
    assert len({i.lower() for i in ids}) == len(ids)
    assert all(e.family for e in registry_entries().values())
    assert len(ids) == len(registry_entries())


def test_every_model_has_exactly_one_source_row() -> None:
    rows = _tsv("SOURCES.tsv")
    assert sorted(r[0] for r in rows) == sorted(e.hub_id for e in registry_entries().values())
    for row in rows:
        assert len(row) == 5 and all(cell.strip() for cell in row), row  # repo, path, commit (or why not), notes


def test_refused_models_are_out_of_the_registry_with_a_reason() -> None:
    """Found, real, but sized wrongly by kvsize today: kept in tests/data for when the parser learns them."""
    kept = REFUSED_CONFIGS.read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["hub_id"] for line in kept) == sorted(row[0] for row in _tsv("REFUSED.tsv"))
    for hub_id, *_, reason in _tsv("REFUSED.tsv"):
        assert find_entry(hub_id) is None, hub_id
        assert len(reason) > 40, hub_id


def test_published_weights_name_registry_models() -> None:
    weights = registry_weights()
    assert weights and all(find_entry(hub_id) is not None for hub_id in weights)


def test_a_config_is_decoded_only_for_the_model_asked() -> None:
    entry = find_entry("qwen/qwen3-8b")
    assert entry is not None and entry.hub_id == "Qwen/Qwen3-8B" and entry.family == "Qwen 3"
    assert load_registry_config(entry)["num_hidden_layers"] == 36
    assert entry.file_name == f"registry.jsonl:{entry.line}"


# --- loose names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Llama-3.1-8B", ["llama", "3", "1", "8b"]),
        ("qwen3 235b", ["qwen", "3", "235b"]),
        ("gpt2", ["gpt", "2"]),
        ("Qwen/Qwen3-235B-A22B", ["qwen", "qwen", "3", "235b", "a", "22b"]),
        ("  ", []),
    ],
)
def test_name_tokens(text: str, tokens: list[str]) -> None:
    assert name_tokens(text) == tokens


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("gpt2", "openai-community/gpt2"),
        ("qwen3 8b", "Qwen/Qwen3-8B"),
        ("qwen3 235b", "Qwen/Qwen3-235B-A22B"),
        ("QWEN3_235B", "Qwen/Qwen3-235B-A22B"),
        ("mixtral 8x22b", "mistralai/Mixtral-8x22B-v0.1"),
        ("mistrall 7b", "mistralai/Mistral-7B-v0.1"),  # a typo: the closest known word (no extra words)
        ("whisper small", "openai/whisper-small"),
    ],
)
def test_loose_names_rank_the_model_first(query: str, first: str) -> None:
    ranked = suggest(query)
    assert ranked[0] == first
    assert 1 <= len(ranked) <= 5


def test_loose_name_ranking_is_pure_and_prefers_fewer_extra_words() -> None:
    ids = ["Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "google/gemma-2-9b"]
    assert rank_names("qwen3 8b", ids) == ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-14B"]
    assert rank_names("qwen3 8b", ids, best_only=True) == ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8"]
    assert rank_names("xyzzy plugh", ids) == []
    assert rank_names("", ids) == []


def test_select_entries_searches_and_filters_by_family() -> None:
    found = [e.hub_id for e in select_entries(search="qwen3 235b")]
    assert found[0] == "Qwen/Qwen3-235B-A22B" and all("235B" in h for h in found)
    gemma = select_entries(family="gemma 2")
    assert gemma and all(e.family == "Gemma 2" for e in gemma)
    assert select_entries(search="llama 70b", family="llama 3.3")[0].hub_id == "meta-llama/Llama-3.3-70B-Instruct"


# --- where a person meets it: the resolve error and `kvsize models` ---------------------------------------


def _no_hub(*args: object, **kwargs: object) -> Path:
    raise AssertionError("the hub must not be asked for a name that is not a hub id")


@pytest.mark.parametrize(("ref", "first"), [("qwen3 235b", "Qwen/Qwen3-235B-A22B"), ("gpt2", "openai-community/gpt2")])
def test_a_loose_name_fails_at_once_with_candidates(ref: str, first: str) -> None:
    with pytest.raises(ModelNotFound) as caught:
        load_model_config(ref, fetch=_no_hub)
    assert caught.value.hint is not None and f"Did you mean: {first}," in caught.value.hint


def test_a_hub_id_the_hub_cannot_give_gets_candidates_in_its_hint() -> None:
    def unreachable(*args: object, **kwargs: object) -> Path:
        raise EnvironmentProblem("cannot reach the Hugging Face Hub", hint="Connect to the network.")

    with pytest.raises(EnvironmentProblem) as caught:  # same class, so the same exit code (3)
        load_model_config("meta-llama/Llama-3.1-8b-instruct-awq", fetch=unreachable)
    assert caught.value.hint is not None
    assert caught.value.hint.startswith("Connect to the network. Did you mean: meta-llama/Llama-3.1-8B-Instruct")


def test_an_unknown_name_with_no_candidate_keeps_the_hub_error() -> None:
    def missing(*args: object, **kwargs: object) -> Path:
        raise ModelNotFound("'zz/qq' is not on the hub")

    with pytest.raises(ModelNotFound, match="not on the hub") as caught:
        load_model_config("zz/qq", fetch=missing)
    assert caught.value.hint is None


def test_cli_models_search_family_and_attention() -> None:
    runner = CliRunner()
    found = runner.invoke(app, ["models", "--search", "qwen3 235b", "--json"])
    assert found.exit_code == 0, found.output
    ids = [item["hub_id"] for item in json.loads(found.stdout)["models"]]
    assert ids[0] == "Qwen/Qwen3-235B-A22B"
    mla = runner.invoke(app, ["models", "--family", "deepseek", "--attention", "MLA", "--json"])
    items = json.loads(mla.stdout)["models"]
    assert items and all("MLA" in item["summary"] and "DeepSeek" in item["family"] for item in items)
    sliding = json.loads(runner.invoke(app, ["models", "--attention", "sliding", "--json"]).stdout)["models"]
    assert {"google/gemma-2-9b", "openai/gpt-oss-20b"} <= {item["hub_id"] for item in sliding}
    none = runner.invoke(app, ["models", "--search", "xyzzy plugh"])
    assert none.exit_code == 1 and "No built-in model matches" in none.stderr
    bad = runner.invoke(app, ["models", "--attention", "diagonal"])
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: --attention 'diagonal' is not an attention kind")
