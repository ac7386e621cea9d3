"""Budget truth beyond the H100 (issue 23): the CUDA total each card reports (GpuProfile.cuda_total_bytes),
unified-memory devices, and the served dtype (--dtype) that `--kv-dtype auto` follows. Values worked by hand."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import kvsize
from kvsize.budget import CUDA_CONTEXT_BYTES, BudgetSettings, cuda_visible, kv_budget
from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.errors import ConfigError, KvsizeError
from kvsize.profiles import load_profiles, parse_profile, profiles_dir, resolve_gpu
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec
from tests.tiny_configs import registry_config

GIB = 1024**3
LLAMA = "meta-llama/Llama-3.1-8B"
# Llama-3.1-8B bf16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token.
LLAMA_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2


def spec_of(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None
    return parse_config(load_registry_config(entry))


# --- the card's CUDA total ----------------------------------------------------------------------------------


def test_h200_starts_from_the_logged_cuda_total() -> None:
    # fs:20903468563: vLLM on 8x H200 (nvidia-smi 143771MiB = 150,754,820,096 B = 140.40 GiB) prints
    # "total_gpu_memory (139.81GiB)"; 139.81 x 1,073,741,824 = 150,119,844,413.44 -> 150,119,844,413 B.
    # The fallback would be 150,754,820,096 - 494,927,872 = 150,259,892,224 (139.94 GiB), 0.13 GiB too high.
    h200 = resolve_gpu("h200")
    assert h200.memory_bytes == 143_771 * 1024**2 == 150_754_820_096
    assert h200.cuda_total_bytes == 150_119_844_413
    visible, source = cuda_visible(h200.memory_bytes, Device.from_profile(h200))
    assert visible == 150_119_844_413 and "139.81 GiB" in source and "fs:20903468563" in source
    # vLLM 0.33 request_memory: ceil(150,119,844,413 x 0.92) = ceil(138,110,256,859.96) = 138,110,256,860.
    b = kv_budget(
        "vllm",
        "0.33",
        spec_of(LLAMA),
        memory_bytes=h200.memory_bytes,
        weights_bytes=0,
        device=Device.from_profile(h200),
    )
    assert (b.visible_bytes, b.requested_bytes) == (150_119_844_413, 138_110_256_860)
    assert "CUDA total 139.81 GiB" in b.rule and b.memory_bytes == 150_754_820_096  # nominal kept for display


def test_logged_totals_of_the_other_cards() -> None:
    # As printed, x 2**30: RTX 3090 23.58 GiB -> 25,318,832,209.92; L40S 44.42 GiB -> 47,695,611,822.08.
    profiles = load_profiles()
    assert profiles["rtx-3090"].cuda_total_bytes == 25_318_832_210
    assert profiles["l40s"].cuda_total_bytes == 47_695_611_822
    # Each figure lies 0.42-0.59 GiB below nvidia-smi's: 24.00 - 23.58, 44.99 - 44.42, 140.40 - 139.81.
    for pid in ("rtx-3090", "l40s", "h200"):
        gap = profiles[pid].memory_bytes - (profiles[pid].cuda_total_bytes or 0)
        assert 0.40 * GIB < gap < 0.60 * GIB, pid


def test_cards_without_a_published_total_fall_back_and_say_so() -> None:
    # H100 PCIe: no published figure names the card with its total; the budget takes 85,520,809,984 - 494,927,872.
    pcie = resolve_gpu("h100-pcie")
    assert pcie.cuda_total_bytes is None and pcie.memory_bytes == 85_520_809_984
    visible, source = cuda_visible(pcie.memory_bytes, Device.from_profile(pcie))
    assert visible == 85_520_809_984 - 494_927_872 == 85_025_882_112
    assert "CUDA_CONTEXT_BYTES" in source


def test_a_published_cuda_total_replaces_the_fallback() -> None:
    # A100-SXM4-80GB: CUDA deviceQuery's 85,100,068,864 B (81158 MBytes, driver 12.5), 304,349,184 B below the
    # fallback 85,899,345,920 - 494,927,872 = 85,404,418,048; the source names the driver spread.
    a100 = resolve_gpu("a100-80gb")
    visible, source = cuda_visible(a100.memory_bytes, Device.from_profile(a100))
    assert visible == 85_100_068_864 and "deviceQuery" in source and "driver 12.2" in source


def test_gpu_mem_drops_the_profiles_cuda_total() -> None:
    # --gpu h200 --gpu-mem 100GiB is a card of that size: its CUDA total is unknown, so the fallback applies.
    dev = Device.from_profile(resolve_gpu("h200"), 100 * GIB)
    assert dev.cuda_total_bytes is None
    assert cuda_visible(100 * GIB, dev)[0] == 100 * GIB - CUDA_CONTEXT_BYTES


def test_sglang_and_trtllm_start_from_the_same_total() -> None:
    # TensorRT-LLM's requested figure is the CUDA-visible memory itself; SGLang's free memory before loading.
    h200 = resolve_gpu("h200")
    dev = Device.from_profile(h200)
    spec = spec_of(LLAMA)
    trt = kv_budget("trtllm", "1.2", spec, memory_bytes=h200.memory_bytes, weights_bytes=0, device=dev)
    assert trt.requested_bytes == 150_119_844_413 and "139.81" in trt.rule
    sgl = kv_budget(
        "sglang",
        None,
        spec,
        memory_bytes=h200.memory_bytes,
        weights_bytes=0,
        device=dev,
        settings=BudgetSettings(gpu_util=0.5),
    )
    # ceil(150,119,844,413 x 0.5) = ceil(75,059,922,206.5) = 75,059,922,207
    assert sgl.requested_bytes == 75_059_922_207 and "139.81" in sgl.rule


def test_profile_refuses_a_total_without_source_or_above_the_card() -> None:
    import yaml

    raw = yaml.safe_load((profiles_dir() / "h200.yaml").read_text())
    with pytest.raises(ConfigError, match="needs its cuda_total_source"):
        parse_profile({**raw, "cuda_total_source": None}, source="x.yaml")
    with pytest.raises(ConfigError, match="exceeds memory_bytes"):
        parse_profile({**raw, "cuda_total_bytes": raw["memory_bytes"] + 1}, source="x.yaml")


# --- unified memory -----------------------------------------------------------------------------------------


def test_unified_memory_budget_and_note() -> None:
    # DGX Spark: CUDA's total is 128,538,451,968 B (119.71 GiB, aiconfigurator gb10.yaml); no context is taken
    # off it. vLLM keeps that total (utils/mem_utils.py MemorySnapshot.measure replaces only free memory, with
    # psutil's available) -> requested = ceil(128,538,451,968 x 0.92) = ceil(118,255,375,810.56) = 118,255,375,811.
    spark = resolve_gpu("dgx-spark")
    dev = Device.from_profile(spark)
    assert dev.unified_memory and not Device.from_profile(resolve_gpu("h200")).unified_memory
    b = kv_budget("vllm", "0.33", spec_of(LLAMA), memory_bytes=spark.memory_bytes, weights_bytes=0, device=dev)
    assert b.requested_bytes == 118_255_375_811
    assert "unified memory" in b.rule and "psutil" in b.rule
    h100 = Device.from_profile(resolve_gpu("h100"))
    other = kv_budget(
        "vllm", "0.33", spec_of(LLAMA), memory_bytes=h100.total_memory_bytes, weights_bytes=0, device=h100
    )
    assert "unified memory" not in other.rule


# --- the served dtype (--dtype) -----------------------------------------------------------------------------


def test_dtype_half_makes_fp16_the_auto_cache_on_vllm_011() -> None:
    # vLLM 0.11 --kv-cache-dtype offers no fp16 name, but auto stores the served dtype: with --dtype half a
    # bf16 Llama-3.1-8B runs in float16 (config/model.py _get_and_verify_dtype: "Casting bfloat16 to float16"),
    # so auto is fp16 and fp16 by name is that same cache, 131,072 B per token as bf16.
    (auto,) = kvsize.estimate(LLAMA, ctx=8192, engine_version="0.11.0", dtype="half").scenarios
    assert auto.kv_dtype.value == "fp16" and auto.kv_bytes_per_token == LLAMA_BYTES_PER_TOKEN == 131_072
    (named,) = kvsize.estimate(LLAMA, ctx=8192, engine_version="0.11.0", dtype="float16", kv_dtype="fp16").scenarios
    assert named.kv_dtype.value == "fp16" and named.kv_cache_bytes == 8192 * 131_072
    with pytest.raises(KvsizeError, match="no fp16 KV cache"):  # without --dtype the model is served in bf16
        kvsize.estimate(LLAMA, ctx=8192, engine_version="0.11.0", kv_dtype="fp16")


def test_dtype_auto_is_the_config_dtype() -> None:
    (s,) = kvsize.estimate(LLAMA, ctx=8192, dtype="auto").scenarios
    assert s.kv_dtype.value == "bf16"


def test_dtype_refusals_follow_vllm() -> None:
    with pytest.raises(KvsizeError, match="Bfloat16 is only supported"):  # T4 is sm_75
        kvsize.estimate(LLAMA, ctx=8192, gpu="t4", dtype="bfloat16")
    with pytest.raises(KvsizeError, match="does not support float16"):  # _FLOAT16_NOT_SUPPORTED_MODELS
        kvsize.estimate("google/gemma-2-9b-it", ctx=8192, dtype="half")
    with pytest.raises(KvsizeError, match="unknown dtype"):
        kvsize.estimate(LLAMA, ctx=8192, dtype="fp8")


def test_sglang_dtype_half() -> None:
    # SGLang --dtype half: the pool's auto dtype is model_config.dtype, float16; same bytes as bf16.
    (s,) = kvsize.estimate(LLAMA, ctx=8192, engine="sglang", dtype="half").scenarios
    assert s.kv_dtype.value == "fp16" and s.kv_bytes_per_token == 131_072


def test_dtype_on_an_engine_without_it_is_noted() -> None:
    est = kvsize.estimate(LLAMA, ctx=8192, engine="formula", dtype="half")
    assert any("--dtype is vLLM's and SGLang's" in n for n in est.notes)


def test_cli_dtype() -> None:
    result = CliRunner().invoke(
        app, [LLAMA, "--ctx", "8k", "--engine-version", "0.11.0", "--dtype", "half", "--kv-dtype", "fp16", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert '"fp16"' in result.output


def test_dtype_float32_doubles_an_unquantized_checkpoint() -> None:
    # vLLM builds every parameter in --dtype's dtype and casts the bf16 weights on load (model_loader/utils.py
    # set_default_torch_dtype): the registry's published 16,060,522,496 B of bf16 safetensors become 2x that.
    # The published llm-d log of this run (tests/data/logs/llmd-meta-llama-llama-3-tp1pp1dp1-8192-dtf32.log)
    # says "Model loading took 29.98 GiB" = 2 x 14.99 GiB. The cache follows: 32 x 8 x 256 x 4 B = 262,144 B/token.
    (s,) = kvsize.estimate("meta-llama/Llama-3.1-8B-Instruct", ctx=8192, gpu="h100", dtype="float32").scenarios
    assert s.gpu is not None and s.gpu.weights_bytes == 2 * 16_060_522_496
    assert s.kv_dtype.value == "fp32" and s.kv_bytes_per_token == 262_144


def test_dtype_float32_on_a_quantized_checkpoint_is_refused() -> None:
    # Only the unquantized part widens (fp8 weights stay 1 B): kvsize cannot split a size measured in total.
    quantized = {**registry_config(LLAMA), "quantization_config": {"quant_method": "fp8"}}
    with pytest.raises(KvsizeError, match="widens only the unquantized part"):
        kvsize.estimate(quantized, ctx=8192, gpu="h100", dtype="float32")
