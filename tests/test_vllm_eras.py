"""vLLM's eras (kvsize/engines/vllm_releases.py): every release on PyPI from 0.8.5 to 0.34.0 maps to the era
whose rules it has, and each era boundary is pinned by a case worked by hand from the two releases' sources
(the sdists; file:function@release beside each), so that a rule moved by one release fails a test."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext, UsageContext
from kvsize.engines.vllm import VllmEngine
from kvsize.engines.vllm_releases import UNREAD_RELEASES, VLLM_RELEASES
from kvsize.engines.vllm_scheduler import batch_defaults, max_concurrent_batches
from kvsize.errors import UsageError
from kvsize.profiles import resolve_gpu
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

GIB = 1024**3
BF16 = KvDtype.BF16

# Every release with files on PyPI from 0.8.5 to 0.34.0 (pypi.org/simple/vllm, 2026-12-03).
PYPI_RELEASES = [
    "0.8.5",
    "0.8.5.post1",
    "0.9.0",
    "0.9.0.1",
    "0.9.1",
    "0.9.2",
    "0.10.0",
    "0.10.1",
    "0.10.1.1",
    "0.10.2",
    "0.11.0",
    "0.11.1",
    "0.11.2",
    "0.12.0",
    "0.13.0",
    "0.14.0",
    "0.14.1",
    "0.15.0",
    "0.15.1",
    "0.16.0",
    "0.17.0",
    "0.17.1",
    "0.18.0",
    "0.18.1",
    "0.19.0",
    "0.19.1",
    "0.20.0",
    "0.20.1",
    "0.20.2",
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
]


def spec(hub_id: str, **changes: Any) -> ArchSpec:
    """The registry's config with `changes` made to its language model (a nested text_config, else the top)."""
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    raw = load_registry_config(entry)
    (raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw).update(changes)
    return parse_config(raw)


def vllm(release: str, gpu: str | None = "h100-sxm", **options: Any) -> VllmEngine:
    context = EngineContext(device=Device.from_profile(resolve_gpu(gpu))) if gpu else None
    engine = get_engine("vllm", release, context, **options)
    assert isinstance(engine, VllmEngine)
    return engine


def per_request(engine: VllmEngine, model: ArchSpec, ctx: int, dtype: KvDtype = BF16, **kw: int) -> int:
    return engine.estimate(model, ctx=ctx, batch=1, kv_dtype=dtype, **kw).bytes_per_request


# --- the table ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", PYPI_RELEASES)
def test_every_release_maps_to_an_era_that_read_it(release: str) -> None:
    engine = get_engine("vllm", release)
    assert engine.era is not None
    if release in UNREAD_RELEASES:  # no sdist on PyPI: the era before, with a note saying so
        assert engine.release_note is not None and "not read" in engine.release_note
    else:
        assert release in engine.era.read and engine.release_note is None


def test_eras_start_where_the_issue_says_rules_change() -> None:
    firsts = {era.first for era in VLLM_RELEASES.eras}
    assert {"0.10.0", "0.14.0", "0.18.0", "0.20.0", "0.21.0", "0.26.0", "0.28.0", "0.32.0", "0.34.0"} <= firsts
    assert VLLM_RELEASES.oldest.first == "0.8.5" and VLLM_RELEASES.newest.last == "0.34.0"


def test_every_era_differs_from_the_one_before() -> None:
    """An era is a change of rules: two neighbours with identical switches would be one era."""
    for before, after in zip(VLLM_RELEASES.eras, VLLM_RELEASES.eras[1:], strict=False):
        assert before.rules != after.rules, after.first


@pytest.mark.parametrize(
    ("typed", "era", "label"),
    [
        ("0.24.0", "0.24.0", "vLLM 0.24.0 (rules of 0.24)"),
        ("v0.25", "0.25.0", "vLLM 0.25 (rules of 0.25)"),
        ("0.29.1rc1.dev17+gd2d649e67", "0.29.0", "vLLM 0.29.1rc1.dev17+gd2d649e67 (rules of 0.29)"),
        ("0.11.0+582e4e37.nv25.11", "0.11.0", "vLLM 0.11.0+582e4e37.nv25.11 (rules of 0.11.0)"),
        ("0.26.0rc1", "0.26.0", "vLLM 0.26.0rc1 (rules of 0.26)"),  # cut from the 0.26 branch
        ("0.26.0.dev3", "0.25.0", "vLLM 0.26.0.dev3 (rules of 0.25)"),  # main before 0.26.0
        ("0.23.0", "0.22.0", "vLLM 0.23.0 (rules of 0.22-0.23)"),
        ("0.20.2", "0.20.1", "vLLM 0.20.2 (rules of 0.20.1-0.20.2)"),
    ],
)
def test_typed_versions_name_their_era(typed: str, era: str, label: str) -> None:
    engine = get_engine("vllm", typed)
    assert engine.era is not None and engine.era.first == era
    assert engine.release_label == label


def test_older_and_untagged_releases_are_refused() -> None:
    with pytest.raises(UsageError, match=r"older than the oldest release kvsize models \(0.8.5\)"):
        get_engine("vllm", "0.8.4")
    with pytest.raises(UsageError, match="without release tags"):
        get_engine("vllm", "0.1.dev7548+gbaba038")
    newer = get_engine("vllm", "0.35.0")
    assert newer.era is VLLM_RELEASES.newest and newer.release_note is not None


# --- the scheduler tiers -----------------------------------------------------------------------------------

API = UsageContext.API_SERVER


@pytest.mark.parametrize(
    ("gpu", "release", "expected"),
    [
        # 0.8.5 _set_default_args_v1: `if device_memory >= 70 * GiB_bytes:` - an A100 80GB takes the big tier.
        ("a100-80gb", "0.8.5", (8192, 1024)),
        # 0.9.0: `and "a100" not in device_name`.
        ("a100-80gb", "0.9.0", (2048, 256)),
        # 0.27.1 has no 160 GiB tier; 0.28.0 get_batch_defaults: `if device_memory >= 160 * GiB_bytes:` 16384.
        ("b200", "0.27.1", (8192, 1024)),
        ("b200", "0.28.0", (16384, 1024)),
        # GB10 is small in every era, for two causes: to 0.32.0 NVML's memory query raises there (the
        # defaults' `except Exception`: device_memory = 0); 0.33.0 reads torch's 119.7 GiB and excludes
        # capability 12.1 by name. The twins below tell the two rules apart.
        ("dgx-spark", "0.8.5", (2048, 256)),
        ("dgx-spark", "0.32.0", (2048, 256)),
        ("dgx-spark", "0.33.0", (2048, 256)),
    ],
)
def test_batch_tiers_by_era(gpu: str, release: str, expected: tuple[int, int]) -> None:
    assert batch_defaults(release, Device.from_profile(resolve_gpu(gpu)), API) == expected


# Near twins of GB10, 119.7 GiB each: capability 12.1 with a working NVML query (only 0.33's capability check
# makes it small), and an integrated part of capability 11.0 whose NVML query fails (small only before 0.33's
# platforms/cuda.py fallback to torch's total_memory; then >= 70 GiB: 8192 / 1024).
SPARK_BYTES = 128_538_451_968
NVML_OK_12_1 = Device(SPARK_BYTES, name="a 12.1 card", capability=(12, 1))
NVML_FAILS_11_0 = Device(SPARK_BYTES, name="an integrated 11.0 part", capability=(11, 0), nvml_memory_info=False)


@pytest.mark.parametrize(
    ("device", "release", "expected"),
    [
        (NVML_OK_12_1, "0.32.0", (8192, 1024)),
        (NVML_OK_12_1, "0.33.0", (2048, 256)),
        (NVML_FAILS_11_0, "0.32.0", (2048, 256)),
        (NVML_FAILS_11_0, "0.33.0", (8192, 1024)),
        (Device(SPARK_BYTES, capability=(11, 0), platform="rocm", nvml_memory_info=False), "0.32.0", (8192, 1024)),
    ],
)
def test_gb10_small_tier_and_the_nvml_query_are_separate_rules(
    device: Device, release: str, expected: tuple[int, int]
) -> None:
    assert batch_defaults(release, device, API) == expected


def test_batches_in_flight_by_era() -> None:
    # 0.13.0: async scheduling off by default (config/scheduler.py `async_scheduling: bool = False`): pp.
    assert max_concurrent_batches("0.13.0", 1) == 1
    # 0.14.0: on by default; executors `2 if async else pp` (0.10.0-0.14.1), so 2 even at pp 3.
    assert max_concurrent_batches("0.14.0", 3) == 2
    # 0.16.0+ MultiprocExecutor: `2 if pp_size <= 1 and async_scheduling else pp_size`.
    assert max_concurrent_batches("0.16.0", 3) == 3
    # 0.25-0.28: the V2 runner (pp + 1) for dense models only (VllmConfig._is_default_v2_model_runner_model).
    assert max_concurrent_batches("0.28.0", 2, v2_runner=False) == 2
    assert max_concurrent_batches("0.28.0", 2, v2_runner=True) == 3
    # 0.29.0+: every model on the V2 runner.
    assert max_concurrent_batches("0.29.0", 2, v2_runner=False) == 3


# --- sliding windows and the hybrid allocator ---------------------------------------------------------------

MISTRAL = "mistralai/Mistral-7B-v0.1"  # 32 sliding layers (W 4096), 8 KV heads x 128: 4096 B/token per layer
GEMMA27 = "google/gemma-3-27b-it"  # 62 layers: 52 sliding (W 1024) + 10 full; 16 KV heads x 128: 8192 B/token
GEMMA4B = "google/gemma-3-4b-it"  # 34 layers: 29 sliding (W 1024) + 5 full; 4 KV heads x 256: 4096 B/token


def test_0_9_0_a100_halves_a_sliding_layers_blocks() -> None:
    # SlidingWindowSpec.max_memory_usage_bytes@0.8.5: cdiv(min(W - 1 + B, L), bs) + 1 blocks. An A100 80GB at
    # L 32768: 0.8.5 B = 8192 -> cdiv(12287, 16) + 1 = 769; 0.9.0 B = 2048 -> cdiv(6143, 16) + 1 = 385.
    # A block of one layer: 16 x 4096 = 65,536 B, 32 layers.
    model = spec(MISTRAL)
    assert per_request(vllm("0.8.5", "a100-80gb"), model, 32768) == 769 * 32 * 65_536
    assert per_request(vllm("0.9.0", "a100-80gb"), model, 32768) == 385 * 32 * 65_536


def test_0_9_1_hybrid_allocator_and_the_log_figure() -> None:
    # 0.9.0 (no hybrid allocator: unify_hybrid_kv_cache_specs makes every layer FullAttentionSpec): one group,
    # num_blocks = 42,949,672,960 // (131,072 x 62) = 5,285; logged 5,285 x 16 = 84,560 tokens;
    # concurrency 84,560 / 32,768 = 2.58.
    model, kv = spec(GEMMA27), 40 * GIB
    old = vllm("0.9.0").pool(model, available_bytes=kv, max_model_len=32768, kv_dtype=BF16)
    assert (old.num_blocks, old.kv_pool_tokens) == (5_285, 84_560)
    assert math.isclose(old.concurrency, 84_560 / 32_768)
    # 0.9.1: group size min(10, 52) = 10 -> 1 full + 6 sliding groups; num_blocks = 40 GiB // (131,072 x 10) =
    # 32,768; logged 32,768 // 7 x 16 = 74,896; blocks per request 2048 + 6 x (cdiv(1023 + 8192, 16) + 1 = 577)
    # = 5,510; concurrency 32,768 / 5,510.
    new = vllm("0.9.1").pool(model, available_bytes=kv, max_model_len=32768, kv_dtype=BF16)
    assert (new.num_blocks, new.kv_pool_tokens) == (32_768, 74_896)
    assert math.isclose(new.concurrency, 32_768 / 5_510)


LLAMA4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"  # 48 layers: 12 full + 36 chunked (C 8192); 4096 B/token


@pytest.mark.parametrize(
    ("release", "chunked"),
    [
        ("0.9.2", False),  # no ChunkedLocalAttentionSpec: local layers are FullAttentionSpec
        ("0.10.0", True),  # ChunkedLocalAttentionSpec with the hybrid allocator on
        ("0.10.1", False),  # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "0": allocator off
        ("0.13.0", False),
        ("0.14.0", True),  # the switch defaults to "1" (envs.py@0.14.0)
        ("0.25.1", True),
    ],
)
def test_llama4_chunked_layers_by_era(release: str, chunked: bool) -> None:
    # Full: 48 layers x cdiv(131072, 16) = 8192 blocks x 65,536 B = 24 GiB. Chunked (ChunkedLocalAttentionSpec:
    # cdiv(min(C + B, L), bs) = cdiv(16384, 16) = 1024 blocks): 12 x 8192 + 36 x 1024 blocks of 65,536 B.
    expected = (12 * 8192 + 36 * 1024) * 65_536 if chunked else 48 * 8192 * 65_536
    assert per_request(vllm(release), spec(LLAMA4), 131072) == expected


def test_0_26_sliding_layers_reserve_the_batches_in_flight() -> None:
    # 0.25.1 SlidingWindowSpec: W - 1 + max_num_batched_tokens: cdiv(1023 + 8192, 16) + 1 = 577 blocks.
    # 0.26.0: W - 1 + max_in_flight_tokens = 2 x 8192 at pp 1: cdiv(1023 + 16384, 16) + 1 = 1089 blocks.
    # gemma-3-4b at 32k on an H100: 6 sliding groups + 1 full group (2048 blocks), a block 5 x 16 x 4096 B.
    block = 5 * 16 * 4096
    model = spec(GEMMA4B)
    assert per_request(vllm("0.25.1"), model, 32768) == (6 * 577 + 2048) * block
    assert per_request(vllm("0.26.0"), model, 32768) == (6 * 1089 + 2048) * block
    # 0.28.0 on a B200 (>= 160 GiB): B = 16384 -> min(1023 + 32768, 32768) -> 2048 + 1 = 2049 blocks.
    assert per_request(vllm("0.28.0", "b200"), model, 32768) == (6 * 2049 + 2048) * block
    # 0.33.0 on GB10: B = 2048, 2 x 2048 in flight -> cdiv(1023 + 4096, 16) + 1 = 321 blocks.
    assert per_request(vllm("0.33.0", "dgx-spark"), model, 32768) == (6 * 321 + 2048) * block
    # 0.26.0 on GB10: NVML reads no total -> B = 2048, 2 x 2048 in flight -> the same 321 blocks.
    assert per_request(vllm("0.26.0", "dgx-spark"), model, 32768) == (6 * 321 + 2048) * block


def test_0_20_1_logged_pool_tokens() -> None:
    # gemma-3-4b, 20 GiB of KV at L 32768: num_blocks = 21,474,836,480 // 327,680 = 65,536; blocks per
    # request 6 x 577 + 2048 = 5,510. 0.20.0 logs num_blocks // 7 groups x 16 = 149,792; 0.20.1
    # (_report_kv_cache_config) int(65,536 / 5,510 x 32,768) = 389,742.
    model = spec(GEMMA4B)
    assert vllm("0.20.0").pool(model, available_bytes=20 * GIB, max_model_len=32768, kv_dtype=BF16).kv_pool_tokens == (
        149_792
    )
    assert vllm("0.20.1").pool(model, available_bytes=20 * GIB, max_model_len=32768, kv_dtype=BF16).kv_pool_tokens == (
        int(65_536 / 5_510 * 32_768)
    )


def test_0_21_nvfp4_sliding_pages_packed() -> None:
    # 0.20.x SlidingWindowSpec.real_page_size_bytes counts 1 B per element: a sliding page 16 x 4 x 512 =
    # 32,768 B against the packed full page 16 x 4 x 2 x (128 + 16) = 18,432 B; 32,768 % 18,432 != 0 and 0.20's
    # unify_kv_cache_spec_page_size raises. 0.21.0 packs sliding pages too: one page size.
    model = spec(GEMMA4B)
    with pytest.raises(UnsupportedArchitecture, match="cannot unify"):
        per_request(vllm("0.20.2", "b200"), model, 32768, KvDtype.NVFP4)
    assert per_request(vllm("0.21.0", "b200"), model, 32768, KvDtype.NVFP4) > 0


# --- groups ----------------------------------------------------------------------------------------------


def group_count(release: str, sliding: int, full: int) -> int:
    types = ["sliding_attention"] * sliding + ["full_attention"] * full
    model = spec(GEMMA4B, num_hidden_layers=sliding + full, layer_types=types)
    return len(vllm(release).global_groups(model, 32768, BF16, 1))


def test_group_size_threshold_by_era() -> None:
    # _get_kv_cache_groups_uniform_page_size: group size min(counts) (0.9.1-0.11.2); max when max < 1.25 min
    # (0.12.0-0.17.1); max when max < 1.5 min (0.18.0+). 13 sliding + 9 full (13 / 9 = 1.44):
    assert group_count("0.11.2", 13, 9) == 2 + 1  # size 9: cdiv(13, 9) sliding + 1 full
    assert group_count("0.17.1", 13, 9) == 2 + 1  # 13 >= 1.25 x 9
    assert group_count("0.18.0", 13, 9) == 1 + 1  # 13 < 1.5 x 9: size 13
    # 11 sliding + 9 full (1.22): padded from 0.12.0.
    assert group_count("0.11.2", 11, 9) == 2 + 1
    assert group_count("0.12.0", 11, 9) == 1 + 1


# --- Mamba and linear-attention hybrids -----------------------------------------------------------------------

NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def test_state_models_need_the_v1_engine() -> None:
    # _is_v1_supported_oracle@0.10.1: "V1 mamba models are unoptimized" -> V0; the V0 state cache
    # (MambaCacheManager) is not modelled.
    with pytest.raises(UnsupportedArchitecture, match="V0 engine"):
        per_request(vllm("0.10.1"), spec(NEMOTRON), 8192)
    assert per_request(vllm("0.10.2"), spec(NEMOTRON), 8192) > 0


@pytest.mark.parametrize(
    ("release", "block", "state_blocks"),
    [
        # Nemotron-H-56B at L 8192 on an H100: 54 Mamba-2 + 10 attention layers (4096 B/token); state conv
        # 122,880 B + SSM 4,194,304 elements. Groups: 6 Mamba + 1 attention of 10 layers.
        # 0.19.x: SSM float16 (NemotronHForCausalLMConfig default): state 8,511,488 B, block 16 x cdiv(8,511,488,
        # 65,536) = 2080; prefix caching off: 1 block per Mamba group; attention cdiv(8192, 2080) = 4 blocks.
        ("0.19.1", 2080, 1),
        # 0.20.0: SSM float32: 16,900,096 B, block 16 x 258 = 4128; attention cdiv(8192, 4128) = 2.
        ("0.20.0", 4128, 1),
        ("0.27.1", 4128, 1),
        # 0.28.0: hybrid prefix caching on by default, "align": 2 blocks per Mamba group.
        ("0.28.0", 4128, 2),
        # 0.32.0: + one mamba_mixer2 prefill-checkpoint block: 3.
        ("0.32.0", 4128, 3),
    ],
)
def test_nemotron_h_state_by_era(release: str, block: int, state_blocks: int) -> None:
    page = block * 4096  # a Mamba state page is padded to the attention page
    attention_blocks = math.ceil(8192 / block)
    expected = (attention_blocks + 6 * state_blocks) * 10 * (page + 0)
    assert per_request(vllm(release), spec(NEMOTRON), 8192) == expected


def test_qwen3_next_gdn_checkpoint_on_033() -> None:
    # Qwen3-Next-80B at L 32768 on an H100: 36 GDN + 12 attention layers (2048 B/token), GDN state 1,097,728 B,
    # groups of 12. 0.32.0: block 16 x cdiv(1,097,728, 32,768) = 544; GDN "align" 2 blocks:
    # (cdiv(32768, 544) = 61 + 3 x 2) x 12 x 544 x 2048 B.
    model = spec(QWEN3_NEXT)
    assert per_request(vllm("0.32.0"), model, 32768) == (61 + 3 * 2) * 12 * 544 * 2048
    # 0.33.0: the FlashInfer GDN prefill on sm_90 checkpoints: A = lcm(16, 64) = 64, block 64 x cdiv(1,097,728,
    # 131,072) = 576; 3 blocks per GDN group: (cdiv(32768, 576) = 57 + 3 x 3) x 12 x 576 x 2048 B.
    assert per_request(vllm("0.33.0"), model, 32768) == (57 + 3 * 3) * 12 * 576 * 2048


def test_speculative_state_blocks_from_016() -> None:
    # MambaSpec.max_memory_usage_bytes@0.14.1: one page; @0.16.0 "none" mode: 1 + num_speculative_blocks.
    # Nemotron-H at 0.19 with 2 draft tokens and prefix caching off: 3 blocks per Mamba group (the Mamba-2 conv
    # also keeps kernel - 1 + 2 columns from 0.17.0, which raises the state and so the block).
    model = spec(NEMOTRON)
    old = vllm("0.14.1", num_speculative_tokens=2).layout(model, model.layers, 8192, BF16, 1)
    new = vllm("0.19.1", num_speculative_tokens=2).layout(model, model.layers, 8192, BF16, 1)
    attn_old, attn_new = math.ceil(8192 / old.block_size), math.ceil(8192 / new.block_size)
    assert old.blocks_per_request == attn_old + 6 * 1
    assert new.blocks_per_request == attn_new + 6 * 3


# --- MLA ---------------------------------------------------------------------------------------------------

DSV3 = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize(
    ("release", "gpu", "dtype", "block"),
    [
        ("0.10.0", "b200", BF16, 16),  # FlashMLA is Hopper-only; Triton MLA 16
        ("0.10.1", "b200", BF16, 128),  # check_and_update_config: "Blackwell => Force CutlassMLA"
        ("0.14.1", "b200", BF16, 128),
        ("0.16.0", "b200", BF16, 64),  # FlashInfer-MLA for qk_nope_head_dim 128, block forced to 64
        ("0.17.1", "h100-sxm", BF16, 64),  # FlashMLA on Hopper
        ("0.18.0", "h100-sxm", BF16, 16),  # update_block_size_for_backend: FlashAttention-MLA, MultipleOf(16)
        ("0.18.0", "h100-sxm", KvDtype.FP8_E4M3, 64),  # FA-MLA has no fp8: FlashMLA [64]
        ("0.18.0", "b200", BF16, 32),  # FlashInfer-MLA [32, 64] -> 32
    ],
)
def test_mla_block_size_by_era(release: str, gpu: str, dtype: KvDtype, block: int) -> None:
    assert vllm(release, gpu).block_size(spec(DSV3), dtype, 1) == block


def test_deepseek_v32_needs_011_and_auto_by_era() -> None:
    v32 = {"model_type": "deepseek_v32", "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}
    model = spec(DSV3, **v32)
    with pytest.raises(UnsupportedArchitecture, match="no DeepSeek-V3.2 sparse attention"):
        vllm("0.10.2").auto_kv_dtype(model, BF16) and vllm("0.10.2").check_supported(model)
    # DeepseekV32ForCausalLM.verify_and_update_config@0.11.0: auto -> fp8_ds_mla; @0.11.1 only fp8.
    assert vllm("0.11.0").auto_kv_dtype(model, BF16) is KvDtype.FP8_DS_MLA
    assert vllm("0.11.1").auto_kv_dtype(model, BF16) is BF16


def test_deepseek_v32_fp8_layout_by_backend() -> None:
    # 0.18+ MLAAttention.__init__: fp8 -> fp8_ds_mla (656 B: 512 NoPE e4m3 + 4 x 4 B scales + 64 x 2 B RoPE) only
    # on FLASHMLA_SPARSE, the sparse backend on Hopper; on sm_10x fp8 takes FlashInfer-MLA sparse: 576 B.
    # Either way + the indexer key: 128 + 128 // 128 x 4 = 132 B per token per layer.
    v32 = {"model_type": "deepseek_v32", "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}
    attn = next(layer.attention for layer in spec(DSV3, **v32).layers if layer.attention)
    assert vllm("0.19.1", "h100-sxm").attention_bytes_per_token(attn, KvDtype.FP8_E4M3) == 656 + 132
    assert vllm("0.19.1", "b200").attention_bytes_per_token(attn, KvDtype.FP8_E4M3) == 576 + 132


# --- dtypes, budget, other models --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "offered", "absent"),
    [
        ("0.8.5", "fp8_e5m2", "bfloat16"),  # config.py CacheDType: auto, fp8, fp8_e4m3, fp8_e5m2
        ("0.11.0", "bfloat16", "float16"),
        ("0.18.0", "float16", "nvfp4"),
        ("0.20.0", "nvfp4", "int4_per_token_head"),
        ("0.25.0", "int4_per_token_head", "nvfp4_ds_mla"),
        ("0.30.0", "nvfp4_ds_mla", "ultraquant_4bit"),
        ("0.33.0", "octave_k3v4", "int8"),
    ],
)
def test_kv_dtypes_offered_by_era(release: str, offered: str, absent: str) -> None:
    kv = get_engine("vllm", release).rules.kv_dtypes  # type: ignore[attr-defined]
    assert offered in kv and absent not in kv


def test_budget_defaults_by_era() -> None:
    # config/cache.py CacheConfig: gpu_memory_utilization 0.9 through 0.19.1, 0.92 from 0.20.0, which also
    # subtracts the CUDA-graph estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1").
    from kvsize.budget import kv_budget

    model = spec(MISTRAL)
    h100 = resolve_gpu("h100-sxm")
    old = kv_budget("vllm", "0.19.1", model, memory_bytes=h100.memory_bytes, weights_bytes=14 * GIB)
    new = kv_budget("vllm", "0.20.0", model, memory_bytes=h100.memory_bytes, weights_bytes=14 * GIB)
    assert (old.utilization, old.cuda_graph_bytes) == (0.90, 0)
    assert new.utilization == 0.92 and new.cuda_graph_bytes > 0


def test_whisper_by_era() -> None:
    whisper = spec("openai/whisper-large-v3")
    with pytest.raises(UnsupportedArchitecture, match="V0 engine"):
        per_request(vllm("0.10.1"), whisper, 448)
    # CrossAttentionSpec: cdiv(max_num_encoder_input_tokens, 16): 0.12.0 the encoder length 1500 -> 94 blocks;
    # 0.13.0 max_num_batched_tokens (H100: 8192) -> 512 blocks. Self attention cdiv(448, 16) = 28 blocks.
    # 32 layers x 20 heads x 64 x 2 x 2 B = 163,840 B per token (all layers).
    assert per_request(vllm("0.12.0"), whisper, 448, KvDtype.FP16) == 163_840 * 16 * (28 + 94)
    assert per_request(vllm("0.13.0"), whisper, 448, KvDtype.FP16) == 163_840 * 16 * (28 + 512)


def test_skip_layers_and_throughput_mode_need_their_release() -> None:
    with pytest.raises(UsageError, match="added in 0.19.0"):
        vllm("0.18.1", kv_cache_dtype_skip_layers="0").check_supported(spec(MISTRAL))
    from kvsize.engines.vllm_scheduler import scheduler_settings

    with pytest.raises(UsageError, match="added in 0.17"):
        scheduler_settings("0.16.0", None, max_model_len=4096, throughput_mode=True)
    assert scheduler_settings("0.17.0", None, max_model_len=4096, throughput_mode=True).max_num_batched_tokens == 4096


def test_rules_records_cite_their_sources() -> None:
    """Each switch has a docstring (its source) in VllmRules."""
    import inspect

    source = inspect.getsource(__import__("kvsize.engines.vllm_releases", fromlist=["VllmRules"]).VllmRules)
    for field in dataclasses.fields(VLLM_RELEASES.newest.rules):
        assert f"    {field.name}:" in source
        after = source.split(f"    {field.name}:", 1)[1].split("\n", 2)[1]
        assert after.strip().startswith('"""'), field.name
