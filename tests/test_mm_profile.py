"""vLLM's profile run of a multimodal model (kvsize/mm_profile.py): the encoder's dummy batch and what it leaves
on the GPU while the language model's profile runs.

Each figure is worked by hand from the config and vLLM's source: v1/worker/gpu_model_runner.py profile_run
(0.8.5-0.33.0), multimodal/encoder_budget.py MultiModalBudget._get_max_items (0.19.0), gemma3_mm.py,
mllama4.py, llava.py / clip.py (0.19.0). The published vLLM 0.19.0 H100 logs of Gemma 3 and Llama 4 Scout
(tests/data/logs/llmd-*) say "profiled with 32 image items" and "profiled with 3 image items".
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tiny_configs import registry_config as registry_raw

from kvsize.api import estimate_loaded
from kvsize.budget import BudgetSettings, kv_budget, vllm_activation_bytes
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.engines.vllm_releases import VLLM_RELEASES
from kvsize.mm_profile import mm_items, vision_dummy
from kvsize.profiles import resolve_gpu
from kvsize.resolve import load_model_config
from kvsize.spec import ArchSpec

H100 = Device.from_profile(resolve_gpu("h100"))
GIB = 1024**3


def spec_of(raw: dict[str, Any]) -> ArchSpec:
    return parse_config(raw)


def activation(spec: ArchSpec, version: str = "0.19.0", tp: int = 1, **settings: Any) -> int:
    return kv_budget(
        "vllm",
        version,
        spec,
        memory_bytes=H100.total_memory_bytes,
        weights_bytes=0,
        tp=tp,
        settings=BudgetSettings(**settings),
        device=H100,
    ).activation_bytes


def language_peak(spec: ArchSpec, tp: int = 1) -> int:
    # H100 on vLLM 0.19, API server: 8,192 batched tokens, 1,024 sequences (vllm_scheduler batch_defaults).
    return vllm_activation_bytes(spec, max_batched_tokens=8192, max_num_seqs=1024, tp=tp, gpu=H100.name)


# --- the largest item per family ---------------------------------------------------------------------------


def test_gemma3_item_is_one_896_crop_of_256_tokens() -> None:
    d = spec_of(registry_raw("google/gemma-3-27b-it")).vision_dummy
    assert d is not None
    assert d.tokens_per_item == 256  # mm_tokens_per_image
    assert d.input_elements == 3 * 896 * 896  # pixel_values (1, 3, 896, 896)
    assert d.tower_tokens == 64 * 64  # (896 / 14)^2 SigLIP patches
    assert (d.tower_hidden, d.tower_intermediate, d.output_width) == (1152, 4304, 5376)


def test_llama4_item_is_16_tiles_and_a_global_tile() -> None:
    d = spec_of(registry_raw("meta-llama/Llama-4-Scout-17B-16E-Instruct")).vision_dummy
    assert d is not None
    # (336 / 14)^2 = 576 patches per tile, pixel shuffle 0.5 keeps 576 // 4 = 144 embeddings; 17 tiles.
    assert d.tokens_per_item == 17 * 144 == 2448
    assert d.input_elements == 17 * 3 * 336 * 336
    assert d.tower_tokens == 17 * 577  # each tile's patches and its class token
    assert (d.tower_hidden, d.tower_intermediate, d.output_width) == (1408, 5632, 5120)


def test_llava_item_drops_the_class_token_from_the_prompt_only() -> None:
    raw = {
        "architectures": ["LlavaForConditionalGeneration"],
        "vision_config": {
            "model_type": "clip_vision_model",
            "image_size": 336,
            "patch_size": 14,
            "hidden_size": 1024,
            "intermediate_size": 4096,
        },
    }
    d = vision_dummy(raw, 4096)
    assert d is not None
    assert (d.tokens_per_item, d.tower_tokens) == (576, 577)  # clip.py get_num_image_tokens = 24^2 + 1
    assert vision_dummy({**raw, "vision_feature_select_strategy": "full"}, 4096) is None


def test_families_not_read_have_no_item() -> None:
    raw = {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "vision_config": {"image_size": 336, "patch_size": 14, "hidden_size": 1280, "intermediate_size": 3420},
    }
    assert vision_dummy(raw, 3584) is None
    gemma = registry_raw("google/gemma-3-27b-it")
    gemma["vision_config"]["image_size"] = 900  # not a multiple of the patch: not a shape vLLM builds
    assert spec_of(gemma).vision_dummy is None


# --- how many items --------------------------------------------------------------------------------------


def test_items_floor_from_0_10_and_ceil_before() -> None:
    # 8,192 // 2,448 = 3 (the 0.19 Scout log: "profiled with 3 image items"); cdiv gives 4 (0.8.5-0.9.2).
    common = {"max_batched_tokens": 8192, "max_num_seqs": 1024, "max_model_len": 8192, "per_prompt_by_len": True}
    assert mm_items(2448, ceil_budget=False, **common) == 3
    assert mm_items(2448, ceil_budget=True, **common) == 4
    assert mm_items(256, ceil_budget=True, **common) == mm_items(256, ceil_budget=False, **common) == 32
    assert VLLM_RELEASES.resolve("0.9.2").era.rules.mm_items_ceil
    assert not VLLM_RELEASES.resolve("0.10.0").era.rules.mm_items_ceil


def test_items_budget_is_at_least_one_item() -> None:
    # compute_mm_encoder_budget: max(max_num_batched_tokens, tokens per item) -> one item of 2,448 at 2,048.
    assert (
        mm_items(
            2448,
            max_batched_tokens=2048,
            max_num_seqs=256,
            max_model_len=8192,
            ceil_budget=False,
            per_prompt_by_len=True,
        )
        == 1
    )


def test_items_per_prompt_bound_by_max_model_len_from_0_10_1() -> None:
    # One sequence of 4,096 tokens holds 4096 // 2448 = 1 item (0.10.1+); before, 999 items per prompt.
    args = {"max_batched_tokens": 8192, "max_num_seqs": 1, "max_model_len": 4096, "ceil_budget": False}
    assert mm_items(2448, per_prompt_by_len=True, **args) == 1
    assert mm_items(2448, per_prompt_by_len=False, **args) == 3
    assert not VLLM_RELEASES.resolve("0.10.0").era.rules.mm_items_by_len
    assert VLLM_RELEASES.resolve("0.10.1").era.rules.mm_items_by_len


# --- the peak --------------------------------------------------------------------------------------------


def test_gemma3_27b_peak_holds_pixels_and_outputs_over_the_sampler() -> None:
    spec = spec_of(registry_raw("google/gemma-3-27b-it"))
    inputs = 32 * 3 * 896 * 896 * 2  # 154,140,672
    outputs = 32 * 256 * 5376 * 2  # 88,080,384
    tower = 32 * 4096 * (2 * 1152 + 2 * 4304) * 2  # 2,860,515,328: below the sampler phase
    language = language_peak(spec)
    assert language == 1024 * 262208 * 14 + 132 * 262208 * 4 + 8192 * 5376 * 2  # the sampler phase
    assert tower < outputs + language
    assert activation(spec) == inputs + outputs + language == 4_227_761_152
    # The published log: "torch peak memory increase: 3.99GiB"; the language model alone gives 3.71 GiB.
    assert abs(activation(spec) / GIB - 3.99) < 0.06 < abs(language / GIB - 3.99)


def test_llama4_scout_tp4_peak() -> None:
    spec = spec_of(registry_raw("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    inputs = 3 * 17 * 3 * 336 * 336 * 2  # 34,543,104
    outputs = 3 * 2448 * 5120 * 2  # 75,202,560
    assert activation(spec, tp=4) == inputs + outputs + language_peak(spec, tp=4)
    # 0.9.2 rounds the items up: 4 items.
    four = activation(spec, version="0.9.2", tp=4) - language_peak(spec, tp=4)
    assert four >= 4 * 17 * 3 * 336 * 336 * 2 + 4 * 2448 * 5120 * 2


def test_a_large_encoder_batch_peaks_in_the_tower() -> None:
    # 32 images of 4,096 patches through a tower 4x wider: its MLP step beats the sampler phase.
    raw = registry_raw("google/gemma-3-4b-it")
    raw["vision_config"]["intermediate_size"] = 4 * 4304
    spec = spec_of(raw)
    inputs = 32 * 3 * 896 * 896 * 2
    tower = 32 * 4096 * (2 * 1152 + 2 * 4 * 4304) * 2
    assert tower > 32 * 256 * 2560 * 2 + language_peak(spec)
    assert activation(spec) == inputs + tower


def test_a_given_activation_replaces_the_profile() -> None:
    spec = spec_of(registry_raw("google/gemma-3-27b-it"))
    assert activation(spec, activation_bytes=123) == 123


def test_other_engines_take_no_encoder_profile() -> None:
    raw = registry_raw("google/gemma-3-27b-it")
    with_vision, text_only = spec_of(raw), spec_of({**raw, "vision_config": None})
    for engine in ("trtllm", "sglang"):
        a, b = (
            kv_budget(engine, None, s, memory_bytes=H100.total_memory_bytes, weights_bytes=0, device=H100)
            for s in (with_vision, text_only)
        )
        assert a.activation_bytes == b.activation_bytes


def test_an_unmodelled_multimodal_model_is_flagged(tmp_path: Any) -> None:
    raw = {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 128000,
        "torch_dtype": "bfloat16",
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "patch_size": 14},
    }
    (tmp_path / "config.json").write_text(json.dumps(raw))
    spec = spec_of(raw)
    assert spec.vision_dummy is None
    budget = kv_budget("vllm", "0.19.0", spec, memory_bytes=H100.total_memory_bytes, weights_bytes=0, device=H100)
    assert budget.activation_bytes == language_peak(spec)
    assert "not modelled for Qwen2_5_VLForConditionalGeneration" in budget.activation_rule
    est = estimate_loaded(load_model_config(str(tmp_path)), gpu="h100", engine="vllm", ctx=8192)
    assert any("not modelled for Qwen2_5_VLForConditionalGeneration" in n for n in est.notes)
    text = estimate_loaded(load_model_config(str(tmp_path)), engine="vllm", ctx=8192)
    assert not any("not modelled" in n for n in text.notes)  # no card, no budget: nothing to flag


@pytest.mark.parametrize("hub_id", ["google/gemma-3-27b-it", "meta-llama/Llama-4-Scout-17B-16E-Instruct"])
def test_modelled_families_carry_no_flag(hub_id: str) -> None:
    spec = spec_of(registry_raw(hub_id))
    rule = kv_budget(
        "vllm", "0.19.0", spec, memory_bytes=H100.total_memory_bytes, weights_bytes=0, device=H100
    ).activation_rule
    assert "multimodal profile:" in rule and "not modelled" not in rule


@pytest.mark.parametrize("archs", [[[]], [{}], [3, None], "Gemma3ForConditionalGeneration", {"a": 1}])
def test_architectures_that_are_not_names_read_as_none(archs: Any) -> None:
    # a hostile `architectures` (a list holding lists or dicts was a TypeError, found by the registry fuzz test):
    # no family is recognised from it, so no encoder dummy is sized
    raw = {"architectures": archs, "vision_config": {"image_size": 896, "hidden_size": 1152}}
    assert vision_dummy(raw, 2560) is None


# --- the Qwen-VL family: a video of frame pairs, by release and max_model_len ------------------------------
# qwen2_vl.py Qwen2VLProcessingInfo (shared by qwen2_5_vl.py) and qwen3_vl.py Qwen3VLProcessingInfo, read in the
# 0.8.5, 0.10.1, 0.10.2, 0.11.0, 0.12.0, 0.13.0, 0.19.0 and 0.33.0 sdists. The hub's preprocessor max_pixels
# (12,845,056 for Qwen2/2.5-VL, longest_edge 16,777,216 for Qwen3-VL) makes the largest image 3584^2 / 4096^2:
# (3584 / 14)^2 = (4096 / 16)^2 = 65,536 patches, / 2^2 merged = 16,384 tokens.

QWEN25_PER_TOKEN = 4 * 1280 + 4 * 3420  # Qwen2.5-VL-7B's gated MLP step: 4 x H + 4 x I = 18,800 elements
QWEN25_PATCH = 3 * 2 * 14 * 14  # pixel_values row: channels x temporal patch x patch^2 = 1,176


def _qwen25() -> ArchSpec:
    return spec_of(registry_raw("Qwen/Qwen2.5-VL-7B-Instruct"))


def test_qwen25_vl_largest_image() -> None:
    d = _qwen25().vision_dummy
    assert d is not None and d.video == "qwen2_vl"
    assert (d.tokens_per_item, d.tower_tokens, d.input_elements) == (16_384, 65_536, 65_536 * QWEN25_PATCH)
    assert (d.tower_hidden, d.tower_intermediate, d.output_width) == (1280, 3420, 3584)  # out_hidden_size


@pytest.mark.parametrize(
    ("version", "max_model_len", "patches"),
    [
        # 0.11+: pairs = min(max_model_len // 16,384, 14 frames / 2), the dummy built at max_model_len:
        ("0.19.0", 128_000, 7 * 65_536),  # 128,000 // 16,384 = 7: 14 frames, 114,688 tokens (vllm PR #12604)
        ("0.19.0", 32_768, 2 * 65_536),  # 2 pairs: 4 frames
        ("0.11.0", 65_535, 3 * 65_536),  # 65,535 // 16,384 = 3 (one token short of 4 pairs)
        ("0.34.0", 8_192, 65_536),  # below one pair: still one (max(1, ...)), the image's shape
        # <= 0.10.2: the budget may count 6-7 pairs, but the item is rebuilt at max_num_batched_tokens (8,192 on
        # an H100): max(1, 8,192 // 16,384) = 1 pair
        ("0.10.1", 128_000, 65_536),
        ("0.10.2", 128_000, 65_536),
    ],
)
def test_qwen25_vl_profiles_its_video(version: str, max_model_len: int, patches: int) -> None:
    spec = _qwen25()
    inputs = patches * QWEN25_PATCH * 2
    tower = patches * QWEN25_PER_TOKEN * 2
    outputs = patches // 4 * 3584 * 2
    got = activation(spec, version, max_model_len=max_model_len)
    # every release here gives an H100 API server 8,192 tokens / 1,024 sequences (vllm_scheduler batch_defaults)
    assert got == inputs + max(tower, outputs + language_peak(spec))
    if patches == 7 * 65_536:  # 128k on 0.19: 1,078,984,704 B of pixels + 17,249,075,200 B of tower
        assert got == 1_078_984_704 + 17_249_075_200


def test_qwen25_vl_video_budget_by_release() -> None:
    # The budgeted tokens set the item count (1 here at every release); they differ by release:
    # 0.10.1 budgets max_model_len less one image: (128,000 - 16,384) // 16,384 = 6 pairs (98,304 tokens);
    # 0.10.2: 128,000 // 16,384 = 7 (cap 16 frames = 8 pairs); 0.11+: 7 (cap 14 frames).
    from kvsize.mm_profile import qwen_vl_item

    d = _qwen25().vision_dummy
    assert d is not None
    budget = {
        v: qwen_vl_item(d, VLLM_RELEASES.resolve(v).era.rules, max_model_len=128_000, max_batched_tokens=8192)
        for v in ("0.10.1", "0.10.2", "0.11.0")
    }
    assert [b.budget_tokens for b in budget.values()] == [98_304, 114_688, 114_688]
    assert [b.tokens for b in budget.values()] == [16_384, 16_384, 114_688]
    assert [b.what for b in budget.values()] == [
        "video of 2 frames (budgeted as 12)",
        "video of 2 frames (budgeted as 14)",
        "video of 14 frames",
    ]
    # the frame cap: 1M tokens of max_model_len, 16 frames (8 pairs) on 0.10.2, 14 (7 pairs) on 0.11
    capped = [
        qwen_vl_item(d, VLLM_RELEASES.resolve(v).era.rules, max_model_len=1 << 20, max_batched_tokens=8192)
        for v in ("0.10.2", "0.11.0")
    ]
    assert [c.budget_tokens for c in capped] == [8 * 16_384, 7 * 16_384]


def test_qwen25_vl_tower_shards_its_mlp_over_tp() -> None:
    # tp 2 at 0.19, 32k: 131,072 patches x (4 x 1,280 + 4 x 3,420 / 2) x 2 B; the residual stream is replicated
    spec = _qwen25()
    patches = 2 * 65_536
    tower = patches * (4 * 1280 + 4 * 3420 // 2) * 2
    got = activation(spec, "0.19.0", tp=2, max_model_len=32_768)
    outputs = patches // 4 * 3584 * 2
    assert got == patches * QWEN25_PATCH * 2 + max(tower, outputs + language_peak(spec, tp=2))


def test_qwen2_vl_tower_is_embed_dim_wide() -> None:
    # Qwen2-VL's vision_config: embed_dim 1280 is the tower, hidden_size 3584 the merger's output (the language
    # model's width), mlp_ratio 4: fc1 of 5,120; the MLP step holds 2 x E + 3 x I = 17,920 elements per patch.
    raw = registry_raw("Qwen/Qwen2.5-VL-7B-Instruct")
    raw = {
        **raw,
        "architectures": ["Qwen2VLForConditionalGeneration"],
        "model_type": "qwen2_vl",
        "vision_config": {
            "depth": 32,
            "embed_dim": 1280,
            "mlp_ratio": 4,
            "num_heads": 16,
            "hidden_size": 3584,
            "in_chans": 3,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
    }
    spec = spec_of(raw)
    d = spec.vision_dummy
    assert d is not None
    assert (d.tower_hidden, d.tower_intermediate, d.output_width) == (1280, 5120, 3584)
    got = activation(spec, "0.19.0", max_model_len=32_768)
    patches = 2 * 65_536
    assert got == patches * QWEN25_PATCH * 2 + max(patches * 17_920 * 2, patches // 4 * 3584 * 2 + language_peak(spec))


def test_qwen3_vl_image_and_deepstack() -> None:
    # Qwen3-VL-8B: H 1,152, I 4,304, out_hidden 4,096, deepstack_visual_indexes [8, 16, 24]. The image: 65,536
    # patches of 3 x 2 x 16^2 = 1,536 values; per patch 3 x H + 2 x I (the MLP and the position embeddings) +
    # 3 x 4,096 / 4 deepstack features kept = 15,136 elements; the encoder returns 4,096 x (1 + 3) per token.
    spec = spec_of(registry_raw("Qwen/Qwen3-VL-8B-Instruct"))
    d = spec.vision_dummy
    assert d is not None and d.video == "qwen3_vl"
    assert (d.tokens_per_item, d.output_width, d.tower_kept_per_token) == (16_384, 16_384, 3_072)
    inputs, tower, outputs = 65_536 * 1536 * 2, 65_536 * 15_136 * 2, 16_384 * 16_384 * 2
    assert (inputs, tower, outputs) == (201_326_592, 1_983_905_792, 536_870_912)
    assert activation(spec, "0.13.0", max_model_len=32_768) == inputs + max(tower, outputs + language_peak(spec))
    # 0.11.0-0.12.0: the video of 24,576 frames of 32 x 32 (12,288 pairs x (32 / 16)^2 = 49,152 patches, 12,288
    # tokens, budgeted x 12.5 = 153,600) is profiled instead: one item (153,600 > 8,192 batched tokens).
    patches = 49_152
    small = patches * 1536 * 2 + max(patches * 15_136 * 2, 12_288 * 16_384 * 2 + language_peak(spec))
    assert activation(spec, "0.11.0", max_model_len=32_768) == small


def test_a_qwen_vl_config_without_its_vision_fields_is_flagged() -> None:
    # no spatial_merge_size / temporal_patch_size / out_hidden_size: not sized from guesses, said instead
    raw = registry_raw("Qwen/Qwen2.5-VL-7B-Instruct")
    vision = {k: v for k, v in raw["vision_config"].items() if k != "out_hidden_size"}
    assert spec_of({**raw, "vision_config": vision}).vision_dummy is None


@pytest.mark.parametrize(
    "vision",
    [
        {"patch_size": 0},
        {"patch_size": True},
        {"patch_size": "14"},
        {"temporal_patch_size": 10**12},
        {"spatial_merge_size": 10**6},
        {"intermediate_size": 10**15},
    ],
)
def test_a_qwen_vl_tower_past_any_released_one_is_flagged(vision: dict[str, Any]) -> None:
    # a field that is not a positive int, or one past every released tower (mm_profile MAX_PATCH_FIELD,
    # MAX_TOWER_WIDTH), leaves the encoder profile not modelled, with its note, rather than sized from it
    raw = registry_raw("Qwen/Qwen2.5-VL-7B-Instruct")
    spec = spec_of({**raw, "vision_config": {**raw["vision_config"], **vision}})
    assert spec.vision_dummy is None
    assert (
        "not modelled for Qwen2_5_VLForConditionalGeneration"
        in kv_budget(
            "vllm", "0.19.0", spec, memory_bytes=H100.total_memory_bytes, weights_bytes=0, device=H100
        ).activation_rule
    )


def test_the_context_asked_is_the_profile_s_max_model_len() -> None:
    # `kvsize MODEL --ctx 32768` launches with --max-model-len 32768 (kvsize/launch.py), so vLLM 0.19 profiles a
    # 4-frame video: 131,072 patches x 1,176 x 2 B of pixels + 131,072 x 18,800 x 2 B of tower = 5,236,588,544 B.
    # The model's own maximum (128,000) would profile 14 frames: 18,328,059,904 B.
    from typer.testing import CliRunner

    from kvsize.cli.app import app

    def activation_at(ctx: str) -> int:
        args = ["Qwen/Qwen2.5-VL-7B-Instruct", "--ctx", ctx, "--gpu", "h100", "--engine-version", "0.19", "--json"]
        out = json.loads(CliRunner().invoke(app, args).stdout)
        return int(out["scenarios"][0]["gpu"]["budget"]["activation_bytes"])

    assert activation_at("32768") == 131_072 * QWEN25_PATCH * 2 + 131_072 * QWEN25_PER_TOKEN * 2 == 5_236_588_544
    assert activation_at("128000") == 18_328_059_904


@pytest.mark.parametrize(
    ("log_id", "config", "tp", "budget", "items"),
    [
        # Gemma 3 (gemma3_mm.py): 256 tokens per image; the encoder budget max(8,192 batched, 256) = 8,192 holds
        # 8,192 // 256 = 32 images (MultiModalBudget._get_max_items: far below 1,024 sequences x 32 per prompt)
        ("llmd-google-gemma-3-4b-it-tp1pp1dp1-8192", "google/gemma-3-4b-it", 1, 8192, 32),
        ("llmd-google-gemma-3-27b-it-tp1pp1dp1-8192", "google/gemma-3-27b-it", 1, 8192, 32),
        # Llama 4 (mllama4.py): 16 tiles + 1 global of (336 / 14)^2 / 4 = 144 tokens: 2,448 per image, 8,192 // 2,448
        ("llmd-meta-llama-llama-4-scout-tp4pp1dp1-8192", "meta-llama/Llama-4-Scout-17B-16E-Instruct", 4, 8192, 3),
    ],
)
def test_kvsize_log_shows_the_encoder_batch(log_id: str, config: str, tp: int, budget: int, items: int) -> None:
    # v1/worker/gpu_model_runner.py profile_run logs "Encoder cache will be initialized with a budget of N tokens,
    # and profiled with M image items of the maximum feature size"; kvsize log puts its own beside them
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from kvsize.cli.app import app

    path = Path(__file__).parent / "data" / "logs" / f"{log_id}.log"
    result = CliRunner().invoke(app, ["log", str(path), "--config", config, "--gpu", "h100", "--tp", str(tp), "--json"])
    figures = {f["name"]: f for f in json.loads(result.stdout)["figures"]}
    assert (figures["encoder budget"]["logged"], figures["encoder budget"]["predicted"]) == (budget, budget)
    profiled = figures["encoder items profiled"]
    assert (profiled["logged"], profiled["predicted"]) == (items, items)
    assert profiled["part"] is True


def test_the_encoder_line_is_read() -> None:
    from kvsize.engine_log import parse_log

    log = parse_log(
        "INFO vLLM API server version 0.19.0\n"
        "INFO [gpu_model_runner.py:5753] Encoder cache will be initialized with a budget of 8289 tokens, and "
        "profiled with 1 image items of the maximum feature size.\n"
    )
    assert log is not None
    assert (log.figures["encoder_budget_tokens"], log.figures["mm_profile_items"]) == (8289.0, 1.0)
    assert log.settings["mm_profile_modality"] == "image"
