"""How much of a GPU an engine gives its KV cache: utilisation, weights, activations, CUDA graphs. Pure.

Each part is a stated number with its source and can be overridden; `--kv-memory` skips the model and takes
the KV memory per GPU as given (vLLM's --kv-cache-memory-bytes).

The activation peak is counted tensor by tensor from vLLM 0.19's profile run (vllm_activation_bytes); the
non-torch memory is a stated figure per interconnect (NVLS_CARDS). tests/test_log_corpus.py measures the
budget against the published start-up logs in tests/data/logs (README: "Budget accuracy").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import msgspec

from kvsize.engines.base import cdiv
from kvsize.engines.context import Device, UsageContext
from kvsize.errors import UsageError
from kvsize.mm_profile import (
    NO_LIMITS,
    MmLimits,
    MmProfile,
    NotModelled,
    model_modalities,
    unmodelled_note,
    vllm_mm_profile,
)
from kvsize.record import Record
from kvsize.rope_tables import MROPE_POSITIONS_FACTOR, RopeTables, rope_table_bytes
from kvsize.spec import ArchSpec

if TYPE_CHECKING:
    from kvsize.engines.vllm_releases import VllmRules

GIB = 1024**3

# CUDA-visible total memory is below nvidia-smi's: the H100 80GB reports 81,559 MiB (79.65 GiB) in nvidia-smi
# but 79.19 GiB to torch / vLLM ("total_gpu_memory (79.19GiB)"); GPUS.md gives 0.45-0.75 GiB by driver. A profile
# with a published CUDA total (GpuProfile.cuda_total_bytes: H200 139.81 of 140.40 GiB, L40S 44.42 of 44.99)
# starts from that; this constant is the fallback for the others.
CUDA_CONTEXT_BYTES = 494_927_872  # 79.65 GiB - 79.19 GiB = 0.461 GiB

# vLLM's profile run (v1/worker/gpu_model_runner.py profile_run, 0.19): a forward of max_num_batched_tokens
# tokens, then _dummy_sampler_run over max_num_seqs rows with top-k and top-p set. Bytes per logit element
# (rows x vocab, the whole vocabulary on every rank: LogitsProcessor all-gathers on CUDA):
#   model-dtype logits (compute_logits) + fp32 copy (Sampler.forward: logits.to(float32); temperature is
#   divided in place) + fp32 probs (TopKTopPSampler.forward_native: softmax) + fp32 exponential noise
#   (random_sample: torch.empty_like(probs)) = dtype + 12 bytes.
SAMPLER_FP32_BYTES_PER_LOGIT = 12
# ...plus the Triton top-k/top-p kernel's cached buffer of num_SMs x vocab fp32 (sample/ops/topk_topp_triton.py
# apply_top_k_top_p_triton: min(next_power_of_2(programs), num_sm) rows, programs = min(num_sm, rows)).
# Streaming multiprocessors per card (NVIDIA architecture whitepapers), matched against the card's name.
SM_COUNTS = (
    ("h100 pcie", 114),
    ("h100 nvl", 132),
    ("h100", 132),
    ("h200", 132),
    ("gh200", 132),
    ("h20", 78),
    ("gb200", 148),
    ("b200", 148),
    ("b300", 148),
    ("a100", 108),
    ("a10g", 80),
    ("a10", 72),
    ("l40", 142),
    ("l4", 58),
    ("rtx pro 6000", 188),
    ("rtx-pro-6000", 188),
    ("6000 ada", 142),
    ("rtx a6000", 84),
    ("a6000", 84),
    ("5090", 170),
    ("4090", 128),
    ("3090", 82),
    ("t4", 40),
    ("v100", 80),
)
DEFAULT_SM_COUNT = 132
# Hopper and Blackwell NVSwitch systems: NCCL's NVLink SHARP (NVLS) buffers and vLLM's custom all-reduce take
# ~2.08 GiB per rank at tp >= 2 (2.06-2.21 GiB in the vLLM 0.19 H100 logs); cards without NVLS (A100, PCIe, L40S,
# consumer cards) keep the tp-1 figure. The tp-1 figure is cuBLAS workspaces and allocator slack.
NVLS_CARDS = ("h100 sxm", "h100 80gb hbm3", "h100-sxm", "h200", "gh200", "h20", "b200", "b300", "gb200")
NON_TORCH_TP1 = 268_435_456  # 0.25 GiB
NON_TORCH_NVLS = 2_233_382_912  # 2.08 GiB
NON_TORCH_TP = NON_TORCH_NVLS  # kept for callers of the old name
# vLLM >= 0.20 subtracts an estimate of CUDA-graph memory (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1):
# the 0.19 logs print estimates of 0.52-0.84 GiB at tp 1 and 1.09 GiB at tp >= 2.
CUDA_GRAPH_TP1 = 805_306_368  # 0.75 GiB
CUDA_GRAPH_TP = 1_170_378_752  # 1.09 GiB
# vLLM 0.34's measured sizing (VllmRules.kv_sizing "measured", v1/worker/extensible_kv_cache.py): the pool is what
# is free after warm-up and capture, less a margin of max(KV_CACHE_MARGIN_FLOOR_BYTES, 0.75 x transient peak)
# (KV_CACHE_MARGIN_FLOOR_BYTES 1 GiB, 3 GiB on ROCm; KV_CACHE_MARGIN_FRACTION 0.75). Two parts are measured, not
# read from source, and come from the vLLM 0.19 H100 start-up logs of tests/data/logs (llm-d sweep, 50 logs):
# - memory already in use at vLLM's start snapshot (total_memory - "Initial free memory"): 0.51 GiB in all 33
#   tp-1 logs, median 1.53 GiB at tp x pp > 1 (1.43-1.55 dense, 2.01-2.07 MoE: NCCL and expert buffers);
# - the CUDA graphs captured ("Graph capturing finished ... took X GiB"): median 0.91 GiB at tp 1 (0.67-1.57,
#   33 logs), 1.13 GiB at tp x pp > 1 (0.51-1.85, 17 logs).
KV_MARGIN_FLOOR = 1 << 30
KV_MARGIN_FLOOR_ROCM = 3 << 30
KV_MARGIN_FRACTION = 0.75
START_SNAPSHOT_TP1 = 547_608_330  # 0.51 GiB
START_SNAPSHOT_MULTI = 1_642_824_991  # 1.53 GiB
CUDA_GRAPH_CAPTURED_TP1 = 977_105_060  # 0.91 GiB
CUDA_GRAPH_CAPTURED_MULTI = 1_213_328_261  # 1.13 GiB
MEASURED_NOTE = (
    "; the start-up use and the captured CUDA graphs are the medians of vLLM 0.19 H100 logs, not read from a 0.34 "
    "run; where the driver's virtual-memory check fails (WSL2) vLLM falls back to the profiled rule at 0.92"
)


def sm_count(gpu: str | None) -> int:
    name = (gpu or "").lower()
    return next((n for key, n in SM_COUNTS if key in name), DEFAULT_SM_COUNT)


def has_nvls(device: Device | None) -> bool:
    """Whether the card's NVSwitch fabric gives NCCL NVLink SHARP (Hopper and later SXM systems); a card of no
    known name is taken to have it (the larger overhead)."""
    name = (device.name if device is not None else "").lower()
    return not name or any(key in name for key in NVLS_CARDS)


class BudgetSettings(msgspec.Struct, frozen=True, kw_only=True):
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
    rope_table_bytes: int | None = None
    """vLLM / SGLang: the RoPE tables loaded beside the weights (None: kvsize/rope_tables.py; 0 where the
    weights given are a measured load, which holds them already)."""
    max_model_len: int | None = None
    """vLLM's max_model_len, which bounds a multimodal profile's items per prompt (None: the model's maximum,
    vLLM's default)."""
    language_model_only: bool = False
    """vLLM --language-model-only (0.17+, config/multimodal.py: every modality's limit 0): no encoder in the
    profile run, and the towers are not built (`tower_bytes` less on the weights, split over tp)."""
    tower_bytes: int = 0
    """The whole model's vision and audio towers, bytes (kvsize/params.py's count at the model dtype)."""
    audio_tower_bytes: int = 0
    """The audio towers' part of tower_bytes."""
    mm_limits: MmLimits | None = None
    """vLLM --limit-mm-per-prompt: the modality profiled and its items per prompt (kvsize/mm_profile.py); a
    tower whose modalities are all 0 is not built where the release skips it (VllmRules.zero_limit_drops_towers)."""
    skip_mm_profiling: bool = False
    """vLLM --skip-mm-profiling (0.10.1+): the profile run encodes nothing, so the budget keeps nothing back for
    the encoder (its activations at serving time come out of the headroom)."""
    expert_parallel: bool = False
    """vLLM --enable-expert-parallel: each rank holds E / tp whole experts instead of every expert's 1 / tp
    (the fused-MoE workspace and MXFP4 padding follow)."""
    enforce_eager: bool = False
    """vLLM --enforce-eager: no CUDA graphs, so none are estimated (0.20+, gpu_worker.py
    determine_available_memory skips profile_cudagraph_memory when cudagraph_mode is NONE) or captured (0.34's
    measured pool: compile_or_warm_up_model skips capture_model)."""


DEFAULT_SETTINGS = BudgetSettings()


class KvBudget(Record, frozen=True, kw_only=True):
    """The memory one GPU gives the KV cache, part by part."""

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
    """requested - weights - RoPE tables - activation - non_torch - cuda_graph (negative: the model does not
    load)."""
    rule: str
    rope_table_bytes: int = 0
    """vLLM / SGLang: the RoPE cos/sin tables loaded with the weights on each rank (kvsize/rope_tables.py)."""
    rope_table_rule: str = ""
    activation_rule: str = ""
    """What the activation peak counts (vLLM's profile run: the language model, and a multimodal encoder's
    dummy batch where kvsize/mm_profile.py models it)."""
    visible_bytes: int = 0
    """Where vLLM / SGLang / TensorRT-LLM start: the card's CUDA total (cudaMemGetInfo)."""
    start_snapshot_bytes: int = 0
    """vLLM 0.34+ measured sizing: memory in use at the engine's start snapshot (CUDA context, NCCL), where the
    warm-up bound decides the pool (0 where the utilisation cap does)."""
    margin_bytes: int = 0
    """vLLM 0.34+ measured sizing: the warm-up margin kept free, max(1 GiB, 0.75 x transient peak), where it decides."""
    visible_source: str = ""
    """Which figure `visible_bytes` is, and its source."""
    loading_padding_bytes: int = 0
    """Of `weights_bytes`: what the engine holds beyond the weights given (vLLM's padded MXFP4 experts; negative
    where it leaves towers out: --language-model-only)."""
    loading_padding_rule: str = ""


def cuda_visible(memory_bytes: int, device: Device | None) -> tuple[int, str]:
    """The total CUDA reports for the card (torch.cuda.mem_get_info()[1], which vLLM's MemorySnapshot.measure,
    SGLang's get_available_gpu_memory and TensorRT-LLM's cudaMemGetInfo read), with its source: the profile's
    published figure, else `memory_bytes` less CUDA_CONTEXT_BYTES."""
    if device is not None and device.cuda_total_bytes is not None:
        return device.cuda_total_bytes, f"CUDA total {_gib(device.cuda_total_bytes)} ({device.cuda_total_source})"
    return (
        memory_bytes - CUDA_CONTEXT_BYTES,
        f"card {_gib(memory_bytes)} - CUDA context {_gib(CUDA_CONTEXT_BYTES)} (kvsize/budget.py CUDA_CONTEXT_BYTES: "
        "no published CUDA total for this card)",
    )


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


# Unified memory (DGX Spark, Jetson): vLLM keeps cudaMemGetInfo's total but takes free memory from the OS
# (psutil.virtual_memory().available: utils/mem_utils.py MemorySnapshot.measure, for compute capability 8.7 /
# 11.0 / 12.1 in 0.11.1-0.19, for every device torch reports is_integrated from 0.20); request_memory
# (v1/worker/utils.py) refuses to start unless that covers ceil(total x utilisation). The budget is unchanged.
UNIFIED_MEASURED_NOTE = (
    "; unified memory: the measured pool is bounded by what the OS reports available after warm-up (utils/mem_utils.py "
    "device_memory_info, psutil), so the OS and other programs come out of it; whether the driver's virtual-memory "
    "check passes on this device is not stated in vLLM's source (where it fails, the profiled rule at 0.92 applies)"
)
UNIFIED_NOTE = (
    "; unified memory: the CPU shares this memory, and vLLM (0.11.1+) starts only if the OS reports "
    "ceil(total x utilisation) available (utils/mem_utils.py MemorySnapshot.measure, psutil), so the OS, the "
    "engine's own process and other programs must fit in the rest"
)


# SGLang on unified memory (Jetson, DGX Spark): the budget is mem_fraction_static x the free memory before
# loading (model_executor/model_runner.py profile_max_num_token@0.4.1.post7 .. 0.4.9.post2; pool_configurator.py
# later), read by get_available_gpu_memory, which on an integrated GPU is the OS's figure (SglangRules.unified_free:
# torch.cuda.mem_get_info <= 0.5.8, psutil.virtual_memory().available 0.5.9+). kvsize cannot know what the OS and
# other programs hold, so its figure (the whole memory free) is an upper bound.
SGLANG_UNIFIED_NOTE = (
    "; unified memory: SGLang starts from the free memory the OS reports ({free}: utils.py "
    "get_available_gpu_memory), not the card's total; this figure assumes all of it free and is an upper bound "
    "(lower by mem_fraction_static x what the OS and other programs hold)"
)
UNIFIED_FREE_SOURCE = {
    "mem_get_info": "torch.cuda.mem_get_info, page cache not counted free",
    "psutil_available": "psutil.virtual_memory().available",
}


def _dtype_bytes(spec: ArchSpec) -> int:
    return 4 if spec.model_dtype in ("fp32", "float32") else 2


class RankWeights(Record, frozen=True, kw_only=True):
    """The weights on the busiest GPU of a tp x pp deployment, and how they were split."""

    bytes: int
    rule: str
    even: bool = True
    """An even split over the GPUs (no pipeline stages, or none told apart)."""


def weights_on_busiest_rank(
    spec: ArchSpec, weights_bytes: int, *, tp: int = 1, pp: int = 1, engine: str = "vllm"
) -> RankWeights:
    """The weights on the GPU that holds the most. Tensor parallelism splits every stage evenly (vocab-parallel
    embeddings and heads included; norms and routers are replicated, a small error). Pipeline stages split the
    decoder layers as the engine does (Engine.stages: vLLM/SGLang get_pp_indices), and the first stage holds the
    input embedding, the last the output head (vLLM/SGLang build VocabParallelEmbedding only on the first rank
    and ParallelLMHead only on the last, PPMissingLayer elsewhere; a tied head is loaded as a copy there), so
    with pp > 1 the first or last stage holds the most. The embedding is counted at the model's dtype
    (vocab x hidden), as checkpoints keep it unquantized."""
    gpus = tp * pp
    even = -(-weights_bytes // gpus)
    if pp == 1 or not spec.vocab_size or not spec.hidden_size:
        return RankWeights(bytes=even, rule=f"1/{gpus} of the weights per GPU" if gpus > 1 else "the weights")
    from kvsize.engines import get_engine

    stages = get_engine(engine if engine in ("vllm", "sglang", "trtllm") else "vllm").stages(spec.num_layers, pp)
    table = spec.vocab_size * spec.hidden_size * _dtype_bytes(spec)
    body = weights_bytes - table * (1 if spec.tied_embeddings else 2)
    if body < 0:  # a checkpoint smaller than its embeddings at 16 bits (quantized tables): the even split
        return RankWeights(bytes=even, rule=f"1/{gpus} of the weights per GPU")
    per_stage = [
        -(-(body * len(layers) // spec.num_layers + table * ((i == 0) + (i == pp - 1))) // tp)
        for i, layers in enumerate(stages)
    ]
    busiest = max(range(pp), key=lambda i: per_stage[i])
    return RankWeights(
        bytes=per_stage[busiest],
        even=False,
        rule=(
            f"the weights of pipeline stage {busiest} of {pp} ({len(stages[busiest])} of {spec.num_layers} layers"
            + (" + the input embedding" if busiest == 0 else "")
            + (" + the output head" if busiest == pp - 1 else "")
            + (f", 1/{tp} of it per GPU" if tp > 1 else "")
            + ")"
        ),
    )


def vllm_activation_bytes(
    spec: ArchSpec,
    *,
    max_batched_tokens: int,
    max_num_seqs: int,
    tp: int = 1,
    gpu: str | None = None,
    expert_parallel: bool = False,
) -> int:
    """vLLM's profile-run peak ("torch peak memory increase"), tensor by tensor (0.19 source):

    - sampler: max_num_seqs x vocab x (dtype + 12) bytes (see SAMPLER_FP32_BYTES_PER_LOGIT) plus the
      Triton top-k/top-p buffer num_SMs x vocab x 4, while the forward's max_batched_tokens x hidden hidden
      states are still held;
    - forward (dense MLP, the larger layer peak): max_batched_tokens x (2 x hidden + 3 x intermediate / tp)
      x dtype: residual, normed input, gate_up output (2 x intermediate) and the activation's output;
    - MoE: the fused-MoE workspace, kept between calls (model_executor/layers/fused_moe/fused_moe.py
      intermediate_cache1..3): tokens x top_k x (3 x expert width / tp + hidden) x dtype; with
      --enable-expert-parallel the experts are whole on their ranks (FusedMoEParallelConfig.make: MoE tp size
      1, ep size tp), so the width is not divided.
    The peak is max(sampler, forward) + the MoE workspace."""
    vocab = spec.vocab_size or 32_000
    hidden = spec.hidden_size or 4096
    dtype = _dtype_bytes(spec)
    sampler = (
        max_num_seqs * vocab * (dtype + SAMPLER_FP32_BYTES_PER_LOGIT)
        + sm_count(gpu) * vocab * 4
        + max_batched_tokens * hidden * dtype
    )
    dense_width = (
        0
        if spec.experts_per_token and spec.intermediate_size == spec.moe_intermediate_size
        else (spec.intermediate_size or 0)
    )
    forward = max_batched_tokens * (2 * hidden + 3 * dense_width // tp) * dtype
    moe = 0
    if spec.experts_per_token and spec.moe_intermediate_size:
        width = spec.moe_intermediate_size // (1 if expert_parallel else tp)
        moe = max_batched_tokens * spec.experts_per_token * (3 * width + hidden) * dtype
    return max(sampler, forward) + moe


def _profile_peak(
    spec: ArchSpec,
    memory_bytes: int,
    s: BudgetSettings,
    version: str | None = None,
    device: Device | None = None,
    tp: int = 1,
    multimodal: bool = False,
) -> tuple[int, str]:
    """The warm-up run's activation peak and its rule: given, or vLLM's profile-run model at the server's batch
    defaults for the device (kvsize.engines.vllm_scheduler; TensorRT-LLM's warm-up runs the same kind of
    max-batch forward, so it takes vLLM 0.33's defaults). `multimodal`: vLLM's encoder profile comes first
    (kvsize/mm_profile.py), for the families modelled; other multimodal models say they are not."""
    if s.activation_bytes is not None:
        return s.activation_bytes, "activation peak given"
    rules = _vllm_rules(version)
    tokens, seqs = _profile_batch(rules, memory_bytes, s, device)
    language = vllm_activation_bytes(
        spec,
        max_batched_tokens=tokens,
        max_num_seqs=seqs,
        tp=tp,
        gpu=device.name if device is not None else None,
        expert_parallel=s.expert_parallel,
    )
    rule = (
        f"language model's profile forward of {tokens:,} tokens and sampler over {seqs:,} sequences "
        "(kvsize/budget.py vllm_activation_bytes)"
    )
    if not (multimodal and spec.is_multimodal):
        return language, rule
    if s.skip_mm_profiling:
        return language, f"{rule}; --skip-mm-profiling: no encoder in the profile run"
    if spec.vision_dummy is None:
        return language, f"{rule}; {unmodelled_note(spec)}"
    try:
        mm = vllm_encoder_profile(spec, memory_bytes, s, version, device, tp)
    except NotModelled as exc:
        return language, f"{rule}; {exc}: the language model only"
    if mm is None:
        return language, f"{rule}; --limit-mm-per-prompt {s.mm_limits.given if s.mm_limits else ''}: no encoder"
    peak = mm.input_bytes + max(mm.tower_peak_bytes, mm.output_bytes + language)
    return peak, f"{rule}; {mm.rule}"


def _profile_batch(rules: VllmRules, memory_bytes: int, s: BudgetSettings, device: Device | None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of the profile run: the stated ones, else the server's defaults for
    the device (kvsize.engines.vllm_scheduler)."""
    from kvsize.engines.vllm_scheduler import batch_defaults

    default_tokens, default_seqs = batch_defaults(rules, device or Device(memory_bytes), UsageContext.API_SERVER)
    return s.max_batched_tokens or default_tokens, s.max_num_seqs or default_seqs


def vllm_encoder_profile(
    spec: ArchSpec, memory_bytes: int, s: BudgetSettings, version: str | None, device: Device | None, tp: int = 1
) -> MmProfile | None:
    """The encoder part of vLLM's profile run (kvsize/mm_profile.py) at the run's batch, for a model whose
    dummy item is modelled; None where the settings leave nothing to encode. Raises NotModelled."""
    if spec.vision_dummy is None or s.skip_mm_profiling or s.language_model_only:
        return None
    rules = _vllm_rules(version)
    tokens, seqs = _profile_batch(rules, memory_bytes, s, device)
    return vllm_mm_profile(
        spec,
        spec.vision_dummy,
        dtype_bytes=_dtype_bytes(spec),
        max_batched_tokens=tokens,
        max_num_seqs=seqs,
        max_model_len=s.max_model_len or spec.max_context or tokens,
        tp=tp,
        rules=rules,
        limits=s.mm_limits or NO_LIMITS,
    )


def load_rope_tables(engine: str, version: str | None, spec: ArchSpec, device: Device | None = None) -> RopeTables:
    """The RoPE tables `engine` loads with the weights on each rank (kvsize/rope_tables.py): vLLM in the model's
    dtype, SGLang in float32 on CUDA where its release does (SglangRules.rope_table_fp32). Other engines: none
    counted (TensorRT-LLM and llama.cpp compute rotary angles in their kernels)."""
    on_cuda = device is None or device.platform != "rocm"
    if engine == "vllm":
        rules = _vllm_rules(version)
        return rope_table_bytes(
            spec,
            engine="vllm",
            element_bytes=_dtype_bytes(spec),
            deepseek_fp32=on_cuda and rules.deepseek_rope_fp32,
            mrope_factor=1 if set(spec.architectures) & rules.mrope_unit_factor_archs else MROPE_POSITIONS_FACTOR,
        )
    if engine == "sglang":
        from kvsize.engines.sglang_releases import SGLANG_RELEASES

        fp32 = SGLANG_RELEASES.resolve(version).era.rules.rope_table_fp32
        return rope_table_bytes(spec, engine="sglang", element_bytes=4 if fp32 and on_cuda else _dtype_bytes(spec))
    return RopeTables(bytes=0, rule="no RoPE tables counted")


def _rope_tables(
    engine: str, version: str | None, spec: ArchSpec, s: BudgetSettings, device: Device | None
) -> RopeTables:
    """The RoPE tables loaded with the weights: given (a measured load holds them: 0), else counted."""
    if s.rope_table_bytes is not None:
        return RopeTables(bytes=s.rope_table_bytes, rule="RoPE tables given (held in the measured weights)")
    return load_rope_tables(engine, version, spec, device)


MXFP4_BLOCK = 32  # one e8m0 scale byte per 32 weights (OCP MX)


def _round_up(n: int, multiple: int) -> int:
    return cdiv(n, multiple) * multiple


def _mxfp4_layer_bytes(experts: int, inter: int, hidden: int, *, bias: int, scale_copies: int, row: int) -> int:
    """One layer's MXFP4 expert tensors as Mxfp4MoEMethod.create_weights makes them (quantization/mxfp4.py):
    w13 (E, 2I, H/2) and w2 (E, H, I/2) uint8 (rows padded to `row` bytes), their e8m0 scales (E, 2I, H/32) and
    (E, H, I/32) (`scale_copies` resident), biases (E, 2I) and (E, H) of `bias` bytes."""
    weights = experts * (2 * inter * _round_up(hidden // 2, row) + hidden * _round_up(inter // 2, row))
    scales = experts * (2 * inter * (hidden // MXFP4_BLOCK) + hidden * (inter // MXFP4_BLOCK))
    return weights + scale_copies * scales + experts * (2 * inter + hidden) * bias


def vllm_mxfp4_padding(
    spec: ArchSpec, rules: VllmRules, device: Device | None, tp: int, pp: int, *, expert_parallel: bool = False
) -> tuple[int, str]:
    """(bytes per GPU, rule) vLLM holds beyond the checkpoint's share for MXFP4 MoE experts (gpt-oss): the kernel
    it picks pads intermediate_size / tp and hidden_size and may widen the biases or keep a second copy of the
    scales (VllmRules.mxfp4_hopper, mxfp4_trtllm_pad; read in every sdist 0.10.1-0.34.0: quantization/mxfp4.py,
    fused_moe/oracle/mxfp4.py, utils/mxfp4_utils.py, marlin_utils_fp4.py). By compute capability: 10.x FlashInfer
    TRT-LLM (I to 256, 128 from 0.27; H to 256; fp32 biases); 9.x OAI Triton from 0.12 (I to 64; fp32 biases),
    Marlin before; 7.5-8.x and 11.x-12.x Marlin (I to 128, H to 256). The Triton swizzle's padding of the scale
    rows (under 0.05 GiB) is not counted. (0, "") where nothing is padded or the card is not known."""
    experts, inter, hidden = spec.mxfp4_experts, spec.moe_intermediate_size, spec.hidden_size
    cap = device.capability if device is not None else None
    if not (experts and inter and hidden) or cap is None or device is None or device.platform != "cuda":
        return 0, ""
    # expert parallelism: E / tp whole experts per rank (FusedMoEParallelConfig.make), padded at full width
    part, local = (inter, experts // tp) if expert_parallel else (inter // tp, experts)
    if cap[0] == 10:
        kernel, padded = "FlashInfer TRT-LLM", (_round_up(part, rules.mxfp4_trtllm_pad), _round_up(hidden, 256))
        bias, copies, row = 4, 1, 1
    elif cap[0] == 9 and rules.mxfp4_hopper != "marlin":
        kernel, padded = "OAI Triton", (_round_up(part, 64), hidden)
        bias, copies = 4, 1 if rules.mxfp4_hopper == "triton" else 2
        row = 64 if rules.mxfp4_hopper == "triton_dup_scales_row64" else 1
    elif cap >= (7, 5):
        kernel, padded, bias, copies, row = "Marlin", (_round_up(part, 128), _round_up(hidden, 256)), 2, 1, 1
    else:
        return 0, ""
    layers = -(-spec.num_layers // pp)
    held = layers * _mxfp4_layer_bytes(local, padded[0], padded[1], bias=bias, scale_copies=copies, row=row)
    stored = -(-layers * _mxfp4_layer_bytes(experts, inter, hidden, bias=2, scale_copies=1, row=1) // tp)
    if held <= stored:
        return 0, ""
    extra = [f"intermediate {part} -> {padded[0]}"] + (
        [f"hidden {hidden} -> {padded[1]}"] if padded[1] != hidden else []
    )
    if expert_parallel:
        extra.insert(0, f"{local} whole experts per rank (expert parallel)")
    if bias == 4:
        extra.append("fp32 biases")
    if copies == 2:
        extra.append("the original scales kept beside the swizzled ones")
    if row > 1:
        extra.append(f"weight rows padded to {row} B")
    return held - stored, f"MXFP4 experts on {kernel}: {', '.join(extra)}"


def vllm_loading_change(
    spec: ArchSpec, rules: VllmRules, device: Device | None, tp: int, pp: int, s: BudgetSettings
) -> tuple[int, str]:
    """(bytes per GPU, rule) vLLM loads beyond the checkpoint's share (MXFP4 padding, vllm_mxfp4_padding) or
    short of it (--language-model-only: the towers, over tp); (0, "") for neither. Refuses --language-model-only
    on a release without it."""
    change, rule = vllm_mxfp4_padding(spec, rules, device, tp, pp, expert_parallel=s.expert_parallel)
    check_mm_flags(rules, s)
    dropped, why = dropped_tower_bytes(spec, rules, s)
    if dropped:
        towers = cdiv(dropped, tp)
        change -= towers
        rule = "; ".join(r for r in (rule, f"{why}: the towers' {towers:,} B not loaded") if r)
    return change, rule


def check_mm_flags(rules: VllmRules, s: BudgetSettings) -> None:
    """Refuses a multimodal flag the release does not have."""
    for given, exists, flag, first in (
        (s.language_model_only, rules.language_model_only, "--language-model-only", "0.17.0"),
        (s.skip_mm_profiling, rules.skip_mm_profiling, "--skip-mm-profiling", "0.10.1"),
        (bool(s.mm_limits and s.mm_limits.sized), rules.mm_dummy_options, "A dummy size in --limit-mm-per-prompt",
         "0.11.1"),
    ):  # fmt: skip
        if given and not exists:
            raise UsageError(
                f"{flag} was added in vLLM {first}",
                hint=f"Use --engine-version {first.removesuffix('.0')} or later, or leave it out.",
            )


def drops_a_tower(spec: ArchSpec, s: BudgetSettings) -> bool:
    """Whether the settings ask vLLM to leave a tower unbuilt (its release decides whether it does)."""
    if s.language_model_only:
        return True
    if s.mm_limits is None:
        return False
    modalities = model_modalities(spec.architectures)
    return s.mm_limits.drops("vision", modalities) or s.mm_limits.drops("audio", modalities)


def dropped_tower_bytes(spec: ArchSpec, rules: VllmRules, s: BudgetSettings) -> tuple[int, str]:
    """(bytes, why) of the towers vLLM does not build: all of them under --language-model-only; under
    --limit-mm-per-prompt each tower whose modalities are all 0, where the release skips it
    (VllmRules.zero_limit_drops_towers)."""
    from kvsize.engines.vllm_releases import ZERO_LIMIT_TOWER_ARCHS

    if s.language_model_only:
        return s.tower_bytes, "--language-model-only"
    limits = s.mm_limits
    if limits is None or rules.zero_limit_drops_towers == "none":
        return 0, ""
    if rules.zero_limit_drops_towers == "families" and not set(spec.architectures) & ZERO_LIMIT_TOWER_ARCHS:
        return 0, ""
    modalities = model_modalities(spec.architectures)
    marked = rules.zero_limit_drops_towers == "marked"
    audio = s.audio_tower_bytes if marked and limits.drops("audio", modalities) else 0
    vision = s.tower_bytes - s.audio_tower_bytes if limits.drops("vision", modalities) else 0
    return vision + audio, f"--limit-mm-per-prompt {limits.given}"


def _vllm_rules(version: str | None) -> VllmRules:
    """The switches of the vLLM era that sizes `version` (None: the newest read)."""
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    return VLLM_RELEASES.resolve(version).era.rules


def _vllm_measured(
    rules: VllmRules, s: BudgetSettings, device: Device | None, visible: int, multi: bool, activation: int
) -> tuple[float, int, int, int, int]:
    """(utilisation, requested, captured graphs, start-up use, margin) of vLLM 0.34+'s measured pool
    (VllmRules.kv_sizing, v1/worker/extensible_kv_cache.py measure_kv_cache_bytes): `available = min(requested -
    non_kv_used, headroom - margin) - max(transient peak, reserve growth)`, headroom = free at the start snapshot -
    what loading and capture keep. kvsize's activation peak stands for the transient peak and the reserve growth
    alike, so the request is min(ceil(visible x u), visible - start-up use - margin); start-up use and margin are
    0 where the utilisation cap decides."""
    util = s.gpu_util if s.gpu_util is not None else (rules.measured_utilization or rules.gpu_memory_utilization)
    rocm = device is not None and device.platform == "rocm"
    start = START_SNAPSHOT_MULTI if multi else START_SNAPSHOT_TP1
    margin = max(KV_MARGIN_FLOOR_ROCM if rocm else KV_MARGIN_FLOOR, int(activation * KV_MARGIN_FRACTION))
    graphs = (
        s.cuda_graph_bytes
        if s.cuda_graph_bytes is not None
        else 0
        if s.enforce_eager
        else (CUDA_GRAPH_CAPTURED_MULTI if multi else CUDA_GRAPH_CAPTURED_TP1)
    )
    capped, measured = math.ceil(visible * util), visible - start - margin
    if capped <= measured:
        return util, capped, graphs, 0, 0
    return util, measured, graphs, start, margin


def kv_budget(
    engine: str,
    version: str | None,
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
    the card for vLLM's scheduler tiers, its SM count and its interconnect (None: a card of `memory_bytes`
    with no name)."""
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
    visible, visible_source = cuda_visible(memory_bytes, device)
    multi = tp * pp > 1
    start = margin = 0  # vLLM 0.34+'s measured sizing only
    if s.reserve_bytes is not None:
        engine = "given reserve"  # a stated reserve replaces every engine's model
    padding_rule = ""
    if engine == "vllm":
        rules = _vllm_rules(version)
        padding, padding_rule = vllm_loading_change(spec, rules, device, tp, pp, s)
        weights_bytes += padding  # the weights as loaded: what vLLM's profile subtracts
        util = s.gpu_util if s.gpu_util is not None else rules.gpu_memory_utilization
        activation, activation_rule = _profile_peak(
            spec, memory_bytes, s, version, device, tp, multimodal=not s.language_model_only
        )
        non_torch = (
            s.non_torch_bytes
            if s.non_torch_bytes is not None
            else (NON_TORCH_NVLS if tp > 1 and has_nvls(device) else NON_TORCH_TP1)
        )
        rope = _rope_tables("vllm", version, spec, s, device)
        from kvsize.engines.vllm_releases import measures_pool

        if measures_pool(rules, device.platform if device is not None else "cuda"):
            util, requested, graphs, start, margin = _vllm_measured(rules, s, device, visible, multi, activation)
            rocm = device is not None and device.platform == "rocm"
            rule = (
                f"vLLM {version}: min(ceil(CUDA-visible memory x {util:g}), CUDA-visible - start-up use - warm-up "
                f"margin max({'3' if rocm else '1'} GiB, 0.75 x activation)) - weights"
                + (" - RoPE tables" if rope.bytes else "")
                + " - activation peak - non-torch - captured CUDA graphs (v1/worker/extensible_kv_cache.py "
                + f"measure_kv_cache_bytes); CUDA-visible memory: {visible_source}"
                + MEASURED_NOTE
                + (UNIFIED_MEASURED_NOTE if device is not None and device.unified_memory else "")
            )
        else:
            graphs = (
                s.cuda_graph_bytes
                if s.cuda_graph_bytes is not None
                else (
                    (CUDA_GRAPH_TP if multi else CUDA_GRAPH_TP1)
                    if rules.cuda_graph_estimate and not s.enforce_eager
                    else 0
                )
            )
            requested = math.ceil(visible * util)
            rule = (
                f"vLLM {version}: ceil(CUDA-visible memory x {util}) - weights"
                + (" - RoPE tables" if rope.bytes else "")
                + " - activation peak - non-torch"
                + (" - CUDA graphs" if graphs else "")
                + " (v1/worker/gpu_worker.py determine_available_memory, v1/worker/utils.py request_memory); "
                + f"CUDA-visible memory: {visible_source}"
                + (UNIFIED_NOTE if device is not None and device.unified_memory else "")
            )
        if s.enforce_eager:
            rule += "; --enforce-eager: no CUDA graphs"
    elif engine == "sglang":
        # KV = mem_fraction_static x free memory before loading - weights - what loading left allocated
        # (KVCacheConfigurator._profile_available_bytes); the default fraction is the formula of the era that
        # sizes `version` (kvsize/engines/sglang_releases.py, sglang.py spec_mem_fraction_static), and from 0.5.18
        # a multimodal model's budget loses SGLANG_VLM_CACHE_SIZE_MB (mm_runtime_reservation_gb).
        from kvsize.engines.sglang import spec_mem_fraction_static, vlm_kv_reserve_bytes
        from kvsize.engines.sglang_releases import SGLANG_RELEASES

        era = SGLANG_RELEASES.resolve(version).era
        sglang_rules = era.rules
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
                rules=sglang_rules,
            )
        )
        activation, graphs = s.activation_bytes or 0, s.cuda_graph_bytes or 0
        activation_rule = "activation peak given" if s.activation_bytes else ""
        vlm_reserve = vlm_kv_reserve_bytes(spec, sglang_rules)
        non_torch = (
            s.non_torch_bytes
            if s.non_torch_bytes is not None
            else (NON_TORCH_NVLS if multi and has_nvls(device) else 0)
        ) + vlm_reserve
        requested = math.ceil(visible * util)
        rope = _rope_tables("sglang", version, spec, s, device)
        rule = (
            f"SGLang {version or era.last} (rules of {SGLANG_RELEASES.span_of(era)}): mem_fraction_static {util} x "
            "free memory before loading - weights"
            + (" - RoPE tables" if rope.bytes else "")
            + (f" - {sglang_rules.vlm_kv_reserve_mib} MiB multimodal cache" if vlm_reserve else "")
            + f" (model_executor/pool_configurator.py, memory_hook.py); free memory before loading: {visible_source}"
            + (
                SGLANG_UNIFIED_NOTE.format(free=UNIFIED_FREE_SOURCE[sglang_rules.unified_free])
                if device is not None and device.unified_memory
                else ""
            )
        )
    elif engine == "trtllm":
        # (total - peak + temporary KV) x free_gpu_memory_fraction (_torch/pyexecutor/_util.py
        # KvCacheCreator._cal_max_memory): the fraction applies to what the warm-up run left free; its default is
        # the release's (kvsize/engines/trtllm_releases.py TrtllmRules.free_gpu_memory_fraction).
        from kvsize.engines.trtllm_releases import TRTLLM_RELEASES

        trt_rules = TRTLLM_RELEASES.resolve(version).era.rules
        util = s.gpu_util if s.gpu_util is not None else trt_rules.free_gpu_memory_fraction
        activation, activation_rule = _profile_peak(spec, memory_bytes, s, device=device, tp=tp)
        non_torch = (
            s.non_torch_bytes
            if s.non_torch_bytes is not None
            else (NON_TORCH_NVLS if multi and has_nvls(device) else NON_TORCH_TP1)
        )
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
            activation_rule=activation_rule,
            rule=f"TensorRT-LLM: {util} x (CUDA-visible memory - weights - warm-up peak); CUDA-visible memory: "
            + visible_source,
            visible_bytes=visible,
            visible_source=visible_source,
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
    budget = requested - weights_bytes - rope.bytes - activation - non_torch - graphs
    if padding_rule:
        rule += f"; weights as loaded: {padding:+,} B ({padding_rule})"
    else:
        padding = 0
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
        visible_bytes=visible,
        visible_source=visible_source,
        rope_table_bytes=rope.bytes,
        rope_table_rule=rope.rule,
        activation_rule=activation_rule,
        start_snapshot_bytes=start,
        margin_bytes=margin,
        loading_padding_bytes=padding,
        loading_padding_rule=padding_rule,
    )
