"""The hf engine's arithmetic, versions and refusals, without torch (the oracle against transformers itself is
tests/test_hf_oracle.py). Expected numbers are worked out by hand beside each assertion."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import ENGINES, get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.hf import (
    HF_RULES,
    RULE_GROUPED_FALCON,
    RULE_LATENT,
    RULE_PER_HEAD,
    HfEngine,
    parse_release,
    resolve_version,
)
from kvsize.errors import UsageError
from kvsize.registry import load_registry_config, registry_entries
from kvsize.spec import ArchSpec, AttentionSpec

BF16 = KvDtype.BF16


def registry(hub_id: str) -> dict[str, Any]:
    return load_registry_config(registry_entries()[hub_id.lower()])


def spec_of(hub_id: str) -> ArchSpec:
    return parse_config(registry(hub_id), source=hub_id)


def hf(version: str | None = None, **options: Any) -> HfEngine:
    engine = get_engine("hf", version, **options)
    assert isinstance(engine, HfEngine)
    return engine


def test_registered_for_engine_all() -> None:
    assert ENGINES["hf"] is HfEngine


@pytest.mark.parametrize(
    ("given", "rule"),
    [
        ("5.25.0", RULE_GROUPED_FALCON),
        ("5.25.0.dev0", RULE_GROUPED_FALCON),
        ("6.0", RULE_GROUPED_FALCON),
        ("5.24.0", RULE_LATENT),
        ("5.24.9", RULE_LATENT),
        ("5.15.0", RULE_LATENT),
        ("v5.15.0.dev0", RULE_LATENT),
        ("5.14.2", RULE_PER_HEAD),
        ("4.57.6", RULE_PER_HEAD),
        ("4.45", RULE_PER_HEAD),
        (RULE_GROUPED_FALCON, RULE_GROUPED_FALCON),
        (RULE_LATENT, RULE_LATENT),
        (RULE_PER_HEAD, RULE_PER_HEAD),
        ("5.15+", RULE_LATENT),  # the name kvsize printed before 5.25 split the rule keeps its meaning
    ],
)
def test_engine_version_release_numbers_and_rules(given: str, rule: str) -> None:
    assert hf(given).version == rule


def test_rule_table_switches() -> None:
    # One switch changes at each boundary: latent MLA at 5.15, Falcon's grouped K/V at 5.25.
    assert (HF_RULES[RULE_PER_HEAD].mla_latent, HF_RULES[RULE_PER_HEAD].falcon_grouped_kv) == (False, False)
    assert (HF_RULES[RULE_LATENT].mla_latent, HF_RULES[RULE_LATENT].falcon_grouped_kv) == (True, False)
    assert (HF_RULES[RULE_GROUPED_FALCON].mla_latent, HF_RULES[RULE_GROUPED_FALCON].falcon_grouped_kv) == (True, True)
    assert [r.since for r in HF_RULES.values()] == [(5, 25), (5, 15), (0, 0)]


def test_a_release_newer_than_read_says_so() -> None:
    assert hf("5.25.0").release_note is None and hf("5.24.0").release_note is None
    note = hf("5.26.0").release_note or ""
    assert "newer than the newest release kvsize has read (5.25)" in note and "5.25+" in note


def test_bad_engine_version() -> None:
    with pytest.raises(UsageError, match="not modelled for hf"):
        hf("latest-ish")
    assert parse_release("five") is None


def test_default_version_follows_the_installed_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kvsize.engines.hf.installed_transformers_version", lambda: "4.57.6")
    assert resolve_version(None) == (RULE_PER_HEAD, "4.57.6", "installed")
    monkeypatch.setattr("kvsize.engines.hf.installed_transformers_version", lambda: None)
    rule, release, source = resolve_version(None)
    assert (rule, release) == (RULE_GROUPED_FALCON, None) and "not installed" in source


def test_llama_full_layers() -> None:
    # 32 layers x 8 KV heads x (128 + 128) x 2 B = 131072 B/token; 8192 tokens x 3 requests = 3 GiB.
    est = hf().estimate(spec_of("meta-llama/Llama-3.1-8B"), ctx=8192, batch=3, kv_dtype=BF16)
    assert est.kv_bytes_per_token == 131072
    assert est.kv_cache_bytes == 3 * 8192 * 131072


def test_gemma2_sliding_layers_keep_window_minus_one() -> None:
    # gemma-2-2b: 26 layers alternate sliding (W 4096) and full; 4 KV heads x 256 x 2 (K,V) x 2 B = 4096 B/token.
    # ctx 8192: 13 full layers x 8192 + 13 sliding x 4095 tokens.
    spec = spec_of("google/gemma-2-2b-it")
    per_layer = hf().layer_bytes(spec, ctx=8192, batch=1, kv_dtype=BF16)
    assert sorted(set(per_layer)) == [4095 * 4096, 8192 * 4096]
    assert sum(per_layer) == 13 * 4096 * (8192 + 4095)
    # Below the window every layer holds the whole context.
    assert set(hf().layer_bytes(spec, ctx=100, batch=1, kv_dtype=BF16)) == {100 * 4096}


def test_static_cache_rules() -> None:
    # StaticCache(max_cache_len=10000): full layers 10000 slots, sliding min(W=4096, 10000) = 4096.
    spec = spec_of("google/gemma-2-2b-it")
    engine = hf(cache_implementation="static", max_cache_len=10000)
    assert sorted(set(engine.layer_bytes(spec, ctx=8192, batch=1, kv_dtype=BF16))) == [4096 * 4096, 10000 * 4096]
    with pytest.raises(UsageError, match="cannot hold ctx"):
        engine.layer_bytes(spec, ctx=20000, batch=1, kv_dtype=BF16)
    with pytest.raises(UsageError, match="not modelled"):
        hf(cache_implementation="offloaded")


def test_deepseek_v3_latent_since_5_15() -> None:
    # (kv_lora_rank 512 + qk_rope 64) x 2 B = 1152 B per token per layer; 61 layers.
    est = hf("5.24.0").estimate(spec_of("deepseek-ai/DeepSeek-V3"), ctx=4096, batch=1, kv_dtype=BF16)
    assert est.kv_bytes_per_token == 61 * 1152


def test_deepseek_v3_per_head_before_5_15() -> None:
    # 128 heads x ((128 nope + 64 rope) + 128 v) x 2 B = 81920 B per token per layer (71x the latent).
    raw = registry("deepseek-ai/DeepSeek-V3")
    est = hf("4.57.6", raw_config=raw).estimate(spec_of("deepseek-ai/DeepSeek-V3"), ctx=4096, batch=1, kv_dtype=BF16)
    assert est.kv_bytes_per_token == 61 * 81920
    assert est.engine_version == RULE_PER_HEAD and "4.57.6" in est.rule


def test_per_head_mla_needs_the_head_split() -> None:
    spec = spec_of("deepseek-ai/DeepSeek-V3")
    mla = spec.layers[0].attention
    assert mla is not None
    if getattr(mla, "qk_nope_head_dim", None) is not None:  # the spec carries the split: no raw config needed
        assert hf("4.57.6").estimate(spec, ctx=16, batch=1, kv_dtype=BF16).kv_bytes_per_token == 61 * 81920
        return
    with pytest.raises(UnsupportedArchitecture, match="qk_nope_head_dim"):
        hf("4.57.6").estimate(spec, ctx=16, batch=1, kv_dtype=BF16)


def test_qwen3_next_states() -> None:
    # Linear layers: conv (2 x 16 x 128 + 32 x 128 = 8192 channels) x 4 (full kernel) x 2 B = 65536 B, recurrent
    # 32 x 128 x 128 x 4 B (fp32) = 2097152 B; 36 of 48 layers are linear. Full layers: 2 KV heads x 256 x 2 x 2 B.
    est = hf().estimate(spec_of("Qwen/Qwen3-Next-80B-A3B-Thinking"), ctx=1000, batch=2, kv_dtype=BF16)
    assert est.state_bytes_per_request == 36 * (65536 + 2097152)
    assert est.kv_bytes_per_token == 12 * 2 * 256 * 2 * 2
    assert est.kv_cache_bytes == 2 * (36 * (65536 + 2097152) + 1000 * 12 * 2048)


def test_mamba2_state_keeps_the_full_kernel_in_fp32() -> None:
    # Mamba-Codestral: conv (8192 + 2 x 8 x 128 = 10240 ch) x 4 x 2 B = 81920; SSM 128 x 64 x 128 x 4 B = 4194304.
    est = hf().estimate(spec_of("mistralai/Mamba-Codestral-7B-v0.1"), ctx=10, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 64 * (81920 + 4194304)


def test_fp8_quantized_cache() -> None:
    # QuantizedCache(backend="fp8"): 1 B per element -> Llama-3.1-8B 32 x 8 x 256 = 65536 B/token.
    est = hf().estimate(spec_of("meta-llama/Llama-3.1-8B"), ctx=100, batch=1, kv_dtype=KvDtype.FP8_E4M3)
    assert est.kv_bytes_per_token == 65536
    with pytest.raises(UnsupportedArchitecture, match="all full attention"):
        hf().estimate(spec_of("google/gemma-2-2b-it"), ctx=100, batch=1, kv_dtype=KvDtype.FP8_E4M3)


@pytest.mark.parametrize("dtype", [KvDtype.NVFP4, KvDtype.INT8, KvDtype.Q8_0])
def test_formats_transformers_has_no_cache_for(dtype: KvDtype) -> None:
    with pytest.raises(UsageError, match="transformers has no"):
        hf().estimate(spec_of("meta-llama/Llama-3.1-8B"), ctx=100, batch=1, kv_dtype=dtype)


def test_tensor_parallel_is_refused() -> None:
    with pytest.raises(UsageError, match="--tp 2 is not modelled"):
        hf().estimate(spec_of("meta-llama/Llama-3.1-8B"), ctx=100, batch=1, kv_dtype=BF16, tp=2)


@pytest.mark.parametrize("hub_id", ["microsoft/phi-1_5", "nvidia/Llama-3_3-Nemotron-Super-49B-v1"])
def test_remote_code_only_models(hub_id: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match="no built-in class"):
        hf().check_supported(spec_of(hub_id))


FALCON_NEW = {
    "model_type": "falcon",
    "new_decoder_architecture": True,
    "num_kv_heads": 8,
    "num_attention_heads": 64,
    "hidden_size": 4096,
    "num_hidden_layers": 2,
}
FALCON_OLD_MHA = {**FALCON_NEW, "new_decoder_architecture": False, "multi_query": False, "num_kv_heads": 64}
FALCON_OLD_MQA = {**FALCON_NEW, "new_decoder_architecture": False, "multi_query": True, "num_kv_heads": 64}


@pytest.mark.parametrize(
    ("release", "config", "heads"),
    [
        # New decoder architecture: through 5.24 `_split_heads` broadcasts K and V to all 64 query heads before
        # the cache; 5.25 caches the 8 KV heads and repeats them inside attention (modeling_falcon.py).
        ("5.24.0", FALCON_NEW, 64),
        ("4.57.6", FALCON_NEW, 64),
        ("5.25.0", FALCON_NEW, 8),
        # The old layout: multi-head caches every head, multi_query one, in every release.
        ("5.24.0", FALCON_OLD_MHA, 64),
        ("5.25.0", FALCON_OLD_MHA, 64),
        ("5.24.0", FALCON_OLD_MQA, 1),
        ("5.25.0", FALCON_OLD_MQA, 1),
    ],
)
def test_falcon_cached_heads_by_release(release: str, config: dict[str, object], heads: int) -> None:
    # head_dim 4096 / 64 = 64: 2 layers x heads x (64 + 64) x 2 B per token.
    engine = hf(release, raw_config=config)
    est = engine.estimate(parse_config(config), ctx=1, batch=1, kv_dtype=BF16)
    assert est.kv_bytes_per_token == 2 * heads * 128 * 2
    # The note says so only where the cache holds more heads than the config's KV heads.
    assert any("one K/V head per query head" in n for n in est.notes) == (heads > config["num_kv_heads"])


def test_falcon_without_its_raw_config_reads_the_kv_heads() -> None:
    # The plain CLI passes no raw config: 8 KV heads (not 1) mean the new architecture.
    spec = parse_config(FALCON_NEW)
    assert hf("5.24.0").estimate(spec, ctx=1, batch=1, kv_dtype=BF16).kv_bytes_per_token == 2 * 64 * 128 * 2
    assert hf("5.25.0").estimate(spec, ctx=1, batch=1, kv_dtype=BF16).kv_bytes_per_token == 2 * 8 * 128 * 2


def test_head_count_quirks_mpt() -> None:
    # MPT: all 16 heads of 2048 / 16 = 128: 2 layers x 16 x (128 + 128) x 2 B = 16384 B/token.
    mpt = {"model_type": "mpt", "n_heads": 16, "d_model": 2048, "n_layers": 2, "attn_config": {"kv_n_heads": 8}}
    assert hf().estimate(parse_config(mpt), ctx=1, batch=1, kv_dtype=BF16).kv_bytes_per_token == 16384


def test_cross_attention_layers_hold_the_encoder_tokens() -> None:
    # Llama-3.2-90B-Vision: 20 cross layers x 8 KV heads x 256 x 2 B x 7 image tokens, per request.
    spec = parse_config(registry("meta-llama/Llama-3.2-90B-Vision-Instruct"), encoder_tokens=7)
    est = hf().estimate(spec, ctx=10, batch=1, kv_dtype=BF16)
    assert est.state_bytes_per_request == 20 * 8 * 256 * 2 * 7
    assert isinstance(spec.layers[3].attention, AttentionSpec)


def test_cli_engine_hf_json() -> None:
    result = CliRunner().invoke(app, ["meta-llama/Llama-3.1-8B", "--engine", "hf", "--ctx", "8k", "--json"])
    assert result.exit_code == 0, result.stderr
    (scenario,) = json.loads(result.stdout)["scenarios"]
    assert scenario["engine"] == "hf" and scenario["kv_cache_bytes"] == 8192 * 131072


def test_cli_engine_all_stays_light() -> None:
    """`--engine all` constructs the hf engine, whose version lookup reads metadata without importing transformers."""
    probe = (
        "import sys, json; from kvsize.cli import main; sys.argv = ['kvsize', 'meta-llama/Llama-3.1-8B', "
        "'--engine', 'all', '--ctx', '8k', '--json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "sys.stderr.write(json.dumps([code, [m for m in ('torch', 'transformers') if m in sys.modules]]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    code, heavy = json.loads(done.stderr.strip().splitlines()[-1])
    assert code in (0, None) and heavy == []
    engines = [s["engine"] for s in json.loads(done.stdout)["scenarios"]]
    assert "hf" in engines
