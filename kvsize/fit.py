"""Does it fit: a GPU's memory, the weights, the engine's budget, and the KV cache of a scenario. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from kvsize.budget import DEFAULT_SETTINGS, BudgetSettings, KvBudget, kv_budget, weights_on_busiest_rank
from kvsize.config import CONTEXT_LENGTH_KEYS
from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine
from kvsize.engines.sglang import SglangEngine
from kvsize.engines.trtllm import TrtllmEngine
from kvsize.engines.vllm import VllmEngine
from kvsize.record import Record
from kvsize.serving import Throughput, Tier, WorkloadFigures
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec
from kvsize.units import format_bytes

if TYPE_CHECKING:
    from kvsize.bench_result import BenchRun

MAX_SEARCH_CONTEXT = 1 << 40
PCIE5_X16_BYTES_PER_S = 64_000_000_000  # PCIe Gen5 x16: 32 GT/s x 16 lanes, 64 GB/s per direction


class SpeedBound(Record, frozen=True, kw_only=True):
    """Roofline upper bounds on speed: no engine runs faster (labelled as bounds, not predictions)."""

    requests: int
    """Requests decoding at once: the batch, or the engine's running-request cap when that is lower (the rest
    wait in the queue, holding no KV)."""
    decode_step_seconds_min: float
    """(weights on the GPU + KV of the running requests read once) / memory bandwidth."""
    decode_tokens_per_s_per_request_max: float
    decode_tokens_per_s_max: float
    """All running requests together."""
    prefill_seconds_min: float | None
    """2 x active parameters x prompt tokens (+ causal attention) / (bf16 dense peak x tp); None without a
    FLOP/s figure."""
    bandwidth_bytes_per_s: int
    rule: str


class OffloadTier(Record, frozen=True, kw_only=True):
    """A CPU DRAM or disk tier behind the GPU cache."""

    memory_bytes: int
    extra_tokens: int
    """Tokens of KV the tier holds (all layers, one replica)."""
    extra_requests: int
    """Requests of `ctx` tokens the tier holds."""
    link_bytes_per_s: int
    transfer_seconds_per_request: float
    """Moving one request's cache over the link once."""
    link_source: str = "PCIe Gen5 x16 assumed (64 GB/s per direction)"
    """Where link_bytes_per_s comes from: --link-bandwidth, or the GPU profile's host link."""
    tiers: tuple[Tier, ...] = ()
    """CPU DRAM, then disk behind it (kvsize/serving.py tiers): size, tokens, restore time per request."""
    recompute_seconds_per_request: float | None = None
    """Prefill roofline of one request's ctx tokens: what restoring competes with (a bound)."""
    break_even_context: int | None = None
    """Shortest context beyond which restoring from the CPU tier beats recomputing (roofline; None: never)."""


class Suggestion(Record, frozen=True, kw_only=True):
    """One change that would make a scenario fit (or give it headroom), with the figures it would give."""

    change: str
    """Flags a user can paste: `--kv-dtype fp8`, `--tp 2`, `--gpu h200`, `--ctx 65536`."""
    fits: bool
    max_concurrency: int
    """Requests of the scenario's (or the changed) ctx run at once per replica after the change: what the KV
    budget holds, never more than the engine's running-request cap."""
    max_concurrency_by_memory: int | None = None
    """What the KV budget holds after the change, before the engine's cap."""
    concurrency_cap: int | None = None
    """The engine's cap on running requests after the change (None: no cap)."""
    cap_binds: bool = False
    """The cap, not the KV memory, limits max_concurrency: requests of the batch past the cap wait in the
    engine's queue (vLLM 0.33 v1/core/sched/scheduler.py Scheduler.schedule admits waiting requests only while
    len(self.running) < max_num_seqs; they hold no blocks and are not preempted)."""
    kv_budget_bytes: int
    kv_cache_bytes_per_gpu: int
    """The scenario's KV on the most loaded GPU after the change."""
    why: str
    """What the change does, in words."""


class ContextLimit(Record, frozen=True, kw_only=True):
    """A context longer than the engine's maximum for the model, and what the engine does about it."""

    ctx: int
    maximum: int
    """The engine's own maximum context for the model (the config's, scaled by RoPE where the engine does)."""
    refuses: bool
    """True: the engine does not serve `ctx` (it raises at start-up, or lowers its limit below ctx), so the
    scenario does not fit; False: it only warns and runs."""
    engine: str
    """The engine and release: "vLLM 0.33"."""
    action: str
    """What the engine does, in words: "refuses a longer max_model_len at start-up"."""
    source: str
    """Where: file and function."""
    override: str | None = None
    """The engine's switch that allows the longer context (at the user's risk); None: none."""

    @property
    def reason(self) -> str:
        return f"ctx {self.ctx:,} is past the model's maximum context {self.maximum:,}: {self.engine} {self.action}"


# RoPE types whose `factor` the engines do not apply to max_position_embeddings, since the config's figure is
# already the scaled one (vllm/config/model.py _get_and_verify_max_len, 0.33.0; TensorRT-LLM
# _torch/pyexecutor/model_engine.py PyTorchModelEngine._infer_max_seq_len_from_config).
_TRTLLM_UNSCALED_ROPE = frozenset({"su", "longrope", "llama3", "yarn"})
# vLLM 0.33 reads all nine keys the parser keeps (model_arch_config_convertor.py derive_max_model_len_and_key).
VLLM_CONTEXT_KEYS = CONTEXT_LENGTH_KEYS
SGLANG_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
SGLANG_DEFAULT_CONTEXT = 2048  # srt/utils/hf_transformers/common.py get_context_length: no key in the config
TRTLLM_DEFAULT_CONTEXT = 2048  # _infer_max_seq_len_from_config: no max_position_embeddings


def engine_max_context(engine: Engine, spec: ArchSpec) -> int | None:
    """The longest context the engine accepts for the model without an override; None: no limit it checks.

    Each reads its own keys of the config (`spec.context_lengths`) and applies its own RoPE rule:
    - vLLM 0.33: the smallest of the nine keys it knows, `model_max_length` overriding them
      (transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key), then x `factor` of
      every RoPE entry whose type is not su/longrope/llama3/yarn/deepseek_yarn/deepseek_llama_scaling (the
      last such entry's factor wins), never for Gemma 3 (config/model.py _get_and_verify_max_len); no key:
      no limit on a given max_model_len. Before 0.30 only su/longrope/llama3 are unscaled and YaRN's maximum
      is original_max_position_embeddings x factor (VllmRules.unscaled_rope_types, yarn_from_original).
    - SGLang 0.5.23: the first of max_sequence_length, seq_length, max_seq_len, model_max_length,
      max_position_embeddings (srt/utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS, get_context_length),
      int(factor x length) unless the entry states original_max_position_embeddings or is llama3; no key: 2,048.
    - TensorRT-LLM 1.2 (_torch/pyexecutor/model_engine.py _infer_max_seq_len_from_config):
      max_position_embeddings, ceil(x factor) unless su/longrope/llama3/yarn; none: 2,048.
    - llama.cpp: n_ctx_train (the GGUF's context_length, the config's maximum as converted); transformers and
      the formula: the config's maximum (neither refuses; see context_limit).
    The engines read the config through transformers, whose attribute maps make `max_position_embeddings`
    read `n_positions` in GPT-2-style configs; a spec built without the keys stands on `max_context`."""
    stated = dict(spec.context_lengths)
    if "max_position_embeddings" not in stated and "n_positions" in stated:
        stated["max_position_embeddings"] = stated["n_positions"]
    if not stated and spec.max_context is not None:
        stated = {"max_position_embeddings": spec.max_context}
    rope = spec.rope_scaling
    one = (1, 1)
    if engine.name == "vllm":
        lengths = [stated[key] for key in VLLM_CONTEXT_KEYS if key in stated]
        if not lengths:
            return None
        base = stated.get("model_max_length", min(lengths))
        factor = one
        from kvsize.engines.vllm import VllmEngine

        assert isinstance(engine, VllmEngine)
        rules = engine.rules  # the era's RoPE switches (VllmRules.unscaled_rope_types, yarn_from_original)
        if "gemma3" not in spec.model_type:
            for entry in rope:
                if entry.rope_type not in rules.unscaled_rope_types:
                    factor = entry.factor or factor
                    if entry.rope_type == "yarn" and rules.yarn_from_original and entry.original_max:
                        base = entry.original_max  # derived_max_model_len = rp["original_max_position_embeddings"]
        return base * factor[0] // factor[1]  # int(derived_max_model_len * scaling_factor)
    if engine.name == "sglang":
        # get_context_length reads the one `rope_scaling` dict; a nested (per layer type) form states none.
        first = rope[0] if len(rope) == 1 else None
        factor = one
        if first is not None and not first.has_original_max and first.rope_type != "llama3":
            factor = first.factor or one
        length = next((stated[key] for key in SGLANG_CONTEXT_KEYS if key in stated), SGLANG_DEFAULT_CONTEXT)
        return length * factor[0] // factor[1]  # int(rope_scaling_factor * val)
    if engine.name == "trtllm":
        first = rope[0] if len(rope) == 1 else None
        factor = one
        if first is not None and first.rope_type not in _TRTLLM_UNSCALED_ROPE:
            factor = first.factor or one
        maximum = stated.get("max_position_embeddings", TRTLLM_DEFAULT_CONTEXT)
        return -(-maximum * factor[0] // factor[1])  # math.ceil(inferred_max_seq_len * rope_factor)
    return spec.max_context


# Engines that do not serve a context past their maximum: (what they do, where, the switch that allows it).
_REFUSALS = {
    "vllm": (
        "refuses a longer max_model_len at start-up",
        "vllm/config/model.py _get_and_verify_max_len",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    ),
    "sglang": (
        "refuses a longer --context-length at start-up",
        "python/sglang/srt/configs/model_config.py ModelConfig._derive_context_length",
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    ),
    "trtllm": (
        "lowers max_seq_len to {maximum:,}: requests of {ctx:,} tokens are not served",
        "tensorrt_llm/_torch/pyexecutor/model_engine.py PyTorchModelEngine._init_max_seq_len",
        "TLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    ),
}


def context_limit(engine: Engine, spec: ArchSpec, ctx: int) -> ContextLimit | None:
    """What the engine does with `ctx` past its maximum for the model (engine_max_context); None within it.

    vLLM and SGLang refuse to start (ValueError) unless an environment switch allows it; TensorRT-LLM starts but
    lowers max_seq_len to its maximum, so requests of ctx tokens are not served: all three refuse the scenario.
    llama.cpp only warns (src/llama-context.cpp llama_context: "n_ctx_seq > n_ctx_train -- possible training
    context overflow"); transformers checks nothing: they run it."""
    maximum = engine_max_context(engine, spec)
    if maximum is None or ctx <= maximum:
        return None
    label = f"{engine.title} {engine.version}"
    if engine.name in _REFUSALS:
        action, source, override = _REFUSALS[engine.name]
        switch = dict(engine.context.long_context_switches).get(engine.name)
        if switch is not None:  # the engine warns and serves it, as its switch allows (at the user's risk)
            return ContextLimit(
                ctx=ctx,
                maximum=maximum,
                refuses=False,
                engine=label,
                action=f"serves it because {switch} is set (it only warns)",
                source=source,
                override=override,
            )
        action = action.format(maximum=maximum, ctx=ctx)
        # YaRN whose original maximum x factor passes the stated one: the user extended the context (Qwen3's
        # --hf-overrides recipe), which vLLM 0.30+ reads only from max_position_embeddings.
        extended = [
            r
            for r in spec.rope_scaling
            if r.rope_type == "yarn"
            and r.original_max
            and r.factor
            and r.original_max * r.factor[0] // r.factor[1] > maximum
        ]
        if engine.name == "vllm" and extended:
            from kvsize.engines.vllm import VllmEngine

            if isinstance(engine, VllmEngine) and not engine.rules.yarn_from_original:
                action += (
                    f" (from 0.30 it takes a YaRN config's max_position_embeddings as already scaled: add "
                    f'"max_position_embeddings": {ctx} to --hf-overrides)'
                )
        return ContextLimit(
            ctx=ctx,
            maximum=maximum,
            refuses=True,
            engine=label,
            action=action,
            source=source,
            override=override,
        )
    if engine.name == "llamacpp":
        action, source = "runs it with a warning (n_ctx_seq > n_ctx_train)", "src/llama-context.cpp llama_context"
    elif engine.name == "hf":
        action, source = "does not check it and runs it", "no check of the context against the config"
    else:
        label, action, source = "the formula", "sizes it", "no engine"
    return ContextLimit(ctx=ctx, maximum=maximum, refuses=False, engine=label, action=action, source=source)


class GpuFit(Record, frozen=True, kw_only=True):
    """One scenario on one GPU of the deployment."""

    name: str
    memory_bytes: int
    weights_bytes: int
    """Weights on this GPU (the model's weights / (tp x pp))."""
    weights_source: str
    weights_estimated: bool
    reserve_bytes: int
    """Everything on the card that is neither weights nor KV: memory - weights - kv_budget."""
    reserve_rule: str
    budget: KvBudget
    """The engine's budget, part by part."""
    kv_budget_bytes: int
    """KV memory per GPU (negative when the weights alone do not fit)."""
    fits: bool
    """Whether `batch` requests of `ctx` tokens fit in the KV budget and the engine accepts `ctx`."""
    memory_fits: bool
    """Whether `batch` requests of `ctx` tokens fit in the KV budget, whatever the engine's context limit."""
    max_concurrency: int
    """Requests of `ctx` tokens the engine runs at once: what the budget holds (block rounding included), never
    more than the engine's running-request cap."""
    concurrency_cap: int | None = None
    """The engine's cap on running requests (vLLM max_num_seqs, SGLang max_running_requests); None: no cap."""
    cap_binds: bool = False
    """True when the cap, not the KV memory, limits max_concurrency. Requests past the cap wait in the engine's
    queue, holding no KV and not preempted: vLLM 0.33 v1/core/sched/scheduler.py Scheduler.schedule admits
    waiting requests only while len(self.running) < max_num_seqs; SGLang 0.5.23 managers/scheduler.py
    get_new_batch_prefill marks the batch full when get_num_allocatable_reqs() <= 0. So `fits` stays a memory
    verdict (the KV budget holds all `batch` requests at once) and a batch above the cap runs cap at a time."""
    max_concurrency_by_memory: int | None = None
    """Requests of `ctx` tokens the KV budget holds, before the engine's cap (the shared prefix counted once)."""
    max_context: int | None
    """Longest context each of `batch` requests can have: what the KV budget holds, never past the model's
    maximum context; None when nothing limits it (windows cap every layer and the config states no maximum), or
    when not asked for (`kvsize plan`)."""
    max_context_by_memory: int | None = None
    """The longest context the KV budget alone holds for each of `batch` requests, past the model's maximum
    when the memory allows it; None when windows cap every layer (no limit), or when not asked for."""
    kv_pool_tokens: int | None = None
    """The engine's own pool figure: vLLM "GPU KV cache size: N tokens", SGLang max_total_num_tokens,
    TensorRT-LLM max_tokens; None for engines without a pool."""
    concurrency: float | None = None
    """vLLM's "Maximum concurrency for ctx tokens per request: X" (others: pool tokens / ctx; SGLang's split
    hybrid SWA pools: the binding pool's tokens over a request's slots there)."""
    kv_pool_swa_tokens: int | None = None
    """SGLang's hybrid SWA pool, beside the full pool of kv_pool_tokens (swa_max_total_num_tokens)."""
    speed: SpeedBound | None = None
    offload: OffloadTier | None = None
    context_limit: ContextLimit | None = None
    """Set when ctx is past the engine's maximum context for the model: refused (fits is False) or only a
    warning (the engine runs it)."""
    suggestions: tuple[Suggestion, ...] = ()
    """Changes that would make the scenario fit or give it headroom (the sizing command only)."""
    # --- serving-time figures (kvsize/serving.py) ---
    steady_state_concurrency: float | None = None
    """Steady state: KV budget / the mean bytes a request holds over its life (P + O/2 rounded to blocks,
    exactly averaged over the decode steps); preemption happens whenever the instantaneous sum exceeds it."""
    workload: WorkloadFigures | None = None
    throughput: Throughput | None = None
    """Little's law on the roofline step time (a bound)."""
    prefill_saved_seconds: float | None = None
    """Prefill roofline time one request saves by hitting the shared prefix (time to first token)."""


class Hardware(msgspec.Struct, frozen=True):
    """What the speed and offload figures need to know of the card and its host."""

    bandwidth_bytes_per_s: int | None = None
    bf16_flops: float | None = None
    """Dense bf16 FLOP/s of one GPU."""
    active_parameters: int | None = None
    total_parameters: int | None = None
    """With active_parameters below it (MoE), a decode step need read only the routed share of the weights."""
    num_layers: int = 0
    attention_width: int = 0
    """num_attention_heads x head_dim, for the causal attention FLOPs of prefill."""
    cpu_mem_bytes: int | None = None
    link_bytes_per_s: int | None = None
    link_source: str | None = None
    """Where link_bytes_per_s comes from (--link-bandwidth or the GPU profile's host link)."""
    num_experts: int | None = None
    """MoE models: routed experts per MoE layer (n_routed_experts / num_local_experts / num_experts)."""
    experts_per_token: int | None = None
    """MoE models: routed experts each token chooses (num_experts_per_tok / top_k)."""


def weights_read_per_step(weights_per_gpu: int, hw: Hardware) -> int:
    """The fewest weight bytes one decode step reads on a GPU: all of them for a dense model; for an MoE the
    active share (active / total parameters: the shared parts and top_k experts per layer), which is what a
    step reads when the batch's tokens route to the same experts. Reading more is slower, so this keeps the
    bound an upper bound; counting every expert (issue 20) made Qwen3-30B-A3B ~10x slower than it runs."""
    active, total = hw.active_parameters, hw.total_parameters
    if active and total and active < total:
        return weights_per_gpu * active // total
    return weights_per_gpu


def speed_bound(
    *, weights_per_gpu: int, kv_per_gpu: int, ctx: int, batch: int, tp: int, hw: Hardware
) -> SpeedBound | None:
    if not hw.bandwidth_bytes_per_s:
        return None
    step = (weights_read_per_step(weights_per_gpu, hw) + kv_per_gpu) / hw.bandwidth_bytes_per_s
    prefill = None
    if hw.bf16_flops and hw.active_parameters:
        # Linear layers: 2 FLOPs per parameter per token; causal attention: QK^T and PV over half the square.
        flops = 2 * hw.active_parameters * ctx * batch + 2 * hw.num_layers * hw.attention_width * ctx * ctx * batch
        prefill = flops / (hw.bf16_flops * tp)
    return SpeedBound(
        decode_step_seconds_min=step,
        decode_tokens_per_s_per_request_max=1 / step,
        decode_tokens_per_s_max=batch / step,
        prefill_seconds_min=prefill,
        requests=batch,
        bandwidth_bytes_per_s=hw.bandwidth_bytes_per_s,
        rule="memory-bandwidth roofline: every decode step reads the GPU's weights (an MoE's routed share: "
        "active/total parameters) and the batch's KV once; prefill at the bf16 dense peak",
    )


def expected_distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts `tokens` tokens route to in one MoE layer, each choosing top_k of num_experts
    uniformly and independently: E x (1 - (1 - k/E)^tokens) (an expert is missed by a token with chance 1 - k/E)."""
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


def weights_read_for_tokens(weights_per_gpu: int, hw: Hardware, tokens: int) -> tuple[float, float | None]:
    """(weight bytes, experts read per MoE layer) one forward pass over `tokens` tokens reads on a GPU. A dense
    model reads every weight. An MoE reads the dense parts, the shared experts and the expected distinct routed
    experts (uniform routing): active + (distinct - k) / (E - k) x (total - active) parameters, since
    total - active is the (E - k) routed experts per layer a single token skips (kvsize/params.py)."""
    active, total = hw.active_parameters, hw.total_parameters
    experts, k = hw.num_experts, hw.experts_per_token
    if not (active and total and active < total and experts and k and k < experts):
        return float(weights_read_per_step(weights_per_gpu, hw)), None
    distinct = expected_distinct_experts(experts, k, tokens)
    params = active + (distinct - k) / (experts - k) * (total - active)
    return weights_per_gpu * params / total, distinct


class LatencyBound(Record, frozen=True, kw_only=True):
    """Lower bounds on latency at one context and batch (roofline: no engine is faster), as --itl prints them."""

    ctx: int
    batch: int
    experts_read_per_layer: float | None
    """MoE: expected distinct routed experts a decode step reads per layer (uniform routing); None if dense."""
    weights_read_bytes: float
    kv_read_bytes: int
    """batch x one request's KV at ctx on the GPU (the engine's bytes)."""
    ttft_seconds_min: float | None
    """max(2 x active params x batch x ctx / peak FLOP/s, prefill's weight read / bandwidth); None without a peak."""
    itl_seconds_min: float
    """(weights read + KV read) / memory bandwidth."""
    itl_target_ms: float
    max_requests_under_itl: int
    """Most requests at ctx whose decode step bound stays within the target (0: not even one)."""
    bandwidth_bytes_per_s: int
    peak_flops: float | None
    rule: str


LATENCY_RULE = (
    "roofline lower bounds: ITL >= (weights read + batch x ctx KV) / bandwidth, an MoE reading "
    "E x (1 - (1 - k/E)^batch) routed experts per layer (uniform routing) plus its dense and shared parts; "
    "TTFT >= max(2 x active params x batch x ctx / peak, weights read / bandwidth)"
)
MAX_LATENCY_REQUESTS = 1 << 30


def latency_bounds(
    *,
    weights_per_gpu: int,
    kv_per_request: Callable[[int], int],
    hardware: Hardware,
    contexts: Sequence[int],
    batches: Sequence[int],
    itl_ms: float,
    tp: int = 1,
) -> list[LatencyBound]:
    """One row per context x batch. `kv_per_request(ctx)` is one request's KV bytes on the GPU at ctx;
    `weights_per_gpu` the weights on one GPU; FLOPs are split over tp GPUs. A bound: reading less than this, or
    computing faster than the peak, is impossible; real engines are slower."""
    bw, peak = hardware.bandwidth_bytes_per_s, hardware.bf16_flops
    if not bw:
        raise ValueError("latency bounds need the card's memory bandwidth")

    def step(batch: int, kv: int) -> float:
        return (weights_read_for_tokens(weights_per_gpu, hardware, batch)[0] + batch * kv) / bw

    rows = []
    for ctx in contexts:
        kv = kv_per_request(ctx)
        target = itl_ms / 1000
        low, high = 0, MAX_LATENCY_REQUESTS  # the step grows with the batch: bisect the largest within target
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if step(mid, kv) <= target else (low, mid)
        for batch in batches:
            weights, experts = weights_read_for_tokens(weights_per_gpu, hardware, batch)
            ttft = None
            if peak and hardware.active_parameters:
                compute = 2 * hardware.active_parameters * batch * ctx / (peak * tp)
                ttft = max(compute, weights_read_for_tokens(weights_per_gpu, hardware, batch * ctx)[0] / bw)
            rows.append(
                LatencyBound(
                    ctx=ctx,
                    batch=batch,
                    experts_read_per_layer=experts,
                    weights_read_bytes=weights,
                    kv_read_bytes=batch * kv,
                    ttft_seconds_min=ttft,
                    itl_seconds_min=(weights + batch * kv) / bw,
                    itl_target_ms=itl_ms,
                    max_requests_under_itl=low,
                    bandwidth_bytes_per_s=bw,
                    peak_flops=peak,
                    rule=LATENCY_RULE,
                )
            )
    return rows


class MeasuredAgainstBound(Record, frozen=True, kw_only=True):
    """A benchmark run's measured latency and throughput beside kvsize's bounds for the same load (--bench-result).
    share: how close the run came to the bound (bound / measured for a latency, measured / bound for the
    throughput); 1.0 is the roofline, real engines stay below it."""

    run: str
    tool: str
    requests: int
    """Requests decoding at once that the ITL and throughput bounds assume."""
    requests_source: str
    prompt_tokens: int
    """Mean prompt of the run (total input tokens / completed requests)."""
    output_tokens: int
    decode_ctx: int
    """The mean context a decode step reads: prompt + half the output (the cache grows from one to the other)."""
    itl_ms: float | None
    itl_bound_ms: float
    itl_share: float | None
    ttft_ms: float | None
    ttft_bound_ms: float | None
    """One request's prefill of the mean prompt alone (batch 1): no request's first token comes sooner."""
    ttft_share: float | None
    output_tokens_per_s: float | None
    output_tokens_per_s_bound: float
    """requests x tokens per step / the ITL bound (prefill time left out: a looser bound)."""
    throughput_share: float | None
    faster_than_bound: tuple[str, ...]
    """Figures measured beyond their bound: the run was not the scenario kvsize bounded (another card,
    quantized weights, prefix-cache hits, speculation kvsize was not told of)."""
    bandwidth_bytes_per_s: int
    peak_flops: float | None
    rule: str


MEASURED_RULE = (
    "bounds at the run's load: ITL at its concurrency and mean prompt + output/2 tokens; TTFT of the mean prompt "
    "prefilled alone; throughput = requests x tokens per step / ITL bound"
)


def measured_against_bounds(
    run: BenchRun,
    *,
    weights_per_gpu: int,
    kv_per_request: Callable[[int], int],
    hardware: Hardware,
    tp: int = 1,
) -> MeasuredAgainstBound:
    """Set a benchmark run beside the latency bounds (latency_bounds) of the load it ran: its requests in flight
    (--max-concurrency, else SGLang's measured mean concurrency, rounded down so the bound stays a bound), its
    mean prompt, and its mean decode context."""
    from kvsize.errors import UsageError

    if run.max_concurrency:
        requests, source = min(run.max_concurrency, run.completed), "the benchmark's --max-concurrency"
    elif run.mean_concurrency:
        requests, source = max(1, int(run.mean_concurrency)), "its measured mean concurrency, rounded down"
    else:
        raise UsageError(
            f"--bench-result: '{run.label}' ran without --max-concurrency, so how many requests decoded at once "
            "is unknown",
            hint="Rerun the benchmark with --max-concurrency N (vllm bench serve, sglang.bench_serving).",
        )
    prompt = max(1, run.total_input_tokens // run.completed)
    output = run.total_output_tokens // run.completed
    decode_ctx = prompt + output // 2
    step = latency_bounds(
        weights_per_gpu=weights_per_gpu,
        kv_per_request=kv_per_request,
        hardware=hardware,
        contexts=[decode_ctx],
        batches=[requests],
        itl_ms=run.median_itl_ms or 1.0,
        tp=tp,
    )[0]
    first = latency_bounds(
        weights_per_gpu=weights_per_gpu,
        kv_per_request=kv_per_request,
        hardware=hardware,
        contexts=[prompt],
        batches=[1],
        itl_ms=1.0,
        tp=tp,
    )[0]
    itl_bound = step.itl_seconds_min * 1000
    ttft_bound = None if first.ttft_seconds_min is None else first.ttft_seconds_min * 1000
    throughput_bound = requests * (run.accept_length or 1.0) / step.itl_seconds_min

    def share(bound: float | None, measured: float | None) -> float | None:
        return None if bound is None or not measured else bound / measured

    itl_share = share(itl_bound, run.median_itl_ms)
    ttft_share = share(ttft_bound, run.median_ttft_ms)
    throughput_share = share(run.output_tokens_per_s, throughput_bound)
    beyond = [
        name
        for name, value in (("ITL", itl_share), ("TTFT", ttft_share), ("throughput", throughput_share))
        if value is not None and value > 1
    ]
    return MeasuredAgainstBound(
        run=run.label,
        tool=run.tool,
        requests=requests,
        requests_source=source,
        prompt_tokens=prompt,
        output_tokens=output,
        decode_ctx=decode_ctx,
        itl_ms=run.median_itl_ms,
        itl_bound_ms=itl_bound,
        itl_share=itl_share,
        ttft_ms=run.median_ttft_ms,
        ttft_bound_ms=ttft_bound,
        ttft_share=ttft_share,
        output_tokens_per_s=run.output_tokens_per_s,
        output_tokens_per_s_bound=throughput_bound,
        throughput_share=throughput_share,
        faster_than_bound=tuple(beyond),
        bandwidth_bytes_per_s=step.bandwidth_bytes_per_s,
        peak_flops=step.peak_flops,
        rule=f"{MEASURED_RULE}; {step.rule}",
    )


def offload_tier(*, bytes_per_token: int, bytes_per_request: int, hw: Hardware) -> OffloadTier | None:
    if not hw.cpu_mem_bytes:
        return None
    link = hw.link_bytes_per_s or PCIE5_X16_BYTES_PER_S
    return OffloadTier(
        link_source=hw.link_source or "PCIe Gen5 x16 assumed (64 GB/s per direction)",
        memory_bytes=hw.cpu_mem_bytes,
        extra_tokens=hw.cpu_mem_bytes // bytes_per_token if bytes_per_token else 0,
        extra_requests=hw.cpu_mem_bytes // bytes_per_request if bytes_per_request else 0,
        link_bytes_per_s=link,
        transfer_seconds_per_request=bytes_per_request / link,
    )


def request_bytes(engine: Engine, spec: ArchSpec, ctx: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1) -> int:
    """One request's cache on the most loaded GPU."""
    return engine.estimate(spec, ctx=ctx, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp).kv_cache_bytes_per_gpu


def grown_request_bytes(engine: Engine, spec: ArchSpec, ctx: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1) -> int:
    """The most one request's cache holds on its way to `ctx` tokens (a request passes every length): its
    bytes at `ctx`, or more where an engine's bytes can fall as the context grows (the hf engine on
    DeepSeek-V4: HfEngine.peak_request_bytes)."""
    at_ctx = request_bytes(engine, spec, ctx, kv_dtype, tp, pp)
    peak = engine.peak_request_bytes(spec, ctx, kv_dtype, pp)
    return at_ctx if peak is None else max(at_ctx, peak)


def max_context(
    engine: Engine, spec: ArchSpec, kv_dtype: KvDtype, *, batch: int, budget: int, tp: int = 1, pp: int = 1
) -> int | None:
    """Largest ctx with batch x grown_request_bytes(ctx) <= budget (monotone in ctx: the most a request holds
    on its way there).

    A bracketing search: `low` always fits and `high` never does, and it ends when they are adjacent, so the
    answer is exactly the bisection's. The probes are chosen by interpolation, since the bytes grow almost
    linearly with ctx (block and padding steps aside): a handful of estimates instead of ~40, which matters
    when one estimate walks 100,000 layers. A probe that fails to halve the bracket is followed by a
    bisection step, so the worst case stays within twice bisection's count."""
    target = budget // batch if batch > 0 else budget  # batch x bytes <= budget  <=>  bytes <= budget // batch
    high_bytes = grown_request_bytes(engine, spec, MAX_SEARCH_CONTEXT, kv_dtype, tp, pp)
    if batch * high_bytes <= budget:
        return None
    low, high = 0, MAX_SEARCH_CONTEXT  # invariant: low fits (0 tokens: trivially), high does not
    low_bytes = 0
    bisect = False
    while high - low > 1:
        width = high - low
        if bisect or high_bytes <= low_bytes:
            mid = (low + high) // 2
        else:
            mid = low + (target - low_bytes) * width // (high_bytes - low_bytes)
            mid = min(max(mid, low + 1), high - 1)
        mid_bytes = grown_request_bytes(engine, spec, mid, kv_dtype, tp, pp)
        if batch * mid_bytes <= budget:
            low, low_bytes = mid, mid_bytes
        else:
            high, high_bytes = mid, mid_bytes
        bisect = not bisect and 2 * (high - low) > width
    return low


def within_model_context(by_memory: int | None, model_max: int | None) -> int | None:
    """The longest context a request can have: what the memory holds (None: no limit), never past the model's
    maximum context (None: the config states none)."""
    if by_memory is None:
        return model_max
    return by_memory if model_max is None else min(by_memory, model_max)


def pool_figures(
    engine: Engine, spec: ArchSpec, *, budget: int, ctx: int, kv_dtype: KvDtype, tp: int, pp: int
) -> tuple[int | None, float | None]:
    """(pool tokens, concurrency) as the engine reports them at start-up."""
    if budget <= 0:
        return 0, 0.0
    if isinstance(engine, VllmEngine):
        pool = engine.pool(spec, available_bytes=budget, max_model_len=ctx, kv_dtype=kv_dtype, tp=tp, pp=pp)
        return pool.kv_pool_tokens, pool.concurrency
    if isinstance(engine, SglangEngine):
        tokens = engine.pool(spec, available_bytes=budget, kv_dtype=kv_dtype, tp=tp, pp=pp).max_total_num_tokens
        return tokens, tokens / ctx
    if isinstance(engine, TrtllmEngine):  # the budget already applied free_gpu_memory_fraction
        tokens = engine.pool(
            spec, available_bytes=budget, kv_dtype=kv_dtype, tp=tp, pp=pp, free_gpu_memory_fraction=1.0
        ).pool_tokens  # whole blocks, as allocatePools logs them
        return tokens, tokens / ctx
    return None, None


def running_request_cap(
    engine: Engine,
    spec: ArchSpec,
    *,
    ctx: int,
    tp: int,
    pp: int,
    settings: BudgetSettings,
    pool_tokens: int | None,
    kv_budget_bytes: int | None = None,
    kv_dtype: KvDtype = KvDtype.BF16,
) -> int | None:
    """How many requests the engine runs at once at most, whatever the KV memory holds.

    vLLM: max_num_seqs (v1/core/sched/scheduler.py stops admitting at len(self.running) == max_num_seqs): given,
    else the scheduler's default for the card and release (Engine.max_running_requests, vllm_scheduler.py).
    SGLang: max_running_requests given (--max-num-seqs), else its default from the pool of `kv_budget_bytes`,
    capped by the Mamba state pool (engines/sglang.py SglangEngine.running_request_cap,
    KVCacheConfigurator.resolve_max_num_reqs)."""
    if settings.max_num_seqs is not None and isinstance(engine, (VllmEngine, SglangEngine)):
        return settings.max_num_seqs
    if isinstance(engine, SglangEngine):
        if not pool_tokens or kv_budget_bytes is None:
            return None
        # The default from the pool, capped by the Mamba state pool SGLang reserves (SglangEngine.running_request_cap:
        # resolve_max_num_reqs); the era's rules (the formula per release) come with the engine.
        pool = engine.pool(spec, available_bytes=kv_budget_bytes, kv_dtype=kv_dtype, tp=tp, pp=pp)
        return engine.running_request_cap(pool, ctx)
    return engine.max_running_requests(spec, ctx, tp, pp)


def plan_fit(
    engine: Engine,
    spec: ArchSpec,
    *,
    ctx: int,
    batch: int,
    kv_dtype: KvDtype,
    gpu_name: str,
    memory_bytes: int,
    weights_bytes: int,
    weights_source: str,
    weights_estimated: bool,
    settings: BudgetSettings = DEFAULT_SETTINGS,
    tp: int = 1,
    pp: int = 1,
    hardware: Hardware | None = None,
    with_max_context: bool = True,
    estimate: KvEstimate | None = None,
) -> GpuFit:
    """The fit on one GPU of a tp x pp deployment: the weights of the busiest GPU (budget.py
    weights_on_busiest_rank: an even tensor-parallel split, the embeddings on the first and last pipeline
    stages), the cache of the most loaded rank."""
    gpus = tp * pp
    on_rank = weights_on_busiest_rank(spec, weights_bytes, tp=tp, pp=pp, engine=engine.name)
    weights_per_gpu = on_rank.bytes
    if gpus > 1:
        weights_source = (
            f"{weights_source}; 1/{gpus} of {format_bytes(weights_bytes)} per GPU"
            if on_rank.even
            else f"{weights_source}; {on_rank.rule} ({format_bytes(weights_bytes)} in all)"
        )
    if settings.max_model_len is None:  # the context is the engine's max_model_len (launch: --max-model-len ctx)
        settings = msgspec.structs.replace(settings, max_model_len=ctx)
    budget = kv_budget(
        engine.name,
        engine.version,
        spec,
        memory_bytes=memory_bytes,
        weights_bytes=weights_per_gpu,
        tp=tp,
        pp=pp,
        settings=settings,
        device=engine.context.device,
    )
    if budget.loading_padding_bytes:  # the engine holds more (padding) or less (towers) than the share given
        change = budget.loading_padding_bytes
        shown = f"{'+' if change > 0 else '-'} {format_bytes(abs(change))}"
        weights_source = f"{weights_source}; {shown} as vLLM loads them ({budget.loading_padding_rule})"
        weights_per_gpu = budget.weights_bytes
    whole = estimate or engine.estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
    per_request = -(-whole.kv_cache_bytes_per_gpu // batch)  # the most loaded GPU's share of one request
    usable = max(budget.kv_budget_bytes, 0)
    # SGLang's hybrid SWA pools are split at start-up: each must hold the requests on its own
    split = (
        engine.split_pools(spec, available_bytes=usable, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        if isinstance(engine, SglangEngine) and usable > 0
        else None
    )
    tokens, concurrency = (
        (split.full_tokens, split.concurrency)
        if split is not None
        else pool_figures(engine, spec, budget=usable, ctx=ctx, kv_dtype=kv_dtype, tp=tp, pp=pp)
    )
    hw = hardware or Hardware()
    held = usable // per_request if per_request else 0
    if split is not None:
        held = min(held, split.requests)
    cap = running_request_cap(
        engine,
        spec,
        ctx=ctx,
        tp=tp,
        pp=pp,
        settings=settings,
        pool_tokens=tokens,
        kv_budget_bytes=usable,
        kv_dtype=kv_dtype,
    )
    by_memory = (
        max_context(engine, spec, kv_dtype, batch=batch, budget=usable, tp=tp, pp=pp) if with_max_context else None
    )
    if split is not None and with_max_context:
        # the full pool binds before the bytes do (a request's SWA slots fit the SWA pool's 0.8 share below its
        # cap), so the pool's figure is the limit even where the byte search found none
        by_memory = split.longest if by_memory is None else min(by_memory, split.longest)
    running = min(batch, cap) if cap is not None else batch  # the rest of the batch waits (speed only)
    limit = context_limit(engine, spec, ctx)  # past the engine's maximum: refused, or only a warning
    memory_fits = budget.kv_budget_bytes >= 0 and batch * per_request <= budget.kv_budget_bytes
    if split is not None:
        memory_fits = memory_fits and batch <= split.requests
    return GpuFit(
        name=gpu_name,
        memory_bytes=memory_bytes,
        weights_bytes=weights_per_gpu,
        weights_source=weights_source,
        weights_estimated=weights_estimated,
        reserve_bytes=memory_bytes - weights_per_gpu - budget.kv_budget_bytes,
        reserve_rule=budget.rule,
        budget=budget,
        kv_budget_bytes=budget.kv_budget_bytes,
        fits=memory_fits and not (limit is not None and limit.refuses),
        memory_fits=memory_fits,
        context_limit=limit,
        max_concurrency=min(held, cap) if cap is not None else held,
        concurrency_cap=cap,
        cap_binds=cap is not None and cap < held,
        max_concurrency_by_memory=held,
        max_context=within_model_context(by_memory, engine_max_context(engine, spec)) if with_max_context else None,
        max_context_by_memory=by_memory,
        kv_pool_tokens=tokens,
        kv_pool_swa_tokens=split.swa_tokens if split is not None else None,
        concurrency=concurrency,
        speed=speed_bound(
            weights_per_gpu=weights_per_gpu, kv_per_gpu=running * per_request, ctx=ctx, batch=running, tp=tp, hw=hw
        ),
        offload=offload_tier(
            bytes_per_token=whole.kv_bytes_per_token, bytes_per_request=whole.bytes_per_request, hw=hw
        ),
    )
