"""How much of a GPU an engine gives its KV cache: utilisation, weights, activations, CUDA graphs. Pure.

Each part is a stated number with its source and can be overridden; `--kv-memory` skips the model and takes
the KV memory per GPU as given (vLLM's --kv-cache-memory-bytes).

Calibration: the activation and non-torch defaults reproduce vLLM 0.19 start-up logs on H100 80GB
(llm-d-incubation/llm-d-planner accuracy sweep, tests/data/engine_logs.json): activation peak 1.89 GiB
(Llama-3.1-8B), 3.62 (gemma-2-2b), 3.89 (gemma-3-4b), 2.21 (Qwen2.5-7B), 2.87 (gpt-oss-20b), 3.19
(Llama-4-Scout); non-torch 0.25 GiB at tp 1, 2.07-2.17 GiB at tp >= 2 (NCCL buffers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from kvsize.engines.context import Device, UsageContext
from kvsize.spec import ArchSpec

GIB = 1024**3

# CUDA-visible total memory is below nvidia-smi's: the H100 80GB reports 81,559 MiB (79.65 GiB) in nvidia-smi
# but 79.19 GiB to torch / vLLM ("total_gpu_memory (79.19GiB)"); GPUS.md gives 0.45-0.75 GiB by driver.
CUDA_CONTEXT_BYTES = 494_927_872  # 79.65 GiB - 79.19 GiB = 0.461 GiB

# vLLM's profile run: a forward of max_num_batched_tokens tokens, then a dummy sampler run over max_num_seqs
# rows of fp32 logits. Least-squares fit to the six 0.19 logs above (within 0.1 GiB on five of them):
ACTIVATION_BYTES_PER_LOGIT = 14.58  # per (sequence x vocab entry): fp32 logits and ~2.6 temporaries
ACTIVATION_BYTES_PER_HIDDEN = 3.40  # per (batched token x hidden unit): bf16 hidden states plus residual
NON_TORCH_TP1 = 268_435_456  # 0.25 GiB: cuBLAS workspaces and allocator slack seen at tp 1
NON_TORCH_TP = 2_233_382_912  # 2.08 GiB: NCCL buffers at tp >= 2 (2.06-2.17 GiB in the logs)
# vLLM >= 0.20 subtracts an estimate of CUDA-graph memory (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1):
# the 0.19 logs print estimates of 0.52-0.84 GiB at tp 1 and 1.09 GiB at tp >= 2.
CUDA_GRAPH_TP1 = 805_306_368  # 0.75 GiB
CUDA_GRAPH_TP = 1_170_378_752  # 1.09 GiB


@dataclass(frozen=True, kw_only=True)
class BudgetSettings:
    """What a user can state about a deployment's memory; None means the engine's default."""

    gpu_util: float | None = None
    """vLLM gpu_memory_utilization / SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction."""
    max_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    kv_memory_bytes: int | None = None
    """Skip the model: the KV memory per GPU, as vLLM's --kv-cache-memory-bytes."""
    reserve_bytes: int | None = None
    """formula / hf: memory kept out besides weights (default 8% of the card)."""


DEFAULT_SETTINGS = BudgetSettings()


class KvBudget(BaseModel):
    """The memory one GPU gives the KV cache, part by part."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str
    memory_bytes: int
    utilization: float | None
    requested_bytes: int
    """What the engine may use: ceil((CUDA-visible memory) x utilisation), or the card minus a reserve."""
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_budget_bytes: int
    """requested - weights - activation - non_torch - cuda_graph (negative: the model does not load)."""
    rule: str


def vllm_activation_bytes(spec: ArchSpec, *, max_batched_tokens: int, max_num_seqs: int) -> int:
    """vLLM profile-run peak: max_num_seqs rows of fp32 logits with temporaries, plus max_batched_tokens
    hidden states (an empirical fit, see the module docstring)."""
    vocab = spec.vocab_size or 32_000
    hidden = spec.hidden_size or 4096
    return int(
        max_num_seqs * vocab * ACTIVATION_BYTES_PER_LOGIT + max_batched_tokens * hidden * ACTIVATION_BYTES_PER_HIDDEN
    )


def _profile_peak(
    spec: ArchSpec, memory_bytes: int, s: BudgetSettings, version: str = "0.33", device: Device | None = None
) -> int:
    """The warm-up run's activation peak: given, or vLLM's profile-run model at the server's batch defaults
    for the device (kvsize.engines.vllm_scheduler; TensorRT-LLM's warm-up runs the same kind of max-batch
    forward, so it takes vLLM 0.33's defaults)."""
    if s.activation_bytes is not None:
        return s.activation_bytes
    from kvsize.engines.vllm import VllmEngine
    from kvsize.engines.vllm_scheduler import batch_defaults

    release = version if version in VllmEngine.versions else VllmEngine.versions[0]
    default_tokens, default_seqs = batch_defaults(release, device or Device(memory_bytes), UsageContext.API_SERVER)
    return vllm_activation_bytes(
        spec, max_batched_tokens=s.max_batched_tokens or default_tokens, max_num_seqs=s.max_num_seqs or default_seqs
    )


def kv_budget(
    engine: str,
    version: str,
    spec: ArchSpec,
    *,
    memory_bytes: int,
    weights_bytes: int,
    tp: int = 1,
    pp: int = 1,
    settings: BudgetSettings = DEFAULT_SETTINGS,
    device: Device | None = None,
) -> KvBudget:
    """The KV memory per GPU under `engine`'s rule. `weights_bytes` is the weights on this GPU; `device` names
    the card for vLLM's scheduler tiers (None: a card of `memory_bytes` with no name)."""
    s = settings
    if s.kv_memory_bytes is not None:
        return KvBudget(
            engine=engine,
            memory_bytes=memory_bytes,
            utilization=None,
            requested_bytes=memory_bytes,
            weights_bytes=weights_bytes,
            activation_bytes=0,
            non_torch_bytes=0,
            cuda_graph_bytes=0,
            kv_budget_bytes=s.kv_memory_bytes,
            rule="given (--kv-memory)",
        )
    visible = memory_bytes - CUDA_CONTEXT_BYTES
    multi = tp * pp > 1
    if s.reserve_bytes is not None:
        engine = "given reserve"  # a stated reserve replaces every engine's model
    if engine == "vllm":
        util = s.gpu_util if s.gpu_util is not None else (0.90 if version in ("0.19", "0.11") else 0.92)
        activation = _profile_peak(spec, memory_bytes, s, version, device)
        non_torch = s.non_torch_bytes if s.non_torch_bytes is not None else (NON_TORCH_TP if tp > 1 else NON_TORCH_TP1)
        graphs = (
            s.cuda_graph_bytes
            if s.cuda_graph_bytes is not None
            else (0 if version in ("0.19", "0.11") else (CUDA_GRAPH_TP if multi else CUDA_GRAPH_TP1))
        )
        requested = math.ceil(visible * util)
        rule = (
            f"vLLM {version}: ceil(CUDA-visible memory x {util}) - weights - activation peak - non-torch"
            + (" - CUDA graphs" if graphs else "")
            + " (v1/worker/gpu_worker.py determine_available_memory)"
        )
    elif engine == "sglang":
        # KV = mem_fraction_static x free memory before loading - weights - what loading left allocated
        # (KVCacheConfigurator._profile_available_bytes); default fraction: SGLang 0.5.23's reserve formula
        # (kvsize/engines/sglang.py spec_mem_fraction_static, from arg_groups/memory_hook.py).
        from kvsize.engines.sglang import spec_mem_fraction_static

        util = (
            s.gpu_util
            if s.gpu_util is not None
            else spec_mem_fraction_static(
                spec,
                memory_bytes,
                tp=tp,
                pp=pp,
                amd=device is not None and device.platform == "rocm",
                chunked_prefill_size=s.max_batched_tokens,
                max_running_requests=s.max_num_seqs,
            )
        )
        activation, graphs = s.activation_bytes or 0, s.cuda_graph_bytes or 0
        non_torch = s.non_torch_bytes if s.non_torch_bytes is not None else (NON_TORCH_TP if multi else 0)
        requested = math.ceil(visible * util)
        rule = (
            f"SGLang: mem_fraction_static {util} x free memory before loading - weights "
            "(model_executor/pool_configurator.py, memory_hook.py)"
        )
    elif engine == "trtllm":
        # (total - peak + temporary KV) x free_gpu_memory_fraction 0.9 (_torch/pyexecutor/_util.py
        # KvCacheCreator._cal_max_memory): the fraction applies to what the warm-up run left free.
        util = s.gpu_util if s.gpu_util is not None else 0.9
        activation = _profile_peak(spec, memory_bytes, s, device=device)
        non_torch = s.non_torch_bytes if s.non_torch_bytes is not None else (NON_TORCH_TP if multi else NON_TORCH_TP1)
        graphs = s.cuda_graph_bytes or 0
        free = visible - weights_bytes - activation - non_torch - graphs
        return KvBudget(
            engine=engine,
            memory_bytes=memory_bytes,
            utilization=util,
            requested_bytes=visible,
            weights_bytes=weights_bytes,
            activation_bytes=activation,
            non_torch_bytes=non_torch,
            cuda_graph_bytes=graphs,
            kv_budget_bytes=math.floor(free * util),
            rule=f"TensorRT-LLM: {util} x (CUDA-visible memory - weights - warm-up peak)",
        )
    else:  # formula, hf, llamacpp: the card minus the weights and a reserve
        reserve = s.reserve_bytes if s.reserve_bytes is not None else memory_bytes - memory_bytes * 92 // 100
        return KvBudget(
            engine=engine,
            memory_bytes=memory_bytes,
            utilization=None,
            requested_bytes=memory_bytes - reserve,
            weights_bytes=weights_bytes,
            activation_bytes=s.activation_bytes or 0,
            non_torch_bytes=s.non_torch_bytes or 0,
            cuda_graph_bytes=s.cuda_graph_bytes or 0,
            kv_budget_bytes=memory_bytes
            - reserve
            - weights_bytes
            - (s.activation_bytes or 0)
            - (s.non_torch_bytes or 0)
            - (s.cuda_graph_bytes or 0),
            rule=(
                "card - weights - reserve "
                + ("(given)" if s.reserve_bytes is not None else "(8%, as vLLM's default 0.92)")
            ),
        )
    budget = requested - weights_bytes - activation - non_torch - graphs
    return KvBudget(
        engine=engine,
        memory_bytes=memory_bytes,
        utilization=util,
        requested_bytes=requested,
        weights_bytes=weights_bytes,
        activation_bytes=activation,
        non_torch_bytes=non_torch,
        cuda_graph_bytes=graphs,
        kv_budget_bytes=budget,
        rule=rule,
    )
