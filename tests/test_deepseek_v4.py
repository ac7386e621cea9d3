"""DeepSeek-V4 (issue 19): compressed sparse attention sized exactly for `--engine formula` and `--engine hf`; the
serving engines refuse it.

Every expected value is worked by hand from the fixture config (tests/data/never_silent/nvidia--DeepSeek-V4-Flash-
NVFP4.json, source in its SOURCES.tsv) and transformers 5.24.0's models/deepseek_v4 code (configuration_deepseek_v4.py
DeepseekV4Config.__post_init__; modeling_deepseek_v4.py DeepseekV4Attention, DeepseekV4CSACompressor,
DeepseekV4HCACompressor, DeepseekV4Indexer and the cache layers DeepseekV4CSACache / DeepseekV4HCACache). The oracle
tests at the end build the model with transformers (meta device, and a tiny CPU model) and compare the cache it holds
after a prompt and after decode steps with kvsize's hf engine, layer by layer.

The fixture: 43 layers, compress_ratios [0, 0, 4, 128, 4, 128, ..., 4, 0] (44 entries: the last is the MTP layer,
which transformers does not build), so layers 0-1 slide, the 21 even layers 2..42 are CSA (rate 4) and the 20 odd
layers 3..41 HCA (rate 128). head_dim D = 512 (one K = V head), index_head_dim I = 128, sliding_window W = 128; bf16.
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
from kvsize.cache_fields import UnmodelledFields
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.hf import HfEngine
from kvsize.errors import ConfigError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import AttentionKind

FLASH: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "never_silent" / "nvidia--DeepSeek-V4-Flash-NVFP4.json").read_text("utf-8")
)


def _scenario(config: dict[str, Any], engine: str, ctx: int, **options: Any) -> Any:
    return kvsize.estimate(config, ctx=ctx, engine=engine, kv_dtype="bf16", **options).scenarios[0]


def test_layers_of_the_flash_config() -> None:
    spec = parse_config(FLASH)
    groups = [(layer.kind, n) for layer, n in spec.layer_groups()]
    assert groups == [("sliding", 2), ("compressed/4", 21), ("compressed/128", 20)]
    kinds = [layer.kind for layer in spec.layers]
    assert kinds[:4] == ["sliding", "sliding", "compressed/4", "compressed/128"] and kinds[-1] == "compressed/4"
    csa, hca = (layer.attention for layer in (spec.layers[2], spec.layers[3]))
    assert csa is not None and hca is not None
    assert (csa.num_kv_heads, csa.head_dim, csa.head_dim_v, csa.window) == (1, 512, 0, 128)
    assert (csa.compress_ratio, csa.index_head_dim, csa.compress_overlap) == (4, 128, True)
    assert (hca.compress_ratio, hca.index_head_dim, hca.compress_overlap) == (128, None, False)
    assert any("transformers reads the first 43" in n for n in spec.notes)


# --- formula: the window (K = V, one row), floor(ctx / m) entries, CSA indexer keys ---------------------------------

# per token while the windows fill: 43 layers x D 512 x 2 B = 44,032 B (K = V: one row, not 2 x 512).
# per request: 43 x min(ctx, 128) x 1,024 + 21 x floor(ctx / 4) x (512 + 128) x 2 [1,280]
#   + 20 x floor(ctx / 128) x 1,024
#   ctx 3:     43 x 3 x 1,024 = 132,096; no entry yet
#   ctx 4:     43 x 4 x 1,024 = 176,128 + 21 x 1 x 1,280 = 26,880 -> 203,008
#   ctx 102:   43 x 102 x 1,024 = 4,491,264 + 21 x 25 x 1,280 = 672,000 -> 5,163,264 (ceil: 26 entries, +26,880)
#   ctx 127:   43 x 127 x 1,024 = 5,592,064 + 21 x 31 x 1,280 = 833,280 -> 6,425,344
#   ctx 128:   43 x 128 x 1,024 = 5,636,096 + 21 x 32 x 1,280 = 860,160 + 20 x 1 x 1,024 = 20,480 -> 6,516,736
#   ctx 129:   the same 6,516,736 (window full; floor(129/4) = 32, floor(129/128) = 1; ceil would add 26,880 + 20,480)
#   ctx 4,099: 5,636,096 + 21 x 1,024 x 1,280 = 27,525,120 + 20 x 32 x 1,024 = 655,360 -> 33,816,576
FORMULA_CASES = [
    (3, 132_096),
    (4, 203_008),
    (102, 5_163_264),
    (127, 6_425_344),
    (128, 6_516_736),
    (129, 6_516_736),
    (4099, 33_816_576),
]


@pytest.mark.parametrize(("ctx", "expected"), FORMULA_CASES, ids=[str(c) for c, _ in FORMULA_CASES])
def test_formula_bytes(ctx: int, expected: int) -> None:
    s = _scenario(FLASH, "formula", ctx)
    assert s.kv_bytes_per_token == 43 * 512 * 2 == 44_032
    assert s.bytes_per_request == expected


def test_formula_counts_entries_as_the_layers_state() -> None:
    # ctx 4,099: the compressed entries 27,525,120 + 655,360 = 28,180,480 B are the state; the windows are the
    # per-token part
    s = _scenario(FLASH, "formula", 4099)
    assert s.state_bytes_per_request == 28_180_480
    csa = next(g for g in s.layers if g.kind == "compressed/4")
    assert (csa.tokens_held, csa.bytes_per_token, csa.state_bytes) == (128, 1024, 1024 * 1280)


# --- hf: what DeepseekV4CSACache / DeepseekV4HCACache and DynamicSlidingWindowLayer hold --------------------------

# Sliding layers (DynamicSlidingWindowLayer): K and V apart, W - 1 = 127 rows: 2 x min(ctx, 127) x 1,024 each.
# HCA (m 128): window once (values is keys) min(ctx, 127) x 1,024 + floor(ctx/128) x 1,024 compressed_kv
#   + (ctx mod 128) x (buffer_kv 512 + buffer_gate 512) x 2 B = 2,048 per buffered token.
# CSA (m 4): window min(ctx, 127) x 1,024 + floor(ctx/4) x (512 + 128) x 2 = 1,280 per entry
#   + (ctx mod 4) x (kv and gate, compressor 2 x 512 and indexer 2 x 128 each) = 2 x 1,280 x 2 B = 5,120 per token
#   + once ctx >= 4: overlap_kv 4 x 640 x 2 B = 5,120 and overlap_gate 4 x 640 x 4 B (float32) = 10,240: 15,360.
# per token while the windows fill: 2 x 2,048 + 41 x 1,024 = 46,080 B.
#   ctx 3:   sliding 2 x 2 x 3 x 1,024 = 12,288; CSA 21 x (3,072 + 3 x 5,120) = 387,072 (no overlap before 4 tokens);
#            HCA 20 x (3,072 + 3 x 2,048) = 184,320 -> 583,680
#   ctx 4:   sliding 16,384; CSA 21 x (4,096 + 1,280 + 15,360) = 435,456; HCA 20 x (4,096 + 8,192) = 245,760 -> 697,600
#   ctx 102: sliding 417,792; CSA 21 x (104,448 + 25 x 1,280 + 2 x 5,120 + 15,360) = 21 x 162,048 = 3,403,008;
#            HCA 20 x (104,448 + 102 x 2,048) = 20 x 313,344 = 6,266,880 -> 10,087,680
#   ctx 127: sliding 2 x 2 x 127 x 1,024 = 520,192; CSA 21 x (130,048 + 39,680 + 15,360 + 15,360) = 4,209,408;
#            HCA 20 x (130,048 + 127 x 2,048) = 7,802,880 -> 12,532,480
#   ctx 128: sliding 520,192 (W - 1, the formula's 128 would be 524,288); CSA 21 x (130,048 + 40,960 + 15,360) =
#            3,913,728; HCA 20 x (130,048 + 1,024) = 2,621,440 (the buffer drained into an entry) -> 7,055,360
#   ctx 129: CSA 21 x (130,048 + 40,960 + 5,120 + 15,360) = 4,021,248; HCA 20 x (131,072 + 2,048) = 2,662,400
#            -> 520,192 + 4,021,248 + 2,662,400 = 7,203,840
#   ctx 4,099: CSA 21 x (130,048 + 1,024 x 1,280 + 3 x 5,120 + 15,360) = 21 x 1,471,488 = 30,901,248;
#            HCA 20 x (130,048 + 32 x 1,024 + 3 x 2,048) = 20 x 168,960 = 3,379,200 -> 520,192 + ... = 34,800,640
HF_CASES = [
    (3, 583_680),
    (4, 697_600),
    (102, 10_087_680),
    (127, 12_532_480),
    (128, 7_055_360),
    (129, 7_203_840),
    (4099, 34_800_640),
]


@pytest.mark.parametrize(("ctx", "expected"), HF_CASES, ids=[str(c) for c, _ in HF_CASES])
def test_hf_bytes(ctx: int, expected: int) -> None:
    s = _scenario(FLASH, "hf", ctx)
    assert s.kv_bytes_per_token == 2 * 2048 + 41 * 1024 == 46_080
    assert s.bytes_per_request == expected


def test_the_pro_config_has_no_sliding_layer() -> None:
    # nvidia/DeepSeek-V4-Pro-NVFP4 (registry; ai-dynamo/aiconfigurator's vendored hub config): compress_ratios
    # 128, 128, then 4 / 128 alternating over 61 layers (the 62nd entry, 0, is the MTP layer): 31 HCA, 30 CSA.
    # formula at ctx 1,001: windows 61 x 128 x 1,024 = 7,995,392; CSA 30 x floor(1001 / 4) 250 x 1,280 = 9,600,000;
    #   HCA 31 x floor(1001 / 128) 7 x 1,024 = 222,208 -> 17,817,600.
    # hf: HCA 31 x (127 x 1,024 + 7 x 1,024 + (1001 mod 128 = 105) x 2,048) = 31 x 352,256 = 10,919,936;
    #   CSA 30 x (130,048 + 250 x 1,280 + 1 x 5,120 + overlap 15,360) = 30 x 470,528 = 14,115,840 -> 25,035,776.
    pro = "nvidia/DeepSeek-V4-Pro-NVFP4"
    spec = parse_config(load_registry_config(find_entry(pro)))  # type: ignore[arg-type]
    assert sorted((layer.kind, n) for layer, n in spec.layer_groups()) == [
        ("compressed/128", 31),
        ("compressed/4", 30),
    ]
    assert _scenario(pro, "formula", 1001).bytes_per_request == 17_817_600
    assert _scenario(pro, "hf", 1001).bytes_per_request == 25_035_776


def test_hf_refuses_what_transformers_has_no_cache_for() -> None:
    with pytest.raises(UnsupportedArchitecture, match="static cache"):
        _scenario(FLASH, "hf", 4096, engine_options={"cache_implementation": "static"})
    for dtype, match in (("fp16", "_keep_in_fp32_modules"), ("fp8_e4m3", "QuantizedCache")):
        with pytest.raises(UnsupportedArchitecture, match=match):
            kvsize.estimate(FLASH, ctx=4096, engine="hf", kv_dtype=dtype)


def test_fp32_keeps_everything_in_fp32() -> None:
    # ctx 4,099 in fp32: every term of the bf16 figure doubles except overlap_gate, already float32 (21 x 10,240):
    # 2 x (34,800,640 - 215,040) + 215,040 = 69,171,200 + 215,040 = 69,386,240 B.
    s = kvsize.estimate(FLASH, ctx=4099, engine="hf", kv_dtype="fp32").scenarios[0]
    assert s.bytes_per_request == 69_386_240


# --- the config's forms ---------------------------------------------------------------------------------------------


def test_saved_form_parses_the_same() -> None:
    # transformers writes layer_types, compress_rates, partial_rotary_factor, mlp_layer_types and nested
    # rope_parameters when it saves the config (DeepseekV4Config.__post_init__ folds the legacy keys in).
    saved = transformers.DeepseekV4Config.from_dict(copy.deepcopy(FLASH)).to_dict()
    assert "layer_types" in saved and "compress_ratios" not in saved
    groups = [(layer.kind, n) for layer, n in parse_config(saved).layer_groups()]
    assert groups == [(layer.kind, n) for layer, n in parse_config(FLASH).layer_groups()]


def test_default_layout_and_rates_without_the_layout_fields() -> None:
    # No layer_types nor compress_ratios: two HCA layers, then HCA / CSA alternating (CSA at odd positions after them).
    config = {k: v for k, v in FLASH.items() if k != "compress_ratios"}
    kinds = [layer.kind for layer in parse_config(config).layers]
    assert kinds[:5] == ["compressed/128", "compressed/128", "compressed/128", "compressed/4", "compressed/128"]
    assert transformers.DeepseekV4Config.from_dict(copy.deepcopy(config)).layer_types[:5] == [
        "heavily_compressed_attention",
        "heavily_compressed_attention",
        "heavily_compressed_attention",
        "compressed_sparse_attention",
        "heavily_compressed_attention",
    ]


def test_legacy_rate_overrides_the_csa_rate() -> None:
    # compress_rate_csa 8: the CSA layers pool 8 tokens (compress_ratios only picks the layer type). ctx 4,099 formula:
    # 21 x floor(4,099 / 8) = 21 x 512 x 1,280 = 13,762,560 in place of 27,525,120: 33,816,576 - 27,525,120 +
    # 13,762,560 = 20,054,016.
    config = {**FLASH, "compress_rate_csa": 8}
    assert _scenario(config, "formula", 4099).bytes_per_request == 20_054_016


def test_ratios_transformers_cannot_map_are_refused() -> None:
    ratios = list(FLASH["compress_ratios"])
    ratios[2] = 8  # transformers 5.24: KeyError in _COMPRESS_RATIO_TO_LAYER_TYPE
    with pytest.raises(ConfigError, match="compress_ratios"):
        parse_config({**FLASH, "compress_ratios": ratios})
    with pytest.raises(ConfigError, match="compress_ratios"):
        parse_config({**FLASH, "compress_ratios": FLASH["compress_ratios"][:40]})


def test_v4_fields_on_another_type_are_refused() -> None:
    llama = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}
    for extra in ({"compress_ratios": [0, 4, 128, 4]}, {"compress_rates": {"compressed_sparse_attention": 4}}):
        with pytest.raises(UnmodelledFields):
            parse_config({**llama, **extra})
    with pytest.raises(UnmodelledFields, match="layer_types"):
        parse_config({**llama, "layer_types": ["compressed_sparse_attention"] * 4})


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
def test_serving_engines_refuse(engine: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match="pages DeepSeek-V4's layers"):
        get_engine(engine).check_supported(parse_config(FLASH))


# --- oracle: the cache transformers 5.24 holds ---------------------------------------------------------------------

B = 2
TINY: dict[str, Any] = {
    "model_type": "deepseek_v4",
    "vocab_size": 64,
    "hidden_size": 32,
    "moe_intermediate_size": 16,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "q_lora_rank": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "layer_types": [
        "sliding_attention",
        "compressed_sparse_attention",
        "heavily_compressed_attention",
        "compressed_sparse_attention",
    ],
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
    "sliding_window": 6,
    "o_groups": 2,
    "o_lora_rank": 8,
    "index_n_heads": 2,
    "index_head_dim": 8,
    "index_topk": 4,
    "qk_rope_head_dim": 8,
    "num_hash_layers": 0,
    "hc_mult": 2,
}
# The fixture cut to 6 layers (2 sliding, 2 CSA, 2 HCA), on the meta device: its real widths and rates.
SHORT_FLASH = {**FLASH, "num_hidden_layers": 6}


def _build(raw: dict[str, Any], device: str, dtype: torch.dtype) -> Any:
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).eval()


def _forward(model: Any, tokens: int, device: str, cache: Any = None) -> Any:
    with torch.no_grad():
        ids = torch.zeros((B, tokens), dtype=torch.long, device=device)
        out = model(input_ids=ids, use_cache=True, **({} if cache is None else {"cache": cache}))
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


def _held(cache: Any) -> list[int]:
    """numel x element_size of every tensor of every cache layer, the compressor's dicts included, each tensor once
    (`values is keys` on the compressed layers); 0-dim bookkeeping left out, as in tests/test_hf_oracle.py."""
    out = []
    for layer in cache.layers:
        seen: dict[int, torch.Tensor] = {}
        for value in vars(layer).values():
            for t in value.values() if isinstance(value, dict) else [value]:
                if isinstance(t, torch.Tensor) and t.dim():
                    seen[id(t)] = t
        out.append(sum(t.numel() * t.element_size() for t in seen.values()))
    return out


def _predicted(raw: dict[str, Any], ctx: int, dtype: KvDtype) -> list[int]:
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    return engine.layer_bytes(parse_config(raw), ctx=ctx, batch=B, kv_dtype=dtype)


ORACLE = {
    # (config, device, dtype, prompt, decode steps): prompts below a rate (no entry, no overlap yet), past the window
    # and at a non-multiple of the rates; decode steps that close a window (the buffer drains into an entry)
    "tiny bf16, prompt 3": (TINY, "cpu", KvDtype.BF16, 3, 6),
    "tiny bf16, prompt 11": (TINY, "cpu", KvDtype.BF16, 11, 6),
    "tiny fp32, prompt 13": (TINY, "cpu", KvDtype.FP32, 13, 4),
    "flash cut to 6 layers, prompt 127": (SHORT_FLASH, "meta", KvDtype.BF16, 127, 2),
}
TORCH_DTYPES = {KvDtype.BF16: torch.bfloat16, KvDtype.FP32: torch.float32}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(ORACLE))
def test_transformers_cache_matches_hf_engine(name: str) -> None:
    raw, device, dtype, prompt, steps = ORACLE[name]
    model = _build(raw, device, TORCH_DTYPES[dtype])
    cache = _forward(model, prompt, device)
    assert _held(cache) == _predicted(raw, prompt, dtype), name
    for step in range(1, steps + 1):
        cache = _forward(model, 1, device, cache)
        assert _held(cache) == _predicted(raw, prompt + step, dtype), (name, step)
    kinds = {a.kind for layer in parse_config(raw).layers if (a := layer.attention) is not None}
    assert kinds == {AttentionKind.SLIDING, AttentionKind.COMPRESSED}
