"""SGLang by release (kvsize/engines/sglang_releases.py): each era's rule, worked by hand from that release's
source (paths under python/sglang/srt/, sdists 0.4.9.post2 .. 0.5.10.post1 and wheels 0.5.11 .. 0.5.23 from PyPI)."""

from __future__ import annotations

from typing import Any

import pytest

from kvsize.budget import BudgetSettings, kv_budget
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext
from kvsize.engines.sglang import SglangEngine, is_hybrid_swa, spec_mem_fraction_static
from kvsize.engines.sglang_releases import SGLANG_RELEASES
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

BF16 = KvDtype.BF16
MIB = 1024**2
GIB = 1024**3
RTX4090_MIB = 24_564  # nvidia-smi memory.total of an RTX 4090 (the rtx-4090 profile's 23.99 GiB)
H100_MIB = 81_559
B200_MIB = 183_359

LLAMA = "meta-llama/Llama-3.1-8B"
GEMMA3 = "google/gemma-3-1b-it"
GPT_OSS = "openai/gpt-oss-20b"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
DSV3 = "deepseek-ai/DeepSeek-V3"
QWEN25_VL = "Qwen/Qwen2.5-VL-7B-Instruct"


def spec(hub_id: str, **changes: Any) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config({**dict(load_registry_config(entry)), **changes}, source=hub_id)


def sglang(version: str, device: Device | None = None, **options: Any) -> SglangEngine:
    engine = get_engine("sglang", version, **options)
    assert isinstance(engine, SglangEngine)
    return engine.with_context(EngineContext(device=device)) if device is not None else engine


def fraction(version: str, hub_id: str, mib: int, **kw: Any) -> float:
    return spec_mem_fraction_static(spec(hub_id), mib * MIB, rules=sglang(version).rules, **kw)


# --- versions as typed ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "era"),
    [
        ("0.5.4", "0.5.4"),
        ("v0.5.4", "0.5.4"),
        ("0.5.4.post1", "0.5.4"),
        ("0.5.4rc1", "0.5.4"),  # a release candidate is cut from its release's branch
        ("0.5.5.dev3+g1234abc", "0.5.4"),  # a dev build precedes 0.5.5
        ("0.5.6.post2", "0.5.5"),
        ("0.5.10rc0", "0.5.10"),
        ("0.4.9.post2", "0.4.9.post2"),
        ("0.4.10", "0.4.9.post3"),
        ("0.5.23+vendor", "0.5.23"),
    ],
)
def test_any_version_resolves_to_its_era(typed: str, era: str) -> None:
    engine = sglang(typed)
    assert engine.rules_name == era
    assert engine.release_note is None
    assert engine.version == typed.lstrip("v")


def test_newer_and_older_releases() -> None:
    newer = sglang("0.5.24")
    assert newer.rules_name == "0.5.23" and newer.release_note is not None and "newer than" in newer.release_note
    with pytest.raises(UsageError, match="older than the oldest"):
        sglang("0.3.6")
    # 0.4.0-0.4.9.post1 were read for the default mem_fraction_static only: sized with a note saying so.
    early = get_engine("sglang", "0.4.9.post1")
    assert early.rules_name == "0.4.9" and early.release_note is not None and "only the default" in early.release_note
    assert SGLANG_RELEASES.era_named("0.5.5") is not None
    assert SGLANG_RELEASES.span_of(SGLANG_RELEASES.era_named("0.5.5")) == "0.5.5-0.5.6"  # type: ignore[arg-type]


# --- the default mem_fraction_static --------------------------------------------------------------------


def test_mem_fraction_static_0_4_9_post2_tiered() -> None:
    # server_args.py ServerArgs.__post_init__@0.4.9.post2: a reserve per tier, tp x pp = 1.
    # RTX 4090 (< 35 GiB): (2.8 + 1/10) x 1024 = 2,969.6 MiB; round((24,564 - 2,969.6) / 24,564, 3) = 0.879.
    assert fraction("0.4.9.post2", LLAMA, RTX4090_MIB) == 0.879
    # H100 (< 90 GiB): (9.5 + 1/2) x 1024 = 10,240; round(71,319 / 81,559, 3) = 0.874.
    assert fraction("0.4.9.post2", LLAMA, H100_MIB) == 0.874
    # tp 2 on the H100: (9.5 + 2/2) x 1024 = 10,752; round(70,807 / 81,559, 3) = 0.868.
    assert fraction("0.4.9.post2", LLAMA, H100_MIB, tp=2) == 0.868


def test_mem_fraction_static_0_5_4_reserve() -> None:
    # server_args.py _handle_gpu_memory_settings@0.5.4: 4090 tier chunked_prefill_size 2048, cuda_graph_max_bs 16;
    # reserved = 512 + max(2048, 2048) x 1.5 + 16 x 2 + 1 x 1 / 8 x 1024 = 512 + 3,072 + 32 + 128 = 3,744 MiB;
    # round((24,564 - 3,744) / 24,564, 3) = round(0.84758, 3) = 0.848. No prefill-graph term (piecewise off).
    assert fraction("0.5.4", LLAMA, RTX4090_MIB) == 0.848
    # H100: chunk 8192, max_bs 256: 512 + 12,288 + 512 + 128 = 13,440 (over the 10 GiB floor);
    # round(68,119 / 81,559, 3) = round(0.83521, 3) = 0.835.
    assert fraction("0.5.4", LLAMA, H100_MIB) == 0.835


def test_mem_fraction_static_0_5_5_tier() -> None:
    # _handle_gpu_memory_settings@0.5.5: the 4090 tier's cuda_graph_max_bs becomes 24:
    # 512 + 3,072 + 48 + 128 = 3,760; round(20,804 / 24,564, 3) = round(0.84693, 3) = 0.847.
    assert fraction("0.5.5", LLAMA, RTX4090_MIB) == 0.847


def test_mem_fraction_static_0_5_10_prefill_graph() -> None:
    # _handle_gpu_memory_settings@0.5.10.post1: the piecewise CUDA graph is on by default (disable_piecewise_
    # cuda_graph False), + len(piecewise_cuda_graph_tokens) x 8 MiB. Buckets up to chunk 2048
    # (_generate_piecewise_cuda_graph_tokens): 8 (4..32) + 14 (48..256) + 8 (288..512) + 8 (576..1024) +
    # 4 (1280..2048 by 256) = 42 -> 336 MiB. 3,760 + 336 = 4,096; round(20,468 / 24,564, 3) = 0.833.
    assert fraction("0.5.10", LLAMA, RTX4090_MIB) == 0.833
    # Multimodal models are off the piecewise graph there (_handle_piecewise_cuda_graph, 9.); 0.5.23 too for
    # Qwen2.5-VL (not on multimodal_breakable_cuda_graph_supported_model_archs): H100 reserve 13,440 + 0 (the
    # 0.5.23 decode graph term is the same 512) -> 0.835, then x the ViT factor.
    vl = spec(QWEN25_VL)
    assert spec_mem_fraction_static(vl, H100_MIB * MIB, rules=sglang("0.5.10").rules) == pytest.approx(
        0.835 * 0.95 * max(0.8, min(1.05, 1 - 0.1 * (32 * 1280**2 / (24 * 1024**2) - 1)))
    )


def test_mem_fraction_static_0_5_23() -> None:
    # arg_groups/memory_hook.py handle_gpu_memory_settings@0.5.23: 4090 tier chunk 4096, decode max_bs 48;
    # prefill graph buckets up to 4096: 42 + 8 (2304..4096 by 256) = 50 -> 400 MiB.
    # 512 + 6,144 + 96 + 128 + 400 = 7,280; round(17,284 / 24,564, 3) = round(0.70363, 3) = 0.704.
    assert fraction("0.5.23", LLAMA, RTX4090_MIB) == 0.704
    # H100: 13,440 + 58 buckets (50 + 4608..8192 by 512 = 8) x 8 = 464 -> 13,904; round(67,655 / 81,559, 3) = 0.830.
    assert fraction("0.5.23", LLAMA, H100_MIB) == 0.830


def test_kv_tokens_on_a_4090_0_5_4_vs_0_5_23() -> None:
    # The issue's case: the same card, weights and cell; KV = ceil(visible x fraction) - weights. 0.5.4's 0.848
    # leaves about three times 0.5.23's 0.704 once 16 GB of bf16 weights are out.
    llama = spec(LLAMA)
    weights = 16_060_522_496
    old = kv_budget("sglang", "0.5.4", llama, memory_bytes=RTX4090_MIB * MIB, weights_bytes=weights)
    new = kv_budget("sglang", "0.5.23", llama, memory_bytes=RTX4090_MIB * MIB, weights_bytes=weights)
    assert (old.utilization, new.utilization) == (0.848, 0.704)
    assert "rules of 0.5.4" in old.rule and "rules of 0.5.23" in new.rule
    assert old.kv_budget_bytes > 2.5 * new.kv_budget_bytes


def test_vision_models_lose_100_mib_from_0_5_18() -> None:
    # mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb@0.5.18: rest_memory -= SGLANG_VLM_CACHE_SIZE_MB
    # (100) / 1024 GiB for multimodal models; 0.5.17 sizes the pool first (kv_cache_builder.py). Same fraction.
    vl = spec(QWEN25_VL)
    fixed = BudgetSettings(gpu_util=0.8)
    args: dict[str, Any] = {"memory_bytes": H100_MIB * MIB, "weights_bytes": 16 * GIB, "settings": fixed}
    before = kv_budget("sglang", "0.5.17", vl, **args).kv_budget_bytes
    after = kv_budget("sglang", "0.5.18", vl, **args).kv_budget_bytes
    assert before - after == 100 * MIB
    text_before = kv_budget("sglang", "0.5.17", spec(LLAMA), **args).kv_budget_bytes
    text_after = kv_budget("sglang", "0.5.18", spec(LLAMA), **args).kv_budget_bytes
    assert text_after == text_before  # a text model keeps it all


# --- which models get an SWA pool -----------------------------------------------------------------------


def test_swa_pool_membership_by_era() -> None:
    gemma3, gpt_oss = spec(GEMMA3), spec(GPT_OSS)
    # 0.4.9.post2: no hybrid-SWA detection in model_runner.py (Llama 4 only with --hybrid-kvcache-ratio).
    assert not is_hybrid_swa(gemma3, sglang("0.4.9.post2").rules)
    # model_runner.py ModelRunner.__init__@0.4.9.post3: any model with get_attention_sliding_window_size
    # (Gemma 2 / 3 / 3n) gets the pool unless disable_hybrid_swa_memory.
    assert is_hybrid_swa(gemma3, sglang("0.4.10").rules)
    # server_args.py@0.5.0rc0: Gemma 2/3/3n and GptOssForCausalLM set disable_hybrid_swa_memory.
    assert not is_hybrid_swa(gemma3, sglang("0.5.4").rules)
    assert not is_hybrid_swa(gpt_oss, sglang("0.5.4").rules)
    # configs/model_config.py is_hybrid_swa_model@0.5.8 lists GptOssForCausalLM; Gemma 3 stays off.
    assert is_hybrid_swa(gpt_oss, sglang("0.5.8").rules)
    assert not is_hybrid_swa(gemma3, sglang("0.5.23").rules)
    # Gemma 3 1B at ctx 32,768: 26 layers, 1 KV head x 256 x (K + V) x 2 B = 1,024 B per slot. Under 0.4.10 the
    # 22 sliding layers are pooled but a running request's SWA tokens are never evicted (prepare_for_decode evicts
    # for SWAChunkCache only; SWARadixCache frees unlocked tree nodes, read in 0.4.10.post2), so every layer holds
    # 32,768; 0.5.4 sizes all 26 as full attention; 0.5.8's window eviction on a pooled window (gpt-oss) below.
    est = sglang("0.4.10").estimate(gemma3, ctx=32_768, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 1024 * 26 * 32_768
    assert any("not evicted in this release" in n for n in sglang("0.4.10").estimate_notes(gemma3))
    assert sglang("0.5.4").estimate(gemma3, ctx=32_768, batch=1, kv_dtype=BF16).kv_cache_bytes == (1024 * 26 * 32_768)


def test_swa_eviction_interval_by_era() -> None:
    # gpt-oss-20b at ctx 8,192, page 1: SGLang's window is sliding_window - 1 = 127 (models/gpt_oss.py
    # get_attention_sliding_window_size). 0.5.8-0.5.13 evict every window decode steps (maybe_evict_swa:
    # `decode_batch_idx % sliding_window_size == 1`), so a request holds 127 + 127 + 1 + 1 = 256 SWA slots;
    # 0.5.14+ every 128 (SGLANG_SWA_EVICTION_INTERVAL): 127 + 128 + 1 + 1 = 257. 12 sliding layers x 2,048 B each,
    # beside 12 full layers x 2,048 B x 8,192.
    gpt_oss = spec(GPT_OSS)
    full = 12 * 2048 * 8192
    for version, slots in (("0.5.8", 256), ("0.5.13", 256), ("0.5.14", 257), ("0.5.23", 257)):
        est = sglang(version).estimate(gpt_oss, ctx=8192, batch=1, kv_dtype=BF16)
        assert est.kv_cache_bytes == full + 12 * 2048 * slots, version
    # page 64 under 0.5.13: interval max(64, 127) // 64 x 64 = 64; pages(127 + 64 + 64) = 256, + the decode page;
    # under 0.5.10 the interval is the window itself: pages(127 + 127 + 64) = 320, + the decode page
    est = sglang("0.5.13", block_size=64).estimate(gpt_oss, ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == full + 12 * 2048 * (256 + 64)
    est = sglang("0.5.10", block_size=64).estimate(gpt_oss, ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == full + 12 * 2048 * (320 + 64)


# --- Mamba state pool -----------------------------------------------------------------------------------


def test_mamba_pool_and_request_cap_by_era() -> None:
    qwen = spec(QWEN_NEXT)
    # 0.4.9.post2 .. 0.5.1 serve no hybrid-state model (no max_mamba_cache_size in model_runner.py).
    with pytest.raises(UnsupportedArchitecture, match="Mamba"):
        sglang("0.5.1").estimate(qwen, ctx=1000, batch=1, kv_dtype=BF16)
    per_req = sum(
        sglang("0.5.23").state_bytes(qwen, layer.state, 1) * count
        for layer, count in qwen.layer_groups()
        if layer.state is not None
    )
    rest = 20 * GIB
    budget = rest * 0.9 / 1.9  # mamba_full_memory_ratio 0.9
    # model_runner.py handle_max_mamba_cache@0.5.4: int(budget // per_req) slots, exactly that many held;
    # init_memory_pool: max_running_requests <= max_mamba_cache_size // 3.
    old = sglang("0.5.4").pool(qwen, available_bytes=rest, kv_dtype=BF16)
    assert old.max_mamba_cache_size == int(budget // per_req)
    assert old.mamba_request_limit == int(budget // per_req) // 3
    # 0.5.23 (KVCacheConfigurator._handle_max_mamba_cache): (budget - per_req) // per_req slots, size + 1 held;
    # Qwen3-Next takes the extra_buffer strategy: // (3 + 2).
    new = sglang("0.5.23").pool(qwen, available_bytes=rest, kv_dtype=BF16)
    assert new.max_mamba_cache_size == int((budget - per_req) // per_req)
    assert new.mamba_request_limit == new.max_mamba_cache_size // 5
    # 0.5.13: size + 1 held, but mamba_scheduler_strategy auto -> no_buffer: // 3.
    mid = sglang("0.5.13").pool(qwen, available_bytes=rest, kv_dtype=BF16)
    assert mid.mamba_request_limit == mid.max_mamba_cache_size // 3  # type: ignore[operator]
    # The cap the scheduler applies (resolve_max_num_reqs): min(default, the Mamba cap).
    engine = sglang("0.5.23")
    assert engine.running_request_cap(new, 262_144) == min(new.max_total_num_tokens // 2, 2048, new.mamba_request_limit)


# --- DeepSeek-V3.2's indexer and pages ------------------------------------------------------------------


def v32() -> ArchSpec:
    return spec(
        DSV3,
        model_type="deepseek_v32",
        architectures=["DeepseekV32ForCausalLM"],
        index_topk=2048,
        index_head_dim=128,
        index_n_heads=64,
    )


def test_dsa_indexer_in_every_cell() -> None:
    # model_runner.py profile_max_num_token@0.5.4 (pool_configurator.py _compute_dsa_indexer_cell_size@0.5.23):
    # cell = (512 + 64) x 61 x 2 B + (128 + 128 / 128 x 4) x 61 x 1 B (uint8) = 70,272 + 8,052 = 78,324 B.
    # Page 64 ("Setting page size to 64 for DeepSeek NSA"): ctx 1000 holds 1,024 slots.
    est = sglang("0.5.4").estimate(v32(), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.block_size == 64
    assert est.kv_bytes_per_token == 78_324
    assert est.kv_cache_bytes == 1024 * 78_324
    # Pool: 10,737,418,240 // 78,324 = 137,089 -> floored to 64 (2,142 pages): 137,088 tokens.
    assert sglang("0.5.4").pool(v32(), available_bytes=10 * GIB, kv_dtype=BF16).max_total_num_tokens == 137_088
    # 0.5.3 (profile_max_num_token@0.5.3): the cell counts the latent only, 70,272 B: 10 GiB // 70,272 = 152,797
    # -> 152,768 (64-token pages).
    assert sglang("0.5.3").pool(v32(), available_bytes=10 * GIB, kv_dtype=BF16).max_total_num_tokens == 152_768
    # 0.5.2 has no NSATokenToKVPool.
    with pytest.raises(UnsupportedArchitecture, match="indexer"):
        sglang("0.5.2").estimate(v32(), ctx=1000, batch=1, kv_dtype=BF16)


def test_sm100_pages_by_era() -> None:
    b200 = Device(B200_MIB * MIB, name="NVIDIA B200", capability=(10, 0))
    # server_args.py _handle_model_specific_adjustments@0.5.4: DeepseekV3ForCausalLM on SM100 -> trtllm_mla, whose
    # pages are 64 (_handle_page_size / _mla_backend_page_constraints); 0.5.3 has no such default (page 1).
    assert sglang("0.5.4", b200).estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).block_size == 64
    assert sglang("0.5.23", b200).estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).block_size == 64
    assert sglang("0.5.3", b200).estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).block_size == 1
    # MHA: _get_default_attn_backend@0.5.7 picks trtllm_mha on SM100 (pages of 64); 0.5.6 flashinfer, page 1.
    assert sglang("0.5.7", b200).estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16).block_size == 64
    assert sglang("0.5.6", b200).estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16).block_size == 1
    # An H100 keeps page 1 for DeepSeek-V3 in every era.
    h100 = Device(H100_MIB * MIB, capability=(9, 0))
    assert sglang("0.5.23", h100).estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).block_size == 1


def test_swa_cell_counts_the_stage_layers_by_era() -> None:
    # gpt-oss-20b at pp 2: 24 layers alternating sliding / full from layer 0, 12 per stage; 2,048 B per layer per
    # token (8 KV heads x 64 x (K + V) x 2 B). 0.5.21+ count each stage's own layers (layer_setup.py
    # _resolve_local_hybrid_swa_layer_ids): cell 2,048 x 6 + 0.8 x 2,048 x 6 = 22,118.4, 10 GiB / 22,118.4 =
    # 485,451.9. 0.5.8-0.5.20 count range(start_layer, end_layer + 1): the first stage takes layer 12 (sliding)
    # too: 2,048 x 6 + 0.8 x 2,048 x 7 = 23,756.8, 10 GiB / 23,756.8 = 451,972.4, the binding stage.
    gpt_oss, rest = spec(GPT_OSS), 10 * 2**30
    assert sglang("0.5.23").pool(gpt_oss, available_bytes=rest, kv_dtype=BF16, pp=2).max_total_num_tokens == 485_451
    assert sglang("0.5.20").pool(gpt_oss, available_bytes=rest, kv_dtype=BF16, pp=2).max_total_num_tokens == 451_972
    # one stage: the whole model's 12 + 12 either way: 24,576 + 19,660.8 = 44,236.8, 10 GiB / 44,236.8 = 242,725.9
    for version in ("0.5.20", "0.5.23"):
        assert sglang(version).pool(gpt_oss, available_bytes=rest, kv_dtype=BF16).max_total_num_tokens == 242_725
