"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5 / 5.1; issue 19): every MLA layer also caches its indexer's
key of index_head_dim per token. The formula and hf engines count it (transformers 5.24 cache_utils.py
DynamicIndexedLayer); vLLM and SGLang already did (fp8 keys + one fp32 scale per 128). GLM-5.2's shared indexers
(indexer_types "shared") keep no key in transformers and in vLLM 0.24+, one on every layer in SGLang and older vLLM.

Every expected value is worked by hand from the configs in kvsize/models/registry.jsonl (and
tests/data/registry_refused.jsonl) and the sources named beside it; the oracle test builds tiny models with
transformers on the CPU and compares the cache they hold.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

import kvsize
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.hf import HfEngine

REFUSED = Path(__file__).parent / "data" / "registry_refused.jsonl"
REGISTRY = Path(__file__).parent.parent / "kvsize" / "models" / "registry.jsonl"
# the registry's configs (DSA, MiniMax-M3, Nemotron-3 Ultra joined it once sized) and the ones still refused
CONFIGS = {
    e["hub_id"]: e["config"]
    for path in (REGISTRY, REFUSED)
    for e in map(json.loads, path.read_text(encoding="utf-8").splitlines())
}
V32 = CONFIGS["deepseek-ai/DeepSeek-V3.2"]
GLM5 = CONFIGS["zai-org/GLM-5"]


def _bytes_per_token(config: dict[str, Any], engine: str, kv_dtype: str = "bf16") -> int:
    return kvsize.estimate(config, ctx=4096, engine=engine, kv_dtype=kv_dtype).scenarios[0].kv_bytes_per_token


# DeepSeek-V3.2: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128.
#   formula / hf (bf16): (512 + 64 + 128) x 2 B = 1,408 B per layer; x 61 = 85,888 B per token
#   (the latent alone, the near-twin reading, would be 576 x 2 x 61 = 70,272).
# GLM-5 (glm_moe_dsa): 78 layers, the same widths: 1,408 x 78 = 109,824 B per token (latent only: 89,856).
# vLLM 0.33 / SGLang 0.5.23 (bf16): latent 576 x 2 = 1,152 + indexer 128 fp8 + 128 / 128 x 4 B scale = 132:
#   1,284 B per layer (vllm models/deepseek_v2.py Indexer.__init__ DeepseekV32IndexerCache head_dim
#   index_head_dim + index_head_dim // 128 * 4, uint8; sglang NSATokenToKVPool index_k_with_scale_buffer).
#   DeepSeek-V3.2: 1,284 x 61 = 78,324; GLM-5: 1,284 x 78 = 100,152.
@pytest.mark.parametrize(
    ("config", "engine", "expected"),
    [
        (V32, "formula", 61 * (512 + 64 + 128) * 2),
        (V32, "hf", 85_888),
        (GLM5, "formula", 109_824),
        (GLM5, "hf", 78 * 1408),
        (V32, "vllm", 78_324),
        (V32, "sglang", 61 * (1152 + 132)),
        (GLM5, "sglang", 100_152),
    ],
)
def test_dsa_bytes_per_token(config: dict[str, Any], engine: str, expected: int) -> None:
    assert _bytes_per_token(config, engine) == expected


def test_dsa_formula_fp8_counts_the_indexer_key_at_one_byte() -> None:
    # (512 + 64 + 128) x 1 B x 61 = 42,944
    assert _bytes_per_token(V32, "formula", "fp8") == 42_944


def test_hf_refuses_a_quantized_cache_for_indexed_layers() -> None:
    # cache_utils.py QuantizedCache.__init__: layer types other than full_attention (here indexed_attention) raise.
    with pytest.raises(UnsupportedArchitecture, match="indexed_attention"):
        kvsize.estimate(V32, ctx=4096, engine="hf", kv_dtype="fp8_e4m3")


def test_hf_refuses_the_per_head_rule_for_dsa() -> None:
    with pytest.raises(UnsupportedArchitecture, match="DynamicIndexedLayer"):
        kvsize.estimate(V32, ctx=4096, engine="hf", engine_version="4.57.6", kv_dtype="bf16")


# --- GLM-5.2: indexers shared between layers ---------------------------------------------------------------------

# zai-org/GLM-5.2: 78 layers, the GLM-5 widths, index_topk_freq 4, index_skip_topk_offset 3, indexer_types listing
# 21 "full" and 57 "shared". transformers 5.24 GlmMoeDsaConfig.__post_init__ derives the same list: layer i is full
# where max(i - 3 + 1, 0) % 4 == 0, i.e. layers 0, 1, 2 and 6, 10, ..., 74 (18 more): 21.
# A shared layer (GlmMoeDsaAttention: indexer None) keeps the latent alone; vLLM 0.24+ deepseek_v2.py builds no
# Indexer there (`not _skip_topk`); vLLM 0.16-0.23 and SGLang (NSATokenToKVPool: index_k buffers for every layer)
# keep a key on all 78.
#   formula / hf (bf16): 78 x 576 x 2 + 21 x 128 x 2 = 89,856 + 5,376 = 95,232 B per token
#   vLLM 0.24+ (bf16): 78 x 1,152 + 21 x 132 = 89,856 + 2,772 = 92,628
#   vLLM 0.23 / SGLang (bf16): 78 x (1,152 + 132) = 100,152 (GLM-5's figure)
#   vLLM 0.33 on a B200 (auto -> fp8_e4m3): 78 x 576 + 21 x (128 + 4) = 44,928 + 2,772 = 47,700
GLM52 = CONFIGS["zai-org/GLM-5.2"]


def test_glm5_2_full_layers_follow_the_schedule() -> None:
    spec = parse_config(GLM52)
    full = [layer.index for layer in spec.layers if layer.attention and not layer.attention.index_shared]
    assert full == [0, 1, 2, *range(6, 78, 4)] and len(full) == 21
    assert spec.shared_indexer_layers == 57


@pytest.mark.parametrize(
    ("engine", "version", "expected"),
    [
        ("formula", None, 95_232),
        ("hf", None, 95_232),
        ("vllm", "0.33.0", 92_628),
        ("vllm", "0.24.0", 92_628),
        ("vllm", "0.23.0", 100_152),
        ("vllm", "0.16.0", 100_152),
        ("sglang", None, 100_152),
    ],
)
def test_glm5_2_bytes_per_token(engine: str, version: str | None, expected: int) -> None:
    result = kvsize.estimate(GLM52, ctx=4096, engine=engine, engine_version=version, kv_dtype="bf16")
    assert result.scenarios[0].kv_bytes_per_token == expected
    keyed_everywhere = expected == 100_152
    assert any("share a top-k" in note for note in result.notes) is keyed_everywhere


def test_glm5_2_on_a_b200_keys_only_its_full_layers() -> None:
    on_b200 = kvsize.estimate(GLM52, ctx=4096, engine="vllm", kv_dtype="auto", gpu="b200")
    assert on_b200.scenarios[0].kv_bytes_per_token == 47_700


def test_glm5_2_without_its_list_derives_it_from_the_schedule() -> None:
    bare = {k: v for k, v in GLM52.items() if k != "indexer_types"}
    assert parse_config(bare).layers == parse_config(GLM52).layers
    # A pattern string overrides the schedule (GlmMoeDsaConfig: "F" full, "S" shared): 3 full layers of 78.
    patterned = {**bare, "index_topk_pattern": "FSF" + "S" * 74 + "F"}
    assert parse_config(patterned).shared_indexer_layers == 75


@pytest.mark.parametrize(
    "change",
    [
        {"index_skip_topk_offset": None},  # the default offset 2 keys layers 0, 1, 5, 9, ...: not the list
        {"index_topk_freq": 2},
        {"indexer_types": ["full"] * 78},
    ],
    ids=["offset removed", "freq changed", "list all full"],
)
def test_glm5_2_list_and_schedule_must_agree(change: dict[str, Any]) -> None:
    # vLLM derives the shared layers from the schedule and ignores the list; transformers reads the list.
    with pytest.raises(kvsize.errors.ConfigError, match="disagrees"):
        parse_config({**GLM52, **change})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"indexer_types": ["full"] + ["maybe"] * 77}, "indexer_types"),
        ({"index_topk_pattern": "FS"}, "index_topk_pattern"),
        ({"indexer_types": None, "index_skip_topk_offset": 0}, "indexer_types"),  # layer 0 shared: nothing to reuse
    ],
)
def test_glm5_2_bad_schedules_are_refused(change: dict[str, Any], field: str) -> None:
    with pytest.raises(kvsize.errors.ConfigError, match=field):
        parse_config({**GLM52, **change})


def test_shared_indexers_on_another_dsa_type_are_refused() -> None:
    # transformers' DeepseekV32Config reads no indexer schedule (vLLM would): the guard names the fields.
    v32 = {**V32, "index_topk_freq": 4, "indexer_types": GLM52["indexer_types"][:61]}
    with pytest.raises(kvsize.errors.ConfigError, match="index_topk_freq"):
        parse_config(v32)


def test_indexed_attention_layer_types_read_as_dsa() -> None:
    # transformers 5.24 writes layer_types ["indexed_attention"] * n into every saved DSA config.
    saved = {**GLM5, "layer_types": ["indexed_attention"] * 78}
    assert parse_config(saved).layers == parse_config(GLM5).layers
    # the same layer type without MLA is not understood
    with pytest.raises(kvsize.errors.ConfigError, match="layer_types"):
        parse_config({**CONFIGS["zai-org/GLM-5"], "kv_lora_rank": None, "layer_types": ["indexed_attention"] * 78})


# --- oracle: the cache transformers 5.24 holds -----------------------------------------------------------------

B, T = 2, 12
TINY_DSA: dict[str, Any] = {
    "num_hidden_layers": 2,
    "first_k_dense_replace": 1,
    "hidden_size": 64,
    "intermediate_size": 64,
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "index_head_dim": 24,  # != kv_lora_rank + qk_rope_head_dim: the indexer's width shows apart
    "index_n_heads": 2,
    "index_topk": 4,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "dtype": "bfloat16",
}
ORACLE = {
    "tiny deepseek_v32": {**TINY_DSA, "model_type": "deepseek_v32"},
    "tiny glm_moe_dsa": {**TINY_DSA, "model_type": "glm_moe_dsa", "head_dim": 8},
}
# 5 layers, index_topk_freq 2 (default offset 2): full where max(i - 1, 0) % 2 == 0: layers 0, 1, 3; 2 and 4 shared.
#   full: 2 x 12 x (16 + 8 + 24) x 2 B = 2,304 B; shared: 2 x 12 x (16 + 8) x 2 B = 1,152 B (no indexer_keys)
SHARED = {**TINY_DSA, "model_type": "glm_moe_dsa", "head_dim": 8, "num_hidden_layers": 5, "index_topk_freq": 2}
SHARED_HELD = [2304, 2304, 1152, 2304, 1152]


def _held(cache: Any) -> list[int]:
    """numel x element_size of every tensor of every cache layer (0-dim bookkeeping left out)."""
    return [
        sum(t.numel() * t.element_size() for t in vars(layer).values() if isinstance(t, torch.Tensor) and t.dim())
        for layer in cache.layers
    ]


def _meta_run(raw: dict[str, Any], *, tokens: int = 40, image_text: bool = False) -> tuple[Any, list[int]]:
    """(the cache transformers returns, kvsize's hf layer bytes) for `raw` built on the meta device (shapes and
    dtypes are the real ones, no memory is used) after one forward of `tokens` tokens for B requests."""
    auto = transformers.AutoModelForImageTextToText if image_text else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw)), dtype=torch.bfloat16)
    with torch.no_grad():
        out = model.eval()(input_ids=torch.zeros((B, tokens), dtype=torch.long, device="meta"), use_cache=True)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    return cache, engine.layer_bytes(parse_config(raw), ctx=tokens, batch=B, kv_dtype=KvDtype.BF16)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(ORACLE))
def test_transformers_cache_matches_hf_engine(name: str) -> None:
    raw = ORACLE[name]
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        out = model(input_ids=torch.zeros((B, T), dtype=torch.long), use_cache=True)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    predicted = engine.layer_bytes(parse_config(raw), ctx=T, batch=B, kv_dtype=KvDtype.BF16)
    # by hand: 2 x 12 x (16 + 8 + 24) x 2 B = 2,304 B per layer
    assert _held(cache) == predicted == [2304, 2304], name


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("listed", [False, True], ids=["schedule", "indexer_types"])
def test_transformers_keeps_no_indexer_key_on_shared_layers(listed: bool) -> None:
    raw = {**SHARED, **({"indexer_types": ["full", "full", "shared", "full", "shared"]} if listed else {})}
    config = CONFIG_MAPPING["glm_moe_dsa"].from_dict(copy.deepcopy(raw))
    assert config.indexer_types == ["full", "full", "shared", "full", "shared"]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        out = model(input_ids=torch.zeros((B, T), dtype=torch.long), use_cache=True)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    assert _held(cache) == engine.layer_bytes(parse_config(raw), ctx=T, batch=B, kv_dtype=KvDtype.BF16) == SHARED_HELD


def test_vllm_glm5_auto_is_fp8_on_sm10x_only() -> None:
    # vllm 0.33 models/config.py GlmMoeDsaForCausalLM.verify_and_update_config: auto -> fp8_e4m3 on sm_10x, so a
    # B200 stores 78 x (576 x 1 B latent + 128 x 1 B indexer key + 4 B scale) = 78 x 708 = 55,224 B per token.
    on_b200 = kvsize.estimate(GLM5, ctx=4096, engine="vllm", kv_dtype="auto", gpu="b200")
    assert on_b200.scenarios[0].kv_dtype is KvDtype.FP8_E4M3
    assert on_b200.scenarios[0].kv_bytes_per_token == 78 * (576 + 128 + 4) == 55_224
    assert any("auto -> fp8_e4m3" in note for note in on_b200.notes)
    # Hopper keeps bf16: 100,152 B per token as above; DeepSeek-V3.2 (not glm_moe_dsa) keeps its own rule.
    assert (
        kvsize.estimate(GLM5, ctx=4096, engine="vllm", kv_dtype="auto", gpu="h100").scenarios[0].kv_bytes_per_token
        == 100_152
    )
    kvsize.estimate(V32, ctx=4096, engine="vllm", kv_dtype="auto", gpu="b200")


# Nemotron-3 Ultra: no num_hidden_layers; transformers 5.24 NemotronHConfig.num_hidden_layers = len(layers_block_type)
# = 108 (48 mamba, 48 moe, 12 attention). Attention: 12 x 2 kv heads x (128 + 128) x 2 B = 12,288 B per token.
# Mamba-2: conv channels 256 x 64 + 2 x 8 x 128 = 18,432; SSM 256 x 64 x 128 = 2,097,152 elements.
#   formula (bf16, kernel - 1): (18,432 x 3 + 2,097,152) x 2 B x 48 = 206,635,008 B per request
#   hf (full kernel in bf16, SSM fp32): (18,432 x 4 x 2 + 2,097,152 x 4) x 48 = 409,731,072 B
ULTRA = CONFIGS["nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"]


@pytest.mark.parametrize(("engine", "state"), [("formula", 206_635_008), ("hf", 409_731_072)])
def test_nemotron3_ultra_counts_layers_from_layers_block_type(engine: str, state: int) -> None:
    assert len(parse_config(ULTRA).layers) == 108
    scenario = kvsize.estimate(ULTRA, ctx=4096, engine=engine, kv_dtype="bf16").scenarios[0]
    assert (scenario.kv_bytes_per_token, scenario.state_bytes_per_request) == (12_288, state)


# --- which releases serve GLM-5 at all, and vLLM's auto dtype on sm_10x ----------------------------------------


def _glm5() -> Any:
    return parse_config(CONFIGS["zai-org/GLM-5"])


def test_glm5_needs_vllm_016_and_sglang_059() -> None:
    # vllm model_executor/models/registry.py lists GlmMoeDsaForCausalLM from 0.16.0 (not in 0.14.1); SGLang has
    # its class (srt/models/glm4_moe.py) from 0.5.9 (none in 0.5.8).
    spec = _glm5()
    with pytest.raises(UnsupportedArchitecture, match="added in 0.16.0"):
        get_engine("vllm", "0.14.1").check_supported(spec)
    get_engine("vllm", "0.16.0").check_supported(spec)
    with pytest.raises(UnsupportedArchitecture, match="added in 0.5.9"):
        get_engine("sglang", "0.5.8").check_supported(spec)
    get_engine("sglang", "0.5.9").check_supported(spec)


def test_glm5_auto_is_fp8_on_sm100_from_vllm_032() -> None:
    # models/config.py GlmMoeDsaForCausalLM.verify_and_update_config@0.32.0: auto -> fp8_e4m3 when
    # is_device_capability_family(100); 0.31.0 has no such branch; an sm_90 card keeps bf16.
    from kvsize.engines.context import Device, EngineContext

    spec = _glm5()
    b200 = EngineContext(device=Device(total_memory_bytes=192 << 30, platform="cuda", capability=(10, 0)))
    h100 = EngineContext(device=Device(total_memory_bytes=80 << 30, platform="cuda", capability=(9, 0)))
    assert get_engine("vllm", "0.32.0", b200).auto_kv_dtype(spec, KvDtype.BF16) is KvDtype.FP8_E4M3
    assert get_engine("vllm", "0.31.0", b200).auto_kv_dtype(spec, KvDtype.BF16) is KvDtype.BF16
    assert get_engine("vllm", "0.33.0", h100).auto_kv_dtype(spec, KvDtype.BF16) is KvDtype.BF16


def test_dsa_layers_show_the_indexer_key() -> None:
    # The architecture summary counts the indexer key as the bytes do: 512 + 64 + 128 = 704 elements per token per
    # layer for GLM-5 (DeepSeek-V3 without an indexer stays at 576).
    (group,) = kvsize.estimate(GLM5, ctx=4096, engine="formula").architecture.layers
    assert (group.elements_per_token, group.index_head_dim) == (704, 128)
    (plain,) = kvsize.estimate("deepseek-ai/DeepSeek-V3", ctx=4096, engine="formula").architecture.layers
    assert (plain.elements_per_token, plain.index_head_dim) == (576, None)


# --- Granite 4 / Bamba: Mamba-2 under transformers 5's layer-type names -------------------------------------------

# Granite 4.0-H's shape cut to 8 layers, attention at 3 and 7 (hidden 512, 8 heads of 64, 2 KV heads; Mamba-2 with
# 16 heads x 64, d_state 128, 1 group, conv 4). formula (bf16):
#   attention: 2 layers x 2 KV heads x (64 + 64) x 2 B = 1,024 B per token
#   Mamba-2: conv channels 16 x 64 + 2 x 1 x 128 = 1,280, kernel - 1 = 3 kept: 3,840; SSM 16 x 64 x 128 = 131,072
#            (3,840 + 131,072) x 2 B = 269,824 B per layer, x 6 layers = 1,618,944 B per request
GRANITE_4_SHAPE: dict[str, Any] = {
    "num_hidden_layers": 8,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "mamba_n_heads": 16,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
}


@pytest.mark.parametrize(
    "raw",
    [
        {"model_type": "granitemoehybrid", "layer_types": ["attention" if i in (3, 7) else "mamba" for i in range(8)]},
        # transformers 5.x configuration_utils.py _LEGACY_LAYER_TYPE_REMAP: the names every saved config now carries
        {
            "model_type": "granitemoehybrid",
            "layer_types": ["full_attention" if i in (3, 7) else "linear_attention" for i in range(8)],
        },
        {"model_type": "bamba", "attn_layer_indices": [3, 7]},  # BambaConfig.layers_block_type
    ],
    ids=["granite hub names", "granite transformers-5 names", "bamba"],
)
def test_mamba2_hybrids_size_their_two_layer_kinds(raw: dict[str, Any]) -> None:
    config = {**GRANITE_4_SHAPE, **raw}
    assert [layer.kind for layer in parse_config(config).layers] == ["mamba2"] * 3 + ["full"] + ["mamba2"] * 3 + [
        "full"
    ]
    scenario = kvsize.estimate(config, ctx=1000, engine="formula", kv_dtype="bf16").scenarios[0]
    assert (scenario.kv_bytes_per_token, scenario.state_bytes_per_request) == (1_024, 1_618_944)


def test_bamba_without_attention_indices_is_all_mamba() -> None:
    # BambaConfig.layers_block_type: "full_attention" only for i in attn_layer_indices; none listed, none attend
    spec = parse_config({**GRANITE_4_SHAPE, "model_type": "bamba"})
    assert {layer.kind for layer in spec.layers} == {"mamba2"}


def test_linear_attention_with_gated_deltanet_widths_stays_gated_deltanet() -> None:
    # the near twin: Qwen3-Next's "linear_attention" layers are Gated DeltaNet (linear_* widths), not Mamba
    qwen_next = dict(CONFIG_MAPPING["qwen3_next"](num_hidden_layers=4).to_dict())
    kinds = {layer.kind for layer in parse_config(qwen_next).layers}
    assert "mamba2" not in kinds and "full" in kinds and len(kinds) == 2


# --- SmolLM3: NoPE layers slide when sliding is on -----------------------------------------------------------------

SMOLLM3 = {
    "model_type": "smollm3",
    "num_hidden_layers": 8,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "no_rope_layer_interval": 4,
}


@pytest.mark.parametrize(
    ("change", "sliding"),
    [
        ({}, []),  # the hub's setting: use_sliding_window false, every layer full
        ({"use_sliding_window": True, "sliding_window": 100}, [3, 7]),  # NoPE layers (i + 1) % 4 == 0 slide
        # no interval given: SmolLM3Config's default no_rope_layer_interval 4
        ({"use_sliding_window": True, "sliding_window": 100, "no_rope_layer_interval": None}, [3, 7]),
        ({"use_sliding_window": True, "sliding_window": 100, "no_rope_layers": [1, 0, 1, 1, 1, 1, 0, 1]}, [1, 6]),
        # max_window_layers is Qwen2's rule, which SmolLM3Config does not read
        ({"use_sliding_window": True, "sliding_window": 100, "max_window_layers": 2}, [3, 7]),
    ],
    ids=["off", "interval 4", "no interval", "listed", "max_window_layers ignored"],
)
def test_smollm3_nope_layers_slide(change: dict[str, Any], sliding: list[int]) -> None:
    spec = parse_config({**SMOLLM3, **change})
    assert [layer.index for layer in spec.layers if layer.kind == "sliding"] == sliding
    # formula at 1,000 tokens: 2 KV heads x (128 + 128) x 2 B = 1,024 B per token per layer; a sliding layer holds
    # 100 tokens: 8 x 1,000 x 1,024 - len(sliding) x 900 x 1,024
    result = kvsize.estimate({**SMOLLM3, **change}, ctx=1000, engine="formula", kv_dtype="bf16").scenarios[0]
    assert result.bytes_per_request == 8_192_000 - len(sliding) * 921_600


def test_minimax_residual_scales_are_not_cache_fields() -> None:
    # MiniMaxDecoderLayer.forward: residual * attn_alpha_factor + output * attn_beta_factor; no cache shape
    raw = CONFIG_MAPPING["minimax"](num_hidden_layers=4, num_local_experts=2).to_dict()
    assert {"full_attn_alpha_factor", "linear_attn_beta_factor"} <= set(raw)
    assert [layer.kind for layer in parse_config(raw).layers] == ["full", "lightning"] * 2


# --- RecurrentGemma: RG-LRU blocks and local attention -------------------------------------------------------------

# transformers 5.24 RecurrentGemmaConfig defaults: 26 layers, block_types (recurrent, recurrent, attention) repeated
# -> 18 recurrent and 8 attention layers (2, 5, ..., 23); 10 KV heads x 256, attention_window_size 2048;
# hidden_size = lru_width = 2560, conv1d_width 4.
#   attention: 8 x 10 x (256 + 256) x 2 B = 81,920 B per token, at most 2,048 tokens (hf: W - 1 = 2,047)
#   recurrent (formula, bf16): 2,560 x 3 conv inputs + 2,560 LRU = 10,240 elements x 2 B = 20,480 B x 18 = 368,640
#   recurrent (hf): conv 2,560 x 3 x 2 B = 15,360 + recurrent_states 2,560 x 4 B (float32) = 25,600 x 18 = 460,800
#   at 4,096 tokens: formula 81,920 x 2,048 + 368,640 = 168,140,800; hf 81,920 x 2,047 + 460,800 = 168,151,040
RECURRENT_GEMMA = CONFIG_MAPPING["recurrent_gemma"]().to_dict()


@pytest.mark.parametrize(
    ("engine", "state", "total"), [("formula", 368_640, 168_140_800), ("hf", 460_800, 168_151_040)]
)
def test_recurrent_gemma_bytes(engine: str, state: int, total: int) -> None:
    spec = parse_config(RECURRENT_GEMMA)
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "sliding"] == list(range(2, 26, 3))
    scenario = kvsize.estimate(RECURRENT_GEMMA, ctx=4096, engine=engine, kv_dtype="bf16").scenarios[0]
    assert (scenario.kv_bytes_per_token, scenario.state_bytes_per_request) == (81_920, state)
    assert scenario.bytes_per_request == total


def test_recurrent_gemma_block_types_cycle() -> None:
    spec = parse_config({**RECURRENT_GEMMA, "num_hidden_layers": 5, "block_types": ["attention", "recurrent"]})
    assert [layer.kind for layer in spec.layers] == ["sliding", "rg_lru", "sliding", "rg_lru", "sliding"]
    with pytest.raises(kvsize.errors.ConfigError, match="block_types"):
        parse_config({**RECURRENT_GEMMA, "block_types": ["recurrent", "mlp"]})


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
def test_recurrent_gemma_serving_engines_refuse(engine: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match="rg_lru"):
        kvsize.estimate(RECURRENT_GEMMA, ctx=4096, engine=engine, kv_dtype="bf16")


@pytest.mark.filterwarnings("ignore")
def test_transformers_recurrent_gemma_state_matches_hf_engine() -> None:
    # RecurrentGemmaModel.forward builds its DynamicCache but does not return it: pass one in, and read the
    # recurrent blocks' conv1d_state / rg_lru.recurrent_states off the modules (they live there, not in the cache).
    from transformers import DynamicCache

    raw = CONFIG_MAPPING["recurrent_gemma"](num_hidden_layers=5, attention_window_size=16, num_key_value_heads=1)
    raw = raw.to_dict()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            CONFIG_MAPPING["recurrent_gemma"].from_dict(copy.deepcopy(raw)), dtype=torch.bfloat16
        ).eval()
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.zeros((B, 40), dtype=torch.long, device="meta"), use_cache=True, cache=cache)
    held = _held(cache)
    for i, layer in enumerate(model.model.layers):
        block = layer.temporal_block
        for t in (
            getattr(block, "conv1d_state", None),
            getattr(getattr(block, "rg_lru", None), "recurrent_states", None),
        ):
            if isinstance(t, torch.Tensor):
                held[i] += t.numel() * t.element_size()
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    predicted = engine.layer_bytes(parse_config(raw), ctx=40, batch=B, kv_dtype=KvDtype.BF16)
    # by hand: recurrent 2 x (2,560 x 3 x 2 B + 2,560 x 4 B) = 51,200; attention 2 x 15 x 1 x 512 x 2 B = 30,720
    assert held == predicted == [51_200, 51_200, 30_720, 51_200, 51_200]


# --- Step-3.5 / 3.7: sliding layers with their own query heads ----------------------------------------------------

# Step-3.7-Flash's layout (ai-dynamo/aiconfigurator aic-core/.../stepfun-ai--Step-3.7-Flash_config.json @e10f03af,
# an abridged hub config): 45 layers, full every 4th from 0 (12), sliding (512) elsewhere (33); 8 KV heads x 128.
# Both transformers 5.24 (Step3p7Attention) and vLLM 0.33 (step3p5.py: num_kv_heads=config.num_attention_groups)
# give every layer those KV heads; the sliding layers' own head count (num_sliding_attention_heads, the legacy
# attention_other_setting, per_layer_config) is query heads only.
#   formula (bf16) at 4,096 tokens: 8 x (128 + 128) x 2 B = 4,096 B per token per layer;
#   12 x 4,096 x 4,096 + 33 x 512 x 4,096 = 201,326,592 + 69,206,016 = 270,532,608 B per request
STEP37 = {
    "architectures": ["Step3p7FlashForCausalLM"],
    "model_type": "step3p7",
    "num_hidden_layers": 45,
    "hidden_size": 4096,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "sliding_window": 512,
    "layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(45)],
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"num_sliding_attention_heads": 96},
        # the hub's legacy spelling (vLLM step3p5.py: "Remote code configs")
        {
            "attention_other_setting": {
                "attention_type": "sliding_attention",
                "num_attention_heads": 96,
                "num_attention_groups": 8,
                "head_dim": 128,
                "true_head_dim": 128,
            }
        },
        {"per_layer_config": {str(i): {"num_attention_heads": 96} for i in range(45) if i % 4}},
    ],
    ids=["abridged", "num_sliding_attention_heads", "attention_other_setting", "per_layer_config"],
)
def test_step3p7_sizes_the_same_kv_on_every_layer(extra: dict[str, Any]) -> None:
    result = kvsize.estimate({**STEP37, **extra}, ctx=4096, engine="formula", kv_dtype="bf16")
    assert result.scenarios[0].bytes_per_request == 270_532_608
    assert not any("unknown model_type" in note for note in result.notes)


@pytest.mark.parametrize(
    "extra",
    [
        {"attention_other_setting": {"attention_type": "sliding_attention", "num_attention_groups": 4}},
        {"per_layer_config": {"1": {"num_key_value_heads": 4}}},
        {"num_sliding_key_value_heads": 4},
    ],
    ids=["other KV groups", "per-layer KV heads", "unknown field"],
)
def test_step3p7_kv_changes_no_engine_reads_are_refused(extra: dict[str, Any]) -> None:
    with pytest.raises(kvsize.errors.ConfigError, match="attention_other_setting|per_layer_config|num_sliding"):
        parse_config({**STEP37, **extra})


@pytest.mark.filterwarnings("ignore")
def test_transformers_step3p5_cache_matches_hf_engine() -> None:
    # 6 layers (full at 0 and 4), sliding window 16, 2 KV heads x 64, sliding layers with 4 query heads of 8;
    # dense MLPs (the MoE router cannot run on the meta device). At 40 tokens, 2 requests:
    #   full: 2 x 40 x 2 x (64 + 64) x 2 B = 40,960; sliding (W - 1 = 15): 2 x 15 x 2 x 128 x 2 B = 15,360
    text = CONFIG_MAPPING["step3p5"](
        num_hidden_layers=6,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        layer_types=["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(6)],
        sliding_window=16,
        num_sliding_attention_heads=4,
        intermediate_size=256,
        mlp_layer_types=["dense"] * 6,
    ).to_dict()
    raw = CONFIG_MAPPING["step3p7"](text_config=text).to_dict()
    assert raw["text_config"]["per_layer_config"] == {str(i): {"num_attention_heads": 4} for i in (1, 2, 3, 5)}
    cache, predicted = _meta_run(raw, image_text=True)
    assert _held(cache) == predicted == [40_960, 15_360, 15_360, 15_360, 40_960, 15_360]


# --- Kimi Linear under transformers 5.24's flat field names --------------------------------------------------------


# KimiLinearConfig (5.24) saves linear_num_heads / linear_head_dim / linear_conv_kernel_dim and layer_types (full at
# i > 0 with i % 4 == 0, KDA elsewhere) where the hub nests linear_attn_config. 6 layers: full at 4 (MLA, latent
# 512 + 64), KDA at 0-3 and 5 with 4 heads x 32, conv 4. At 40 tokens, 2 requests, bf16:
#   KDA: conv 3 x 4 x 32 = 384 channels x 4 (transformers keeps the whole kernel) x 2 B = 3,072
#        + delta-rule state 4 x 32 x 32 x 4 B (float32) = 16,384 -> 19,456 per request, x 2 = 38,912
#   MLA: 2 x 40 x (512 + 64) x 2 B = 92,160
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("with_layer_types", [True, False], ids=["layer_types", "default layout"])
def test_kimi_linear_flat_fields_match_transformers(with_layer_types: bool) -> None:
    raw = CONFIG_MAPPING["kimi_linear"](
        num_hidden_layers=6,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=128,
        first_k_dense_replace=6,
        linear_num_heads=4,
        linear_head_dim=32,
    ).to_dict()
    if not with_layer_types:
        raw.pop("layer_types")
    assert "linear_attn_config" not in raw
    cache, predicted = _meta_run(raw)
    assert _held_deep(cache) == predicted == [38_912] * 4 + [92_160, 38_912]


def _held_deep(cache: Any) -> list[int]:
    """As _held, through the lists and dicts a linear-attention cache layer keeps its conv and recurrent states in."""

    def walk(value: Any) -> int:
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size() if value.dim() else 0
        if isinstance(value, dict):
            return sum(walk(v) for v in value.values())
        if isinstance(value, (list, tuple)):
            return sum(walk(v) for v in value)
        return 0

    return [walk(vars(layer)) for layer in cache.layers]


# --- MiniMax-M3: full attention plus a lightning-indexer key on sparse layers --------------------------------------

# MiniMaxAI/MiniMax-M3 (kvsize/models/registry.jsonl, the hub's flat "minimax_m3" config): 60 layers of 4 KV
# heads x 128; sparse_attention_config.sparse_attention_freq marks layers 3-59 sparse (57), each also keeping one
# indexer key of sparse_index_dim 128 per token (transformers 5.24 MiniMaxM3VLSparseCacheLayer.update_index).
#   formula (bf16): 3 x 4 x 256 x 2 B + 57 x (4 x 256 + 128) x 2 B = 6,144 + 131,328 = 137,472 B per token
M3 = CONFIGS["MiniMaxAI/MiniMax-M3"]


def test_minimax_m3_bytes_per_token() -> None:
    spec = parse_config(M3)
    assert [layer.index for layer in spec.layers if layer.attention and layer.attention.index_head_dim] == list(
        range(3, 60)
    )
    assert _bytes_per_token(M3, "formula") == 137_472


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
def test_minimax_m3_serving_engines_refuse(engine: str) -> None:
    # vLLM 0.25+ keeps the indexer keys in an fp8 side cache of its own (models/minimax_m3), not read here
    with pytest.raises(UnsupportedArchitecture, match="MiniMax-M3"):
        kvsize.estimate(M3, ctx=4096, engine=engine, kv_dtype="bf16")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"use_sparse_attention": False}, "use_sparse_attention"),
        ({"sparse_disable_index_value": [0] * 60}, "sparse_disable_index_value"),
        ({"sparse_attention_freq": [1] * 59}, "sparse_attention_freq"),
        ({"sparse_index_value_dim": 64}, "sparse_index_value_dim"),  # a cache-sounding key no reading explains
    ],
)
def test_minimax_m3_sparse_settings_kvsize_cannot_stand_behind(change: dict[str, Any], field: str) -> None:
    bad = {**M3, "sparse_attention_config": {**M3["sparse_attention_config"], **change}}
    with pytest.raises(kvsize.errors.ConfigError, match=field):
        parse_config(bad)


def test_minimax_m3_index_fields_on_another_type_are_refused() -> None:
    with pytest.raises(kvsize.errors.ConfigError, match="sparse_attention_config"):
        parse_config({**M3, "model_type": "minimax_m4"})


@pytest.mark.filterwarnings("ignore")
def test_transformers_minimax_m3_cache_matches_hf_engine() -> None:
    # 4 layers (sparse at 1 and 2), 2 KV heads x 64, index_head_dim 32, dense MLPs (no MoE router on meta).
    # At 40 tokens, 2 requests: full 2 x 40 x 2 x 128 x 2 B = 40,960; sparse + 2 x 40 x 32 x 2 B = 46,080.
    text = CONFIG_MAPPING["minimax_m3_vl_text"](
        num_hidden_layers=4,
        hidden_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        index_head_dim=32,
        index_n_heads=2,
        layer_types=["full_attention", "minimax_m3_sparse", "minimax_m3_sparse", "full_attention"],
        mlp_layer_types=["dense"] * 4,
        intermediate_size=128,
        dense_intermediate_size=128,
    ).to_dict()
    raw = CONFIG_MAPPING["minimax_m3_vl"](text_config=text).to_dict()
    cache, predicted = _meta_run(raw, image_text=True)
    assert _held(cache) == predicted == [40_960, 46_080, 46_080, 40_960]


# --- GPT-Neo: global and local layers ------------------------------------------------------------------------------

# EleutherAI/gpt-neo-1.3B's layout (transformers GPTNeoConfig defaults): 24 layers, attention_types
# [[["global", "local"], 12]], window_size 256, 16 heads of 2048 / 16 = 128 (MHA).
#   per token per layer: 16 x (128 + 128) x 2 B = 8,192 B (bf16)
#   formula at 4,096 tokens: 12 x 4,096 x 8,192 + 12 x 256 x 8,192 = 402,653,184 + 25,165,824 = 427,819,008
#   hf (modeling_gpt_neo.py masks the local layers; DynamicCache keeps every token): 24 x 4,096 x 8,192 = 805,306,368
GPT_NEO = {
    "model_type": "gpt_neo",
    "num_layers": 24,
    "hidden_size": 2048,
    "num_heads": 16,
    "attention_types": [[["global", "local"], 12]],
    "window_size": 256,
    "max_position_embeddings": 2048,
    "torch_dtype": "float32",
}


@pytest.mark.parametrize(("engine", "expected"), [("formula", 427_819_008), ("hf", 805_306_368)])
def test_gpt_neo_local_layers(engine: str, expected: int) -> None:
    spec = parse_config(GPT_NEO)
    assert [layer.kind for layer in spec.layers] == ["full", "sliding"] * 12
    result = kvsize.estimate(GPT_NEO, ctx=4096, engine=engine, kv_dtype="bf16").scenarios[0]
    assert result.bytes_per_request == expected


def test_gpt_neo_saved_attention_layers_and_bad_types() -> None:
    saved = {**GPT_NEO, "attention_layers": ["global", "local"] * 12}
    assert parse_config(saved).layers == parse_config(GPT_NEO).layers
    with pytest.raises(kvsize.errors.ConfigError, match="attention_types"):
        parse_config({**GPT_NEO, "attention_types": [[["global", "sparse"], 12]]})
    with pytest.raises(kvsize.errors.ConfigError, match="attention_types"):
        parse_config({**GPT_NEO, "attention_types": [[["global", "local"], 11]]})  # 22 of 24 layers


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
def test_gpt_neo_serving_engines_refuse(engine: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match="GPT-Neo"):
        kvsize.estimate(GPT_NEO, ctx=4096, engine=engine, kv_dtype="bf16")


# --- fields transformers 5.24 writes into saved configs that size nothing --------------------------------------------


def test_paligemma_saved_bidirectional_flag_changes_nothing() -> None:
    # PaliGemmaConfig.__post_init__ sets text_config.use_bidirectional_attention = True (its prefix-LM mask); for a
    # Gemma 1 / 2 backbone that is a mask only (GemmaConfig / Gemma2Config keep the window; Gemma3TextConfig would
    # halve it), so the cache is what the config without it gives.
    saved = CONFIG_MAPPING["paligemma"]().to_dict()
    assert saved["text_config"]["use_bidirectional_attention"] is True
    bare = copy.deepcopy(saved)
    bare["text_config"].pop("use_bidirectional_attention")
    assert parse_config(saved).layers == parse_config(bare).layers
    # a Gemma 3 backbone with it is still refused: transformers halves the window there
    gemma3 = CONFIG_MAPPING["gemma3_text"](use_bidirectional_attention=True).to_dict()
    with pytest.raises(kvsize.errors.ConfigError, match="use_bidirectional_attention"):
        parse_config(gemma3)


@pytest.mark.parametrize("model_type", ["aria", "qwen2_5_omni_thinker", "shieldgemma2"])
def test_saved_fields_that_size_nothing_are_read(model_type: str) -> None:
    # Aria's projector_patch_to_query_dict (vision projector), Qwen2.5-Omni's seconds_per_chunk (audio time ids),
    # Gemma 3's private _sliding_window_pattern beside its layer_types: sized as the config says, no refusal.
    spec = parse_config(CONFIG_MAPPING[model_type]().to_dict())
    assert not any("assume-standard-attention" in note for note in spec.notes)


def test_private_window_pattern_without_layer_types_is_refused() -> None:
    raw = CONFIG_MAPPING["gemma3_text"]().to_dict()
    raw.pop("layer_types")
    raw["_sliding_window_pattern"] = 3
    with pytest.raises(kvsize.errors.ConfigError, match="_sliding_window_pattern"):
        parse_config(raw)


# --- llama.cpp: which builds key GLM-5's indexer --------------------------------------------------------------------


# llama-model.cpp create_memory@b9665 (llama-cpp-python 0.3.30) puts only LLM_ARCH_DEEPSEEK32 in llama_kv_cache_dsa:
# GLM-5 (LLM_ARCH_GLM_DSA) gets the plain MLA cache (V-less latent 576 x 2 B x 78 = 89,856 B per token). From b11312
# (0.3.36) GLM_DSA uses llama_kv_cache_dsa with filter_lid = is_indexer_full(il): GLM-5 78 x (1,152 + 256) = 109,824;
# GLM-5.2 keys its 21 full layers only: 89,856 + 21 x 256 = 95,232. DeepSeek-V3.2 keys every layer in both:
# 61 x (1,152 + 256) = 85,888.
@pytest.mark.parametrize(
    ("config", "version", "expected"),
    [
        (GLM5, "2026-06", 89_856),
        (GLM5, "2026-10", 109_824),
        (GLM52, "2026-06", 89_856),
        (GLM52, "2026-10", 95_232),
        (V32, "2026-06", 85_888),
        (V32, "2026-10", 85_888),
    ],
    ids=["glm5 b9665", "glm5 b11312", "glm5.2 b9665", "glm5.2 b11312", "v3.2 b9665", "v3.2 b11312"],
)
def test_llamacpp_dsa_indexer_by_build(config: dict[str, Any], version: str, expected: int) -> None:
    result = kvsize.estimate(config, ctx=4096, engine="llamacpp", engine_version=version, kv_dtype="f16")
    assert result.scenarios[0].kv_bytes_per_token == expected
