"""The budget's parts, worked by hand from vLLM's source (issue 11): the profile-run activation peak, non-torch
memory by interconnect, the A100 batch exclusion, and the running-request cap."""

from __future__ import annotations

import re
from pathlib import Path

import kvsize
from kvsize.budget import BudgetSettings, kv_budget, vllm_activation_bytes
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.profiles import resolve_gpu
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

GIB = 1024**3
H100 = Device.from_profile(resolve_gpu("h100"))
A100 = Device.from_profile(resolve_gpu("a100-80gb"))
L40S = Device.from_profile(resolve_gpu("l40s"))


def spec_of(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None
    return parse_config(load_registry_config(entry))


def test_activation_llama_8b_on_h100() -> None:
    # vLLM 0.19 profile run (v1/worker/gpu_model_runner.py _dummy_sampler_run, v1/sample/sampler.py,
    # ops/topk_topp_sampler.py, ops/topk_topp_triton.py), Llama-3.1-8B (vocab 128,256, hidden 4096, MLP 14,336):
    # sampler: 1024 rows x 128,256 x (2 bf16 logits + 4 fp32 copy + 4 probs + 4 noise) = 1,838,678,016
    # Triton top-k/top-p buffer: 132 SMs x 128,256 x 4 = 67,719,168; held hidden states 8192 x 4096 x 2 = 67,108,864
    # forward: 8192 x (2 x 4096 + 3 x 14,336) x 2 = 838,860,800 (smaller) -> peak 1,973,506,048 B = 1.838 GiB
    # (the log says 1.89 GiB).
    got = vllm_activation_bytes(
        spec_of("meta-llama/Llama-3.1-8B-Instruct"), max_batched_tokens=8192, max_num_seqs=1024, gpu=H100.name
    )
    assert got == 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2 == 1_973_506_048


def test_activation_moe_adds_the_fused_moe_workspace() -> None:
    # Qwen3-30B-A3B: 8 experts per token of width 768, hidden 2048; workspace 8192 x 8 x (3 x 768 + 2048) x 2 B
    # = 578,813,952 on top of the sampler's 1024 x 151,936 x 14 + 132 x 151,936 x 4 + 8192 x 2048 x 2.
    spec = spec_of("Qwen/Qwen3-30B-A3B")
    assert (spec.experts_per_token, spec.moe_intermediate_size) == (8, 768)
    got = vllm_activation_bytes(spec, max_batched_tokens=8192, max_num_seqs=1024, gpu=H100.name)
    sampler = 1024 * 151_936 * 14 + 132 * 151_936 * 4 + 8192 * 2048 * 2
    assert got == sampler + 8192 * 8 * (3 * 768 + 2048) * 2


def test_a100_profiles_the_small_batch_tier() -> None:
    # EngineArgs.get_batch_defaults: an 80 GiB A100 is excluded by name from the 8192 / 1024 tier -> 2048 / 256.
    spec = spec_of("meta-llama/Llama-3.1-8B-Instruct")
    budget = kv_budget(
        "vllm",
        "0.19",
        spec,
        memory_bytes=A100.total_memory_bytes,
        weights_bytes=16 * GIB,
        settings=BudgetSettings(gpu_util=0.9),
        device=A100,
    )
    small = vllm_activation_bytes(spec, max_batched_tokens=2048, max_num_seqs=256, gpu=A100.name)
    assert budget.activation_bytes == small
    # sampler 256 x 128,256 x 14 + 108 SMs x 128,256 x 4 + 2048 x 4096 x 2 = 531,853,312 B, larger than the
    # forward 2048 x (8192 + 43,008) x 2 = 209,715,200 B.
    assert small == 256 * 128_256 * 14 + 108 * 128_256 * 4 + 2048 * 4096 * 2


def test_non_torch_by_interconnect() -> None:
    # NCCL NVLS buffers only on NVSwitch Hopper/Blackwell systems: 2.08 GiB per rank at tp 2 on H100 SXM,
    # the tp-1 figure on an L40S (PCIe) and on an A100. The figures are the vLLM 0.19 logs' "non-torch forward
    # increase memory" (v1/worker/gpu_worker.py determine_available_memory), as kvsize/budget.py cites them:
    #   tp 1: 0.25 GiB = 0.25 x 1,073,741,824 = 268,435,456 B
    #   tp >= 2 with NVLS: 2.08 GiB = 2.08 x 1,073,741,824 = 2,233,382,993.92 B, held in whole KiB:
    #   round(2.08 x 1,048,576) = 2,181,038 KiB x 1,024 = 2,233,382,912 B
    tp1, nvls = 268_435_456, 2_233_382_912
    assert tp1 == GIB // 4 and nvls == round(2.08 * 1024**2) * 1024
    # ...which sits inside what the H100 tp 2 / tp 4 logs in tests/data/logs print (2.06-2.21 GiB), read here.
    logs = Path(__file__).parent / "data" / "logs"
    logged = [
        float(m)
        for log in logs.glob("llmd-*tp[248]pp1dp1-*.log")
        for m in re.findall(r"non-torch forward increase memory: ([0-9.]+)GiB", log.read_text())
    ]
    assert len(logged) >= 10 and min(logged) * GIB <= nvls <= max(logged) * GIB
    spec = spec_of("meta-llama/Llama-3.1-8B-Instruct")
    for device, expected in ((H100, nvls), (L40S, tp1), (A100, tp1)):
        b = kv_budget(
            "vllm", "0.19", spec, memory_bytes=device.total_memory_bytes, weights_bytes=8 * GIB, tp=2, device=device
        )
        assert b.non_torch_bytes == expected, device.name


def test_concurrency_capped_by_max_num_seqs() -> None:
    # Llama-3.1-8B on an H100 at 256 tokens: one request is 16 blocks of 2 MiB, so ~59 GiB hold ~1,880 of them,
    # but vLLM runs at most max_num_seqs = 1024 (v1/core/sched/scheduler.py) -- the cap binds.
    (s,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=256, gpu="h100", engine="vllm").scenarios
    assert s.gpu is not None
    assert s.gpu.concurrency_cap == 1024 and s.gpu.cap_binds and s.gpu.max_concurrency == 1024
    # At 128k tokens the memory binds first.
    (t,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=128 * 1024, gpu="h100", engine="vllm").scenarios
    assert t.gpu is not None and not t.gpu.cap_binds and t.gpu.max_concurrency < 1024


def test_weights_mem_per_gpu_is_per_rank() -> None:
    # vLLM logs weights per rank ("Model loading took 7.51 GiB" at tp 2): --weights-mem-per-gpu takes that figure
    # as it is; --weights-mem is the whole model, split over tp x pp.
    import json

    from typer.testing import CliRunner

    from kvsize.cli.app import app

    runner = CliRunner()
    base = ["meta-llama/Llama-3.1-8B", "--ctx", "8k", "--gpu", "h100", "--tp", "2", "--json"]
    per_rank = runner.invoke(app, [*base, "--weights-mem-per-gpu", "7GiB"])
    whole = runner.invoke(app, [*base, "--weights-mem", "7GiB"])
    assert per_rank.exit_code == 0 and whole.exit_code == 0
    assert json.loads(per_rank.stdout)["scenarios"][0]["gpu"]["weights_bytes"] == 7 * GIB
    assert json.loads(whole.stdout)["scenarios"][0]["gpu"]["weights_bytes"] == 7 * GIB // 2
    both = runner.invoke(app, [*base, "--weights-mem", "7GiB", "--weights-mem-per-gpu", "7GiB"])
    assert both.exit_code == 2 and both.stderr.startswith("Error:")


def test_trtllm_budget_is_nine_tenths_of_what_the_warm_up_leaves() -> None:
    # TensorRT-LLM 1.2.0, KvCacheCreator._cal_max_memory (_torch/pyexecutor/_util.py): the KV cache gets
    # free_gpu_memory_fraction = 0.9 (llmapi/llm_args.py KvCacheConfig) of what the warm-up run left free.
    # kvsize.budget: floor((CUDA-visible - weights - warm-up peak - non-torch) x 0.9). Llama-3.1-8B bf16 on one
    # H100 SXM (nvidia-smi 85,520,809,984 B):
    #   CUDA-visible   85,520,809,984 - 494,927,872 (CUDA context)                        = 85,025,882,112
    #   weights        8,030,261,248 parameters x 2 B                                     = 16,060,522,496
    #   warm-up peak   vLLM 0.33.0 H100 tier 8192 tokens / 1024 seqs, as in the first test  =  1,973,506,048
    #   non-torch      tp 1: 0.25 GiB                                                     =    268,435,456
    #   free           85,025,882,112 - 16,060,522,496 - 1,973,506,048 - 268,435,456      = 66,723,418,112
    #   KV budget      66,723,418,112 x 0.9 = 60,051,076,300.8 -> 60,051,076,300
    # (0.8 would give 53,378,734,489; 0.95 63,387,247,206.)
    spec = spec_of("meta-llama/Llama-3.1-8B-Instruct")
    b = kv_budget("trtllm", "1.2", spec, memory_bytes=85_520_809_984, weights_bytes=16_060_522_496, device=H100)
    assert b.utilization == 0.9
    assert (b.requested_bytes, b.activation_bytes) == (85_025_882_112, 1_973_506_048)
    assert (b.non_torch_bytes, b.cuda_graph_bytes) == (268_435_456, 0)
    assert b.kv_budget_bytes == 60_051_076_300
    # End to end, the pool takes that budget once (not 0.9 x 0.9): 60,051,076,300 // 131,072 B per token
    # (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B) = 458,153 tokens -> math.ceil(458,153 / 32) = 14,318 blocks
    # of 32 = 458,176 tokens (calculate_max_num_blocks, resource_manager.py @ main 1.2.0rc2; was floor, 458,144).
    (s,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=8192, gpu="h100", engine="trtllm").scenarios
    assert s.gpu is not None
    assert (s.gpu.weights_bytes, s.gpu.kv_budget_bytes) == (16_060_522_496, 60_051_076_300)
    assert s.gpu.kv_pool_tokens == 458_176
