"""Does it fit: a GPU's memory, the weights, a reserve, and the KV cache of a scenario. Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine
from kvsize.spec import ArchSpec

# vLLM's default gpu_memory_utilization is 0.92 (vllm 0.33 config/cache.py; 0.9 before): the engine budgets
# 92% of the card and leaves the rest to the CUDA context, other processes and fragmentation.
DEFAULT_UTILIZATION_PERCENT = 92
MAX_SEARCH_CONTEXT = 1 << 40


class GpuFit(BaseModel):
    """One scenario on one card."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_bytes: int
    weights_bytes: int
    """Weights on this GPU (the model's weights / (tp x pp))."""
    weights_source: str
    weights_estimated: bool
    reserve_bytes: int
    reserve_rule: str
    kv_budget_bytes: int
    """memory - weights - reserve (negative when the weights alone do not fit)."""
    fits: bool
    """Whether `batch` requests of `ctx` tokens fit in the KV budget."""
    max_concurrency: int
    """Requests of `ctx` tokens the budget holds at once."""
    max_context: int | None
    """Longest context each of `batch` requests can have; None when windows cap every layer (no limit)."""


def default_reserve(memory_bytes: int) -> tuple[int, str]:
    reserve = memory_bytes - memory_bytes * DEFAULT_UTILIZATION_PERCENT // 100
    return reserve, f"{100 - DEFAULT_UTILIZATION_PERCENT}% of the card, as vLLM's default gpu_memory_utilization 0.92"


def request_bytes(engine: Engine, spec: ArchSpec, ctx: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1) -> int:
    """One request's cache on the most loaded GPU."""
    return engine.estimate(spec, ctx=ctx, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp).kv_cache_bytes_per_gpu


def max_context(
    engine: Engine, spec: ArchSpec, kv_dtype: KvDtype, *, batch: int, budget: int, tp: int = 1, pp: int = 1
) -> int | None:
    """Largest ctx with batch x request_bytes(ctx) <= budget (bytes grow monotonically with ctx)."""
    if batch * request_bytes(engine, spec, MAX_SEARCH_CONTEXT, kv_dtype, tp, pp) <= budget:
        return None
    low, high = 0, MAX_SEARCH_CONTEXT  # invariant: low fits (0 tokens: trivially), high does not
    while high - low > 1:
        mid = (low + high) // 2
        if batch * request_bytes(engine, spec, mid, kv_dtype, tp, pp) <= budget:
            low = mid
        else:
            high = mid
    return low


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
    reserve_bytes: int,
    reserve_rule: str,
    tp: int = 1,
    pp: int = 1,
) -> GpuFit:
    """The fit on one GPU of a tp x pp deployment: the weights split evenly over the GPUs (embeddings and
    norms are in truth replicated or on one stage, a small error), the cache of the most loaded rank."""
    gpus = tp * pp
    weights_per_gpu = -(-weights_bytes // gpus)
    if gpus > 1:
        weights_source = f"{weights_source}; 1/{gpus} of {weights_bytes:,} B per GPU"
    budget = memory_bytes - weights_per_gpu - reserve_bytes
    per_request = request_bytes(engine, spec, ctx, kv_dtype, tp, pp)
    usable = max(budget, 0)
    return GpuFit(
        name=gpu_name,
        memory_bytes=memory_bytes,
        weights_bytes=weights_per_gpu,
        weights_source=weights_source,
        weights_estimated=weights_estimated,
        reserve_bytes=reserve_bytes,
        reserve_rule=reserve_rule,
        kv_budget_bytes=budget,
        fits=budget >= 0 and batch * per_request <= budget,
        max_concurrency=usable // per_request if per_request else 0,
        max_context=max_context(engine, spec, kv_dtype, batch=batch, budget=usable, tp=tp, pp=pp),
    )
