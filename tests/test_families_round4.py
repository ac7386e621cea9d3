"""Families issue 19 found refused and now sizes exactly for `--engine formula` and `--engine hf`: Gemma 4 (full
layers of global_head_dim x num_global_key_value_heads), MiMo-V2-Flash (sliding layers of swa_num_key_value_heads,
K 192 / V 128) and Gemma 3n (KV shared by the last layers). SGLang, TensorRT-LLM and llama.cpp refuse Gemma 4
and MiMo-V2-Flash; vLLM sizes Gemma 4 and Gemma 3n (tests/test_vllm_gemma4.py).

Every expected value is worked by hand from the fixture config (tests/data/never_silent, sources in its SOURCES.tsv)
and the transformers 5.24.0 modelling code named beside it; the oracle tests at the end build the models with
transformers (meta device, or a tiny CPU model where the meta device cannot run the wrapper's masks) and compare the
cache it allocates with kvsize's hf engine, layer by layer.
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
from kvsize.spec import ArchSpec, AttentionKind

NEVER_SILENT = Path(__file__).parent / "data" / "never_silent"


def _load(name: str) -> dict[str, Any]:
    return json.loads((NEVER_SILENT / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


GEMMA4 = _load("google--gemma-4-26B-A4B.json")
GEMMA4_31B = _load("nvidia--Gemma-4-31B-IT-NVFP4.json")
MIMO = _load("XiaomiMiMo--MiMo-V2-Flash.json")
GEMMA3N = _load("google--gemma-3n-E4B.json")


def _scenario(config: dict[str, Any], engine: str, ctx: int) -> Any:
    return kvsize.estimate(config, ctx=ctx, engine=engine, kv_dtype="bf16").scenarios[0]


def _shapes(spec: ArchSpec) -> list[tuple[str, int, tuple[int, int, int, int | None]]]:
    return [
        (layer.kind, n, (a.num_kv_heads, a.head_dim, a.head_dim_v, a.window))
        for layer, n in spec.layer_groups()
        if (a := layer.attention) is not None
    ]


# --- Gemma 4 -------------------------------------------------------------------------------------------------------

# google/gemma-4-26B-A4B text_config: 30 layers, layer_types full at 5, 11, 17, 23, 29 (5 full, 25 sliding), window
# 1024, head_dim 256, num_key_value_heads 8, global_head_dim 512, num_global_key_value_heads 2, attention_k_eq_v true.
# configuration_gemma4.py Gemma4TextConfig.__post_init__ gives every full layer per_layer_config
# {head_dim: 512, num_key_value_heads: 2}; modeling_gemma4.py Gemma4TextAttention caches K and V of those widths
# (K = V layers still hand both to cache.update).
#   sliding: 8 x (256 + 256) x 2 B = 8,192 B per token per layer;  full: 2 x (512 + 512) x 2 B = 4,096 B.
#   per token: 25 x 8,192 + 5 x 4,096 = 204,800 + 20,480 = 225,280 B
#   (head_dim 256 on the full layers, the near-twin reading, would give 5 x 2 x 512 x 2 = 10,240: 215,040 B;
#   num_key_value_heads 8 there: 5 x 8 x 1,024 x 2 = 81,920: 286,720 B).
GEMMA4_PER_TOKEN = 25 * 8192 + 5 * 4096
# ctx 512 (below the window): every layer holds the whole context: 225,280 x 512 = 115,343,360 B (formula and hf).
# ctx 32,768: full 5 x 4,096 x 32,768 = 671,088,640; sliding formula 25 x 8,192 x 1,024 = 209,715,200 (the window),
# hf 25 x 8,192 x 1,023 = 209,510,400 (cache_utils.py DynamicSlidingWindowLayer keeps W - 1).
GEMMA4_CASES = [
    ("formula", 512, 115_343_360),
    ("hf", 512, 115_343_360),
    ("formula", 32768, 671_088_640 + 209_715_200),
    ("hf", 32768, 671_088_640 + 209_510_400),
]


def test_gemma4_full_layers_use_the_global_head_size_and_kv_heads() -> None:
    spec = parse_config(GEMMA4)
    assert spec.model_type == "gemma4_text"
    assert _shapes(spec) == [("sliding", 25, (8, 256, 256, 1024)), ("full", 5, (2, 512, 512, None))]
    assert [layer.kind for layer in spec.layers][:6] == ["sliding"] * 5 + ["full"]


@pytest.mark.parametrize(("engine", "ctx", "expected"), GEMMA4_CASES, ids=[f"{e}-{c}" for e, c, _ in GEMMA4_CASES])
def test_gemma4_bytes(engine: str, ctx: int, expected: int) -> None:
    s = _scenario(GEMMA4, engine, ctx)
    assert s.kv_bytes_per_token == GEMMA4_PER_TOKEN == 225_280
    assert s.bytes_per_request == expected


def test_gemma4_31b() -> None:
    # 60 layers, full every 6th (10 full, 50 sliding); sliding 16 x 512 x 2 = 16,384 B, full (num_global 4 with
    # attention_k_eq_v) 4 x 1,024 x 2 = 8,192 B: 50 x 16,384 + 10 x 8,192 = 819,200 + 81,920 = 901,120 B per token.
    assert _scenario(GEMMA4_31B, "formula", 4096).kv_bytes_per_token == 901_120


def test_gemma4_kv_heads_follow_num_global_only_with_k_eq_v() -> None:
    # Gemma4TextConfig.__post_init__: num_global_key_value_heads overrides the full layers' KV heads only when
    # attention_k_eq_v; without it they keep num_key_value_heads 8: 8 x (512 + 512) x 2 B = 16,384 B per full layer,
    # 25 x 8,192 + 5 x 16,384 = 286,720 B per token.
    config = copy.deepcopy(GEMMA4)
    config["text_config"]["attention_k_eq_v"] = False
    spec = parse_config(config)
    assert _shapes(spec)[1] == ("full", 5, (8, 512, 512, None))
    assert any("num_global_key_value_heads ignored" in n for n in spec.notes)
    assert _scenario(config, "formula", 4096).kv_bytes_per_token == 286_720


def test_gemma4_global_head_dim_defaults_to_512() -> None:
    config = copy.deepcopy(GEMMA4)
    text = config["text_config"]
    text.pop("global_head_dim")
    text["head_dim"] = 128  # global_head_dim is not head_dim: the full layers keep the class default 512
    spec = parse_config(config)
    assert _shapes(spec) == [("sliding", 25, (8, 128, 128, 1024)), ("full", 5, (2, 512, 512, None))]
    assert any("global_head_dim" in n and "defaults" in n for n in spec.notes)


def test_gemma4_last_layer_is_forced_full() -> None:
    config = copy.deepcopy(GEMMA4)
    config["text_config"]["layer_types"][-1] = "sliding_attention"  # transformers forces it back, with a warning
    spec = parse_config(config)
    assert spec.layers[-1].kind == "full" and any("forces it" in n for n in spec.notes)


def test_gemma4_without_layer_types_derives_every_sixth_full() -> None:
    config = copy.deepcopy(GEMMA4)
    config["text_config"].pop("layer_types")
    assert [layer.kind for layer in parse_config(config).layers] == [
        layer.kind for layer in parse_config(GEMMA4).layers
    ]


def test_gemma4_per_layer_config_as_transformers_saves_it() -> None:
    # transformers 5.24 writes per_layer_config {"5": {...}, ...} in place of global_head_dim when it saves a config;
    # global_head_dim and num_global_key_value_heads are then not read (Gemma4TextConfig.__post_init__).
    config = copy.deepcopy(GEMMA4)
    text = config["text_config"]
    for key in ("global_head_dim", "num_global_key_value_heads"):
        text.pop(key)
    full = [i for i, t in enumerate(text["layer_types"]) if t == "full_attention"]
    text["per_layer_config"] = {str(i): {"head_dim": 512, "num_key_value_heads": 2} for i in full}
    assert _shapes(parse_config(config)) == _shapes(parse_config(GEMMA4))
    text["per_layer_config"]["5"]["sliding_window"] = 64  # a per-layer window kvsize does not read
    with pytest.raises(UnmodelledFields, match=r"per_layer_config\.5\.sliding_window"):
        parse_config(config)


def test_gemma4_fields_on_other_types_are_still_refused() -> None:
    base = {"model_type": "gemma3_text", "num_hidden_layers": 6, "num_attention_heads": 8, "hidden_size": 512}
    for extra in ({"global_head_dim": 512}, {"attention_k_eq_v": True}, {"per_layer_config": {"5": {"head_dim": 8}}}):
        with pytest.raises(UnmodelledFields):
            parse_config({**base, **extra})


@pytest.mark.parametrize("value", ["all", True])
def test_bidirectional_attention_is_refused(value: object) -> None:
    # "all" (Gemma 4) / true (Gemma 3) make transformers halve the window (sliding_window // 2 + 1) and attend both
    # ways; "vision" only unmasks image tokens and is read as no change.
    config = copy.deepcopy(GEMMA4)
    config["text_config"]["use_bidirectional_attention"] = value
    with pytest.raises(UnmodelledFields, match="use_bidirectional_attention"):
        parse_config(config)


# --- MiMo-V2-Flash -------------------------------------------------------------------------------------------------

# 48 layers, hybrid_layer_pattern 0 (full) at 0, 5, 11, 17, 23, 29, 35, 41, 47: 9 full, 39 sliding.
# full: num_key_value_heads 4 x (head_dim 192 + v_head_dim 128) x 2 B = 2,560 B per token per layer;
# sliding: swa_num_key_value_heads 8 x (192 + 128) x 2 B = 5,120 B (transformers' 2 x num_key_value_heads, the same).
#   per token: 9 x 2,560 + 39 x 5,120 = 23,040 + 199,680 = 222,720 B
# window: sliding_window_size 128 + 1 = 129 (configuration_mimo_v2_flash.py MiMoV2FlashConfig.__post_init__: the
# reference code attends to 128 previous tokens plus the query); attention_chunk_size 128 is read by no one.
MIMO_PER_TOKEN = 9 * 2560 + 39 * 5120
# ctx 100 (below the window): 222,720 x 100 = 22,272,000 B.
# ctx 32,768: full 9 x 2,560 x 32,768 = 754,974,720; sliding formula 39 x 5,120 x 129 = 25,758,720,
# hf 39 x 5,120 x 128 = 25,559,040 (DynamicSlidingWindowLayer keeps W - 1 = 128).
MIMO_CASES = [
    ("formula", 100, 22_272_000),
    ("hf", 100, 22_272_000),
    ("formula", 32768, 754_974_720 + 25_758_720),
    ("hf", 32768, 754_974_720 + 25_559_040),
]


def test_mimo_sliding_layers_have_their_own_kv_heads() -> None:
    spec = parse_config(MIMO)
    assert _shapes(spec) == [("full", 9, (4, 192, 128, None)), ("sliding", 39, (8, 192, 128, 129))]
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    assert not any(layer.kind == "chunked" for layer in spec.layers)  # attention_chunk_size is not Llama 4 chunking


@pytest.mark.parametrize(("engine", "ctx", "expected"), MIMO_CASES, ids=[f"{e}-{c}" for e, c, _ in MIMO_CASES])
def test_mimo_bytes(engine: str, ctx: int, expected: int) -> None:
    s = _scenario(MIMO, engine, ctx)
    assert s.kv_bytes_per_token == MIMO_PER_TOKEN == 222_720
    assert s.bytes_per_request == expected


def test_mimo_window_without_sliding_window_size_is_sliding_window() -> None:
    # No sliding_window_size: transformers keeps sliding_window 128 as the window; formula 39 x 5,120 x 128 =
    # 25,559,040, hf 39 x 5,120 x 127 = 25,359,360 beside the full layers' 754,974,720 at ctx 32,768.
    config = {k: v for k, v in MIMO.items() if k != "sliding_window_size"}
    assert _scenario(config, "formula", 32768).bytes_per_request == 754_974_720 + 25_559_040
    assert _scenario(config, "hf", 32768).bytes_per_request == 754_974_720 + 25_359_360


def test_mimo_swa_heads_the_transformers_class_would_not_build() -> None:
    # swa_num_key_value_heads 16 (not 2 x 4): the formula follows the config (39 x 16 x 320 x 2 = 399,360 B for the
    # sliding layers, + 23,040 = 422,400 B per token); transformers' MiMoV2FlashAttention would build 8: hf refuses.
    config = {**MIMO, "swa_num_key_value_heads": 16}
    assert _scenario(config, "formula", 4096).kv_bytes_per_token == 23_040 + 39 * 16 * 320 * 2
    with pytest.raises(UnsupportedArchitecture, match="MiMoV2FlashAttention"):
        _scenario(config, "hf", 4096)


def test_mimo_layer_pattern_other_than_transformers_derives() -> None:
    # Every other layer full: 24 x 2,560 + 24 x 5,120 = 184,320 B per token for the formula; transformers ignores
    # hybrid_layer_pattern (full at 0 and every 6th), so hf refuses.
    config = {**MIMO, "hybrid_layer_pattern": [i % 2 for i in range(48)]}
    assert _scenario(config, "formula", 4096).kv_bytes_per_token == 24 * 2560 + 24 * 5120
    with pytest.raises(UnsupportedArchitecture, match="every 6th layer"):
        _scenario(config, "hf", 4096)


def test_mimo_layer_types_that_contradict_the_pattern_are_refused() -> None:
    config = {**MIMO, "layer_types": ["full_attention"] * 48}
    with pytest.raises(ConfigError, match="hybrid_layer_pattern"):
        parse_config(config)


def test_mimo_swa_query_heads_unlike_the_full_layers_are_refused() -> None:
    with pytest.raises(UnmodelledFields, match="swa_num_attention_heads"):
        parse_config({**MIMO, "swa_num_attention_heads": 32})


def test_mimo_fields_on_another_type_are_refused() -> None:
    with pytest.raises(UnmodelledFields, match="swa_num_key_value_heads"):
        parse_config({**MIMO, "model_type": "mimo_v2"})  # MiMo-V2.5 / V2.6: no class in transformers 5.24


# --- Gemma 3n ------------------------------------------------------------------------------------------------------

# 35 layers, full every 5th (4, 9, ..., 34), num_kv_shared_layers 15: layers 20..34 read the last earlier layer of
# their type (configuration_gemma3n.py kv_sharing_modes "reuse": cache_utils.py DummyLayer). Cached: layers 0..19,
# 4 full + 16 sliding, each 2 KV heads x (256 + 256) x 2 B = 2,048 B per token; 20 x 2,048 = 40,960 B per token.
# ctx 256 (below the window 512): 40,960 x 256 = 10,485,760 B. ctx 4,096: full 4 x 2,048 x 4,096 = 33,554,432;
# sliding formula 16 x 2,048 x 512 = 16,777,216, hf 16 x 2,048 x 511 = 16,744,448.
GEMMA3N_CASES = [
    ("formula", 256, 10_485_760),
    ("hf", 256, 10_485_760),
    ("formula", 4096, 33_554_432 + 16_777_216),
    ("hf", 4096, 33_554_432 + 16_744_448),
]


@pytest.mark.parametrize(("engine", "ctx", "expected"), GEMMA3N_CASES, ids=[f"{e}-{c}" for e, c, _ in GEMMA3N_CASES])
def test_gemma3n_bytes(engine: str, ctx: int, expected: int) -> None:
    s = _scenario(GEMMA3N, engine, ctx)
    assert s.kv_bytes_per_token == 20 * 2048
    assert s.bytes_per_request == expected


def test_gemma3n_defaults_when_the_config_leaves_the_layout_out() -> None:
    # Gemma3nTextConfig derives layer_types (every 5th full) and defaults num_kv_shared_layers to 15.
    config = {k: v for k, v in GEMMA3N.items() if k not in ("layer_types", "num_kv_shared_layers")}
    assert _shapes(parse_config(config)) == _shapes(parse_config(GEMMA3N))


# --- the serving engines -------------------------------------------------------------------------------------------


# vLLM's Gemma 4 and Gemma 3n were read (tests/test_vllm_gemma4.py), SGLang's (tests/test_sglang_gemma4.py),
# vLLM's and SGLang's MiMo-V2 (tests/test_vllm_mimo.py, tests/test_sglang_mimo.py).
@pytest.mark.parametrize(
    ("engine", "config"),
    [(e, GEMMA4) for e in ("trtllm", "llamacpp")] + [(e, MIMO) for e in ("trtllm", "llamacpp")],
    ids=[f"{e}-gemma4" for e in ("trtllm", "llamacpp")] + [f"{e}-mimo" for e in ("trtllm", "llamacpp")],
)
def test_serving_engines_refuse_layers_of_different_widths(engine: str, config: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedArchitecture, match="has not read how this engine pages"):
        _scenario(config, engine, 4096)


@pytest.mark.parametrize("engine", ["trtllm", "llamacpp"])
def test_gemma3n_refused_by_the_serving_engines(engine: str) -> None:
    # One width on every layer, but 15 layers reuse earlier layers' KV: how these engines page (or skip) them is
    # not read, so they refuse rather than size them as layers of their own.
    with pytest.raises(UnsupportedArchitecture, match="reuse earlier layers' KV cache"):
        get_engine(engine).check_supported(parse_config(GEMMA3N))


# --- oracle: the cache transformers 5.24 allocates -----------------------------------------------------------------

B, T, WINDOW = 2, 40, 16
TINY_GEMMA4: dict[str, Any] = {
    "model_type": "gemma4_text",
    "num_hidden_layers": 6,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "global_head_dim": 32,  # != head_dim: the full layers' width tells the two apart
    "num_global_key_value_heads": 1,
    "attention_k_eq_v": True,
    "sliding_window": WINDOW,
    "vocab_size": 128,
    "vocab_size_per_layer_input": 128,
    "hidden_size_per_layer_input": 8,
    "dtype": "bfloat16",
}


def _shrunk(config: dict[str, Any], **window: int) -> dict[str, Any]:
    out = copy.deepcopy(config)
    text = out.get("text_config", out)
    text.update(window)
    return out


ORACLE: dict[str, tuple[dict[str, Any], str]] = {
    "gemma-4-26B text_config": (_shrunk(GEMMA4["text_config"], sliding_window=WINDOW), "meta"),
    # sliding_window_size 15 -> transformers' window 16 (holds 15); kvsize reading sliding_window 15 would hold 14
    "MiMo-V2-Flash": (_shrunk(MIMO, sliding_window_size=WINDOW - 1, sliding_window=WINDOW - 1), "meta"),
    "gemma-3n-E4B": (_shrunk(GEMMA3N, sliding_window=WINDOW), "meta"),
    "tiny gemma4 k_eq_v": (TINY_GEMMA4, "meta"),
    "tiny gemma4 k_eq_v off": ({**TINY_GEMMA4, "attention_k_eq_v": False}, "meta"),
    "tiny gemma4 shared KV": (
        {
            **TINY_GEMMA4,
            "num_hidden_layers": 8,
            "num_kv_shared_layers": 2,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention", "sliding_attention", "full_attention"],
        },
        "meta",
    ),
    "tiny gemma4 last layer forced full": ({**TINY_GEMMA4, "num_hidden_layers": 4}, "meta"),
    "tiny gemma4 as 5.24 saves it (per_layer_config)": (
        transformers.Gemma4TextConfig(**{k: v for k, v in TINY_GEMMA4.items() if k != "model_type"}).to_dict(),
        "meta",
    ),
    "tiny gemma4_unified_text": ({**TINY_GEMMA4, "model_type": "gemma4_unified_text"}, "meta"),
    # the wrappers' mask code calls .item() on position ids, which the meta device cannot: tiny models on the CPU
    "tiny gemma4 wrapper": ({"model_type": "gemma4", "text_config": TINY_GEMMA4, "dtype": "bfloat16"}, "cpu"),
    "tiny gemma4_unified wrapper": (
        {"model_type": "gemma4_unified", "text_config": {**TINY_GEMMA4, "model_type": "gemma4_unified_text"}},
        "cpu",
    ),
}


def _build(raw: dict[str, Any], device: str) -> Any:
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    with torch.device(device):
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        except ValueError:  # the multimodal wrappers
            model = transformers.AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    return model.eval()


def _forward(model: Any, tokens: int, device: str, cache: Any = None) -> Any:
    kwargs: dict[str, Any] = {"use_cache": True} if cache is None else {"use_cache": True, "cache": cache}
    with torch.no_grad():
        out = model(input_ids=torch.zeros((B, tokens), dtype=torch.long, device=device), **kwargs)
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


def _held(cache: Any) -> list[int]:
    """numel x element_size of every tensor of every cache layer (0-dim bookkeeping left out, as in
    tests/test_hf_oracle.py)."""
    return [
        sum(t.numel() * t.element_size() for t in vars(layer).values() if isinstance(t, torch.Tensor) and t.dim())
        for layer in cache.layers
    ]


def _predicted(raw: dict[str, Any], ctx: int) -> list[int]:
    engine = get_engine("hf", None, raw_config=raw)
    assert isinstance(engine, HfEngine)
    return engine.layer_bytes(parse_config(raw), ctx=ctx, batch=B, kv_dtype=KvDtype.BF16)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(ORACLE))
def test_transformers_cache_matches_hf_engine(name: str) -> None:
    raw, device = ORACLE[name]
    model = _build(raw, device)
    cache = _forward(model, T, device)
    assert _held(cache) == _predicted(raw, T), name
    cache = _forward(model, 1, device, cache)  # one decode step: sliding layers stay at W - 1, full ones grow
    assert _held(cache) == _predicted(raw, T + 1), name
    spec = parse_config(raw)
    windows = {a.window for layer in spec.layers if (a := layer.attention) is not None and a.window}
    assert windows <= {WINDOW}, "every window is exercised past its length"
    assert any(layer.attention and layer.attention.kind is AttentionKind.FULL for layer in spec.layers)
