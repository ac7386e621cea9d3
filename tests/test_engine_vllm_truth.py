"""vLLM rules per GPU, version and family, each worked by hand from the release's source (file:function and
version beside each case; the sources are the sdists of vLLM 0.33.0, 0.19.0 and 0.11.0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tiny_configs import registry_config as raw_config
from typer.testing import CliRunner

from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext, UsageContext, compute_capability
from kvsize.engines.vllm import VllmEngine
from kvsize.engines.vllm_scheduler import batch_defaults, max_concurrent_batches, scheduler_settings
from kvsize.errors import UsageError
from kvsize.profiles import resolve_gpu
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

GIB = 1024**3
API, LLM = UsageContext.API_SERVER, UsageContext.LLM_CLASS


def device(gpu_id: str) -> Device:
    return Device.from_profile(resolve_gpu(gpu_id))


# --- 1. scheduler defaults: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults ------------------------------

# (gpu, version, usage, (max_num_batched_tokens, max_num_seqs)), read off the tier tables:
# 0.33: >= 160 GiB -> 16384/1024 both contexts; >= 70 GiB, not "a100" in the name, not capability (12, 1)
#       -> API 8192 / LLM 16384, 1024 seqs; else API 2048 / LLM 8192, 256 seqs.
# 0.19 and 0.11 (EngineArgs._set_default_args): no 160 GiB tier, no GB10 check.
TIERS = [
    ("h100-sxm", "0.33", API, (8192, 1024)),  # 79.65 GiB >= 70, not A100
    ("h100-sxm", "0.33", LLM, (16384, 1024)),
    ("h200", "0.33", API, (8192, 1024)),  # 140.4 GiB < 160
    ("b200", "0.33", API, (16384, 1024)),  # 179.06 GiB >= 160
    ("b200", "0.19", API, (8192, 1024)),  # 0.19 has no 16384 tier
    ("b200", "0.11", LLM, (16384, 1024)),
    ("mi300x", "0.33", API, (16384, 1024)),  # 191.98 GiB (ROCm, same table)
    ("a100-80gb", "0.33", API, (2048, 256)),  # "a100" in the device name: small tier despite 80 GiB
    ("a100-80gb", "0.19", LLM, (8192, 256)),
    ("dgx-spark", "0.33", API, (2048, 256)),  # GB10, capability (12, 1): small tier in 0.33
    # 0.19 has no GB10 check, but NVML answers NOT_SUPPORTED for GB10's memory: get_device_total_memory raises
    # and the defaults' `except Exception` sets device_memory = 0 -> the small tier (as logged in vllm#39734).
    ("dgx-spark", "0.19", API, (2048, 256)),
    ("dgx-spark", "0.19", LLM, (8192, 256)),
    ("l40s", "0.33", API, (2048, 256)),  # 44.99 GiB < 70
    ("l4", "0.11", API, (2048, 256)),
    ("rtx-pro-6000-blackwell", "0.33", API, (8192, 1024)),  # 95.59 GiB, capability (12, 0) is not GB10
    ("tpu-v6e", "0.33", API, (1024, 256)),  # TPU chip override of the tokens only (V6E: 1024 API)
]


@pytest.mark.parametrize(
    ("gpu", "version", "usage", "expected"), TIERS, ids=[f"{t[0]}-{t[1]}-{t[2].name}" for t in TIERS]
)
def test_batch_defaults_by_gpu_and_version(
    gpu: str, version: str, usage: UsageContext, expected: tuple[int, int]
) -> None:
    assert batch_defaults(version, device(gpu), usage) == expected


def test_no_device_is_the_small_tier() -> None:
    # get_batch_defaults: device_memory = 0 when the platform cannot be queried -> the small tier.
    assert batch_defaults("0.33", None, API) == (2048, 256)


def test_custom_card_by_memory_only() -> None:
    # --gpu-mem 96GiB: no name, no capability -> the >= 70 GiB tier (8192 / 1024); 200 GiB -> 16384 in 0.33.
    assert batch_defaults("0.33", Device(96 * GIB), API) == (8192, 1024)
    assert batch_defaults("0.33", Device(200 * GIB), API) == (16384, 1024)
    assert batch_defaults("0.19", Device(200 * GIB), API) == (8192, 1024)


def test_compute_capability_from_profiles() -> None:
    assert device("dgx-spark").capability == (12, 1)
    assert device("b300").capability == (10, 3)
    assert compute_capability("CDNA 3, gfx942") is None


def test_concurrent_batches_and_in_flight() -> None:
    # 0.33 vllm/config/vllm.py VllmConfig.max_concurrent_batches: async scheduling + V2 runner -> pp + 1;
    # max_in_flight_tokens = batches x max_num_batched_tokens.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, pp=2)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (3, 3 * 8192)
    s = scheduler_settings("0.33", device("l40s"), max_model_len=32768)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (2, 2 * 2048)
    # 0.19 multiproc_executor.py max_concurrent_batches: 2 at pp 1 (async on by default), pp otherwise; the
    # sliding-window reserve (SlidingWindowSpec.max_memory_usage_bytes) is one max_num_batched_tokens.
    s = scheduler_settings("0.19", device("h100-sxm"), max_model_len=32768, pp=4)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (4, 8192)
    # 0.11: async scheduling off by default (config/scheduler.py) -> pp batches.
    assert max_concurrent_batches("0.11", 1) == 1 and max_concurrent_batches("0.11", 3) == 3


def test_clamps_of_the_defaults() -> None:
    # 0.33 _set_default_max_num_seqs_and_batched_tokens_args: min(max_num_seqs x max_model_len, default);
    # then max_num_seqs = min(max_num_seqs, max_num_batched_tokens). H100 API, max_model_len 4:
    # min(1024 x 4, 8192) = 4096 tokens; min(1024, 4096) = 1024 seqs.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=4)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (4096, 1024)
    # Without chunked prefill (encoder-decoder): max(max_model_len, default) first: max(32768, 2048) = 32768,
    # then min(256 x 32768, 32768) = 32768 (L40S, API).
    s = scheduler_settings("0.33", device("l40s"), max_model_len=32768, chunked_prefill=False)
    assert s.max_num_batched_tokens == 32768 and s.max_num_encoder_input_tokens == 32768
    # 0.11 EngineArgs._set_default_args: no max_num_seqs x max_model_len clamp (max_model_len 4 keeps 8192), and
    # without chunked prefill max_num_batched_tokens = max_model_len.
    assert scheduler_settings("0.11", device("h100-sxm"), max_model_len=4).max_num_batched_tokens == 8192
    s = scheduler_settings("0.11", device("h100-sxm"), max_model_len=448, chunked_prefill=False)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (448, 448)  # min(1024, 448)
    # --performance-mode throughput (0.19+): both defaults doubled before the clamps.
    s = scheduler_settings("0.19", device("h100-sxm"), max_model_len=32768, throughput_mode=True)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (16384, 2048)


def test_explicit_overrides_are_kept() -> None:
    # A value the user gives is never clamped; the other default is still clamped by it:
    # --max-num-batched-tokens 100 -> max_num_seqs = min(1024, 100) = 100.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, max_num_batched_tokens=100)
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.in_flight_tokens) == (100, 100, 200)
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, max_num_seqs=64)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (8192, 64)


# --- the engine on a GPU -----------------------------------------------------------------------------------


def spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config(load_registry_config(entry))


def vllm(version: str = "0.33", gpu: str | None = None, **options: Any) -> VllmEngine:
    context = EngineContext(device=device(gpu)) if gpu else None
    engine = get_engine("vllm", version, context, **options)
    assert isinstance(engine, VllmEngine)
    return engine


def per_request(engine: VllmEngine, model: ArchSpec, ctx: int, dtype: KvDtype = KvDtype.BF16, **kw: int) -> int:
    return engine.estimate(model, ctx=ctx, batch=1, kv_dtype=dtype, **kw).bytes_per_request


GEMMA3 = "google/gemma-3-4b-it"
# gemma-3-4b: 34 layers, every 6th full (5, 11, 17, 23, 29), 29 sliding (W 1024); 4 KV heads x 256 x (K+V) x 2 B
# = 4096 B per token. Groups (kv_cache_planning.py _get_kv_cache_groups_uniform_page_size): 29 sliding vs 5 full
# -> group size 5 (29 >= 1.5 x 5): 6 sliding groups + 1 full group; a block = 5 pages of 16 x 4096 = 327,680 B.
GEMMA3_BLOCK = 5 * 16 * 4096


@pytest.mark.parametrize(
    ("gpu", "version", "sliding_blocks"),
    [
        # 0.33 in flight = 2 batches x the tier's max_num_batched_tokens (VllmConfig.max_in_flight_tokens);
        # SlidingWindowSpec.max_admission_blocks_per_request = cdiv(min(W - 1 + in_flight, L), 16) + 1.
        ("h100-sxm", "0.33", 1089),  # 2 x 8192: cdiv(1023 + 16384, 16) + 1 = 1088 + 1
        ("l40s", "0.33", 321),  # 2 x 2048: cdiv(1023 + 4096, 16) + 1 = 320 + 1
        ("a100-80gb", "0.33", 321),  # A100 excluded from the 8192 tier: as L40S
        ("l4", "0.33", 321),
        ("b200", "0.33", 2049),  # 2 x 16384: min(1023 + 32768, 32768) = 32768 -> 2048 + 1
        ("dgx-spark", "0.33", 321),  # GB10 excluded in 0.33
        # 0.19 SlidingWindowSpec.max_memory_usage_bytes: one batch of max_num_batched_tokens.
        ("h100-sxm", "0.19", 577),  # cdiv(1023 + 8192, 16) + 1 = 576 + 1
        ("l40s", "0.19", 193),  # cdiv(1023 + 2048, 16) + 1 = 192 + 1
        ("b200", "0.19", 577),  # no 16384 tier in 0.19
        ("dgx-spark", "0.19", 193),  # NVML reads no total on GB10 -> device_memory 0 -> 2048, as L40S
    ],
)
def test_gemma3_sliding_admission_by_gpu(gpu: str, version: str, sliding_blocks: int) -> None:
    # Per request at 32k = (6 sliding groups x sliding blocks + cdiv(32768, 16) = 2048 full blocks) x block.
    assert per_request(vllm(version, gpu), spec(GEMMA3), 32768) == (6 * sliding_blocks + 2048) * GEMMA3_BLOCK


def test_gemma3_issue_example_concurrency() -> None:
    # 20 GiB of KV at 32k: H100 (6 x 1089 + 2048) x 327,680 = 2,812,149,760 B per request -> 7 requests;
    # L40S (6 x 321 + 2048) x 327,680 = 1,302,200,320 B -> 16; B200 (6 x 2049 + 2048) x 327,680 = 4,699,586,560 -> 4.
    budget = 20 * GIB
    assert budget // per_request(vllm("0.33", "h100-sxm"), spec(GEMMA3), 32768) == 7
    assert budget // per_request(vllm("0.33", "l40s"), spec(GEMMA3), 32768) == 16
    assert budget // per_request(vllm("0.33", "b200"), spec(GEMMA3), 32768) == 4


def test_batched_tokens_override_feeds_admission() -> None:
    # --max-num-batched-tokens 512 on an H100 (0.33): in flight 2 x 512 -> cdiv(1023 + 1024, 16) + 1 = 128 + 1.
    engine = vllm("0.33", "h100-sxm", max_num_batched_tokens=512)
    assert per_request(engine, spec(GEMMA3), 32768) == (6 * 129 + 2048) * GEMMA3_BLOCK


def test_pipeline_parallel_groups_are_global_then_projected() -> None:
    # gemma-3-4b at pp 2 on L40S (0.33): in flight (pp + 1) x 2048 = 6144 -> sliding cdiv(1023 + 6144, 16) + 1
    # = 449 blocks; 6 x 449 + 2048 = 4742 blocks per request on each stage.
    # Groups are formed over all 34 layers (get_global_kv_cache_groups): sliding group g holds the g-th, (g+6)-th,
    # ... sliding layer (layers[i::num_groups]); stages are layers 0-16 and 17-33 (get_pp_indices). Stage 0 holds
    # sliding positions 0-14 (groups 0-2: 3 layers, 3-5: 2) and full layers 5, 11: widest group 3 layers. Stage 1
    # holds sliding positions 15-28 (groups 3, 4: 3 layers) and full 17, 23, 29: 3. A block = 3 x 65,536 B.
    # (Grouping each stage on its own would give stage 0 groups of 2 layers: 2 x 65,536 B blocks.)
    engine = vllm("0.33", "l40s")
    model = spec(GEMMA3)
    est = engine.estimate(model, ctx=32768, batch=1, kv_dtype=KvDtype.BF16, pp=2)
    assert est.kv_cache_bytes_per_gpu == 4742 * 3 * 16 * 4096
    stage0 = engine.layout(model, model.layers[:17], 32768, KvDtype.BF16, 1, pp=2)
    assert (stage0.bytes_per_block, stage0.blocks_per_request, stage0.groups) == (3 * 65536, 4742, 7)


# --- 2. Mamba state blocks per request ---------------------------------------------------------------------

NEMOTRON_H = "nvidia/Nemotron-H-56B-Base-8K"
# Nemotron-H-56B: 54 Mamba-2 + 10 attention layers (+ 54 MLP). Attention: 8 KV heads x 128 x 2 x 2 B = 4096 B/token.
# Mamba-2 (MambaStateShapeCalculator.mamba2_state_shape): conv (16384 + 2 x 8 x 256) x 3 = 61,440 bf16 elements
# = 122,880 B; SSM 256 heads x 64 x 256 = 4,194,304 elements.


def test_nemotron_h_align_mode_three_blocks_on_033() -> None:
    # 0.33: SSM fp32 (NemotronHForCausalLMConfig default) -> state 122,880 + 16,777,216 = 16,900,096 B.
    # Block = 16 x cdiv(16,900,096, 16 x 4096) = 16 x 258 = 4128 tokens; page 4128 x 4096 = 16,908,288 B.
    # Prefix caching on for hybrids (is_prefix_caching_supported) -> align mode: 2 + 0 speculative + 1 checkpoint
    # (mamba_mixer2.get_kv_cache_spec). Groups: 54 vs 10 -> size 10: 6 Mamba groups + 1 attention group.
    # At 8192: cdiv(8192, 4128) = 2 attention blocks + 6 x 3 = 20 blocks of 10 pages.
    engine = vllm("0.33", "h100-sxm")
    model = spec(NEMOTRON_H)
    assert engine.block_size(model, KvDtype.BF16, 1) == 4128
    assert per_request(engine, model, 8192) == 20 * 10 * 16_908_288


def test_nemotron_h_without_prefix_caching_one_block() -> None:
    # --no-enable-prefix-caching (0.33): mamba_cache_mode none -> 1 + 0 speculative blocks: 2 + 6 = 8 blocks.
    engine = vllm("0.33", "h100-sxm", enable_prefix_caching=False)
    assert per_request(engine, spec(NEMOTRON_H), 8192) == 8 * 10 * 16_908_288


@pytest.mark.parametrize("version", ["0.19", "0.11"])
def test_nemotron_h_older_versions_one_block(version: str) -> None:
    # 0.19: hybrids default to no prefix caching; NemotronH SSM float16 (0.19 NemotronHForCausalLMConfig);
    # 0.11: prefix caching forced off (MambaModelConfig), SSM in the model dtype. Both 2 B: state 122,880 +
    # 8,388,608 = 8,511,488 B; block 16 x cdiv(8,511,488, 65,536) = 16 x 130 = 2080; page 8,519,680 B.
    # At 8192: cdiv(8192, 2080) = 4 attention blocks + 6 groups x 1 state block = 10 blocks of 10 pages.
    engine = vllm(version, "h100-sxm")
    assert per_request(engine, spec(NEMOTRON_H), 8192) == 10 * 10 * 8_519_680


def test_speculative_tokens_add_state_blocks_and_conv_columns() -> None:
    # 0.33, 2 draft tokens: conv keeps kernel - 1 + 2 = 5 columns: 20480 x 5 x 2 B = 204,800 B; state
    # 204,800 + 16,777,216 = 16,982,016 B -> block 16 x cdiv(16,982,016, 65,536) = 16 x 260 = 4160, page
    # 17,039,360 B. Align mode: 2 + 2 + 1 = 5 blocks per Mamba group: cdiv(8192, 4160) = 2 + 6 x 5 = 32 blocks.
    engine = vllm("0.33", "h100-sxm", num_speculative_tokens=2)
    model = spec(NEMOTRON_H)
    assert engine.block_size(model, KvDtype.BF16, 1) == 4160
    assert per_request(engine, model, 8192) == 32 * 10 * 17_039_360


QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
# Qwen3-Next: 36 GDN + 12 attention; attention 2 KV heads x 256 x 2 x 2 B = 2048 B/token; GDN state (bf16)
# conv 8192 x 3 x 2 = 49,152 + 32 x 128 x 128 x 2 = 1,048,576 -> 1,097,728 B.


def test_qwen3_next_gdn_checkpoint_alignment_on_hopper() -> None:
    # 0.33 on H100 (sm_90): FlashInfer GDN prefill -> checkpoint alignment 64, one checkpoint block
    # (qwen_gdn_linear_attn.py get_kv_cache_spec): block lcm(16, 64) x cdiv(1,097,728, 64 x 2048) = 576.
    # At 32k: cdiv(32768, 576) = 57 + 3 GDN groups x 3 = 66 blocks of 12 pages of 576 x 2048 B.
    engine = vllm("0.33", "h100-sxm")
    model = spec(QWEN3_NEXT)
    assert engine.block_size(model, KvDtype.BF16, 1) == 576
    assert per_request(engine, model, 32768) == 66 * 12 * 576 * 2048


def test_qwen3_next_triton_gdn_on_ampere() -> None:
    # 0.33 on A100 (sm_80): Triton GDN prefill, no checkpoints -> block 16 x cdiv(1,097,728, 32,768) = 16 x 34
    # = 544; align mode 2 blocks. At 32k: cdiv(32768, 544) = 61 + 3 x 2 = 67 blocks of 12 x 544 x 2048 B.
    engine = vllm("0.33", "a100-80gb")
    model = spec(QWEN3_NEXT)
    assert engine.block_size(model, KvDtype.BF16, 1) == 544
    assert per_request(engine, model, 32768) == 67 * 12 * 544 * 2048


def test_qwen3_next_019_no_prefix_caching() -> None:
    # 0.19: block 544 (16-token alignment), one state block: 61 + 3 = 64 blocks.
    assert per_request(vllm("0.19", "h100-sxm"), spec(QWEN3_NEXT), 32768) == 64 * 12 * 544 * 2048


def test_019_explicit_prefix_caching_all_mode_for_mamba2_models() -> None:
    # 0.19 --enable-prefix-caching on NemotronH (SupportsMambaPrefixCaching) -> mamba_cache_mode "all": the
    # block holds a state rounded to the SSD chunk (config chunk_size 128, ModelConfig.get_mamba_chunk_size):
    # tokens per state cdiv(8,511,488, 4096) = 2078; block lcm(128, 16) x cdiv(2078, 128) = 128 x 17 = 2176.
    # Each Mamba layer keeps cdiv(8192, 2176) = 4 blocks (MambaSpec.max_memory_usage_bytes "all"); attention
    # cdiv(8192, 2176) = 4. Per request: 4 + 6 x 4 = 28 blocks of 10 x 2176 x 4096 B.
    engine = vllm("0.19", "h100-sxm", enable_prefix_caching=True)
    model = spec(NEMOTRON_H)
    assert engine.block_size(model, KvDtype.BF16, 1) == 2176
    assert per_request(engine, model, 8192) == 28 * 10 * 2176 * 4096


# --- 3. n_groups replication and state dtypes -------------------------------------------------------------


def mamba2_hybrid(n_groups: int, **extra: Any) -> ArchSpec:
    """A small Nemotron-H style hybrid: 2 Mamba-2 layers, 1 attention layer."""
    return parse_config(
        {
            "model_type": "nemotron_h",
            "architectures": ["NemotronHForCausalLM"],
            "hidden_size": 1024,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "num_hidden_layers": 3,
            "hybrid_override_pattern": "MM*",
            "mamba_num_heads": 16,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": n_groups,
            "conv_kernel": 4,
            "expand": 1,
            "vocab_size": 1000,
            "torch_dtype": "bfloat16",
            **extra,
        }
    )


def test_n_groups_replicated_when_tp_does_not_divide() -> None:
    # n_groups 1 at tp 4 (MambaStateShapeCalculator.extra_groups_for_head_shards: 4 - 1 = 3 extra): conv channels
    # (1024 + 2 x 4 x 128) / 4 = 512 per rank, x 3 columns x 2 B = 3072 B; SSM 16/4 x 64 x 128 x 4 B (fp32) =
    # 131,072 B -> 134,144 B per rank. Without replication it would be (1024 + 256)/4 x 3 x 2 = 1920 B of conv.
    engine = vllm("0.33", "h100-sxm")
    model = mamba2_hybrid(1)
    state = next(layer.state for layer in model.layers if layer.state is not None)
    assert engine.state_bytes(model, state, 4) == 3072 + 131_072
    # n_groups 8 at tp 4 divides: (1024 + 2 x 8 x 128) / 4 x 3 x 2 = 4608 B of conv.
    model8 = mamba2_hybrid(8)
    state8 = next(layer.state for layer in model8.layers if layer.state is not None)
    assert engine.state_bytes(model8, state8, 4) == 4608 + 131_072


def test_nemotron_h_config_names_ssm_dtype() -> None:
    # mamba_ssm_cache_dtype "bfloat16" in the config: 0.33 and 0.19 follow it (update_mamba_ssm_cache_dtype).
    model = mamba2_hybrid(8, mamba_ssm_cache_dtype="bfloat16")
    state = next(layer.state for layer in model.layers if layer.state is not None)
    assert vllm("0.33").state_dtypes(model, state) == (KvDtype.BF16, KvDtype.BF16)
    plain = mamba2_hybrid(8)
    state = next(layer.state for layer in plain.layers if layer.state is not None)
    assert vllm("0.33").state_dtypes(plain, state) == (KvDtype.BF16, KvDtype.FP32)
    assert vllm("0.19").state_dtypes(plain, state) == (KvDtype.BF16, KvDtype.FP16)
    assert vllm("0.11").state_dtypes(plain, state) == (KvDtype.BF16, KvDtype.BF16)


def test_qwen3_5_mamba_ssm_dtype() -> None:
    # Qwen3_5ForConditionalGenerationConfig (0.19+): mamba_ssm_cache_dtype auto -> the config's mamba_ssm_dtype.
    raw = raw_config(QWEN3_NEXT)
    raw.update(model_type="qwen3_5_moe", architectures=["Qwen3_5MoeForCausalLM"], mamba_ssm_dtype="float32")
    model = parse_config(raw)
    state = next(layer.state for layer in model.layers if layer.state is not None)
    assert vllm("0.33").state_dtypes(model, state) == (KvDtype.BF16, KvDtype.FP32)
    # GDN state at tp 1: conv 8192 x 3 x 2 B = 49,152 + SSM 32 x 128 x 128 x 4 B = 2,097,152.
    assert vllm("0.33").state_bytes(model, state) == 49_152 + 2_097_152


def test_mamba_heads_must_divide_tp() -> None:
    # MambaStateShapeCalculator divides the 16 Mamba heads over tp (divide() asserts): tp 8 is fine (also 8
    # attention heads), a 12-head model at tp 8 is not.
    engine = vllm("0.33")
    engine.check_parallel(mamba2_hybrid(8), 8, 1)
    with pytest.raises(UsageError, match="Mamba heads"):
        engine.check_parallel(mamba2_hybrid(8, mamba_num_heads=12, mamba_head_dim=64, expand=1, hidden_size=768), 8, 1)


# --- 4. DeepSeek-V3.2 sparse MLA, 11. MLA block per backend -------------------------------------------------


def deepseek_v32() -> ArchSpec:
    raw = raw_config("deepseek-ai/DeepSeek-V3")
    raw.update(
        model_type="deepseek_v32",
        architectures=["DeepseekV32ForCausalLM"],
        index_topk=2048,
        index_head_dim=128,
        index_n_heads=64,
    )
    return parse_config(raw)


@pytest.mark.parametrize(
    ("version", "dtype", "per_token_layer"),
    [
        # bf16 latent (512 + 64) x 2 = 1152 B + indexer 128 + 128 // 128 x 4 = 132 B (Indexer: uint8 fp8 keys with
        # fp32 scales) = 1284 B per token per layer.
        ("0.33", KvDtype.BF16, 1152 + 132),
        # fp8_ds_mla (flashmla_sparse.py): 512 e4m3 + 4 x 4 B scales + 64 x 2 B RoPE = 656 B, + 132 = 788.
        ("0.33", KvDtype.FP8_DS_MLA, 656 + 132),
        # FlashMLA sparse takes "fp8" as fp8_ds_mla (supported_kv_cache_dtypes: "fp8  # alias for fp8_ds_mla").
        ("0.33", KvDtype.FP8_E4M3, 656 + 132),
        # nvfp4_ds_mla: 256 B e2m1 + 32 e4m3 scales + 64 e4m3 RoPE = 352 B, + 132 = 484.
        ("0.33", KvDtype.NVFP4_DS_MLA, 352 + 132),
        ("0.19", KvDtype.FP8_DS_MLA, 656 + 132),
    ],
)
def test_deepseek_v32_sparse_mla_and_indexer(version: str, dtype: KvDtype, per_token_layer: int) -> None:
    # 61 MLA layers + 61 indexer caches, one group (UniformTypeKVCacheSpecs), 64-token blocks (FlashMLA sparse).
    # At 4096: cdiv(4096, 64) = 64 blocks of 64 tokens.
    engine = vllm(version, "h100-sxm")
    model = deepseek_v32()
    assert engine.block_size(model, dtype, 8) == 64
    est = engine.estimate(model, ctx=4096, batch=1, kv_dtype=dtype, tp=8)
    assert est.kv_cache_bytes_per_gpu == 61 * per_token_layer * 64 * 64


def test_deepseek_v32_auto_on_011_is_fp8_ds_mla() -> None:
    # 0.11 models/config.py DeepseekV32ForCausalLM: cache_dtype auto or fp8* -> fp8_ds_mla.
    model = deepseek_v32()
    assert vllm("0.11").auto_kv_dtype(model, KvDtype.BF16) is KvDtype.FP8_DS_MLA
    assert vllm("0.33").auto_kv_dtype(model, KvDtype.BF16) is KvDtype.BF16
    with pytest.raises(UnsupportedArchitecture, match="sparse-MLA"):
        vllm("0.33").estimate(spec("deepseek-ai/DeepSeek-V3"), ctx=64, batch=1, kv_dtype=KvDtype.FP8_DS_MLA)
    with pytest.raises(UnsupportedArchitecture, match="nvfp4_ds_mla"):
        vllm("0.19").estimate(model, ctx=64, batch=1, kv_dtype=KvDtype.NVFP4_DS_MLA)


@pytest.mark.parametrize(
    ("version", "gpu", "dtype", "block"),
    [
        # 0.33 / 0.19 platforms/cuda.py _get_backend_priorities (MLA): Hopper FLASH_ATTN_MLA (MultipleOf(16), no
        # fp8) -> 16 in bf16, FLASHMLA ([64]) for fp8; Blackwell sm_10x FLASHINFER_MLA ([32, 64]) -> 32;
        # sm_12x and Ampere TRITON_MLA -> 16.
        ("0.33", "h100-sxm", KvDtype.BF16, 16),
        ("0.33", "h100-sxm", KvDtype.FP8_E4M3, 64),
        ("0.33", "b200", KvDtype.BF16, 32),
        ("0.33", "b200", KvDtype.FP8_E4M3, 32),
        ("0.33", "a100-80gb", KvDtype.BF16, 16),
        ("0.19", "h100-sxm", KvDtype.FP8_E4M3, 64),
        # 0.11 platforms/cuda.py check_and_update_config: FlashMLA forced to 64 off Blackwell, CUTLASS MLA 128 on
        # capability 10.0.
        ("0.11", "h100-sxm", KvDtype.BF16, 64),
        ("0.11", "b200", KvDtype.BF16, 128),
    ],
)
def test_mla_block_size_per_backend(version: str, gpu: str, dtype: KvDtype, block: int) -> None:
    # DeepSeek-V3 at 1000 tokens: cdiv(1000, block) blocks of block tokens x 61 layers x 576 x bytes.
    engine = vllm(version, gpu)
    model = spec("deepseek-ai/DeepSeek-V3")
    assert engine.block_size(model, dtype, 8) == block
    width = 1 if dtype is KvDtype.FP8_E4M3 else 2
    est = engine.estimate(model, ctx=1000, batch=1, kv_dtype=dtype, tp=8)
    assert est.kv_cache_bytes_per_gpu == -(-1000 // block) * block * 61 * 576 * width


# --- 5. cross-attention and Mllama -------------------------------------------------------------------------


def whisper() -> ArchSpec:
    raw = json.loads((Path(__file__).parent / "data" / "configs" / "openai--whisper-large-v3.json").read_text())
    return parse_config(raw)


def test_whisper_cross_attention_by_max_num_encoder_input_tokens() -> None:
    # 0.19 on L40S: SchedulerConfig.max_num_encoder_input_tokens = max_num_batched_tokens; no chunked prefill for
    # encoder-decoder -> max(448, 2048) = 2048, min(256 x 448, 2048) = 2048 -> cdiv(2048, 16) = 128 cross blocks;
    # self-attention cdiv(448, 16) = 28. 32 layers x 20 heads x 64 x 2 x 2 B = 163,840 B per token (all layers).
    est = vllm("0.19", "l40s").estimate(whisper(), ctx=448, batch=1, kv_dtype=KvDtype.FP16)
    assert est.bytes_per_request == 163_840 * 16 * (28 + 128)


def test_mllama_refused_with_the_reason() -> None:
    # models/registry.py@0.11.0 _PREVIOUSLY_SUPPORTED_MODELS: "MllamaForConditionalGeneration": "0.10.2"; through
    # 0.10.2 it is SupportsV0Only, and kvsize does not model the V0 engine.
    mllama = spec("meta-llama/Llama-3.2-90B-Vision-Instruct")
    with pytest.raises(UnsupportedArchitecture, match="removed the model after 0.10.2"):
        vllm("0.33").estimate(mllama, ctx=4096, batch=1, kv_dtype=KvDtype.BF16)
    with pytest.raises(UnsupportedArchitecture, match="on its V0 engine only"):
        vllm("0.10.2").estimate(mllama, ctx=4096, batch=1, kv_dtype=KvDtype.BF16)


# --- 6. KV dtypes per version, 8. auto ---------------------------------------------------------------------

LLAMA = "meta-llama/Llama-3.1-8B"


def test_per_token_head_dtypes_add_inline_scales() -> None:
    # TritonAttentionBackend.customize_spec (0.33): (hs_k + hs_v) x 1 B + 2 x 4 B per head. Llama-3.1-8B:
    # 8 heads x (128 + 128 + 8) = 2112 B per token per layer; int4: 8 x (64 + 64 + 8) = 1088 B.
    engine = vllm("0.33")
    model = spec(LLAMA)
    assert engine.estimate(model, ctx=16, batch=1, kv_dtype=KvDtype.INT8_PER_TOKEN_HEAD).kv_bytes_per_token == 32 * 2112
    assert engine.estimate(model, ctx=16, batch=1, kv_dtype=KvDtype.FP8_PER_TOKEN_HEAD).kv_bytes_per_token == 32 * 2112
    assert engine.estimate(model, ctx=16, batch=1, kv_dtype=KvDtype.INT4_PER_TOKEN_HEAD).kv_bytes_per_token == 32 * 1088


@pytest.mark.parametrize(
    ("version", "dtype"),
    [
        ("0.33", KvDtype.INT8),
        ("0.33", KvDtype.INT4),
        ("0.33", KvDtype.MXFP4),
        ("0.33", KvDtype.Q4_0),
        ("0.33", KvDtype.FP32),
        ("0.19", KvDtype.INT8_PER_TOKEN_HEAD),  # 0.19 CacheDType has no *_per_token_head
        ("0.19", KvDtype.NVFP4),
        ("0.11", KvDtype.FP16),  # 0.11 CacheDType: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc
    ],
)
def test_kv_dtypes_vllm_does_not_offer(version: str, dtype: KvDtype) -> None:
    with pytest.raises(UnsupportedArchitecture, match=f"vLLM {version} has no .*offers auto"):
        vllm(version).estimate(spec(LLAMA), ctx=16, batch=1, kv_dtype=dtype)


def test_cli_refuses_int8_naming_what_vllm_offers() -> None:
    result = CliRunner().invoke(app, [LLAMA, "--ctx", "1k", "--kv-dtype", "int8"])
    assert result.exit_code == 2
    assert "int8_per_token_head" in result.output and "fp8_e4m3" in result.output


def test_served_dtype_for_auto() -> None:
    # config/model.py _resolve_auto_dtype: float32 -> the platform's first dtype: bfloat16 from sm_80,
    # float16 on Turing (T4, sm_75: CudaPlatform.supported_dtypes [float16, float32]); a bfloat16 checkpoint on
    # a T4 falls back to float16; gemma3 may not run in float16 (_FLOAT16_NOT_SUPPORTED_MODELS) -> float32.
    llama32 = msgspec.structs.replace(spec(LLAMA), model_dtype="fp32")
    assert vllm("0.33", "h100-sxm").auto_kv_dtype(llama32, KvDtype.FP32) is KvDtype.BF16
    assert vllm("0.33", "t4").auto_kv_dtype(llama32, KvDtype.FP32) is KvDtype.FP16
    assert vllm("0.33", "t4").auto_kv_dtype(spec(LLAMA), KvDtype.BF16) is KvDtype.FP16
    gemma = spec(GEMMA3)
    assert vllm("0.33", "t4").served_dtype(gemma) is KvDtype.FP32
    # A config's fp8 KV scheme is kept.
    assert vllm("0.33", "h100-sxm").auto_kv_dtype(llama32, KvDtype.FP8_E4M3) is KvDtype.FP8_E4M3


# --- 7. --kv-cache-dtype-skip-layers --------------------------------------------------------------------------


def test_skip_sliding_layers_realigns_blocks_033() -> None:
    # gemma-3-4b, fp8 with sliding layers skipped (0.33, H100). Primary page per token P = 4 x 256 x 2 x 1 = 2048,
    # skipped S = 4096 (bf16). Platform._align_heterogeneous_kv_block_size: block = 16 x cdiv(16 x 4096, 16 x 2048)
    # = 32; shared page 32 x 2048 = 65,536. Sliding layers: largest multiple of 16 tokens within 65,536 / 4096 = 16
    # (_largest_kernel_block_within). Sliding blocks cdiv(1023 + 16384, 16) + 1 = 1089; full cdiv(32768, 32) = 1024.
    # Equal pages: 6 sliding groups + 1 full group of 5 layers: (6 x 1089 + 1024) x 5 x 65,536.
    engine = vllm("0.33", "h100-sxm", kv_cache_dtype_skip_layers="sliding_window")
    model = spec(GEMMA3)
    assert engine.block_size(model, KvDtype.FP8_E4M3, 1) == 32
    assert per_request(engine, model, 32768, KvDtype.FP8_E4M3) == (6 * 1089 + 1024) * 5 * 65536


def test_skip_sliding_layers_unify_019() -> None:
    # 0.19 has no block alignment for skip layers: sliding bf16 page 16 x 4096 = 65,536, full fp8 16 x 2048 =
    # 32,768 -> unify_kv_cache_spec_page_size doubles the full block to 32: cdiv(32768, 32) = 1024 blocks.
    # Sliding (one batch of 8192 in flight): cdiv(1023 + 8192, 16) + 1 = 577. (6 x 577 + 1024) x 5 x 65,536.
    engine = vllm("0.19", "h100-sxm", kv_cache_dtype_skip_layers="sliding_window")
    assert per_request(engine, spec(GEMMA3), 32768, KvDtype.FP8_E4M3) == (6 * 577 + 1024) * 5 * 65536


def test_skip_layers_by_index_in_one_group() -> None:
    # Llama-3.1-8B fp8 with layers 0 and 1 skipped (0.33): every layer is full attention, one group; the skipped
    # layers' page (bf16, 4096 B/token) is twice the primary (fp8, 2048 B), so the block grows to
    # 16 x cdiv(16 x 4096, 16 x 2048) = 32 tokens. At 1000 tokens: cdiv(1000, 32) = 32 blocks of 32 tokens;
    # per token 30 x 2048 + 2 x 4096.
    engine = vllm("0.33", "h100-sxm", kv_cache_dtype_skip_layers="0,1")
    assert per_request(engine, spec(LLAMA), 1000, KvDtype.FP8_E4M3) == 32 * 32 * (30 * 2048 + 2 * 4096)


def test_skip_layers_before_019_refused() -> None:
    # The option first appears in 0.19.0 (config/cache.py, engine/arg_utils.py); 0.18.1's sources have no
    # kv_cache_dtype_skip_layers at all.
    engine = vllm("0.18.1", "h100-sxm", kv_cache_dtype_skip_layers="sliding_window")
    with pytest.raises(UsageError, match=r"vLLM 0.18.1 has no --kv-cache-dtype-skip-layers \(added in 0.19.0\)"):
        per_request(engine, spec(GEMMA3), 32768, KvDtype.FP8_E4M3)
    with pytest.raises(UsageError, match="neither a layer index"):
        vllm(kv_cache_dtype_skip_layers="full")


# --- 9. tensor-parallel validation ---------------------------------------------------------------------------


def test_tp_must_divide_attention_heads() -> None:
    with pytest.raises(UsageError, match=r"attention heads \(32\) must be divisible by tensor parallel size \(3\)"):
        vllm("0.33").estimate(spec(LLAMA), ctx=16, batch=1, kv_dtype=KvDtype.BF16, tp=3)
    result = CliRunner().invoke(app, [LLAMA, "--ctx", "1k", "--tp", "3"])
    assert result.exit_code == 2 and "divisible by tensor parallel size" in result.output


def test_tp_must_split_or_replicate_kv_heads_evenly() -> None:
    # QKVParallelLinear: 8 KV heads at tp 16 are replicated (16 / 8 = 2 copies); a 40-head, 8-KV-head model at
    # tp 5 passes the attention-head check (40 % 5 = 0) but divide(8, 5) fails; at tp 10, divide(10, 8) fails.
    vllm("0.33").check_parallel(spec(LLAMA), 16, 1)
    raw = raw_config(LLAMA)
    raw.update(num_attention_heads=40, hidden_size=5120)
    model = parse_config(raw)
    for tp in (5, 10):
        with pytest.raises(UsageError, match=f"8 KV heads over tensor parallel size {tp}"):
            vllm("0.33").check_parallel(model, tp, 1)


# --- the running-request cap ---------------------------------------------------------------------------------


def test_max_running_requests_is_max_num_seqs() -> None:
    assert vllm("0.33", "h100-sxm").max_running_requests(spec(LLAMA), 32768) == 1024
    assert vllm("0.33", "l40s").max_running_requests(spec(LLAMA), 32768) == 256
    assert vllm("0.33", "h100-sxm", max_num_seqs=64).max_running_requests(spec(LLAMA), 32768) == 64
    # max_num_seqs = min(1024, max_num_batched_tokens) with --max-num-batched-tokens 100.
    assert vllm("0.33", "h100-sxm", max_num_batched_tokens=100).max_running_requests(spec(LLAMA), 32768) == 100


# --- more hybrid families (synthetic configs, shapes as the families' configs name them) ---------------------

FALCON_H1 = {
    "model_type": "falcon_h1",
    "architectures": ["FalconH1ForCausalLM"],
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 4,
    "mamba_d_ssm": 1536,
    "mamba_n_heads": 24,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
    "mamba_n_groups": 1,
    "intermediate_size": 2048,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(("version", "state_blocks"), [("0.33", 3), ("0.19", 1), ("0.11", 1)])
def test_falcon_h1_parallel_hybrid(version: str, state_blocks: int) -> None:
    # Every layer: attention (2 KV heads x 64 x 2 x 2 B = 512 B/token) beside a Mamba-2 mixer: conv
    # (1536 + 2 x 1 x 128) x 3 x 2 B = 10,752 + SSM 24 x 64 x 128 x 2 B = 393,216 -> 403,968 B.
    # Block 16 x cdiv(403,968, 16 x 512) = 16 x 50 = 800; page 800 x 512 = 409,600 B. 4 attention + 4 Mamba
    # specs: group size 4, 2 groups, a block = 4 pages. At 4096: cdiv(4096, 800) = 6 + state blocks
    # (0.33 align mode with the mamba_mixer2 checkpoint: 3; 0.19 / 0.11: 1).
    model = parse_config(FALCON_H1)
    engine = vllm(version, "h100-sxm")
    assert engine.block_size(model, KvDtype.BF16, 1) == 800
    assert per_request(engine, model, 4096) == (6 + state_blocks) * 4 * 409_600


def test_falcon_h1_tp2_replicates_the_single_group() -> None:
    # tp 2: n_groups 1 -> 2 (extra_groups_for_head_shards): conv (1536 + 2 x 2 x 128) / 2 x 3 x 2 B = 6144;
    # SSM 12 x 64 x 128 x 2 B = 196,608 -> 202,752 B. Attention 1 KV head: 256 B/token. Block 16 x
    # cdiv(202,752, 4096) = 800; page 204,800 B. Per rank (6 + 3) x 4 x 204,800; both ranks twice that.
    est = vllm("0.33", "h100-sxm").estimate(parse_config(FALCON_H1), ctx=4096, batch=1, kv_dtype=KvDtype.BF16, tp=2)
    assert est.kv_cache_bytes_per_gpu == 9 * 4 * 204_800
    assert est.kv_cache_bytes == 2 * 9 * 4 * 204_800


def test_granite4_hybrid() -> None:
    # 3 Mamba-2 + 1 attention layer. Attention 4 KV heads x 128 x 2 x 2 B = 2048 B/token; Mamba-2 conv
    # (3072 + 256) x 3 x 2 B = 19,968 + SSM 48 x 64 x 128 x 2 B = 786,432 -> 806,400 B. Block 16 x
    # cdiv(806,400, 32,768) = 16 x 25 = 400; page 819,200 B. Buckets 3 vs 1 -> group size 1: 3 Mamba groups +
    # 1 attention group, a block = one page. At 4096: cdiv(4096, 400) = 11 + 3 x (3 in 0.33, 1 in 0.19).
    model = parse_config(
        {
            "model_type": "granitemoehybrid",
            "architectures": ["GraniteMoeHybridForCausalLM"],
            "hidden_size": 1536,
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
            "num_hidden_layers": 4,
            "layer_types": ["mamba", "mamba", "mamba", "attention"],
            "mamba_d_state": 128,
            "mamba_d_conv": 4,
            "mamba_n_heads": 48,
            "mamba_d_head": 64,
            "mamba_n_groups": 1,
            "mamba_expand": 2,
            "vocab_size": 1000,
            "torch_dtype": "bfloat16",
        }
    )
    assert per_request(vllm("0.33", "h100-sxm"), model, 4096) == (11 + 3 * 3) * 819_200
    assert per_request(vllm("0.19", "h100-sxm"), model, 4096) == (11 + 3 * 1) * 819_200


def test_gpu_reaches_the_engine_through_the_api() -> None:
    # kvsize google/gemma-3-4b-it --ctx 32k --gpu l40s --kv-memory 20GiB: the engine context carries the L40S,
    # so the request is (6 x 321 + 2048) x 327,680 = 1,302,200,320 B and vLLM's concurrency figure is
    # floor(20 GiB / 327,680 B) = 65,536 blocks / 3974 blocks per request = 16.49.
    from kvsize.api import estimate
    from kvsize.budget import BudgetSettings

    entry = find_entry(GEMMA3)
    assert entry is not None
    result = estimate(
        load_registry_config(entry),
        ctx=32768,
        kv_dtype="bf16",
        gpu="l40s",
        budget=BudgetSettings(kv_memory_bytes=20 * GIB),
    )
    [scenario] = result.scenarios
    assert scenario.bytes_per_request == 1_302_200_320
    assert scenario.gpu is not None and scenario.gpu.concurrency == 65536 / 3974
