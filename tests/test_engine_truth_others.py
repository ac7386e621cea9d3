"""Engine truth for SGLang, llama.cpp, TensorRT-LLM and transformers, and the model families behind them.

Every expected value is worked by hand from the engine's source (file:function and version beside it), never
copied from kvsize's output. SGLang paths are under `sglang/srt/` of the 0.5.23 wheel; llama.cpp paths under the
llama.cpp vendored by llama-cpp-python 0.3.36; TensorRT-LLM paths under `tensorrt_llm/` and `cpp/` of its 1.2 line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvsize.budget import BudgetSettings, kv_budget
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext
from kvsize.engines.hf import HfEngine
from kvsize.engines.llamacpp import LlamaCppEngine
from kvsize.engines.sglang import (
    SglangEngine,
    SglangPool,
    default_max_running_requests,
    default_mem_fraction_static,
    is_hybrid_swa,
    prefill_graph_sizes,
    sglang_gpu_defaults,
    spec_mem_fraction_static,
    uses_mamba_extra_buffer,
    vlm_mem_fraction_factor,
)
from kvsize.engines.trtllm import TrtllmEngine
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec, AttentionKind, StateKind
from kvsize.verify import truncate_layers

BF16 = KvDtype.BF16
FP16 = KvDtype.FP16
MIB = 1024**2
GIB = 1024**3

# nvidia-smi memory.total of the profiles (gpu_profiles/*.yaml memory_bytes / 2**20).
H100_MIB = 81_559
H200_MIB = 143_771
L40S_MIB = 46_068
T4_MIB = 15_360
B200_MIB = 183_359
MI300X_MIB = 196_592


def raw(hub_id: str) -> dict[str, Any]:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return dict(load_registry_config(entry))


def spec(hub_id: str, **changes: Any) -> ArchSpec:
    return parse_config({**raw(hub_id), **changes}, source=hub_id)


def sglang(**options: Any) -> SglangEngine:
    engine = get_engine("sglang", **options)
    assert isinstance(engine, SglangEngine)
    return engine


def llamacpp(version: str | None = None, **options: Any) -> LlamaCppEngine:
    engine = get_engine("llamacpp", version, **options)
    assert isinstance(engine, LlamaCppEngine)
    return engine


def trtllm(**options: Any) -> TrtllmEngine:
    engine = get_engine("trtllm", **options)
    assert isinstance(engine, TrtllmEngine)
    return engine


LLAMA = "meta-llama/Llama-3.1-8B"
GPT_OSS = "openai/gpt-oss-20b"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
NEMOTRON_H = "nvidia/Nemotron-H-56B-Base-8K"
MAMBA2 = "mistralai/Mamba-Codestral-7B-v0.1"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
MISTRAL = "mistralai/Mistral-7B-Instruct-v0.3"
QWEN25_VL = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN25_7B = "Qwen/Qwen2.5-7B"
DSV3 = "deepseek-ai/DeepSeek-V3"


# ======================================================================================================
# SGLang 0.5.23: default mem_fraction_static (arg_groups/memory_hook.py handle_gpu_memory_settings)
# ======================================================================================================


def test_sglang_gpu_tiers() -> None:
    # handle_gpu_memory_settings: (chunked_prefill_size, decode CUDA-graph max_bs) by nvidia-smi MiB.
    assert sglang_gpu_defaults(T4_MIB) == (2048, 8)  # < 20 GiB
    assert sglang_gpu_defaults(L40S_MIB) == (4096, 32)  # < 60 GiB, tp < 4
    assert sglang_gpu_defaults(L40S_MIB, tp=4) == (4096, 160)
    assert sglang_gpu_defaults(H100_MIB) == (8192, 256)  # < 90 GiB
    assert sglang_gpu_defaults(H200_MIB, tp=8) == (8192, 512)  # < 160 GiB, tp >= 4
    assert sglang_gpu_defaults(B200_MIB) == (16384, 512)  # >= 160 GiB


def test_sglang_prefill_graph_buckets() -> None:
    # cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes: 4..32 step 4 (8), 48..256 step 16 (14),
    # 288..512 step 32 (8), 576..1024 step 64 (8), 1280..4096 step 256 (12), 4608..max step 512.
    assert len(prefill_graph_sizes(2048)) == 8 + 14 + 8 + 8 + 4  # 1280, 1536, 1792, 2048
    assert len(prefill_graph_sizes(4096)) == 50
    assert len(prefill_graph_sizes(8192)) == 58  # + 4608..8192: 8
    assert len(prefill_graph_sizes(16384)) == 74  # + 4608..16384: 24


def test_sglang_mem_fraction_h100() -> None:
    # H100 81,559 MiB, tp 1: reserved = 512 + 1.5 x 8192 (12,288) + 1 x 1 / 8 x 1024 (128) + 2 x 256 (512)
    # + 58 prefill buckets x 8 (464) = 13,904 MiB (>= the 10 GiB floor); round((81,559 - 13,904) / 81,559, 3)
    # = round(0.82952, 3) = 0.830 - not the 0.874 of older releases.
    assert default_mem_fraction_static(H100_MIB) == 0.830
    # tp 4: max_bs 512 (1,024) and tp x pp / 8 x 1024 = 512: 512 + 12,288 + 512 + 1,024 + 464 = 14,800;
    # (81,559 - 14,800) / 81,559 = 0.81854 -> 0.819.
    assert default_mem_fraction_static(H100_MIB, tp=4) == 0.819
    # pp 2: the breakable prefill graph is off with pp > 1 (cuda_graph_hook.py apply_cuda_graph_compatibility):
    # 512 + 12,288 + 256 + 512 = 13,568; (81,559 - 13,568) / 81,559 = 0.83364 -> 0.834.
    assert default_mem_fraction_static(H100_MIB, pp=2) == 0.834
    # MLA: the prefill graph reserve is 1.5 GiB (reserve_for_graph_mb): 512 + 12,288 + 128 + 512 + 1,536 = 14,976;
    # (81,559 - 14,976) / 81,559 = 0.81638 -> 0.816.
    assert default_mem_fraction_static(H100_MIB, mla=True) == 0.816
    assert spec_mem_fraction_static(spec(DSV3), H100_MIB * MIB) == 0.816


def test_sglang_mem_fraction_per_tier() -> None:
    # H200 143,771 MiB: the H100 reserve 13,904; (143,771 - 13,904) / 143,771 = 0.90329 -> 0.903.
    assert default_mem_fraction_static(H200_MIB) == 0.903
    # L40S 46,068 MiB: 512 + 1.5 x 4096 (6,144) + 128 + 2 x 32 (64) + 50 x 8 (400) = 7,248, no floor (<= 60 GiB);
    # (46,068 - 7,248) / 46,068 = 0.84267 -> 0.843.
    assert default_mem_fraction_static(L40S_MIB) == 0.843
    # T4 15,360 MiB: 512 + 3,072 + 128 + 16 + 42 x 8 (336) = 4,064; (15,360 - 4,064) / 15,360 = 0.73542 -> 0.735.
    assert default_mem_fraction_static(T4_MIB) == 0.735
    # B200 183,359 MiB: 512 + 24,576 + 128 + 1,024 + 74 x 8 (592) = 26,832; (183,359 - 26,832) / 183,359
    # = 0.85366 -> 0.854.
    assert default_mem_fraction_static(B200_MIB) == 0.854


def test_sglang_mem_fraction_vlm() -> None:
    # Qwen2.5-VL-7B: multimodal, so no prefill graph (cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible,
    # not on multimodal_breakable_cuda_graph_supported_model_archs): 512 + 12,288 + 128 + 512 = 13,440;
    # round((81,559 - 13,440) / 81,559, 3) = 0.835. adjust_mem_fraction_for_vlm: ViT 32 layers (depth) x 1280 wide:
    # 32 x 1280^2 / (24 x 1024^2) = 2.083333; factor 1 - 0.1 x 1.083333 = 0.891667; x 0.95 = 0.847083.
    assert vlm_mem_fraction_factor(32, 1280) == pytest.approx(0.95 * (1 - 0.1 * (32 * 1280**2 / (24 * 1024**2) - 1)))
    assert spec_mem_fraction_static(spec(QWEN25_VL), H100_MIB * MIB) == pytest.approx(0.835 * 0.8470833333, rel=1e-9)
    # A ViT-L/14 (24 x 1024) gets only the base 0.95; the factor clamps to [0.8, 1.05].
    assert vlm_mem_fraction_factor(None, None) == pytest.approx(0.95)
    assert vlm_mem_fraction_factor(64, 4096) == pytest.approx(0.95 * 0.8)


def test_sglang_mem_fraction_amd_aiter() -> None:
    # MI300X 196,592 MiB (ROCm): no breakable prefill graph (a CUDA default); 512 + 24,576 + 128 + 1,024 = 26,240;
    # (196,592 - 26,240) / 196,592 = 0.86652 -> 0.867. Llama 3.1 (context 131,072 > 8,192, MHA: aiter backend,
    # model_override_base.py get_default_attention_backend) x 0.85 (attention_hook.py) = 0.73695.
    assert spec_mem_fraction_static(spec(LLAMA), MI300X_MIB * MIB, amd=True) == pytest.approx(0.867 * 0.85)
    # A 4k-context model keeps 0.867.
    assert spec_mem_fraction_static(spec(LLAMA, max_position_embeddings=4096), MI300X_MIB * MIB, amd=True) == 0.867


def test_sglang_budget_uses_the_formula() -> None:
    # kv_budget's SGLang branch takes the 0.5.23 default: 0.830 on an H100 (above).
    budget = kv_budget("sglang", "0.5.23", spec(LLAMA), memory_bytes=H100_MIB * MIB, weights_bytes=16 * GIB)
    assert budget.utilization == 0.830
    # A given --max-running-requests 64 lowers the decode graph max_bs to 64 (handle_gpu_memory_settings):
    # 512 + 12,288 + 128 + 128 + 464 = 13,520 -> (81,559 - 13,520) / 81,559 = 0.83423 -> 0.834.
    settings = BudgetSettings(max_num_seqs=64)
    budget = kv_budget(
        "sglang", "0.5.23", spec(LLAMA), memory_bytes=H100_MIB * MIB, weights_bytes=16 * GIB, settings=settings
    )
    assert budget.utilization == 0.834
    # On a ROCm device the aiter factor applies.
    rocm = Device(MI300X_MIB * MIB, platform="rocm")
    budget = kv_budget(
        "sglang", "0.5.23", spec(LLAMA), memory_bytes=MI300X_MIB * MIB, weights_bytes=16 * GIB, device=rocm
    )
    assert budget.utilization == pytest.approx(0.867 * 0.85)


# ======================================================================================================
# SGLang 0.5.23: Mamba extra buffer, hybrid SWA, running-request cap, tp
# ======================================================================================================


def test_sglang_mamba_extra_buffer_slots() -> None:
    # _calculate_mamba_ratio (mem_cache/kv_cache_configurator.py): 3 + get_mamba_tracking_slots(extra_buffer=True,
    # overlap=True) = 3 + 2 = 5 for the _MAMBA_EXTRA_BUFFER_ARCHS (arg_groups/overrides.py).
    nemotron = spec(NEMOTRON_H)
    assert uses_mamba_extra_buffer(nemotron) and uses_mamba_extra_buffer(spec(QWEN_NEXT))
    assert sglang().mamba_ratio(nemotron) == 5
    # Nemotron-H 56B, one Mamba-2 layer (256 heads x 64 = d_inner 16,384, 8 groups, state 256): conv (16,384 +
    # 2 x 8 x 256 = 20,480 channels) x 3 x 2 B (bf16) = 122,880 B; SSM 256 x 64 x 256 x 4 B (fp32) = 16,777,216 B
    # -> 16,900,096 B; 54 Mamba layers x 5 slots.
    mamba_layers = sum(1 for layer in nemotron.layers if layer.state is not None)
    assert mamba_layers == 54
    est = sglang().estimate(nemotron, ctx=1000, batch=1, kv_dtype=BF16)
    assert est.state_bytes_per_request == 54 * 16_900_096 * 5
    # Mamba-2 (Mamba2ForCausalLM) is not on the extra-buffer list: the radix cache's base ratio of 3.
    assert not uses_mamba_extra_buffer(spec(MAMBA2))
    assert sglang().mamba_ratio(spec(MAMBA2)) == 3
    # --disable-radix-cache: 1 slot (_calculate_mamba_ratio returns 1).
    assert sglang(enable_prefix_caching=False).mamba_ratio(nemotron) == 1


def test_sglang_hybrid_swa_allow_list() -> None:
    # configs/model_config.py is_hybrid_swa_model: Llama4ForConditionalGeneration is listed, the text-only
    # Llama4ForCausalLM is not.
    assert is_hybrid_swa(spec(SCOUT))
    text_only = spec(SCOUT, architectures=["Llama4ForCausalLM"])
    assert not is_hybrid_swa(text_only)
    # Scout, ctx 32,768: 36 chunked layers (chunk 8192) in the SWA pool hold min(32,768, 8192 + 128 + 1 + 1) =
    # 8,322 slots each; 12 full layers 32,768. Per slot 8 heads x 256 x 2 B = 4,096 B.
    est = sglang().estimate(spec(SCOUT), ctx=32_768, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 4096 * (36 * 8_322 + 12 * 32_768)
    # Text-only: every layer holds the full context.
    assert sglang().estimate(text_only, ctx=32_768, batch=1, kv_dtype=BF16).kv_cache_bytes == 4096 * 48 * 32_768
    # A config may opt in with is_hybrid_swa: true (Mistral's sliding window of 4096 is not on the list otherwise).
    mistral = spec(MISTRAL, sliding_window=4096)
    assert not is_hybrid_swa(mistral)
    assert is_hybrid_swa(spec(MISTRAL, sliding_window=4096, is_hybrid_swa=True))


def test_sglang_default_max_running_requests() -> None:
    # resolve_max_num_reqs: int(pool / context_len x 512) clamped to [2048, 4096], at most pool // 2.
    assert default_max_running_requests(500_000, 131_072) == 2048  # int(1,953.1) -> floor 2048
    assert default_max_running_requests(2_000_000, 8192) == 4096  # int(125,000) -> cap 4096
    assert default_max_running_requests(3_000, 8192) == 1500  # pool // 2
    assert default_max_running_requests(500_000, 131_072, mamba_cap=26) == 26  # max_mamba_cache_size // ratio
    # Through the engine: a pool of 461,949 tokens with 130 Mamba slots at ratio 5 -> 26.
    pool = SglangPool(461_949, None, 24_576.0, 0, max_mamba_cache_size=130, mamba_request_limit=26)
    assert sglang().running_request_cap(pool, 262_144) == 26
    # A stated --max-running-requests 100 (context max_num_seqs) is taken, at most pool // 2.
    stated = sglang().with_context(EngineContext(max_num_seqs=100))
    assert stated.max_running_requests(spec(LLAMA), 8192) == 100
    assert stated.running_request_cap(SglangPool(150, None, 1.0, 0), 8192) == 75


def test_sglang_tp_validation() -> None:
    # models/llama.py LlamaAttention.__init__: total_num_heads % tp == 0; kv >= tp: kv % tp == 0, else tp % kv == 0.
    with pytest.raises(UsageError, match="32 attention heads"):
        sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=3)
    # Qwen2.5-7B: 28 heads, 4 KV heads; tp 7 divides 28 but 7 % 4 != 0.
    with pytest.raises(UsageError, match="4 KV heads"):
        sglang().estimate(spec(QWEN25_7B), ctx=1000, batch=1, kv_dtype=BF16, tp=7)
    # tp 16 on 32 heads / 8 KV heads is fine (16 % 8 == 0): one replicated head per rank.
    assert sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=16).kv_cache_bytes_per_gpu == (
        32 * 1 * 256 * 2 * 1000
    )


# ======================================================================================================
# llama.cpp (vendored by llama-cpp-python 0.3.36)
# ======================================================================================================


def test_llamacpp_ubatch_sizes_the_swa_cache() -> None:
    # llama_kv_cache_iswa ctor: size_swa = GGML_PAD(min(size_base, n_swa x (unified ? n_seq : 1) + n_ubatch), 256);
    # llama_context ctor: n_ubatch = min(min(n_ctx, n_batch), n_ubatch). gpt-oss-20b (window 128), -c 8192:
    # full 12 x 2,048 B x 8,192 = 201,326,592 B.
    full = 12 * 2048 * 8192
    # -ub 256: pad(128 + 256, 256) = 512 cells: 12 x 2,048 x 512 = 12,582,912 B.
    est = llamacpp(n_ubatch=256).estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == full + 12 * 2048 * 512
    # -b 128 caps the default -ub 512 to 128: pad(128 + 128, 256) = 256 cells.
    est = llamacpp(n_batch=128).estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == full + 12 * 2048 * 256
    # -c 1000: n_ctx 1,024 cells; n_ubatch min(1000, 2048, 512) = 512; SWA pad(min(1024, 640), 256) = 768.
    est = llamacpp().estimate(spec(GPT_OSS), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 12 * 2048 * 1024 + 12 * 2048 * 768
    # -c 300: n_ubatch min(300, 2048, 512) = 300; n_ctx 512; SWA pad(min(512, 428), 256) = 512.
    est = llamacpp().estimate(spec(GPT_OSS), ctx=300, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 12 * 2048 * 512 * 2


def test_llamacpp_explicit_np_keeps_streams() -> None:
    # -np 2 keeps kv_unified false (common/common.h); llama-server's -np auto sets it (tools/server/server.cpp).
    # Llama 3.1 8B f16, 131,072 B per cell; -c 2 x 1000 -np 2: n_ctx pad(2000, 256) = 2,048; n_ctx_seq
    # pad(2048 / 2, 256) = 1,024 per stream; 2 streams -> 2,048 cells either way here.
    assert llamacpp().estimate(spec(LLAMA), ctx=1000, batch=2, kv_dtype=FP16).kv_cache_bytes == 2048 * 131_072
    # -c 3 x 700 -np 3: n_ctx pad(2100, 256) = 2,304; per stream pad(768, 256) = 768 -> 2,304 cells; unified the same
    # 2,304. With -c 5 x 100: n_ctx 512; streams pad(102, 256) = 256 x 5 = 1,280 cells; unified 512.
    assert llamacpp().estimate(spec(LLAMA), ctx=100, batch=5, kv_dtype=FP16).kv_cache_bytes == 1280 * 131_072
    assert llamacpp(kv_unified=True).estimate(spec(LLAMA), ctx=100, batch=5, kv_dtype=FP16).kv_cache_bytes == (
        512 * 131_072
    )


def test_llamacpp_pre_iswa_versions() -> None:
    # Before the iSWA cache (2025-05): one unified cache of n_ctx cells in every layer, padded to 256 with flash
    # attention and 32 without (llama_kv_cache_unified::get_padding); -fa was off by default.
    # Llama 3.1 8B f16, -c 1030: pad(1030, 32) = 1,056 cells x 131,072 = 138,412,032 B.
    for version in ("2025-04", "2025-03"):
        est = llamacpp(version).estimate(spec(LLAMA), ctx=1030, batch=1, kv_dtype=FP16)
        assert est.kv_cache_bytes == 1056 * 131_072
    # -fa: pad(1030, 256) = 1,280 cells.
    est = llamacpp("2025-04", flash_attn=True).estimate(spec(LLAMA), ctx=1030, batch=1, kv_dtype=FP16)
    assert est.kv_cache_bytes == 1280 * 131_072
    # 2026-01 pads to 256 whatever the flash-attention setting (llama_context ctor: GGML_PAD(n_ctx, 256)).
    assert llamacpp("2026-01").estimate(spec(LLAMA), ctx=1030, batch=1, kv_dtype=FP16).kv_cache_bytes == (
        1280 * 131_072
    )
    # gpt-oss-20b -c 8192 on 2025-04: no SWA cache, 24 layers x 2,048 B x 8,192 cells.
    est = llamacpp("2025-04").estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 24 * 2048 * 8192
    # Three sequences share one cache (no streams before 2025-07): -c 300 -> pad(300, 32) = 320 cells.
    est = llamacpp("2025-04").estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=FP16)
    assert est.kv_cache_bytes == 320 * 131_072


def _nas(blocks: list[int | None]) -> ArchSpec:
    """A Nemotron-NAS config with per-block n_heads_in_group (None: a no-op attention block)."""
    return parse_config(
        {
            "model_type": "nemotron-nas",
            "num_hidden_layers": len(blocks),
            "num_attention_heads": 32,
            "hidden_size": 4096,
            "torch_dtype": "bfloat16",
            "block_configs": [
                {"attention": {"no_op": True}} if g is None else {"attention": {"n_heads_in_group": g}} for g in blocks
            ],
        }
    )


def test_llamacpp_v_padded_without_flash_attention() -> None:
    # llama_kv_cache ctor: V rows are n_embd_v_gqa_max() wide when v_trans (= !flash_attn). Layers of 32 heads in
    # groups of 8 (4 KV heads) and 4 (8 KV heads), head_dim 128, f16, -c 256 (256 cells):
    # with FA: (4 x 128 x 2) x 2 + (8 x 128 x 2) x 2 = 2,048 + 4,096 = 6,144 B per cell;
    # without: V of both layers 8 x 128 = 1,024 elements: (1,024 + 2,048) + (2,048 + 2,048) = 7,168 B per cell.
    model = _nas([8, 4, None])
    assert llamacpp().estimate(model, ctx=256, batch=1, kv_dtype=FP16).kv_cache_bytes == 6144 * 256
    assert llamacpp(flash_attn=False).estimate(model, ctx=256, batch=1, kv_dtype=FP16).kv_cache_bytes == 7168 * 256


# ======================================================================================================
# TensorRT-LLM 1.2.0 (PyTorch flow, V1 KV cache manager)
# ======================================================================================================


def test_trtllm_pool_in_whole_blocks() -> None:
    # KVCacheManager::allocatePools logs getNumPrimaryBlocks() x getTokensPerBlock() (kvCacheManager.cpp).
    # Llama 3.1 8B bf16 131,072 B per token; 1 GiB x 0.9 = 966,367,641.6 B -> 7,372 tokens -> math.ceil(7,372 / 32)
    # = 231 blocks of 32 (calculate_max_num_blocks, resource_manager.py @ main 1.2.0rc2; was floor, 230) -> 7,392.
    pool = trtllm().pool(spec(LLAMA), available_bytes=GIB, kv_dtype=BF16)
    assert (pool.max_tokens, pool.blocks, pool.pool_tokens) == (7372, 231, 7392)
    # Blocks of 128: ceil(7,372 / 128) = 58 -> 7,424.
    assert trtllm(block_size=128).pool(spec(LLAMA), available_bytes=GIB, kv_dtype=BF16).pool_tokens == 7424


def test_trtllm_tp_validation_and_rounding() -> None:
    # _torch/modules/attention.py Attention.__init__: assert num_heads % tp_size == 0; KV heads (kv + tp - 1) // tp.
    with pytest.raises(UsageError, match="32 attention heads"):
        trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=3)
    # Qwen2.5-7B (28 heads, 4 KV) on tp 7: allowed (SGLang refuses it), ceil(4 / 7) = 1 head per rank:
    # 28 layers x 1 x 128 x 2 (K, V) x 2 B = 14,336 B per token x cdiv(1000, 32) x 32 = 1,024 slots.
    est = trtllm().estimate(spec(QWEN25_7B), ctx=1000, batch=1, kv_dtype=BF16, tp=7)
    assert est.kv_cache_bytes_per_gpu == 14_336 * 1024
    # 48 heads, 8 KV heads, tp 6: ceil(8 / 6) = 2 KV heads per rank (vLLM and SGLang refuse 8 % 6).
    cfg = {**raw(LLAMA), "num_attention_heads": 48, "hidden_size": 6144, "head_dim": 128}
    model = parse_config(cfg)
    est = trtllm().estimate(model, ctx=1000, batch=1, kv_dtype=BF16, tp=6)
    assert est.kv_cache_bytes_per_gpu == 32 * 2 * 128 * 2 * 2 * 1024
    with pytest.raises(UsageError, match="8 KV heads"):
        sglang().estimate(model, ctx=1000, batch=1, kv_dtype=BF16, tp=6)


# ======================================================================================================
# Families (config.py) and transformers (hf)
# ======================================================================================================

FALCON_MAMBA_7B = {
    # tiiuae/falcon-mamba-7b config.json (the fields that size the state)
    "architectures": ["FalconMambaForCausalLM"],
    "model_type": "falcon_mamba",
    "hidden_size": 4096,
    "expand": 16,
    "intermediate_size": 8192,
    "num_hidden_layers": 64,
    "state_size": 16,
    "conv_kernel": 4,
    "time_step_rank": 256,
    "torch_dtype": "bfloat16",
    "vocab_size": 65024,
}


def test_falcon_mamba_uses_intermediate_size() -> None:
    # The mixer is intermediate_size = 8,192 wide (vLLM mamba.py MambaMixer(intermediate_size=config.
    # intermediate_size)), not expand x hidden = 65,536: conv 8,192 x 3 + SSM 8,192 x 16 = 155,648 elements.
    model = parse_config(FALCON_MAMBA_7B)
    state = model.layers[0].state
    assert state is not None and state.kind is StateKind.MAMBA
    assert state.conv_channels == 8192 and state.ssm_shape == (8192, 16)
    # formula: 64 layers x 155,648 x 2 B = 19,922,944 B per request (was 8x that).
    est = get_engine("formula").estimate(model, ctx=2048, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 64 * 155_648 * 2
    # Without intermediate_size the mixer falls back to expand x hidden_size (transformers MambaConfig).
    derived = parse_config({k: v for k, v in FALCON_MAMBA_7B.items() if k != "intermediate_size"})
    assert derived.layers[0].state is not None and derived.layers[0].state.conv_channels == 65_536


MINIMAX_TEXT_01 = {
    # MiniMaxAI/MiniMax-Text-01 config.json: lightning attention everywhere but every 8th layer.
    "architectures": ["MiniMaxText01ForCausalLM"],
    "model_type": "minimax_text_01",
    "hidden_size": 6144,
    "intermediate_size": 9216,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "attn_type_list": [int((i + 1) % 8 == 0) for i in range(80)],
    "max_position_embeddings": 10_240_000,
    "rotary_dim": 64,
    "torch_dtype": "bfloat16",
    "vocab_size": 200_064,
}


def test_minimax_configs_parse() -> None:
    # attn_type_list: 0 = lightning (linear) attention, 1 = softmax (vLLM minimax_text_01.py). 70 lightning
    # layers keep one head_dim x head_dim matrix per head: 64 x 128 x 128 = 1,048,576 elements, no conv.
    model = parse_config(MINIMAX_TEXT_01)
    lightning = [layer for layer in model.layers if layer.state is not None]
    softmax = [layer for layer in model.layers if layer.attention is not None]
    assert len(lightning) == 70 and len(softmax) == 10
    state = lightning[0].state
    assert state is not None and state.kind is StateKind.LIGHTNING
    assert state.ssm_elements == 1_048_576 and state.conv_elements == 0
    # formula, bf16, ctx 1000: 10 x 8 x 256 x 2 B = 40,960 B per token + 70 x 1,048,576 x 2 B = 146,800,640 B.
    est = get_engine("formula").estimate(model, ctx=1000, batch=1, kv_dtype=BF16)
    assert (est.kv_bytes_per_token, est.state_bytes_per_request) == (40_960, 146_800_640)
    # MiniMax-M1 shares the format; SGLang has no implementation for either (sglang/srt/models: minimax_m2/m3).
    with pytest.raises(UnsupportedArchitecture, match="MiniMax"):
        sglang().estimate(model, ctx=1000, batch=1, kv_dtype=BF16)
    # MiniMax-M2: attn_type_list all 1 -> 62 full layers of 8 KV heads x 128: 62 x 8 x 256 x 2 B = 253,952 B.
    m2 = parse_config(
        {
            "architectures": ["MiniMaxM2ForCausalLM"],
            "model_type": "minimax_m2",
            "hidden_size": 3072,
            "num_hidden_layers": 62,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "attn_type_list": [1] * 62,
            "torch_dtype": "bfloat16",
        }
    )
    assert all(layer.attention is not None and layer.attention.kind is AttentionKind.FULL for layer in m2.layers)
    assert get_engine("formula").estimate(m2, ctx=1, batch=1, kv_dtype=BF16).kv_bytes_per_token == 253_952
    # transformers' own MiniMax (model_type minimax) spells the same with layer_types.
    hf_style = parse_config(
        {
            **{k: v for k, v in MINIMAX_TEXT_01.items() if k != "attn_type_list"},
            "model_type": "minimax",
            "layer_types": ["full_attention" if (i + 1) % 8 == 0 else "linear_attention" for i in range(80)],
        }
    )
    assert sum(1 for layer in hf_style.layers if layer.state is not None) == 70


OPENAI_GPT = {
    # openai-community/openai-gpt config.json
    "architectures": ["OpenAIGPTLMHeadModel"],
    "model_type": "openai-gpt",
    "afn": "gelu",
    "n_ctx": 512,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 512,
    "vocab_size": 40478,
}


def test_hf_gpt1_keeps_no_cache() -> None:
    # transformers models/openai/modeling_openai.py: OpenAIGPTModel.forward has no past_key_values and returns no
    # cache, so --engine hf predicts none (and says so) where the formula would count 12 x 768 x 2 per token.
    model = parse_config(OPENAI_GPT)
    engine = get_engine("hf")
    assert isinstance(engine, HfEngine)
    est = engine.estimate(model, ctx=512, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 0
    assert any("no KV cache" in note for note in est.notes)
    assert engine.layer_bytes(model, ctx=512, batch=1, kv_dtype=BF16) == []


def test_verify_truncates_hybrids_to_an_attention_layer() -> None:
    # Nemotron-H 56B's pattern starts "M-M-M-M*": its first 4 layers hold no attention layer, and transformers'
    # hybrid cache raises in get_seq_length without one. --layers 4 builds layers 0 (M), 1 (-), 2 (M) and 7 (*).
    cut, notes = truncate_layers(raw(NEMOTRON_H), 4)
    assert cut["hybrid_override_pattern"] == "M-M*"
    assert cut["num_hidden_layers"] == 4
    assert "layers 0, 1, 2, 7" in notes[0]
    # A model whose first layers already include attention keeps the first N.
    cut, notes = truncate_layers(raw(QWEN_NEXT), 4)
    assert cut["num_hidden_layers"] == 4 and "first 4" in notes[0]


@pytest.mark.slow
def test_verify_gpt1_and_nemotron_h_do_not_crash(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from kvsize.resolve import load_model_config
    from kvsize.verify import VerifyOptions, verify

    path = tmp_path / "config.json"
    path.write_text(json.dumps(OPENAI_GPT))
    result = verify(load_model_config(str(path)), VerifyOptions(contexts=(16,), device="cpu"))
    assert result.scenarios[0].match is True and result.scenarios[0].measured_bytes == 0
    result = verify(load_model_config(NEMOTRON_H), VerifyOptions(contexts=(16,), device="meta", layers=4))
    assert result.scenarios[0].match is True


def test_minimax_lightning_state_per_engine() -> None:
    model = parse_config(MINIMAX_TEXT_01)
    # llama.cpp (llama-hparams.cpp n_embd_s: n_embd_head_la^2 x n_head = 128 x 128 x 64 = 1,048,576; no conv,
    # ssm_d_conv 0; recurrent states f32, one slot per sequence): 70 x 1,048,576 x 4 B = 293,601,280 B, plus KV
    # 10 layers x 8 heads x 256 x 2 B x 8,192 cells = 335,544,320 B.
    est = llamacpp().estimate(model, ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 293_601_280 + 335_544_320
    # transformers MiniMaxCache.linear_cache keeps the state in the activation dtype (bf16; measured with
    # `kvsize verify` on a 4-layer MiniMax on CPU): 70 x 1,048,576 x 2 B = 146,800,640 B, plus the same KV.
    est = get_engine("hf").estimate(model, ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 146_800_640 + 335_544_320


TINY_MINIMAX = {
    "architectures": ["MiniMaxForCausalLM"],
    "model_type": "minimax",
    "hidden_size": 256,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
    "vocab_size": 1000,
    "num_local_experts": 2,
    "num_experts_per_tok": 1,
    "block_size": 16,
}


@pytest.mark.slow
def test_verify_minimax_lightning_cache(tmp_path: Path) -> None:
    # Built by transformers on CPU: 2 lightning layers x 4 x 64 x 64 x 2 B = 32,768 B, 2 full layers x 2 heads x
    # 64 x 2 (K, V) x 2 B x 40 tokens = 20,480 B: 106,496 B in all.
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from kvsize.resolve import load_model_config
    from kvsize.verify import VerifyOptions, verify

    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_MINIMAX))
    result = verify(load_model_config(str(path)), VerifyOptions(contexts=(40,), device="cpu"))
    assert result.scenarios[0].match is True and result.scenarios[0].measured_bytes == 106_496


def test_mamba2_width_from_explicit_heads() -> None:
    # Nemotron-H gives mamba_num_heads 256 x mamba_head_dim 64 = 16,384 (vLLM nemotron_h.py: intermediate_size =
    # mamba_num_heads * mamba_head_dim); expand x hidden_size is the derived figure. With expand edited to 3
    # (3 x 8192 = 24,576) the explicit fields still win: conv 16,384 + 2 x 8 x 256 = 20,480 channels.
    model = spec(NEMOTRON_H, expand=3)
    state = next(layer.state for layer in model.layers if layer.state is not None)
    assert state.conv_channels == 20_480 and state.ssm_shape == (256, 64, 256)


def test_sglang_page_size_on_sm100() -> None:
    # On compute capability 10.x, MHA models default to trtllm_mha (model_override_base.py
    # get_default_attention_backend), whose pages are 64 tokens (overrides.py _mla_backend_page_constraints):
    # Llama 3.1 8B at ctx 1000 holds cdiv(1000, 64) x 64 = 1,024 slots x 131,072 B = 134,217,728 B.
    b200 = sglang().with_context(EngineContext(device=Device(B200_MIB * MIB, name="NVIDIA B200", capability=(10, 0))))
    est = b200.estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16)
    assert (est.block_size, est.kv_cache_bytes) == (64, 1024 * 131_072)
    # The pool floors to whole pages: 10 GiB // 131,072 = 81,920 tokens (a multiple of 64 already); 10 GiB + 1 MiB
    # // 131,072 = 81,928 -> 81,920.
    assert b200.pool(spec(LLAMA), available_bytes=10 * GIB + MIB, kv_dtype=BF16).max_total_num_tokens == 81_920
    # DeepSeek-V3 there takes trtllm_mla (0.5.4+: arg_groups/model_overrides/deepseek_v2.py sets it on SM100), whose
    # pages are 64 tokens (issue 22: "on B200, MLA uses trtllm_mla with 64-token pages"); on an H100 (9.0) every
    # model keeps page 1.
    assert b200.estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).block_size == 64
    h100 = sglang().with_context(EngineContext(device=Device(H100_MIB * MIB, capability=(9, 0))))
    assert h100.estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == 1000 * 131_072
    # A given --block-size wins.
    given = sglang(block_size=16).with_context(b200.context)
    assert given.estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16).block_size == 16
