"""What would make a scenario fit, or give it headroom: one change at a time, each with its resulting figures,
and the cheapest combination of them that fits, when no single change that fits is as cheap (in GPU memory).

Pure: the caller passes `rerun`, which sizes the same scenario with some options changed (the sizing
pipeline, `kvsize.api`), and the facts the candidates need. Each suggestion's `change` is flags a user can
paste onto the same command line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from kvsize.fit import GpuFit, Suggestion
from kvsize.sizing import KvEstimate

HEADROOM_SHARE = 0.8
"""A scenario whose KV takes more than this share of the KV budget gets advice even though it fits."""
TP_STEPS = (2, 4, 8)  # one node's worth of tensor parallelism
WIDE_DTYPES = ("fp32", "fp16", "bf16")
WIDE_WEIGHTS = ("fp32", "float32", "fp16", "float16", "bf16", "bfloat16")
CTX_STEP = 1024  # a suggested shorter context is rounded down to whole k
LARGER_CARD_TRIES = 3
COMBINATION_REFITS = 8
"""Most combinations sized for one scenario (each a full sizing, like a single change): the cheapest first, so
the first that fits is the one offered. With the single changes (at most 1 + 3 + 2 + 1 + 3 sizings) a
scenario's advice costs at most 18 sizings."""


class AdviceFacts(msgspec.Struct, frozen=True):
    """What the candidates depend on, beside the scenario itself."""

    num_attention_heads: int | None
    kv_heads: tuple[int, ...]
    """num_kv_heads of every attention layer group."""
    model_dtype: str
    weights_given: bool
    """--weights-mem was given: a weights precision change cannot be computed."""
    larger_cards: tuple[tuple[str, str, int], ...] = ()
    """(profile id, words, memory bytes) of larger cards of the same vendor and class, smallest first."""
    engine_named: bool = False
    """Several engines are sized: a shorter context, one engine's limit, says whose it is."""
    min_context: int = 1
    """The shortest --ctx the other options accept (prompt + output, the longest workload row, the shared
    prefix): a shorter one is bad input when pasted."""


Rerun = Callable[[Mapping[str, Any]], tuple[KvEstimate, GpuFit] | None]
"""Size the scenario again with these option changes; None when the engine cannot serve that case."""


def needs_advice(scenario: KvEstimate, gpu: GpuFit) -> bool:
    if not gpu.fits:
        return True
    return gpu.kv_budget_bytes > 0 and scenario.kv_cache_bytes_per_gpu > HEADROOM_SHARE * gpu.kv_budget_bytes


def _served(gpu: GpuFit) -> int:
    return min(gpu.max_concurrency, gpu.concurrency_cap) if gpu.concurrency_cap is not None else gpu.max_concurrency


def _held(gpu: GpuFit) -> int:
    """Requests the KV budget holds, before the engine's cap."""
    return gpu.max_concurrency if gpu.max_concurrency_by_memory is None else gpu.max_concurrency_by_memory


def helps(after: GpuFit, before: GpuFit) -> bool:
    """The change makes the scenario fit, runs more requests at once, or holds more in memory (headroom)."""
    return (after.fits and not before.fits) or _served(after) > _served(before) or _held(after) > _held(before)


FLAGS = {"kv_dtype": "--kv-dtype", "tp": "--tp", "weights_dtype": "--weights-dtype", "ctx": "--ctx", "gpu": "--gpu"}
"""The options a suggestion changes and the flag that pastes each."""


def change_options(change: str) -> dict[str, Any]:
    """The options a suggestion's `change` stands for: `--tp 2` -> {"tp": 2}, `--kv-dtype fp8 --tp 2` -> both
    (the inverse of its flags)."""
    words = change.split()
    keys = {v: k for k, v in FLAGS.items()}
    return {keys[f]: int(v) if keys[f] in ("tp", "ctx") else v for f, v in zip(words[::2], words[1::2], strict=True)}


def is_combination(suggestion: Suggestion) -> bool:
    return len(suggestion.change.split()) > 2


def sized(change: str, why: str, rerun: Rerun) -> Suggestion | None:
    """The figures pasting `change` gives (None: the engine cannot serve it, or the flags are bad input)."""
    outcome = rerun(change_options(change))
    return None if outcome is None else _suggestion(change, why, outcome)


def _suggestion(change: str, why: str, outcome: tuple[KvEstimate, GpuFit]) -> Suggestion:
    est, fit = outcome
    return Suggestion(
        change=change,
        fits=fit.fits,
        max_concurrency=_served(fit),
        max_concurrency_by_memory=_held(fit),
        concurrency_cap=fit.concurrency_cap,
        cap_binds=fit.cap_binds,
        kv_budget_bytes=fit.kv_budget_bytes,
        kv_cache_bytes_per_gpu=est.kv_cache_bytes_per_gpu,
        why=why,
    )


def judged_everywhere(
    own: tuple[Suggestion, ...], others: Sequence[Suggestion], rerun: Rerun
) -> tuple[Suggestion, ...]:
    """`own` plus, sized for this scenario, every change in `others` it lacks (another engine's advice: with
    --engine all one pasted flag changes every engine, so each is judged on it, helpful or not)."""
    have = {s.change for s in own}
    found = list(own)
    for other in others:
        if other.change in have:
            continue
        have.add(other.change)
        mine = sized(other.change, other.why, rerun)
        if mine is not None:
            found.append(mine)
    return tuple(sorted(found, key=_change_order))


def _change_order(suggestion: Suggestion) -> tuple[bool, int, int, str]:
    """Single changes first, in the order of FLAGS; of two contexts the longer (the smaller change) first, of two
    tp the smaller; then combinations."""
    flag, value = suggestion.change.split(" ", 1)
    rank = list(FLAGS.values()).index(flag)
    number = int(value) if value.isdigit() else 0
    return is_combination(suggestion), rank, -number if flag == FLAGS["ctx"] else number, value


def next_tp(tp: int, facts: AdviceFacts) -> int | None:
    """The next tensor-parallel size that divides the query heads and splits or replicates every KV head count
    evenly (vLLM's and SGLang's condition)."""
    for candidate in TP_STEPS:
        if candidate <= tp:
            continue
        if facts.num_attention_heads and facts.num_attention_heads % candidate:
            continue
        if all(h % candidate == 0 or candidate % h == 0 for h in facts.kv_heads if h):
            return candidate
    return None


def suggest(scenario: KvEstimate, gpu: GpuFit, facts: AdviceFacts, rerun: Rerun) -> tuple[Suggestion, ...]:
    """fp8 KV, the next tp, quantized weights, a shorter context, a larger card: those that change anything
    (one that does not fit is still listed, with fits False: the report says "not enough alone"); then, for a
    scenario that does not fit, the cheapest combination that fits, when it is cheaper than them (_combination)."""
    found: list[Suggestion] = []
    memo: dict[tuple[tuple[str, Any], ...], tuple[KvEstimate, GpuFit] | None] = {}

    def again(changes: Mapping[str, Any]) -> tuple[KvEstimate, GpuFit] | None:
        key = tuple(sorted(changes.items()))
        if key not in memo:
            memo[key] = rerun(changes)
        return memo[key]

    def could_load(weights_per_gpu: float, memory: int) -> bool:
        """The weights alone must fit the card: a change that cannot pass this is not worth a sizing."""
        return weights_per_gpu < memory

    def attempt(change: str, options: Mapping[str, Any], why: str) -> Suggestion | None:
        outcome = again(options)
        if outcome is None or not helps(outcome[1], gpu):
            return None
        found.append(_suggestion(change, why, outcome))
        return found[-1]

    # A context the engine refuses (past its maximum for the model) is helped by a shorter context alone.
    memory_changes = gpu.context_limit is None or not gpu.context_limit.refuses
    if memory_changes and scenario.kv_dtype.value in WIDE_DTYPES:
        attempt("--kv-dtype fp8", {"kv_dtype": "fp8"}, "fp8 KV cache: 1 byte per element")
    # The smallest larger tp that fits; if none does, the largest that helps.
    tp, best_tp = (next_tp(scenario.tp, facts) if memory_changes else None), None
    while tp is not None:
        if not could_load(gpu.weights_bytes * scenario.tp / tp, gpu.memory_bytes):
            tp = next_tp(tp, facts)
            continue
        outcome = again({"tp": tp})
        if outcome is not None and helps(outcome[1], gpu):
            best_tp = tp
            if outcome[1].fits:
                break
        tp = next_tp(tp, facts)
    if best_tp is not None:
        attempt(f"--tp {best_tp}", {"tp": best_tp}, f"weights and KV heads split over {best_tp} GPUs per replica")
    if memory_changes and not facts.weights_given and facts.model_dtype.lower() in WIDE_WEIGHTS:
        # From 16 bits per weight: fp8 halves the weights, int4 quarters them (at best; scales add a little).
        fp8 = None
        if could_load(gpu.weights_bytes / 2, gpu.memory_bytes):
            fp8 = attempt("--weights-dtype fp8", {"weights_dtype": "fp8"}, "an fp8 checkpoint: 1 byte per weight")
        if (fp8 is None or not fp8.fits) and could_load(gpu.weights_bytes / 4, gpu.memory_bytes):
            attempt("--weights-dtype int4", {"weights_dtype": "int4"}, "an int4 (AWQ/GPTQ) checkpoint")
    shorter = gpu.max_context or 0
    whole_k = shorter // CTX_STEP * CTX_STEP
    ctx = whole_k if whole_k >= max(facts.min_context, 1) else shorter  # whole k unless that cuts the requests
    if facts.min_context <= ctx < scenario.ctx and ctx > 0:
        attempt(
            f"--ctx {ctx}",
            {"ctx": ctx},
            f"the longest context {scenario.batch} request{'s' if scenario.batch > 1 else ''} can have"
            + (f" on {scenario.engine}" if facts.engine_named else "")
            + (", in whole k" if ctx == whole_k else ""),
        )
    # The smallest larger card of the same vendor that fits, starting from the first with room for what this
    # card lacks; a few tries at most (each is a full sizing). If none fits, the largest one.
    short = max(scenario.kv_cache_bytes_per_gpu - gpu.kv_budget_bytes, 0)
    cards = [c for c in facts.larger_cards if c[2] - gpu.memory_bytes >= short] or list(facts.larger_cards[-1:])
    cards = [c for c in cards if could_load(gpu.weights_bytes, c[2]) and memory_changes]
    for n, (card, words, _) in enumerate(cards[:LARGER_CARD_TRIES]):
        outcome = again({"gpu": card})
        if outcome is not None and (outcome[1].fits or n == min(len(cards), LARGER_CARD_TRIES) - 1):
            attempt(f"--gpu {card}", {"gpu": card}, f"a larger card of the same vendor: {words}")
            break
    if not gpu.fits and memory_changes:
        combined = _combination(scenario, gpu, facts, found, again)
        if combined is not None:
            found.append(combined)
    return tuple(found)


class _Change(msgspec.Struct, frozen=True):
    """One candidate part of a combination: its flags, options and words, and what it costs."""

    flags: str
    options: dict[str, Any]
    why: str
    hardware: float = 1.0
    """GPU memory per replica after the change, in multiples of today's (--tp 2: 2; a 141 GB card for 80: 1.76)."""
    loss: int = 0
    """What the change gives up besides hardware: 1 for fp8 (KV or weights), 2 for int4 weights."""
    weights_scale: float = 1.0
    """The weights per GPU after the change, as a share of today's (at best: quantization scales add a little)."""
    memory_bytes: int | None = None
    """The card's memory after the change (a larger card)."""


def _cost(changes: Sequence[_Change]) -> tuple[float, int, int]:
    """Cheapest first: the least hardware, then the fewest changes, then the least precision given up."""
    return math.prod(c.hardware for c in changes), len(changes), sum(c.loss for c in changes)


def _candidates(scenario: KvEstimate, gpu: GpuFit, facts: AdviceFacts) -> tuple[list[_Change], list[_Change]]:
    """(precision changes, hardware changes) a combination is made of: fp8 KV, fp8 or int4 weights; each next tp,
    the larger cards a single change would try. A shorter context is no part of one: it changes the question."""
    precision: list[_Change] = []
    if scenario.kv_dtype.value in WIDE_DTYPES:
        precision.append(_Change("--kv-dtype fp8", {"kv_dtype": "fp8"}, "fp8 KV cache", loss=1))
    if not facts.weights_given and facts.model_dtype.lower() in WIDE_WEIGHTS:
        bits = 32 if "32" in facts.model_dtype else 16
        for dtype, width, loss in (("fp8", 8, 1), ("int4", 4, 2)):
            option = {"weights_dtype": dtype}
            precision.append(_Change(f"--weights-dtype {dtype}", option, f"{dtype} weights", 1.0, loss, width / bits))
    hardware: list[_Change] = []
    tp = next_tp(scenario.tp, facts)
    while tp is not None:
        hardware.append(_Change(f"--tp {tp}", {"tp": tp}, f"tp {tp}", tp / scenario.tp, 0, scenario.tp / tp))
        tp = next_tp(tp, facts)
    for card, words, memory in facts.larger_cards[:LARGER_CARD_TRIES]:
        share = memory / gpu.memory_bytes
        hardware.append(_Change(f"--gpu {card}", {"gpu": card}, words.split(",")[0], share, memory_bytes=memory))
    return precision, hardware


def _combination(
    scenario: KvEstimate,
    gpu: GpuFit,
    facts: AdviceFacts,
    singles: Sequence[Suggestion],
    again: Callable[[Mapping[str, Any]], tuple[KvEstimate, GpuFit] | None],
) -> Suggestion | None:
    """The cheapest combination that fits (_cost), when it is cheaper than every single change that fits the
    same context: fp8 KV with fp8 or int4 weights, or one or both of them with one hardware change (more GPUs or
    a larger card, never both). Each is sized for real, cheapest first, at most COMBINATION_REFITS; one whose
    weights alone exceed the card is not worth a sizing."""
    precision, hardware = _candidates(scenario, gpu, facts)
    single = {c.flags: c for c in (*precision, *hardware)}
    bound = min((_cost([single[s.change]]) for s in singles if s.fits and s.change in single), default=None)

    def loads(combo: Sequence[_Change]) -> bool:
        weights = gpu.weights_bytes * math.prod(c.weights_scale for c in combo)
        memory = next((c.memory_bytes for c in combo if c.memory_bytes is not None), gpu.memory_bytes)
        return weights < memory

    combos: list[list[_Change]] = []
    for n in (1, 2):
        for chosen in itertools.combinations(precision, n):
            if len({c.flags.split()[0] for c in chosen}) == n:  # one KV dtype, one weights dtype at most
                combos += [[*chosen, h] for h in hardware] + ([list(chosen)] if n == 2 else [])
    combos = sorted((c for c in combos if (bound is None or _cost(c) < bound) and loads(c)), key=_cost)
    for combo in combos[:COMBINATION_REFITS]:
        outcome = again({k: v for c in combo for k, v in c.options.items()})
        if outcome is not None and outcome[1].fits:
            ordered = sorted(combo, key=lambda c: list(FLAGS).index(next(iter(c.options))))
            return _suggestion(" ".join(c.flags for c in ordered), " + ".join(c.why for c in ordered), outcome)
    return None
