"""vLLM 0.34.0's rules, worked by hand from its source (the 0.34.0 sdist):

- config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE 64 (16 through 0.33), which each attention backend takes where its
  kernels accept it (AttentionBackend.get_preferred_block_size); ROCm's ROCM_ATTN keeps 16
  (rocm_attn.py get_preferred_block_size); the hybrid alignment A = max(16, the block)
  (platforms/interface.py _align_hybrid_block_size).
- The extensible KV cache, on by default on CUDA and ROCm (config/vllm.py _resolve_extensible_kv_cache): the pool
  is what v1/worker/extensible_kv_cache.py measure_kv_cache_bytes leaves after warm-up and CUDA-graph capture,
  min(requested - non_kv_used, headroom - margin) - max(transient, growth), margin max(1 GiB (3 on ROCm),
  0.75 x transient), utilisation 1.0 when unset (CacheConfig.resolved_gpu_memory_utilization). kvsize's start-up
  use (0.51 GiB at tp 1) and captured graphs (0.91 GiB) are medians of the vLLM 0.19 H100 logs (budget.py).

Llama-3.1-8B on an H100 (kvsize's own parts, as tests/test_capacity.py works them for 0.33): CUDA-visible
85,025,882,112 B; weights 16,060,522,496; RoPE table 131,072 x 128 x 2 = 33,554,432; activation
1024 x 128,256 x 14 + 132 x 128,256 x 4 + 8192 x 4096 x 2 = 1,973,506,048; non-torch 268,435,456.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import kvsize
from kvsize.budget import BudgetSettings
from kvsize.calibration import unversioned_vllm_release
from kvsize.cli import app
from kvsize.engine_log import parse_log
from kvsize.engines.base import UnsupportedArchitecture
from tests.tiny_configs import registry_config

LLAMA = "meta-llama/Llama-3.1-8B"
VISIBLE = 85_025_882_112
PARTS = 16_060_522_496 + 33_554_432 + 1_973_506_048 + 268_435_456  # weights, RoPE, activation, non-torch
START, GRAPHS = 547_608_330, 977_105_060  # 0.51 GiB, 0.91 GiB (kvsize/budget.py, from the 0.19 logs)


def scenario(model: str = LLAMA, **options: object) -> kvsize.Estimate:
    return kvsize.estimate(model, engine="vllm", engine_version="0.34.0", **options).scenarios[0]  # type: ignore[arg-type]


def test_the_newest_release_is_0_34() -> None:
    assert kvsize.estimate(LLAMA, ctx=8192, gpu="h100").scenarios[0].engine_version == "0.34.0"


def test_the_measured_pool_at_the_default_utilisation() -> None:
    # margin max(1 GiB, 0.75 x 1,973,506,048 = 1,480,129,536) = 1,480,129,536; at utilisation 1.0 the warm-up bound
    # decides: 85,025,882,112 - 547,608,330 - 1,480,129,536 = 82,998,144,246 requested, then - PARTS - 977,105,060
    # = 63,685,020,754 B (59.31 GiB; vLLM 0.33 gave 59,082,486,744 at 0.92). 64-token blocks of 8 MiB:
    # 63,685,020,754 // 8,388,608 = 7,591 blocks = 485,824 tokens.
    s = scenario(ctx=8192, gpu="h100")
    assert s.gpu is not None and s.gpu.budget is not None
    b = s.gpu.budget
    assert (b.utilization, b.start_snapshot_bytes, b.margin_bytes) == (1.0, START, 1_480_129_536)
    assert b.requested_bytes == VISIBLE - START - 1_480_129_536 == 82_998_144_246
    assert b.cuda_graph_bytes == GRAPHS
    assert s.gpu.kv_budget_bytes == 82_998_144_246 - PARTS - GRAPHS == 63_685_020_754
    assert s.gpu.kv_pool_tokens == 63_685_020_754 // (64 * 131_072) * 64 == 485_824
    assert s.gpu.max_concurrency == 63_685_020_754 // (8192 * 131_072) == 59


def test_a_given_utilisation_caps_the_pool_first() -> None:
    # --gpu-memory-utilization 0.95: ceil(85,025,882,112 x 0.95) = 80,774,588,007 < the warm-up bound 82,998,144,246,
    # so the cap decides and neither the start-up use nor the margin is taken: 80,774,588,007 - PARTS - 977,105,060.
    s = scenario(ctx=8192, gpu="h100", budget=BudgetSettings(gpu_util=0.95))
    assert s.gpu is not None and s.gpu.budget is not None
    assert s.gpu.budget.requested_bytes == 80_774_588_007
    assert (s.gpu.budget.start_snapshot_bytes, s.gpu.budget.margin_bytes) == (0, 0)
    assert s.gpu.kv_budget_bytes == 80_774_588_007 - PARTS - GRAPHS == 61_461_464_515


def test_rocm_keeps_a_3_gib_margin_and_16_token_blocks() -> None:
    # MI300X: KV_CACHE_MARGIN_FLOOR_BYTES 3 GiB on ROCm > 0.75 x the activation; ROCM_ATTN keeps 16-token blocks.
    s = scenario(ctx=1000, gpu="mi300x")
    assert s.gpu is not None and s.gpu.budget is not None
    assert s.gpu.budget.margin_bytes == 3 << 30 > 0.75 * s.gpu.budget.activation_bytes
    assert s.block_size == 16


def test_64_token_blocks() -> None:
    # ctx 1,000: cdiv(1000, 64) = 16 blocks = 1,024 slots x 131,072 B = 134,217,728 (0.33: 63 x 16 = 1,008 slots).
    s = scenario(ctx=1000)
    assert (s.block_size, s.bytes_per_request) == (64, 1024 * 131_072)
    old = kvsize.estimate(LLAMA, ctx=1000, engine="vllm", engine_version="0.33.0").scenarios[0]
    assert (old.block_size, old.bytes_per_request) == (16, 1008 * 131_072)


def test_mla_backends_take_the_default() -> None:
    # DeepSeek-V3, tp 8: FlashInfer-MLA [32, 64] on B200 takes 64 (0.33: 32); FlashAttention-MLA (16-bit, Hopper) and
    # Triton-MLA (A100) take 64 (0.33: 16); FlashMLA (fp8, Hopper) is 64 in both.
    for gpu, dtype, before in (
        ("b200", "bf16", 32),
        ("h100", "bf16", 16),
        ("a100-80gb", "bf16", 16),
        ("h100", "fp8", 64),
    ):
        now = scenario("deepseek-ai/DeepSeek-V3", ctx=1050, gpu=gpu, tp=8, kv_dtype=dtype)
        old = kvsize.estimate(
            "deepseek-ai/DeepSeek-V3", ctx=1050, engine="vllm", engine_version="0.33.0", gpu=gpu, tp=8, kv_dtype=dtype
        ).scenarios[0]
        assert (old.block_size, now.block_size) == (before, 64), (gpu, dtype)


def test_hybrid_alignment_follows_the_block() -> None:
    # Qwen3-Next at tp 4: attention max(1, 2 // 4) = 1 KV head x 256 x 2 x 2 B = 1,024 B per token, the GDN state
    # 274,432 B per rank. 0.33 on A100 (A = 16): 16 x cdiv(274,432, 16,384) = 272; 0.34 (A = 64): 64 x
    # cdiv(274,432, 65,536) = 320; on H100 the FlashInfer GDN checkpoint lcm(A, 64) gave 320 in 0.33 already.
    model = "Qwen/Qwen3-Next-80B-A3B-Thinking"
    old = kvsize.estimate(model, ctx=32768, engine="vllm", engine_version="0.33.0", gpu="a100-80gb", tp=4)
    assert old.scenarios[0].block_size == 272
    assert scenario(model, ctx=32768, gpu="a100-80gb", tp=4).block_size == 320
    assert scenario(model, ctx=32768, gpu="h100", tp=4).block_size == 320


# A start-up log in 0.34's format, its lines written from the format strings of the 0.34.0 source (no published
# 0.34 log was at hand): v1/worker/gpu_worker.py determine_available_memory ("Available KV cache memory", now the
# address space reserved at utilisation 1.0) and _compile_or_warm_up_model ("Free memory on device"),
# v1/worker/extensible_kv_cache.py measure_kv_cache_blocks ("Memory after warmup"), the V2 runner's
# "Graph capturing finished", v1/core/kv_cache_utils.py's pool lines. Figures: case A of the research notes.
LOG_034 = """\
INFO [v1/engine/core.py:105] Initializing a V1 LLM engine (v0.34.0) with config: model='meta-llama/Llama-3.1-8B', \
dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto
INFO [v1/worker/gpu/model_runner.py:442] Model loading took 14.99 GiB memory and 10.5 seconds
INFO [v1/worker/gpu_worker.py:795] Available KV cache memory: 62.07 GiB
INFO [v1/worker/gpu/model_runner.py:1200] Graph capturing finished in 10 secs, took 0.91 GiB
INFO [v1/worker/gpu_worker.py:1154] Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory \
utilization is (1.0, 79.19 GiB).
INFO [v1/worker/extensible_kv_cache.py:694] Memory after warmup: 61.5 GiB free, 0.01 GiB committed to the KV \
cache, 1.4 GiB kept for transient activations (1.2 GiB allocated at peak, 1.4 GiB of torch reservation growth); \
7590 KV cache blocks (59.3 GiB) fit within the requested 79.19 GiB. Torch may reserve up to 1.4 GiB.
INFO [v1/core/kv_cache_utils.py:1319] GPU KV cache size: 485,760 tokens
INFO [v1/core/kv_cache_utils.py:1324] Maximum concurrency for 8,192 tokens per request: 59.30x
"""


def test_a_0_34_log_reads_the_measured_pool() -> None:
    log = parse_log(LOG_034)
    f = log.figures
    assert (f["available_kv_gib"], f["kv_reservation_gib"]) == (59.3, 62.07)  # the pool, not the reservation
    assert (f["initial_free_gib"], f["total_memory_gib"], f["cuda_graph_gib"]) == (78.68, 79.19, 0.91)
    assert log.settings["kv_sizing"] == "measured"
    result = CliRunner().invoke(app, ["log", "-", "--gpu", "h100", "--json"], input=LOG_034)
    assert result.exit_code == 0, result.stderr
    figures = {x["name"]: x for x in json.loads(result.stdout)["figures"]}
    # 59.3 GiB // 8 MiB = 7,590 blocks = 485,760 tokens, as logged; kvsize's own pool 63,685,020,754 B = 59.31 GiB.
    assert (figures["pool tokens"]["logged"], figures["pool tokens"]["predicted"]) == (485_760, 485_760)
    assert figures["available KV memory"]["predicted"] * 1024**3 == 63_685_020_754
    # the start-up use 79.19 - 78.68 = 0.51 GiB, next to kvsize's 0.51; the captured graphs 0.91 next to 0.91
    start, graphs = figures["start-up use"], figures["CUDA graphs (captured)"]
    assert (start["logged"], round(start["predicted"] * 1024**3)) == (0.51, START)
    assert (graphs["logged"], round(graphs["predicted"] * 1024**3)) == (0.91, GRAPHS)


def test_a_log_without_its_release_is_sized_by_its_format() -> None:
    measured = parse_log(LOG_034.replace("(v0.34.0) ", ""))
    assert measured.engine_version in (None, "") and unversioned_vllm_release(measured) == "0.34.0"
    profiled = parse_log("INFO [v1/worker/gpu_worker.py:436] Available KV cache memory: 58.11 GiB\n")
    assert unversioned_vllm_release(profiled) == "0.33.0"  # the newest release that sizes its pool by profiling


def test_qwen3_partly_sliding_is_served_all_full_from_0_34() -> None:
    # Qwen3-8B with use_sliding_window and max_window_layers 28 of 36: transformers slides layers 28-35
    # (Qwen3Config: i >= max_window_layers). vLLM through 0.33 refuses it (models/qwen2.py Qwen2Model's assertion,
    # 0.19 and 0.33 read); 0.34 serves every layer full: 36 x 8 KV heads x 128 x 2 x 2 B x 32,768 = 4,831,838,208.
    raw = {**registry_config("Qwen/Qwen3-8B"), "use_sliding_window": True, "sliding_window": 4096}
    raw["max_window_layers"] = 28
    with pytest.raises(UnsupportedArchitecture, match="only partly slide"):
        kvsize.estimate(raw, ctx=32768, engine="vllm", engine_version="0.33.0")
    s = kvsize.estimate(raw, ctx=32768, engine="vllm", engine_version="0.34.0")
    assert s.scenarios[0].bytes_per_request == 36 * 8 * 128 * 2 * 2 * 32768 == 4_831_838_208
    assert any("caches every layer of this qwen3 model in full" in n for n in s.notes)
    # Qwen2 keeps the assertion in 0.34 (Qwen2DecoderLayer); every layer sliding is served as before.
    qwen2 = {**raw, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
    with pytest.raises(UnsupportedArchitecture, match="only partly slide"):
        kvsize.estimate(qwen2, ctx=32768, engine="vllm", engine_version="0.34.0")
    every = {**raw, "max_window_layers": 0}
    assert kvsize.estimate(every, ctx=32768, engine="vllm", engine_version="0.34.0").scenarios[0].layers[0].kind == (
        "sliding"
    )


@pytest.mark.parametrize("release", ["0.18.0", "0.19.0", "0.29.0", "0.33.0", "0.34.0"])
def test_sparse_mla_pages_at_the_indexer_block(release: str) -> None:
    # DeepSeek-V3.2 on a B200 in fp8: FlashInfer-MLA sparse ([MultipleOf(32)], standard fp8: 576 B) beside the indexer
    # cache, whose backend takes only 64 (indexer.py DeepseekV32IndexerBackend, read in 0.18, 0.19 and 0.33): the
    # block is 64 in every release, as the first registered layer (0.18-0.30, platforms/interface.py
    # update_block_size_for_backend; read in 0.18, 0.19, 0.29) or the LCM over backends (0.31+, read in 0.31-0.34).
    # 61 x (576 + 132) = 43,188 B per token per rank, x 8 ranks (the latent is replicated) = 345,504;
    # cdiv(1,050, 64) = 17 blocks = 1,088 slots -> 375,908,352 B (32-token blocks would give 1,056 slots).
    s = kvsize.estimate(
        "nvidia/DeepSeek-V3.2-NVFP4", ctx=1050, engine="vllm", engine_version=release, gpu="b200", tp=8, kv_dtype="fp8"
    ).scenarios[0]
    assert (s.block_size, s.kv_bytes_per_token) == (64, 8 * 61 * (576 + 132))
    assert s.bytes_per_request == 1088 * 345_504 == 375_908_352


def test_removed_architectures_are_refused_after_their_last_release() -> None:
    # model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS (0.34.0): BaichuanForCausalLM "0.23.0",
    # KeyeForConditionalGeneration "0.33.0" (0.33.0 still registers Keye; 0.34.0 lists it as removed).
    assert kvsize.estimate("baichuan-inc/Baichuan2-7B-Chat", ctx=4096, engine="vllm", engine_version="0.23.0")
    for release in ("0.24.0", "0.24.0rc1", "0.34.0"):
        with pytest.raises(
            UnsupportedArchitecture, match="no longer serves BaichuanForCausalLM: it was supported until"
        ):
            kvsize.estimate("baichuan-inc/Baichuan2-7B-Chat", ctx=4096, engine="vllm", engine_version=release)
    keye = {**registry_config("Qwen/Qwen3-8B"), "architectures": ["KeyeForConditionalGeneration"]}
    assert kvsize.estimate(keye, ctx=4096, engine="vllm", engine_version="0.33.0")
    with pytest.raises(UnsupportedArchitecture, match="until v0.33.0"):
        kvsize.estimate(keye, ctx=4096, engine="vllm", engine_version="0.34.0")


def test_the_launch_command_leaves_the_measured_default_unset() -> None:
    # 0.34's flags (kvsize/data/engine_flags/vllm.json, read from arg_utils.py@0.34.0) hold the new switch; the
    # command states no --gpu-memory-utilization where 0.34's unset default (1.0, measured) sized the pool, so a
    # driver without virtual-memory support keeps vLLM's 0.92; a given share is stated.
    from kvsize.launch import release_flags

    assert "--enable-extensible-kv-cache" in release_flags("vllm", "0.34.0").flags
    default = CliRunner().invoke(app, [LLAMA, "--ctx", "32k", "--gpu", "h100", "--emit", "vllm"])
    assert default.exit_code == 0, default.stderr
    command = default.stdout.strip().splitlines()[-1]
    assert command.startswith("vllm serve ") and "--gpu-memory-utilization" not in command
    assert "newer than the newest release read" not in default.stdout
    given = CliRunner().invoke(app, [LLAMA, "--ctx", "32k", "--gpu", "h100", "--gpu-util", "0.9", "--emit", "vllm"])
    assert "--gpu-memory-utilization 0.9 " in given.stdout


def test_only_the_measured_sizing_has_start_up_use_and_a_margin() -> None:
    # 0.33's profiled budget keeps neither part (0 in the JSON, no row in the reserve), and says nothing of 0.34's
    # constants; 0.34 on a card says where its two measured parts come from.
    from kvsize.report import reserve_parts

    old = kvsize.estimate(LLAMA, ctx=8192, gpu="h100", engine="vllm", engine_version="0.33.0")
    gpu = old.scenarios[0].gpu
    assert gpu is not None and gpu.budget is not None
    assert (gpu.budget.start_snapshot_bytes, gpu.budget.margin_bytes) == (0, 0)
    assert not any(label in ("start-up use", "warm-up margin") for label, _ in reserve_parts(gpu))
    assert not any("sizes the pool after warm-up" in n for n in old.notes)
    new = kvsize.estimate(LLAMA, ctx=8192, gpu="h100", engine="vllm", engine_version="0.34.0")
    assert any("taken from vLLM 0.19 H100 logs" in n for n in new.notes)
    new_gpu = new.scenarios[0].gpu
    assert new_gpu is not None
    assert dict(reserve_parts(new_gpu))["start-up use"] == START
