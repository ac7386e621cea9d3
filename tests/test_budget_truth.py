"""The budget's parts, worked by hand from vLLM's source (issue 11): the profile-run activation peak, non-torch
memory by interconnect, the A100 batch exclusion, and the running-request cap."""

from __future__ import annotations

import kvsize
from kvsize.budget import NON_TORCH_NVLS, NON_TORCH_TP1, BudgetSettings, kv_budget, vllm_activation_bytes
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
    # the tp-1 figure on an L40S (PCIe) and on an A100.
    spec = spec_of("meta-llama/Llama-3.1-8B-Instruct")
    for device, expected in ((H100, NON_TORCH_NVLS), (L40S, NON_TORCH_TP1), (A100, NON_TORCH_TP1)):
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
