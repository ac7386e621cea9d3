"""The maximum-context search (kvsize/fit.py `max_context`): exact, and fast on 100,000-layer configs.

The search probes by interpolation (issue 9: it re-estimated the whole model ~41 times per answer, 10-60 s
under llama.cpp, SGLang and TRT-LLM for 100,000 layers). Its answer must stay exactly the bisection's: the
largest ctx whose `batch x request bytes` fits the budget. The reference below is the plain bisection the
search replaced, run on every registry model under every engine.
"""

from __future__ import annotations

import random
import time
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.errors import KvsizeError
from kvsize.fit import MAX_SEARCH_CONTEXT, grown_request_bytes, max_context, request_bytes
from kvsize.registry import load_registry_config, registry_entries
from kvsize.spec import ArchSpec

ENGINES = ["vllm", "sglang", "trtllm", "llamacpp", "hf", "formula"]
SPECS: dict[str, ArchSpec] = {
    entry.hub_id: parse_config(load_registry_config(entry), source=entry.hub_id)
    for entry in registry_entries().values()
}


def bisection(engine: Any, spec: ArchSpec, kv: KvDtype, *, batch: int, budget: int, tp: int = 1, pp: int = 1) -> Any:
    """The reference: the search as it was before interpolation (over the most a request holds on its way to
    each length, which only the hf engine's DeepSeek-V4 layers make differ from its bytes there)."""
    if batch * grown_request_bytes(engine, spec, MAX_SEARCH_CONTEXT, kv, tp, pp) <= budget:
        return None
    low, high = 0, MAX_SEARCH_CONTEXT
    while high - low > 1:
        mid = (low + high) // 2
        if batch * grown_request_bytes(engine, spec, mid, kv, tp, pp) <= budget:
            low = mid
        else:
            high = mid
    return low


def _both(engine: Any, spec: ArchSpec, kv: KvDtype, **kw: int) -> tuple[Any, Any] | None:
    try:
        expected = bisection(engine, spec, kv, **kw)
    except KvsizeError:  # the engine does not serve this model or dtype
        return None
    return expected, max_context(engine, spec, kv, **kw)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_same_answer_as_bisection_on_every_registry_model(engine_name: str) -> None:
    engine = get_engine(engine_name)
    rng = random.Random(engine_name)  # fixed draws: the same cases on every run
    compared = 0
    for hub_id, spec in SPECS.items():
        for kv in (KvDtype.BF16, KvDtype.FP8_E4M3):
            batch = rng.choice([1, 3, 64])
            budget = rng.choice([10**6, 3 * 2**30, 70 * 2**30, rng.randrange(1, 2**42)])
            pair = _both(engine, spec, kv, batch=batch, budget=budget)
            if pair is None:
                continue
            assert pair[0] == pair[1], (hub_id, engine_name, kv, batch, budget)
            compared += 1
    assert compared >= len(SPECS) // 2  # most models are served in at least one dtype


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    hub_id=st.sampled_from(sorted(SPECS)),
    engine_name=st.sampled_from(ENGINES),
    batch=st.integers(1, 300),
    budget=st.integers(0, 2**44),
    pp=st.sampled_from([1, 2]),
)
def test_same_answer_as_bisection_property(hub_id: str, engine_name: str, batch: int, budget: int, pp: int) -> None:
    pair = _both(get_engine(engine_name), SPECS[hub_id], KvDtype.BF16, batch=batch, budget=budget, pp=pp)
    if pair is not None:
        assert pair[0] == pair[1]


def test_few_estimates_per_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvsize import fit

    calls = 0
    real = fit.request_bytes

    def counting(*args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(fit, "request_bytes", counting)
    spec = SPECS["meta-llama/Llama-3.1-8B"]
    for engine_name in ENGINES:
        max_context(get_engine(engine_name), spec, KvDtype.BF16, batch=8, budget=60 * 2**30)
    assert calls <= 6 * 16  # bisection over [0, 2**40] takes 41 per engine


@pytest.fixture(scope="module")
def hundred_thousand_layers() -> ArchSpec:
    """Llama-3.1-8B with 100,000 copies of its layer (renumbered copies: parse_config's own cost is not the point)."""
    spec = SPECS["meta-llama/Llama-3.1-8B"]
    layers = tuple(spec.layers[0].renumbered(i) for i in range(100_000))
    big = msgspec.structs.replace(spec, layers=layers)
    big.layer_groups()  # computed once per spec, outside the search
    return big


@pytest.mark.parametrize("engine_name", ENGINES)
def test_hundred_thousand_layers_answer_quickly(engine_name: str, hundred_thousand_layers: ArchSpec) -> None:
    started = time.monotonic()
    max_context(get_engine(engine_name), hundred_thousand_layers, KvDtype.BF16, batch=1, budget=70 * 2**30)
    assert time.monotonic() - started < 8  # llama.cpp, SGLang and TRT-LLM took 10-45 s on a loaded 2-core machine


def test_deepseek_v4_hf_max_context_is_the_first_length_that_does_not_fit() -> None:
    """transformers' DeepSeek-V4 cache shrinks at every m-th token (the compressor's buffer drains into one entry),
    so its bytes are not monotone in the length. A request passes every length on its way, so the longest context
    that fits is the last one before the first length that does not: found here by walking every length."""
    engine, spec = get_engine("hf"), SPECS["nvidia/DeepSeek-V4-Flash-NVFP4"]
    sizes = [request_bytes(engine, spec, n, KvDtype.BF16) for n in range(1, 1400)]
    assert any(later < earlier for earlier, later in zip(sizes, sizes[1:], strict=False))  # the case: it falls
    # budgets at and just below the bytes of lengths across the first nine HCA periods (ratios 4 and 128), so
    # that some first crossings fall on a peak just before a drain and some just after
    budgets = sorted({b for i in range(0, 1000, 19) for b in (sizes[i], sizes[i] - 1)} | {max(sizes[:1000])})
    for budget in budgets:
        first_over = next(n for n, size in enumerate(sizes, start=1) if size > budget)
        assert max_context(engine, spec, KvDtype.BF16, batch=1, budget=budget) == first_over - 1, budget
