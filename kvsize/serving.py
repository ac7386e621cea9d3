"""Serving-time memory: shared prefixes, workloads over a request's life, eviction budgets, offload tiers,
allocation. Pure arithmetic over an engine's rules; every figure carries a label:

- exact: follows from the engine's allocation rule with no assumption (bytes of a shared prefix, residency
  of a request of P + O tokens, the hypergeometric expectation of freed blocks);
- bound: a roofline or a time average that real engines cannot beat or only approach (Little's-law
  throughput, restore and recompute times, steady-state concurrency: preemption happens whenever the
  instantaneous sum exceeds the pool);
- lossy: the model's output changes (a KV token budget evicts tokens a full cache would keep).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from math import ceil
from typing import Literal

import msgspec

from kvsize.dtypes import KvDtype
from kvsize.engines.base import PER_TOKEN_KINDS, Engine, group_layers
from kvsize.errors import UsageError
from kvsize.record import Record
from kvsize.spec import ArchSpec

Label = Literal["exact", "bound", "lossy"]
Pattern = Literal["uniform", "clustered", "recent"]
PATTERNS: tuple[Pattern, ...] = ("uniform", "clustered", "recent")
MAX_SIMULATED_TOKENS = 1 << 24
"""Longest cache `kvsize evict` simulates (the clustered pattern; uniform and recent are closed forms)."""
MAX_SIMULATED_RUNS = 1 << 19
"""Kept runs the clustered simulation places in all its trials (a second or two): a --keep close to --tokens
in small blocks needs ever more random runs to cover the last gaps (a coupon collector)."""
MAX_EVICT_BLOCK = 1 << 16
"""Largest block `kvsize evict` evaluates (engines page in 16 to a few thousand tokens)."""
SIMULATION_TRIALS = 64
"""Seeded trials averaged for the simulated patterns."""


# --- 1. shared prefixes ---------------------------------------------------------------------------------


class PrefixShare(Record, frozen=True, kw_only=True):
    """What a prefix common to every request costs once instead of once per request."""

    prefix_len: int
    """Tokens every request begins with (--prefix-len)."""
    hit_tokens: int
    """Tokens of the prefix an engine can match: min(prefix_len, prompt - 1), since vLLM
    (kv_cache_manager.py get_computed_blocks) and SGLang (schedule_batch.py _compute_max_prefix_len) always
    recompute the prompt's last token."""
    enabled: bool
    """Whether the engine shares prefixes in this deployment (prefix caching / radix cache / block reuse)."""
    shared_tokens_by_kind: dict[str, int]
    """Token slots per layer each layer kind stores once (block-aligned where the engine pages)."""
    shared_bytes: int
    """Bytes of one copy of the shared prefix, all ranks: stored once instead of once per request."""
    shared_bytes_per_gpu: int
    """The same on the most loaded GPU (the pipeline stage holding most of it)."""
    label: Label = "exact"
    rule: str


def prefix_share(
    engine: Engine,
    spec: ArchSpec,
    *,
    prefix_len: int,
    prompt_len: int,
    ctx: int,
    kv_dtype: KvDtype,
    tp: int = 1,
    pp: int = 1,
    enabled: bool | None = None,
) -> PrefixShare:
    """Bytes of a `prefix_len`-token prefix stored once, per the engine's sharing rule (Engine.prefix_shared_tokens).

    `enabled` None means the engine's own default (vLLM and SGLang: on; TensorRT-LLM: block reuse on;
    llama.cpp slots and transformers: they never share)."""
    if prefix_len < 0:
        raise UsageError(f"--prefix-len must not be negative, got {prefix_len}")
    on = engine.prefix_caching_enabled(spec) if enabled is None else enabled and engine.shares_prefixes
    hit = min(prefix_len, ctx, max(prompt_len - 1, 0) if engine.recomputes_last_prompt_token else prompt_len)
    block = engine.block_size(spec, kv_dtype, tp) or 1
    by_kind: dict[str, int] = {}
    stage_bytes: list[int] = []
    stages = engine.stages(spec.num_layers, pp)
    for stage in stages:
        layers = spec.layers if len(stages) == 1 else [spec.layers[i] for i in stage]
        total = 0
        for layer, count in group_layers(spec, layers):
            a = layer.attention
            if a is None or a.kind not in PER_TOKEN_KINDS:
                continue  # states are per request; cross-attention holds the request's own encoder tokens
            per_token, _, _ = engine.layer_request_bytes(spec, layer, ctx, kv_dtype, tp)
            tokens = engine.prefix_shared_tokens(spec, a, hit, ctx, block) if on and hit else 0
            by_kind[a.kind.value] = tokens
            total += count * per_token * tokens
        stage_bytes.append(total)
    return PrefixShare(
        prefix_len=prefix_len,
        hit_tokens=hit if on else 0,
        enabled=on,
        shared_tokens_by_kind=by_kind,
        shared_bytes=tp * sum(stage_bytes),
        shared_bytes_per_gpu=max(stage_bytes, default=0),
        rule=(
            engine.prefix_sharing_rule()
            if on or not engine.shares_prefixes
            else f"{engine.title}: prefix caching turned off; every request stores the prefix"
        ),
    )


def shared_total(per_request: int, batch: int, shared: int) -> int:
    """`batch` requests that each need `per_request` bytes when `shared` of them are one common copy."""
    if batch <= 0:
        return 0
    return batch * (per_request - shared) + shared


def shared_concurrency(budget: int, per_request: int, shared: int) -> int:
    """Requests that fit in `budget` when one copy of `shared` bytes serves them all."""
    if budget < per_request or per_request <= 0:
        return 0
    if per_request == shared:  # nothing per request: any number (capped by the caller's scheduler)
        return budget // per_request
    return (budget - shared) // (per_request - shared)


def prefill_flops(
    *, active_parameters: int, num_layers: int, attention_width: int, tokens: int, cached: int = 0
) -> int:
    """FLOPs of a prefill of `tokens` whose first `cached` tokens hit the cache: 2 per parameter per new token,
    and causal attention 2 x layers x width x (tokens^2 - cached^2) (QK^T and PV over the new rows)."""
    new = tokens - cached
    return 2 * active_parameters * new + 2 * num_layers * attention_width * (tokens * tokens - cached * cached)


# --- 2. workloads ---------------------------------------------------------------------------------------


class Request(msgspec.Struct, frozen=True):
    prompt: int
    output: int


def life_sum(size: Callable[[int], int], prompt: int, output: int, granularity: int) -> int:
    """Sum over the `output` decode steps of the bytes a request holds: at step i (1..O) it holds the engine's
    allocation for P + i tokens (the token written that step included). Exact.

    `size(t)` is the engine's bytes for t tokens. With `granularity` g > 1 the allocation is constant on each
    aligned run of g tokens ((k g, (k+1) g]: every paged rule is cdiv(., g) x g), so it is evaluated once per
    run. With g = 1 it is evaluated at every token."""
    if output <= 0:
        return 0
    lo, hi = prompt + 1, prompt + output
    total = 0
    if granularity <= 1:
        return sum(size(t) for t in range(lo, hi + 1))
    t = lo
    while t <= hi:
        run_end = min(-(-t // granularity) * granularity, hi)  # last token of t's aligned run
        total += (run_end - t + 1) * size(t)
        t = run_end + 1
    return total


def percentile(values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile: the smallest value with at least q% of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, ceil(Fraction(q) * len(ordered) / 100))
    return ordered[min(rank, len(ordered)) - 1]


class WorkloadFigures(Record, frozen=True, kw_only=True):
    """A request mix over its life on one GPU (the most loaded rank)."""

    requests: int
    """Samples (or percentile rows) read."""
    mean_resident_bytes: int
    """Time-weighted mean bytes a request holds while it decodes: sum over requests and decode steps of the
    allocation / total decode steps (each request weighted by its output length, as Little's law counts
    occupancy). Exact for the samples, block rounding included."""
    steady_state_concurrency: float
    """KV budget / mean resident bytes (shared prefix once): requests the pool holds on average; bursts
    above it preempt. A bound, labelled steady state."""
    p50_resident_bytes: int
    """Median of the requests' peak allocation (P + O tokens, blocks rounded)."""
    p99_resident_bytes: int
    concurrency_p99: int
    """Requests of the p99 peak size that fit at once."""
    token_state_share_paged: float
    """Share of the memory paged allocation holds that is real token state (no rounding, windows as the
    model defines them), time-weighted."""
    token_state_share_contiguous: float
    """The same when every request reserves the whole --ctx up front (pre-paged allocators, transformers'
    StaticCache)."""
    allocation: Literal["paged", "contiguous"]
    labels: dict[str, Label]


LifeSum = Callable[[int, int], int]
"""(prompt, output) -> sum over the request's decode steps of the bytes it holds (see `life_sum`)."""


def workload_figures(
    requests: Sequence[Request],
    *,
    size: Callable[[int], int],
    life: LifeSum,
    token_state_life: LifeSum,
    ctx: int,
    budget: int,
    shared: int = 0,
    allocation: Literal["paged", "contiguous"] = "paged",
) -> WorkloadFigures:
    """Residency and concurrency of a request mix on the most loaded GPU. `size(t)`: the engine's bytes for a
    request of t tokens; `life` / `token_state_life`: those bytes / the bytes its tokens really need (the
    formula, no rounding) summed over a request's decode steps; `shared`: a common prefix stored once."""
    if not requests:
        raise UsageError("the workload holds no requests", hint="Give at least one (prompt, output) row.")
    for r in requests:
        if r.prompt < 1 or r.output < 1:
            raise UsageError(f"workload row ({r.prompt}, {r.output}): prompt and output must be positive")
        if r.prompt + r.output > ctx:
            raise UsageError(
                f"workload row ({r.prompt}, {r.output}) exceeds the context {ctx}",
                hint="Raise --ctx to the longest prompt + output.",
            )
    held = real = steps = 0
    for r in requests:
        held += life(r.prompt, r.output)
        real += token_state_life(r.prompt, r.output)
        steps += r.output
    reserved_one = size(ctx)
    mean = reserved_one if allocation == "contiguous" else -(-held // steps)
    peaks = [reserved_one if allocation == "contiguous" else size(r.prompt + r.output) for r in requests]
    p50, p99 = percentile(peaks, 50), percentile(peaks, 99)
    shared = min(shared, mean, p99)
    return WorkloadFigures(
        requests=len(requests),
        mean_resident_bytes=mean,
        steady_state_concurrency=max(budget - shared, 0) / max(mean - shared, 1),
        p50_resident_bytes=p50,
        p99_resident_bytes=p99,
        concurrency_p99=shared_concurrency(budget, p99, shared),
        token_state_share_paged=real / held if held else 0.0,
        token_state_share_contiguous=real / (reserved_one * steps) if reserved_one else 0.0,
        allocation=allocation,
        labels={
            "mean_resident_bytes": "exact",
            "steady_state_concurrency": "bound",
            "p50_resident_bytes": "exact",
            "p99_resident_bytes": "exact",
            "concurrency_p99": "exact",
            "token_state_share_paged": "exact",
            "token_state_share_contiguous": "exact",
        },
    )


class Throughput(Record, frozen=True, kw_only=True):
    """Little's law on the roofline: requests in flight / time each spends = requests per second."""

    concurrency: float
    """Requests in flight (the steady-state concurrency)."""
    decode_step_seconds: float
    """(weights + the resident KV) / memory bandwidth: one step at that concurrency."""
    request_seconds: float
    """prefill roofline of one prompt + output x decode step."""
    requests_per_s: float
    output_tokens_per_s: float
    label: Label = "bound"


def littles_law(
    *, concurrency: float, weights_bytes: int, kv_bytes: float, bandwidth: int, output: int, prefill_seconds: float
) -> Throughput:
    step = (weights_bytes + kv_bytes) / bandwidth
    latency = prefill_seconds + output * step
    rate = concurrency / latency if latency > 0 else 0.0
    return Throughput(
        concurrency=concurrency,
        decode_step_seconds=step,
        request_seconds=latency,
        requests_per_s=rate,
        output_tokens_per_s=rate * output,
    )


# --- 3. eviction ----------------------------------------------------------------------------------------


class EvictionResult(Record, frozen=True, kw_only=True):
    """What evicting tokens from a paged cache returns: a block frees only when all its tokens are gone."""

    tokens: int
    keep: int
    block_size: int
    pattern: Pattern
    blocks: int
    blocks_freed: float
    """Expected blocks whose every token is evicted (uniform: exact expectation; others: mean of the seeded
    trials)."""
    bytes_freed_fraction: float
    """blocks_freed / blocks: the memory a paged engine can hand back."""
    tokens_evicted_fraction: float
    """(tokens - keep) / tokens: what the policy drops."""
    method: str
    """How blocks_freed was computed: exact (hypergeometric) or simulation (seed, trials)."""
    seed: int | None = None
    trials: int | None = None
    label: Label = "lossy"


def expected_freed_uniform(tokens: int, evicted: int, block: int) -> Fraction:
    """E[blocks wholly evicted] when `evicted` of `tokens` are chosen uniformly without replacement:
    sum over blocks of P(all b tokens chosen) = C(T - b, E - b) / C(T, E) (hypergeometric). Exact: the ratio is
    computed as the product over i < b of (E - i) / (T - i), which equals it and avoids the huge binomials."""
    if not 0 <= evicted <= tokens:
        raise UsageError(f"cannot evict {evicted} of {tokens} tokens")
    full, tail = divmod(tokens, block)
    total = Fraction(0)
    for b, n in ((block, full), (tail, 1 if tail else 0)):
        if not n or b > evicted:
            continue  # a block larger than the evicted set never empties
        p = Fraction(1)
        for i in range(b):
            p *= Fraction(evicted - i, tokens - i)
        total += n * p
    return total


def freed_uniform(tokens: int, evicted: int, block: int) -> float:
    """`expected_freed_uniform` in floating point, in at most 2 x MAX_EVICT_BLOCK steps: the same product over
    i < b of (E - i) / (T - i), each factor correctly rounded (relative error about b x 2^-53), stopped once it
    underflows to 0. The exact Fraction's numerator grows by b x log2(T) bits, minutes for b = 65,536."""
    if not 0 <= evicted <= tokens:
        raise UsageError(f"cannot evict {evicted} of {tokens} tokens")
    full, tail = divmod(tokens, block)
    total = 0.0
    for b, n in ((block, full), (tail, 1 if tail else 0)):
        if not n or b > evicted:
            continue  # a block larger than the evicted set never empties
        p = 1.0
        for i in range(b):
            p *= (evicted - i) / (tokens - i)
            if p == 0.0:
                break
        total += n * p
    return total


def _too_many_runs(tokens: int, keep: int, block: int) -> UsageError:
    return UsageError(
        f"--pattern clustered: keeping {keep:,} of {tokens:,} tokens in blocks of {block} needs more than "
        f"{MAX_SIMULATED_RUNS:,} simulated runs",
        hint="Keep a smaller share, use larger blocks or fewer tokens, or --pattern uniform (exact) or recent.",
    )


def _clustered(tokens: int, keep: int, block: int, rng: random.Random, runs_left: int) -> tuple[int, int]:
    """(blocks freed, runs placed) by one trial: the kept tokens come in runs of one block's length placed at
    random (heavy hitters cluster around salient spans, as H2O/SnapKV observe), the last run cut to `keep`.
    Returns (-1, runs) once more than `runs_left` runs would be needed."""
    covered = bytearray(tokens)
    touched = bytearray(-(-tokens // block))  # a run is at most one block long: it touches at most two blocks
    need = keep
    runs = 0
    while need > 0:
        if runs == runs_left:
            return -1, runs
        runs += 1
        start = rng.randrange(tokens)
        end = min(start + block, tokens, start + need)
        new = covered.count(0, start, end)
        if new:
            covered[start:end] = b"\x01" * (end - start)
            touched[start // block] = touched[(end - 1) // block] = 1
            need -= new
    return len(touched) - touched.count(1), runs


def _simulated(tokens: int, keep: int, block: int, seed: int) -> tuple[float, int]:
    """(mean blocks freed, trials run) of the clustered pattern: SIMULATION_TRIALS seeded trials, fewer when
    MAX_SIMULATED_RUNS runs out after the first (a long cache varies little from trial to trial)."""
    blocks = -(-tokens // block)
    if keep in (0, tokens):
        return float(blocks if keep == 0 else 0), SIMULATION_TRIALS
    if -(-keep // block) > MAX_SIMULATED_RUNS:
        raise _too_many_runs(tokens, keep, block)
    rng = random.Random(seed)
    results: list[int] = []
    left = MAX_SIMULATED_RUNS
    while len(results) < SIMULATION_TRIALS:
        freed, runs = _clustered(tokens, keep, block, rng, left)
        if freed < 0:
            if not results:
                raise _too_many_runs(tokens, keep, block)
            break
        results.append(freed)
        left -= runs
    return sum(results) / len(results), len(results)


def evict(tokens: int, keep: int, block_size: int, pattern: Pattern = "uniform", seed: int = 0) -> EvictionResult:
    """Blocks a paged cache of `tokens` tokens frees when a policy keeps `keep` of them. Bounded work whatever
    the arguments: uniform and recent are closed forms, clustered a simulation capped at MAX_SIMULATED_TOKENS
    tokens and MAX_SIMULATED_RUNS runs (UsageError past either)."""
    for value, what in ((tokens, "--tokens"), (keep, "--keep"), (block_size, "--block-size"), (seed, "--seed")):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{what} must be a whole number")
    if tokens < 1 or block_size < 1:
        raise UsageError("--tokens and --block-size must be positive")
    if block_size > MAX_EVICT_BLOCK:
        raise UsageError(f"--block-size {block_size} is larger than kvsize evaluates ({MAX_EVICT_BLOCK} tokens)")
    if not 0 <= keep <= tokens:
        raise UsageError(f"--keep {keep} must lie between 0 and --tokens {tokens}")
    if pattern not in PATTERNS:
        raise UsageError(f"unknown pattern '{pattern}'", hint=f"Choose one of: {', '.join(PATTERNS)}.")
    blocks = -(-tokens // block_size)
    seed_used: int | None = None
    trials: int | None = None
    if pattern == "uniform":
        freed = freed_uniform(tokens, tokens - keep, block_size)
        method = "exact: hypergeometric expectation sum_b C(T-b, E-b) / C(T, E) over blocks"
    elif pattern == "recent":  # the kept tail touches every block from the one holding token T - keep on
        freed = float(blocks if keep == 0 else (tokens - keep) // block_size)
        seed_used, trials = seed, 1
        method = "exact: the last --keep tokens are kept"
    else:
        if tokens > MAX_SIMULATED_TOKENS:
            raise UsageError(f"--tokens {tokens} is too many to simulate (at most {MAX_SIMULATED_TOKENS})")
        freed, trials = _simulated(tokens, keep, block_size, seed)
        seed_used = seed
        method = f"simulation: mean of {trials} seeded trials (seed {seed}); kept tokens in block-long runs"
    return EvictionResult(
        tokens=tokens,
        keep=keep,
        block_size=block_size,
        pattern=pattern,
        blocks=blocks,
        blocks_freed=freed,
        bytes_freed_fraction=freed / blocks,
        tokens_evicted_fraction=(tokens - keep) / tokens,
        method=method,
        seed=seed_used,
        trials=trials,
    )


# --- 4. offload tiers -----------------------------------------------------------------------------------


class Tier(Record, frozen=True, kw_only=True):
    tier: Literal["cpu", "disk"]
    bytes: int
    tokens: int
    """Tokens of KV the tier holds (all layers and ranks, one replica)."""
    link_bytes_per_s: int
    """Bandwidth a restore from this tier runs at (the slowest link on its way to the GPU)."""
    restore_seconds_per_request: float
    """One request's cache back onto its GPU (each GPU restores its own share over its own link)."""
    break_even_context: int | None = None
    """Shortest context beyond which restoring from this tier beats recomputing the prefill (roofline);
    1: restoring always wins; None: never, or no FLOP/s figure for the card."""
    label: Label = "bound"


def tiers(
    *,
    cpu_bytes: int | None,
    disk_bytes: int | None,
    link_bytes_per_s: int,
    disk_bytes_per_s: int | None,
    bytes_per_token: int,
    request_bytes_per_gpu: int,
) -> list[Tier]:
    """CPU DRAM behind the GPU link; disk behind the CPU (a restore runs at min(disk, link))."""
    out = []
    for name, size, speed in (
        ("cpu", cpu_bytes, link_bytes_per_s),
        ("disk", disk_bytes, min(disk_bytes_per_s or link_bytes_per_s, link_bytes_per_s)),
    ):
        if not size:
            continue
        out.append(
            Tier(
                tier=name,  # type: ignore[arg-type]
                bytes=size,
                tokens=size // bytes_per_token if bytes_per_token else 0,
                link_bytes_per_s=speed,
                restore_seconds_per_request=request_bytes_per_gpu / speed,
            )
        )
    return out


def break_even_context(
    *,
    bytes_per_token_per_gpu: int,
    link_bytes_per_s: int,
    active_parameters: int,
    num_layers: int,
    attention_width: int,
    flops_per_s: float,
) -> int | None:
    """Shortest context whose restore over the link is faster than recomputing its prefill.

    restore(n) = bytes_per_token x n / link; recompute(n) = (2 A n + 2 L w n^2) / F. restore < recompute
    iff n > (bytes_per_token / link - 2 A / F) x F / (2 L w); 1 when restoring wins at any length, None when
    it never does."""
    per_token_restore = bytes_per_token_per_gpu / link_bytes_per_s
    per_token_linear = 2 * active_parameters / flops_per_s
    if per_token_restore < per_token_linear:
        return 1
    quadratic = 2 * num_layers * attention_width / flops_per_s
    if quadratic <= 0:
        return None  # no attention term: recompute stays linear and cheaper
    return int((per_token_restore - per_token_linear) / quadratic) + 1


# --- settings -------------------------------------------------------------------------------------------


class ServingSettings(msgspec.Struct, frozen=True):
    """The serving-time options of a sizing run (all off by default)."""

    prefix_len: int | None = None
    enable_prefix_caching: bool | None = None
    """None: the engine's default."""
    prompt_len: int | None = None
    output_len: int | None = None
    workload: tuple[Request, ...] | None = None
    kv_budget_tokens: int | None = None
    allocation: Literal["paged", "contiguous"] = "paged"
    disk_bytes: int | None = None
    disk_bytes_per_s: int | None = None
    cpu_bytes_per_s: int | None = None
    """Bandwidth of the CPU tier itself when slower than the link (rarely: DRAM outruns PCIe)."""

    def requests(self) -> tuple[Request, ...] | None:
        """The request mix: the workload file, else one request of --prompt-len + --output-len."""
        if self.workload:
            return self.workload
        if self.prompt_len is not None and self.output_len is not None:
            return (Request(self.prompt_len, self.output_len),)
        return None


NO_SERVING = ServingSettings()


def affine_life_sum(size: Callable[[int], int], prompt: int, output: int, breakpoints: Iterable[int]) -> int:
    """`life_sum` at token granularity without evaluating every token: between breakpoints (windows, a token
    budget) an unrounded allocation is affine in t, so each segment sums as an arithmetic series
    n (f(a) + f(b)) / 2. A segment whose midpoint breaks the line is summed token by token instead."""
    lo, hi = prompt + 1, prompt + output
    if hi < lo:
        return 0
    cuts = sorted({lo, hi + 1, *(p for p in breakpoints if lo < p <= hi)})
    total = 0
    for a, nxt in zip(cuts, cuts[1:], strict=False):
        b = nxt - 1
        fa, fb = size(a), size(b)
        m = (a + b) // 2
        if b - a <= 1 or size(m) * (b - a) == fa * (b - m) + fb * (m - a):
            total += (b - a + 1) * (fa + fb) // 2
        else:
            total += sum(size(t) for t in range(a, b + 1))
    return total
