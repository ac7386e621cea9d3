"""Tests that kill the mutants benchmarks/mutants.py found alive (docs/testing.md lists them), each value worked
by hand from the engine's source or the rule's definition, cited beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tiny_configs import TINY, llama_8b_budget, registry_config

from kvsize.engines.context import Device, UsageContext
from kvsize.engines.sglang import tiered_reserve_mib
from kvsize.engines.vllm_scheduler import batch_defaults, scheduler_settings
from kvsize.errors import UsageError
from kvsize.spec import ArchSpec
from kvsize.units import _shown, parse_bandwidth, parse_revision

GIB = 1024**3


def test_vllm_160_gib_tier_starts_at_exactly_160_gib() -> None:
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults@0.28.0: `if device_memory >= 160 * GiB_bytes:`
    # 16384 tokens / 1024 sequences; else `>= 70 * GiB_bytes` (not A100): API server 8192 / 1024.
    # 159.5 GiB is below the tier (a 159 GiB threshold would take it in); 160 GiB exactly is in it.
    below = Device(total_memory_bytes=159 * GIB + GIB // 2, name="NVIDIA H200")
    at = Device(total_memory_bytes=160 * GIB, name="NVIDIA H200")
    assert batch_defaults("0.28.0", below, UsageContext.API_SERVER) == (8192, 1024)
    assert batch_defaults("0.28.0", at, UsageContext.API_SERVER) == (16384, 1024)
    # 0.27.1 has no 160 GiB tier (VllmRules.tier_160gib False): the 70 GiB tier's 8192 / 1024.
    assert batch_defaults("0.27.1", at, UsageContext.API_SERVER) == (8192, 1024)


def test_vllm_throughput_mode_keeps_a_given_max_num_seqs() -> None:
    # vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args@0.19.0: throughput mode doubles
    # only the defaults; a --max-num-seqs the user gave (64) is kept as is (x1, not x0 or x2).
    settings = scheduler_settings(
        "0.19.0",
        Device(total_memory_bytes=80 * GIB, name="NVIDIA H100"),
        max_model_len=4096,
        throughput_mode=True,
        max_num_seqs=64,
    )
    assert settings.max_num_seqs == 64


def test_long_numbers_are_shown_by_their_digit_count() -> None:
    # units._shown: |value| >= 10**30 is shown as "about N digits", N = int(bit_length x log10 2) + 1.
    # 10**30: bit_length 100, 100 x 0.30103 = 30.1 -> 30 + 1 = 31 digits (a 10**31 cut would print it whole).
    assert _shown(10**30) == "(a number of about 31 digits)"
    # 10**40: bit_length 133, 133 x 0.30103 = 40.04 -> 41.
    assert _shown(10**40) == "(a number of about 41 digits)"


def test_bandwidth_in_gb_per_second() -> None:
    # units.parse_bandwidth: GB/s x 10**9 bytes per second, above 0 and at most MAX_LINK_GB_S (100,000).
    assert parse_bandwidth("64") == 64 * 10**9
    assert parse_bandwidth(1e-9) == 1  # 1e-9 GB/s = 1 B/s: the smallest rate that is not 0 once truncated
    for bad in ("0", "100001", 1e-10):  # 0; over the cap; 0.1 B/s truncates to 0
        with pytest.raises(UsageError):
            parse_bandwidth(bad)


def test_revision_text() -> None:
    # units.parse_revision: branch names under git check-ref-format; surrogates U+D800..U+DFFF refused (both ends).
    assert parse_revision("main") == "main"
    for bad in ("a\udfff", "a\ud800", 123):
        with pytest.raises(UsageError):
            parse_revision(bad)  # type: ignore[arg-type]


def test_sglang_tiered_reserve_below_90_gib() -> None:
    # sglang server_args.py ServerArgs.__post_init__@0.4.9.post2: `elif gpu_mem < 90 * 1024:` reserve
    # (9.5 + tp/2) GiB; 89.5 GiB at tp 1: (9.5 + 0.5) x 1024 = 10240 MiB.
    assert tiered_reserve_mib(89.5 * 1024, 1) == 10240


# --- survivors of the 2026-12-01 run (benchmarks/mutants.py --per-module 10 --seed 1) --------------------------


@pytest.mark.parametrize(
    ("name", "sms"),
    [
        # NVIDIA's specifications: RTX 6000 Ada 142 SMs (18,176 CUDA cores / 128), RTX 3090 82 (10,496 / 128),
        # L40 / L40S 142, L4 58, A10 72, RTX A6000 84 (10,752 / 128).
        ("NVIDIA RTX 6000 Ada Generation", 142),
        ("NVIDIA GeForce RTX 3090", 82),
        ("NVIDIA L40S", 142),
        ("NVIDIA L4", 58),
        ("NVIDIA A10", 72),
        ("NVIDIA RTX A6000", 84),
        # RTX PRO 6000 Blackwell: 24,064 CUDA cores / 128 = 188 SMs, by its marketing name or kvsize's profile id.
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 188),
        ("rtx-pro-6000", 188),
        (None, 132),  # no name: an H100's 132
    ],
)
def test_sm_counts_per_card(name: str | None, sms: int) -> None:
    from kvsize.budget import sm_count

    assert sm_count(name) == sms


def test_release_numbers_ignore_trailing_zeros() -> None:
    """releases._release_of: 1 and 1.0 are one release, so typing either for a newest of 1.0.0 gives no note."""
    from kvsize.engines.releases import Era, ReleaseTable

    table = ReleaseTable("x", "X", (Era("0.9.0", "0.9.0", "old"), Era("1.0.0", "1.0.0", "new")))
    assert table.resolve("1").note is None and table.resolve("1.0").note is None
    assert table.resolve("1.0.1").note is not None  # a later patch than the newest read
    # An era read up to a vendor build of its first release is named by that release alone.
    assert Era("0.8.5", "0.8.5+vendor", None).span() == "0.8.5"


def test_named_rule_sets_resolve_exactly() -> None:
    """releases.resolve_named (transformers' cache layouts): the name typed, exactly; another is refused naming
    the choices, the typed text cut at 40 characters."""
    from kvsize.engines.releases import resolve_named

    assert resolve_named("hf", ("5.15+", "<5.15"), "<5.15").rules == "<5.15"
    assert resolve_named("hf", ("5.15+", "<5.15"), None).rules == "5.15+"
    with pytest.raises(UsageError) as raised:
        resolve_named("hf", ("5.15+", "<5.15"), "x" * 100)
    assert f"'{'x' * 40}'" in str(raised.value) and "x" * 41 not in str(raised.value)
    assert "5.15+, <5.15" in (raised.value.hint or "")


def test_sglang_reserve_floor_only_above_60_gib() -> None:
    """arg_groups/memory_hook.py handle_gpu_memory_settings (0.5.23): `if gpu_mem > 60 * 1024: reserved =
    max(reserved, 10 * 1024)`. With chunk 2048, decode max_bs 8 and no prefill graph the reserve is
    512 + 2048 x 1.5 + 1/8 x 1024 + 8 x 2 = 3,728 MiB. At exactly 61,440 MiB (60 GiB) no floor:
    round((61,440 - 3,728) / 61,440, 3) = 0.939; one MiB more and the floor binds: round(51,201 / 61,441, 3) = 0.833."""
    from kvsize.engines.sglang import default_mem_fraction_static

    args: dict[str, Any] = {"chunked_prefill_size": 2048, "cuda_graph_max_bs": 8, "prefill_graph": False}
    assert default_mem_fraction_static(61_440, **args) == 0.939
    assert default_mem_fraction_static(61_441, **args) == 0.833


# --- survivors of the 2026-12-01 rerun (docs/testing.md, issue 24) -------------------------------------------


def _registry_spec(hub_id: str) -> ArchSpec:
    from kvsize.config import parse_config
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config(dict(load_registry_config(entry)), source=hub_id)


def _tiny_llama(layers: int = 2, **extra: Any) -> ArchSpec:
    from kvsize.config import parse_config

    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "vocab_size": 1000,
        "num_hidden_layers": layers,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
        **extra,
    }
    return parse_config(config, source="tiny-llama")


def test_sglang_0_5_4_mamba_states_come_out_of_the_kv_budget() -> None:
    """model_runner.py handle_max_mamba_cache@0.5.4 returns `total_rest_memory - mamba_state_memory` and
    profile_max_num_token divides what is left by the cell. Qwen3-Next-80B (config): 48 layers, every 4th full
    attention -> 12 full, 36 linear (qwen3_next.py layers_block_type). Per request (mamba_utils.py
    Mamba2StateShape.create, mamba2_cache_params): conv_dim = 128 x 32 + 2 x 16 x 128 = 8,192; conv (8,192, 3) bf16
    = 49,152 B; temporal (32, 128, 128) fp32 (mamba_ssm_dtype float32) = 2,097,152 B; x 36 layers = 77,266,944 B.
    rest 20 GiB = 21,474,836,480 B: states get 20 x 0.9 / 1.9 GiB = 10,172,290,964 B -> // 77,266,944 = 131 slots
    = 10,121,969,664 B; KV keeps 11,352,866,816 B. Cell: 2 kv heads x 256 x 12 layers x 2 (K, V) x 2 B = 24,576 B
    -> 461,949 tokens (page 1). Adding the states instead would give 1,285,677."""
    from kvsize.dtypes import KvDtype
    from kvsize.engines.sglang import SglangEngine

    pool = SglangEngine("0.5.4").pool(
        _registry_spec("Qwen/Qwen3-Next-80B-A3B-Thinking"), available_bytes=20 * GIB, kv_dtype=KvDtype.BF16
    )
    assert pool.max_mamba_cache_size == 131
    assert pool.max_total_num_tokens == 461_949


def test_sglang_hybrid_swa_pool_bytes_are_both_pools() -> None:
    """HybridSWAPoolConfigurator (model_runner_kv_cache_mixin.py@0.5.10): full_tokens = total / (F x n_full + 0.8 x
    S x n_swa), swa_tokens = int(0.8 x full_tokens); SWAKVPool holds a full and a SWA MHATokenToKVPool, each buffer
    `size + page_size` rows (memory_pool.py). gpt-oss-20b (config): 24 layers alternating sliding / full -> 12 + 12,
    8 kv heads x (64 + 64) x 2 B = 2,048 B per token per layer in both kinds. 1 GiB: cell 2,048 x 12 + 0.8 x 2,048
    x 12 = 44,236.8 -> full 24,272, swa int(19,417.6) = 19,417. Bytes: (24,272 + 1) x 24,576 + (19,417 + 1) x
    24,576 = 43,691 x 24,576 = 1,073,750,016 (the two pools added, not the SWA pool taken off)."""
    from kvsize.dtypes import KvDtype
    from kvsize.engines.sglang import SglangEngine

    pool = SglangEngine("0.5.23").pool(_registry_spec("openai/gpt-oss-20b"), available_bytes=GIB, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (24_272, 19_417)
    assert pool.pool_bytes == 1_073_750_016


def test_vllm_profile_peak_forward_dominates_with_many_tokens() -> None:
    """budget.vllm_activation_bytes (vLLM 0.19 profile run, models/llama.py LlamaMLP): the forward holds, per
    token, the residual and the normed input (2 x hidden) plus gate_up's output (2 x intermediate / tp) and
    SiluAndMul's (intermediate / tp), in the model dtype. Tiny Llama: hidden 1,024, intermediate 4,096, vocab 1,000,
    bf16; 1,000 tokens, 1 sequence, no card name (132 SMs).
    Sampler: 1 x 1,000 x (2 + 12) + 132 x 1,000 x 4 + 1,000 x 1,024 x 2 = 14,000 + 528,000 + 2,048,000 = 2,590,000.
    Forward, tp 1: 1,000 x (2,048 + 12,288) x 2 = 28,672,000; tp 2: 1,000 x (2,048 + 6,144) x 2 = 16,384,000."""
    from kvsize.budget import vllm_activation_bytes

    spec = _tiny_llama()
    assert vllm_activation_bytes(spec, max_batched_tokens=1000, max_num_seqs=1) == 28_672_000
    assert vllm_activation_bytes(spec, max_batched_tokens=1000, max_num_seqs=1, tp=2) == 16_384_000


def test_sglang_budget_has_no_activation_or_graph_term_unless_stated() -> None:
    """SGLang's KV budget is mem_fraction_static x free memory before loading - weights
    (KVCacheConfigurator._profile_available_bytes); the activation and CUDA-graph memory live in the 1 -
    mem_fraction_static reserve (memory_hook.py handle_gpu_memory_settings), so kvsize subtracts them only when
    given. 80 GiB card, no device profile: visible 85,899,345,920 - 494,927,872 = 85,404,418,048; x 0.5 =
    42,702,209,024; - 16 GiB weights - the RoPE table (4,096 positions x head 128 x 4 B: float32 on CUDA,
    layers/rotary_embedding.py) 2,097,152 = 25,520,242,688. Stated 1 GiB activation and 1 GiB graphs: 2 GiB
    less."""
    from kvsize.budget import BudgetSettings, kv_budget

    spec = _tiny_llama()
    plain = kv_budget(
        "sglang", "0.5.23", spec, memory_bytes=80 * GIB, weights_bytes=16 * GIB, settings=BudgetSettings(gpu_util=0.5)
    )
    assert (plain.activation_bytes, plain.cuda_graph_bytes, plain.non_torch_bytes) == (0, 0, 0)
    assert plain.rope_table_bytes == 4096 * 128 * 4 == 2_097_152
    assert plain.kv_budget_bytes == 42_702_209_024 - 16 * GIB - 2_097_152 == 25_520_242_688
    stated = kv_budget(
        "sglang",
        "0.5.23",
        spec,
        memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        settings=BudgetSettings(gpu_util=0.5, activation_bytes=GIB, cuda_graph_bytes=GIB),
    )
    assert (stated.activation_bytes, stated.cuda_graph_bytes) == (GIB, GIB)
    assert stated.kv_budget_bytes == 25_520_242_688 - 2 * GIB


def test_formula_budget_reports_zero_activation_and_graphs_unless_stated() -> None:
    """budget.kv_budget, formula / hf / llama.cpp: card - weights - 8% reserve (vLLM's default 0.92), nothing for
    activations or CUDA graphs unless stated. 80 GiB: 85,899,345,920 x 92 // 100 = 79,027,398,246 usable; - 16 GiB
    = 61,847,529,062. A stated 1 GiB of CUDA graphs is reported as such and taken off: 60,773,787,238."""
    from kvsize.budget import BudgetSettings, kv_budget

    spec = _tiny_llama()
    plain = kv_budget("formula", None, spec, memory_bytes=80 * GIB, weights_bytes=16 * GIB)
    assert (plain.activation_bytes, plain.non_torch_bytes, plain.cuda_graph_bytes) == (0, 0, 0)
    assert plain.kv_budget_bytes == 61_847_529_062
    graphs = kv_budget(
        "formula",
        None,
        spec,
        memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        settings=BudgetSettings(cuda_graph_bytes=GIB),
    )
    assert graphs.cuda_graph_bytes == GIB
    assert graphs.kv_budget_bytes == 61_847_529_062 - GIB


# --- survivors of the engines/vllm.py and serving.py sample (--per-module 8 --seed 2, issue 24) ----------------


def test_vllm_layer_that_reads_anothers_kv_allocates_nothing() -> None:
    """vLLM gpu_model_runner.py get_kv_cache_spec@0.33.0: an Attention with kv_sharing_target_layer_name gets no
    KVCacheSpec ("doesn't allocate KV cache for the layer"). A 6-layer Llama shape with num_kv_shared_layers 2:
    layers 4 and 5 read layer 3's cache. Own layers: 8 kv heads x (128 + 128) x 2 B = 4,096 B per token; ctx
    1,000 = cdiv(1,000, 16) = 63 blocks = 1,008 slots. Two requests: 4 layers x 4,096 x 1,008 x 2 = 33,030,144 B."""
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine
    from kvsize.spec import AttentionKind

    spec = _tiny_llama(6, num_kv_shared_layers=2)
    shared, own = spec.layers[5].attention, spec.layers[3].attention
    assert shared is not None and shared.kind is AttentionKind.SHARED and own is not None
    engine = VllmEngine("0.33.0")
    assert engine.tokens_allocated(shared, 1000) == 0
    assert engine.tokens_allocated(own, 1000) == 1008
    assert engine.estimate(spec, ctx=1000, batch=2, kv_dtype=KvDtype.BF16).kv_cache_bytes == 33_030_144


def test_vllm_kv_less_model_has_no_groups_and_no_blocks() -> None:
    """vLLM kv_cache_planning.py get_kv_cache_groups@0.33.0: an attention-free model (empty kv_cache_spec) has no
    KV-cache groups, so a request holds no blocks. Nemotron-NAS with every attention a no-op block: layout (16, 0
    B per block, 0 blocks, 0 groups)."""
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine

    block = {"attention": {"no_op": True, "n_heads_in_group": None}, "ffn": {"ffn_mult": 1.0}}
    config = {
        "model_type": "nemotron-nas",
        "architectures": ["DeciLMForCausalLM"],
        "hidden_size": 1024,
        "vocab_size": 1000,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
        "block_configs": [block, block],
    }
    spec = parse_config(config, source="kv-less-nas")
    lay = VllmEngine("0.33.0").layout(spec, spec.layers, 1000, KvDtype.BF16, 1)
    assert (lay.block_size, lay.bytes_per_block, lay.blocks_per_request, lay.groups) == (16, 0, 0, 0)


def test_break_even_context_counts_two_flops_per_attention_multiply_add() -> None:
    """serving.break_even_context: restore(n) = B n / link, recompute(n) = (2 A n + 2 L w n^2) / F; restore wins
    past n = (B / link - 2 A / F) x F / (2 L w). Llama-3.1-8B shape: 131,072 B per token, A = 8e9, L = 32,
    w = 4,096; a 1 GB/s link, F = 1e15. B / link = 131.072 us, 2 A / F = 16 us, 2 L w / F = 0.262144 ns:
    115.072e-6 / 0.262144e-9 = 438,964.84 -> 438,965 (a 3 L w term would give 292,644)."""
    from kvsize.serving import break_even_context

    n = break_even_context(
        bytes_per_token_per_gpu=131_072,
        link_bytes_per_s=10**9,
        active_parameters=8 * 10**9,
        num_layers=32,
        attention_width=4096,
        flops_per_s=1e15,
    )
    assert n == 438_965


# --- survivors of the fit.py sample (--per-module 8 --seed 2, issue 24) ---------------------------------------

LLAMA_8B_PER_TOKEN = 32 * 8 * (128 + 128) * 2  # 131,072 B: the formula engine holds exactly ctx tokens per request


def test_max_context_none_when_the_longest_searched_context_fits_exactly() -> None:
    """fit.max_context: None ("no limit within the search") when batch x bytes(MAX_SEARCH_CONTEXT) <= budget,
    the bound included. Formula engine, Llama-3.1-8B: 2**40 tokens x 131,072 B = 2**57 B. A budget of exactly 2**57
    holds it; one byte less holds floor((2**57 - 1) / 131,072) = 2**40 - 1 tokens."""
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.fit import MAX_SEARCH_CONTEXT, max_context

    assert MAX_SEARCH_CONTEXT == 2**40
    spec, formula = _registry_spec("meta-llama/Llama-3.1-8B"), get_engine("formula")
    assert max_context(formula, spec, KvDtype.BF16, batch=1, budget=2**57) is None
    assert max_context(formula, spec, KvDtype.BF16, batch=1, budget=2**57 - 1) == 2**40 - 1


@pytest.mark.parametrize(
    ("answer", "estimates"),
    [
        # 0.6 x 2**40 = 659,706,976,665: the first interpolated probe lands on it and leaves a bracket of 0.4 x
        # 2**40, under half the 2**40 it had, so no bisection step follows: the next probe, answer + 1, closes
        # it. 3 estimates: 2**40, the answer, the answer + 1.
        (659_706_976_665, 3),
        # 0.4 x 2**40 = 439,804,651,110: the probe lands on it but leaves 0.6 x 2**40, more than half: a bisection
        # step follows ((answer + 2**40) // 2, too long), then answer + 1. 4 estimates.
        (439_804_651_110, 4),
    ],
)
def test_max_context_bisects_only_after_a_probe_that_fails_to_halve(
    monkeypatch: pytest.MonkeyPatch, answer: int, estimates: int
) -> None:
    """fit.max_context's documented policy: probes by interpolation (bytes linear in ctx: the first probe is
    low + (target - low_bytes) x width // (high_bytes - low_bytes) = the answer), a bisection step only after a
    probe that fails to halve the bracket (2 x (high - low) > width). Formula engine, Llama-3.1-8B, batch 1,
    budget = answer x 131,072 B."""
    from kvsize import fit
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    calls = 0
    real = fit.request_bytes

    def counting(*args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(fit, "request_bytes", counting)
    spec = _registry_spec("meta-llama/Llama-3.1-8B")
    budget = answer * LLAMA_8B_PER_TOKEN
    assert fit.max_context(get_engine("formula"), spec, KvDtype.BF16, batch=1, budget=budget) == answer
    assert calls == estimates


def test_sglang_pool_is_empty_when_the_weights_do_not_load() -> None:
    """fit.plan_fit: a KV budget below zero (the weights do not load) leaves no pool: 0 tokens, 0 concurrency
    (pool_figures with the budget floored at 0). SGLang's fallback for a stage with no KV cell (pure SSM:
    --max-total-tokens or the context length, 4,096 here, pool_configurator.py) is for a server that started.
    Mamba-Codestral-7B (pure Mamba2) with max_position_embeddings 4,096; 8 GiB card, 16 GiB of weights."""
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines.sglang import SglangEngine
    from kvsize.fit import plan_fit
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("mistralai/Mamba-Codestral-7B-v0.1")
    assert entry is not None
    spec = parse_config({**dict(load_registry_config(entry)), "max_position_embeddings": 4096}, source="mamba2")
    gpu = plan_fit(
        SglangEngine("0.5.23"),
        spec,
        ctx=1024,
        batch=1,
        kv_dtype=KvDtype.BF16,
        gpu_name="test card",
        memory_bytes=8 * GIB,
        weights_bytes=16 * GIB,
        weights_source="given",
        weights_estimated=False,
    )
    assert gpu.kv_budget_bytes < 0 and not gpu.fits
    assert (gpu.kv_pool_tokens, gpu.concurrency, gpu.max_concurrency) == (0, 0.0, 0)


# --- survivors of the all-module run at --per-module 8 --seed 2 (issue 24) ------------------------------------


def test_vllm_cpu_defaults_scale_with_the_world_size() -> None:
    """vllm/engine/arg_utils.py get_batch_defaults@0.33.0, CPU platform: tokens {LLM_CLASS: 4096, API: 2048} and
    sequences {LLM_CLASS: 256, API: 128}, each x world_size. World size 2: LLM class (8192, 512), API (4096, 256)."""
    from kvsize.engines.vllm_scheduler import batch_defaults

    cpu = Device(total_memory_bytes=64 * GIB, platform="cpu")
    assert batch_defaults("0.33.0", cpu, UsageContext.LLM_CLASS, 2) == (8192, 512)
    assert batch_defaults("0.33.0", cpu, UsageContext.API_SERVER, 2) == (4096, 256)


def test_vllm_default_seqs_capped_by_the_tokens_from_0_10_1() -> None:
    """arg_utils.py _set_default_args_v1: 0.10.1 sets `max_num_seqs = min(default_max_num_seqs[usage],
    max_num_batched_tokens)`, 0.10.0 the default alone. H100 80 GiB, API server: 8192 tokens / 1024 sequences;
    with --max-num-batched-tokens 512, 0.10.0 keeps 1024 sequences and 0.10.1 takes min(1024, 512) = 512."""
    h100 = Device(total_memory_bytes=80 * GIB, name="NVIDIA H100 80GB HBM3")
    old = scheduler_settings("0.10.0", h100, max_model_len=4096, max_num_batched_tokens=512)
    new = scheduler_settings("0.10.1", h100, max_model_len=4096, max_num_batched_tokens=512)
    assert (old.max_num_seqs, new.max_num_seqs) == (1024, 512)


def test_unreadable_engine_version_is_cut_at_40_characters() -> None:
    """releases._parse: the message quotes at most 40 characters of what was typed."""
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    with pytest.raises(UsageError) as raised:
        VLLM_RELEASES.resolve("y" * 100)
    assert f"'{'y' * 40}'" in str(raised.value)


def test_gpu_counts_up_to_65536() -> None:
    """units.MAX_GPUS = 1 << 16 = 65,536: the largest --tp / --pp / GPU count accepted."""
    from kvsize.units import MAX_GPUS, parse_count

    assert parse_count("65536", "tensor-parallel size", maximum=MAX_GPUS) == 65_536
    with pytest.raises(UsageError, match="from 1 to 65,536"):
        parse_count("65537", "tensor-parallel size", maximum=MAX_GPUS)


def test_a_size_without_a_unit_is_bytes() -> None:
    """units.parse_size: '1000000' (no unit) is 1,000,000 B; '1000000B' the same; 'K' is 1,024."""
    from kvsize.units import parse_size

    assert parse_size("1000000") == parse_size("1000000B") == 1_000_000
    assert parse_size("3K") == 3 * 1024


def test_long_texts_are_cut_at_60_characters() -> None:
    """units._shown: a text over 60 characters is shown as its first 60 and '...'; 60 exactly in full."""
    assert _shown("z" * 61) == f"'{'z' * 60}...'"
    assert _shown("z" * 60) == f"'{'z' * 60}'"


def test_bandwidth_below_one_byte_per_second_is_refused() -> None:
    """units.parse_bandwidth: int(GB/s x 10**9) must be at least 1 B/s; 5e-10 GB/s is 0.5 B/s -> 0: refused."""
    with pytest.raises(UsageError):
        parse_bandwidth(5e-10)


def test_sglang_0_4_7_fraction_over_180_000_mib_only() -> None:
    """sglang server_args.py ServerArgs.__post_init__@0.4.7: `if gpu_mem > 180 * 1000 and is_cuda(): 0.79`, `elif
    gpu_mem > 96 * 1024: min(f + 48 x 1024 x (1 - f) / gpu_mem, (gpu_mem - 18 x 1024) / gpu_mem)` with f = 0.88
    (over 81,920 MiB). At 180,000 MiB exactly: min(0.88 + 49,152 x 0.12 / 180,000, 161,568 / 180,000) =
    min(0.912768, 0.8976) = 0.8976; at 180,001: 0.79."""
    from kvsize.engines.sglang import SglangEngine, default_mem_fraction_static

    rules = SglangEngine("0.4.7").rules
    assert default_mem_fraction_static(180_000, rules=rules) == pytest.approx(0.8976, abs=1e-12)
    assert default_mem_fraction_static(180_001, rules=rules) == 0.79


def test_sglang_reserve_grows_one_gib_per_eight_ranks() -> None:
    """sglang server_args.py _handle_gpu_memory_settings@0.5.10 (memory_hook.py@0.5.23): reserved = 512 +
    1.5 x max(chunk, 2048) + tp x pp / 8 x 1024 + 2 x max_bs MiB. tp 8, chunk 2048, max_bs 8, no prefill graph:
    512 + 3,072 + 1,024 + 16 = 4,624 MiB. On 49,995 MiB (under 60 GiB: no 10 GiB floor): round(45,371 / 49,995, 3)
    = round(0.907511, 3) = 0.908 (4,625 MiB would give 0.907491 -> 0.907)."""
    from kvsize.engines.sglang import default_mem_fraction_static

    fraction = default_mem_fraction_static(
        49_995, tp=8, chunked_prefill_size=2048, cuda_graph_max_bs=8, prefill_graph=False
    )
    assert fraction == 0.908


def test_sglang_hybrid_swa_pools_are_page_aligned() -> None:
    """HybridSWAPoolConfigurator (model_runner_kv_cache_mixin.py@0.5.10): both pools aligned down to the page,
    `align_page_size(x) = x // page_size x page_size`. gpt-oss-20b with --page-size 64 on 1 GiB (cell 44,236.8 as in
    test_sglang_hybrid_swa_pool_bytes_are_both_pools): full int(24,272.7) = 24,272 -> 379 pages = 24,256; swa
    int(24,256 x 0.8) = 19,404 -> 303 pages = 19,392. Bytes: (24,256 + 64) x 24,576 + (19,392 + 64) x 24,576 =
    43,776 x 24,576 = 1,075,838,976."""
    from kvsize.dtypes import KvDtype
    from kvsize.engines.sglang import SglangEngine

    engine = SglangEngine("0.5.23", block_size=64)
    pool = engine.pool(_registry_spec("openai/gpt-oss-20b"), available_bytes=GIB, kv_dtype=KvDtype.BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (24_256, 19_392)
    assert pool.pool_bytes == 1_075_838_976


def test_given_kv_memory_has_no_other_term() -> None:
    """budget.kv_budget with --kv-memory (vLLM --kv-cache-memory-bytes, v1/worker/gpu_worker.py
    determine_available_memory skips the profiling): the KV memory is the bytes given, with no activation,
    non-torch or CUDA-graph term."""
    from kvsize.budget import BudgetSettings, kv_budget

    got = kv_budget(
        "vllm",
        "0.33.0",
        _tiny_llama(),
        memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        settings=BudgetSettings(kv_memory_bytes=10 * GIB),
    )
    assert (got.activation_bytes, got.non_torch_bytes, got.cuda_graph_bytes) == (0, 0, 0)
    assert got.kv_budget_bytes == 10 * GIB


def test_vllm_groups_padded_only_below_one_and_a_half() -> None:
    """vllm/v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size@0.33.0: group size = the fewest
    layers of a type, or the most `if max_num_layers < min_num_layers * 1.5`. A gpt-oss shape with 3 sliding + 2
    full layers (8 kv heads x (128 + 128) x 2 B = 4,096 B per token): 3 < 3 is false, so groups of 2: full 1 group,
    sliding cdiv(3, 2) = 2 groups (one padded), 3 groups. A block spans 2 layers x 16 tokens x 4,096 = 131,072 B;
    ctx 1,000 (inside the 4,096 window): full cdiv(1,000, 16) = 63 blocks, each sliding group cdiv(1,000, 16) + 1 =
    64: 63 + 2 x 64 = 191 blocks per request."""
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine

    config = {
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "vocab_size": 1000,
        "num_hidden_layers": 5,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "sliding_window": 4096,
        "layer_types": ["sliding_attention", "full_attention"] * 2 + ["sliding_attention"],
    }
    spec = parse_config(config, source="gpt-oss-3-2")
    lay = VllmEngine("0.33.0").layout(spec, spec.layers, 1000, KvDtype.BF16, 1)
    assert (lay.block_size, lay.bytes_per_block, lay.blocks_per_request, lay.groups) == (16, 131_072, 191, 3)


def test_vllm_library_refuses_a_block_size_below_one() -> None:
    # Found by the mutation round: the library took block_size=-16 and sized 992 tokens for ctx 1000 (the CLI
    # already refused it); the SGLang and TensorRT-LLM engines refuse a block size below 1 the same way.
    import pytest

    from kvsize.engines import get_engine
    from kvsize.errors import UsageError

    for size in (-16, 0):
        with pytest.raises(UsageError, match="must be positive"):
            get_engine("vllm", block_size=size)


# --- round 3 (--seed 3: config, capacity_file, weights, params, engines/formula, engine_log) ---------------------


def test_llama4_chunked_layers_from_the_interval_alone() -> None:
    # transformers Llama4TextConfig: no_rope_layers = [int((i + 1) % no_rope_layer_interval != 0) ...]; RoPE layers
    # (1) attend in chunks, NoPE layers (0) globally. 8 layers, interval 4: layers 3 and 7 are NoPE -> full
    # (an (i + 0) twin would make 0 and 4 full instead).
    from kvsize.config import parse_config

    raw = {
        "model_type": "llama4_text",
        "num_hidden_layers": 8,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "attention_chunk_size": 64,
        "no_rope_layer_interval": 4,
    }
    assert [layer.kind for layer in parse_config(raw).layers] == ["chunked"] * 3 + ["full"] + ["chunked"] * 3 + ["full"]


def test_capacity_summary_counts_one_request_in_the_singular() -> None:
    from kvsize.capacity_file import Requirement, _summary

    assert _summary(Requirement(ctx=8192), 1) == "ok: 1 request of 8,192 tokens fit"
    assert _summary(Requirement(ctx=8192), 2) == "ok: 2 requests of 8,192 tokens fit"


@pytest.mark.parametrize("block", [[0, 128], [True, 128], [128, 1 << 40], [128.0, 128]])
def test_fp8_weight_block_size_must_be_two_positive_whole_numbers(block: list[Any]) -> None:
    # weights.py _fp8_format: each of block_n, block_k an int (not a bool), 0 < b <= MAX_QUANT_BLOCK
    from kvsize.errors import ConfigError
    from kvsize.weights import quant_scheme

    with pytest.raises(ConfigError, match="weight_block_size"):
        quant_scheme({"quantization_config": {"quant_method": "fp8", "weight_block_size": block}})


def test_mixtral_experts_are_excluded_under_their_checkpoint_names(tmp_path: Any) -> None:
    # Mixtral keeps its experts in block_sparse_moe.experts.N.w1/w2/w3 (weights.py _moe_names); excluding them by
    # that name keeps them at bf16. Mixtral-8x7B (registry): 46,702,792,704 parameters; attention 32 x 41,943,040
    # = 1,342,177,280 at fp8 per-tensor (1 B + 4 B scale x 4 linears x 32 layers = 512), the rest at 2 B:
    # 1,342,177,280 + 512 + (46,702,792,704 - 1,342,177,280) x 2 = 92,063,408,640 B.
    import json

    from kvsize.resolve import load_model_config
    from kvsize.weights import weights_from_config

    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}
        },
        "ignore": ["lm_head", "re:.*block_sparse_moe.experts.*"],
    }
    raw = {**load_model_config("mistralai/Mixtral-8x7B-v0.1").raw, "quantization_config": quant}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    priced = weights_from_config(load_model_config(str(tmp_path)), model_dtype="bf16")
    assert priced.bytes == 92_063_408_640


def test_a_one_wide_shared_expert_still_has_its_gate() -> None:
    # params.py _moe_block: Qwen2-MoE's shared expert (3 x hidden x width) and its shared_expert_gate
    # Linear(hidden, 1) whenever the width is > 0. From width 1 to 2 each MoE layer grows by 3 x 64 = 192 only
    # (the gate is there in both): 8 layers x 192 = 1,536.
    from kvsize.params import estimate_parameters

    base = {
        "model_type": "qwen2_moe",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "num_hidden_layers": 8,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
    }
    one = estimate_parameters({**base, "shared_expert_intermediate_size": 1}).total
    two = estimate_parameters({**base, "shared_expert_intermediate_size": 2}).total
    assert two - one == 8 * 3 * 64


def test_qwen3_next_full_layers_default_to_every_fourth() -> None:
    # transformers Qwen3NextConfig: full_attention_interval default 4 -> layer_types full where (i + 1) % 4 == 0;
    # params.py _layer_kinds counts the same layers (an interval of 5 would move them).
    from kvsize.params import _Cfg, _layer_kinds

    raw = {"model_type": "qwen3_next", "num_hidden_layers": 8}
    kinds = _layer_kinds(_Cfg(raw), 8, "qwen3_next")
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == [3, 7]


def test_formula_notes_only_deepseek_v4s_compressed_layers() -> None:
    import json
    from pathlib import Path

    import kvsize

    v4 = json.loads(
        (Path(__file__).parent / "data" / "never_silent" / "nvidia--DeepSeek-V4-Flash-NVFP4.json").read_text()
    )
    noted = kvsize.estimate(v4, ctx=4096, engine="formula", kv_dtype="bf16").notes
    assert any(n.startswith("formula: DeepSeek-V4 compressed layers") for n in noted)
    llama = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=4096, engine="formula", kv_dtype="bf16").notes
    assert not any("DeepSeek-V4" in n for n in llama)


@pytest.mark.parametrize(("ctx", "expected"), [(3000, 1000), (4096, 1000), (4596, 500), (6000, 0)])
def test_formula_shares_the_prefix_tokens_still_in_the_window(ctx: int, expected: int) -> None:
    # formula prefix_shared_tokens: a sliding layer keeps the last `window` tokens, so of a 1,000-token prefix it
    # shares max(0, min(hit, ctx) - max(0, ctx - window)): Gemma 2 2B's window 4096 -> all 1,000 while ctx <= 4096
    # (a floor of 1 would drop one), 1,000 - 500 = 500 at 4,596, none at 6,000. Full layers share all 1,000.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.registry import load_registry_config, registry_entries
    from kvsize.serving import prefix_share

    spec = parse_config(load_registry_config(registry_entries()["google/gemma-2-2b"]))
    share = prefix_share(
        get_engine("formula", None), spec, prefix_len=1000, prompt_len=ctx, ctx=ctx, kv_dtype=KvDtype.BF16
    )
    assert share.shared_tokens_by_kind == {"full": 1000, "sliding": expected}


def test_a_shared_prefix_keeps_the_engines_context_refusal() -> None:
    # vLLM refuses a max_model_len above the model's 131,072 (fit.py context_limit, refuses=True). 200,000 tokens of
    # Llama-3.1-8B take 200,000 x 131,072 B = 24.4 GiB, inside an H100's budget: the memory fits, the scenario does
    # not. With a shared prefix the fit is recomputed (serving_plan.py): the refusal must stay.
    import kvsize

    for prefix in (None, 1000):
        fit = (
            kvsize.estimate(
                "meta-llama/Llama-3.1-8B", ctx=200_000, gpu="h100", prefix_len=prefix, prompt_len=4000, output_len=100
            )
            .scenarios[0]
            .gpu
        )
        assert fit is not None and fit.memory_fits and not fit.fits, prefix


def test_vllm_log_keeps_the_utilization_its_arguments_name() -> None:
    # engine_log.py: "non-default args" are what the user passed; a later gpu_memory_utilization= in the engine's
    # config line does not replace them (0.8 stays 0.8, not the 0.9 printed after it).
    from kvsize.engine_log import parse_log

    log = parse_log(
        "INFO vLLM API server version 0.11.0\n"
        "INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'gpu_memory_utilization': 0.8}\n"
        "INFO Initializing a V1 LLM engine (v0.11.0) with config: model='m', gpu_memory_utilization=0.9\n"
    )
    assert log is not None and log.settings["gpu_memory_utilization"] == 0.8


def test_sglang_mla_log_line_reads_tokens_and_latent_size() -> None:
    # SGLang MLA models log one latent pool (model_runner.py): "KV Cache is allocated. #tokens: N, KV size: F GB".
    from kvsize.engine_log import parse_log

    log = parse_log(
        "server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V2-Lite', mem_fraction_static=0.85, tp_size=1)\n"
        "KV Cache is allocated. #tokens: 123456, KV size: 8.05 GB\n"
    )
    assert log is not None and log.engine == "sglang"
    assert log.figures == {"pool_tokens": 123456.0, "kv_size_gb": 8.05}


def test_mamba2_head_dim_defaults_to_64() -> None:
    # transformers Mamba2Config: head_dim default 64 (validate_architecture: hidden_size x expand must equal
    # num_heads x head_dim). 512 x 2 = 1,024 = 16 heads x 64; SSM state (16, 64, state_size 128); conv channels
    # 1,024 + 2 x 1 group x 128 = 1,280. formula (bf16): (1,280 x 3 + 16 x 64 x 128) x 2 B = 269,824 per layer.
    import kvsize
    from kvsize.config import parse_config

    raw = {
        "model_type": "mamba2",
        "hidden_size": 512,
        "num_hidden_layers": 2,
        "state_size": 128,
        "expand": 2,
        "n_groups": 1,
        "conv_kernel": 4,
        "num_heads": 16,
    }
    state = parse_config(raw).layers[0].state
    assert state is not None and state.ssm_shape == (16, 64, 128) and state.conv_channels == 1280
    scenario = kvsize.estimate(raw, ctx=100, engine="formula", kv_dtype="bf16").scenarios[0]
    assert scenario.state_bytes_per_request == 2 * 269_824


def test_cross_attention_at_layer_zero() -> None:
    # config.py _attention_layer_kinds: cross_attention_layers may name layer 0 (0 <= i < n); a list naming a layer
    # outside the stack is refused.
    from kvsize.config import parse_config
    from kvsize.errors import ConfigError

    raw = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4}
    kinds = [layer.kind for layer in parse_config({**raw, "cross_attention_layers": [0, 3]}, encoder_tokens=8).layers]
    assert kinds == ["cross", "full", "full", "cross"]
    with pytest.raises(ConfigError, match="outside 0..3"):
        parse_config({**raw, "cross_attention_layers": [4]}, encoder_tokens=8)


@pytest.mark.parametrize("field", ["window", "kv_lora_rank", "num_query_heads", "index_head_dim", "compress_ratio"])
def test_attention_spec_sizes_of_zero_are_invalid(field: str) -> None:
    # spec.py AttentionSpec.__post_init__: these are counts of at least 1 (a 0-token window would size nothing).
    from kvsize.record import InvalidRecord
    from kvsize.spec import AttentionKind, AttentionSpec

    base: dict[str, Any] = {"kind": AttentionKind.SLIDING, "num_kv_heads": 8, "head_dim": 128, "head_dim_v": 128}
    AttentionSpec(**base, window=1)  # the smallest valid window
    with pytest.raises(InvalidRecord):
        AttentionSpec(**{"window": 16, **base, field: 0})


def test_trtllm_states_larger_than_the_memory_leave_an_empty_pool() -> None:
    # _util.py configure_kv_cache_capacity: max_tokens from the memory left after MambaCacheManager's states, never
    # below 0. Qwen3-Next: 39,518,208 B of state per slot x 2 slots = 79,036,416 B > 50,000,000 B available: 0
    # tokens by the estimator, so no blocks (a negative estimate would give negative blocks), though the free
    # memory bound alone (1 GiB free) would allow some.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines.trtllm import TrtllmEngine
    from kvsize.registry import load_registry_config, registry_entries

    qwen_next = parse_config(load_registry_config(registry_entries()["qwen/qwen3-next-80b-a3b-thinking"]))
    pool = TrtllmEngine("1.2").pool(
        qwen_next, available_bytes=50_000_000, free_bytes=GIB, kv_dtype=KvDtype.BF16, max_batch_size=2
    )
    assert (pool.max_tokens, pool.blocks) == (0, 0)


def test_llamacpp_notes_say_which_cache_layout_the_build_has() -> None:
    # llamacpp.py estimate_notes: builds before per-sequence streams (RULES_2505, llama-cpp-python 0.3.9) share one
    # cache; later ones give each sequence a stream. Before iSWA (2025-05) windowed layers hold every cell.
    import kvsize

    def notes(model: str, version: str) -> list[str]:
        return list(kvsize.estimate(model, ctx=4096, engine="llamacpp", engine_version=version).notes)

    assert any("no per-sequence streams" in n for n in notes("meta-llama/Llama-3.1-8B", "2025-05"))
    assert any("one stream each" in n for n in notes("meta-llama/Llama-3.1-8B", "2026-10"))
    assert any("predates the iSWA cache" in n for n in notes("google/gemma-2-2b", "2025-05"))
    assert not any("predates the iSWA cache" in n for n in notes("meta-llama/Llama-3.1-8B", "2025-05"))


def test_serving_engines_refuse_an_indexer_beside_standard_attention_under_any_name() -> None:
    # engines/base.py check_layout: MiniMax-M3's layout under a model type kvsize has never seen (the guard lets an
    # unknown type through with the --assume-standard-attention switch only; here the spec is built directly).
    import msgspec

    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.engines.base import UnsupportedArchitecture

    raw = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4}
    spec = parse_config(raw)
    keyed = [
        msgspec.structs.replace(layer, attention=msgspec.structs.replace(layer.attention, index_head_dim=32))
        for layer in spec.layers
    ]
    spec = msgspec.structs.replace(spec, layers=tuple(keyed), model_type="successor_m4")
    for engine in ("vllm", "sglang", "trtllm", "llamacpp"):
        with pytest.raises(UnsupportedArchitecture, match="indexer key beside non-MLA attention"):
            get_engine(engine, None).check_supported(spec)


def test_hf_per_head_rule_refuses_only_mla_without_its_dims() -> None:
    # hf.py check_supported@RULE_PER_HEAD (transformers < 5.15 cached MLA as per-head K and V, which needs
    # qk_nope_head_dim and v_head_dim): a model without MLA is sized as before, 32 x 8 x 256 x 2 B = 131,072 B.
    import kvsize

    result = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=4096, engine="hf", engine_version="4.57.6", kv_dtype="bf16")
    assert result.scenarios[0].kv_bytes_per_token == 131_072


def test_llamacpp_swa_cells_use_the_whole_context_asked_for() -> None:
    # llama_context ctor: n_ubatch = min(min(n_ctx, n_batch), n_ubatch) with n_ctx the -c asked for, here
    # ctx x batch = 4,096 x 16 = 65,536 -> 512. llama_kv_cache_iswa: size_swa = GGML_PAD(min(size_base,
    # n_swa + n_ubatch), 256) per stream = pad(128 + 512, 256) = 768 cells x 16 streams = 12,288 for gpt-oss's
    # 128-token window (a per-sequence 4,096 // 16 = 256 would give pad(384) = 512 x 16); full layers 65,536.
    import kvsize

    result = kvsize.estimate(
        "openai/gpt-oss-20b", ctx=4096, batch=16, engine="llamacpp", engine_version="2026-10", kv_dtype="f16"
    )
    assert {g.kind: g.tokens_held for g in result.scenarios[0].layers} == {"sliding": 12_288, "full": 65_536}


def test_llamacpp_mamba_state_per_request() -> None:
    # llama_memory_recurrent: r (conv) and s (SSM) states in f32. Mamba-1, hidden 768 x expand 2 = 1,536 channels:
    # conv 1,536 x (4 - 1) = 4,608 + SSM 1,536 x 16 = 24,576 -> 29,184 x 4 B = 116,736 B per layer, x 4 = 466,944.
    import kvsize

    raw = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 4, "state_size": 16, "expand": 2,
           "conv_kernel": 4, "vocab_size": 1000}  # fmt: skip
    scenario = kvsize.estimate(raw, ctx=1024, engine="llamacpp", kv_dtype="f16").scenarios[0]
    assert scenario.state_bytes_per_request == scenario.bytes_per_request == 466_944


def test_per_layer_mlp_lists_name_the_moe_layers() -> None:
    # transformers 5 configs carry mlp_layer_types ("dense" / "sparse" per layer); MiniMax-M3's hub config the same
    # as moe_layer_freq 0 / 1. [dense, sparse] x 4 is Qwen2-MoE's decoder_sparse_step 2 ((i + 1) % 2 == 0: layers
    # 1, 3, 5, 7): the same parameter count either way; a list of the wrong length is refused by name.
    from kvsize.errors import ConfigError
    from kvsize.params import estimate_parameters

    base = {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 100, "num_hidden_layers": 8, "num_experts": 4,
            "num_experts_per_tok": 2, "moe_intermediate_size": 32}  # fmt: skip
    by_step = estimate_parameters({**base, "decoder_sparse_step": 2}).total
    assert estimate_parameters({**base, "mlp_layer_types": ["dense", "sparse"] * 4}).total == by_step
    assert estimate_parameters({**base, "moe_layer_freq": [0, 1] * 4}).total == by_step
    with pytest.raises(ConfigError, match="mlp_layer_types"):
        estimate_parameters({**base, "mlp_layer_types": ["dense", "sparse"] * 3})


# --- round 4 (seed 4): kvsize/budget.py ---------------------------------------------------------------------


def test_sm_counts_of_the_h200_and_the_rtx_4090_in_the_sampler_buffer() -> None:
    """budget.py SM_COUNTS: the Triton top-k/top-p buffer is num_SMs x vocab x 4 B (sample/ops/topk_topp_triton.py).
    Llama-3.1-8B (vocab 128,256, hidden 4,096) at 8,192 tokens x 1,024 sequences: 1,024 x 128,256 x 14 +
    SMs x 128,256 x 4 + 8,192 x 4,096 x 2; the H200 has 132 SMs (Hopper whitepaper), the RTX 4090 128 (Ada)."""
    from kvsize.budget import vllm_activation_bytes
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("meta-llama/Llama-3.1-8B")
    assert entry is not None
    from kvsize.config import parse_config

    spec = parse_config(load_registry_config(entry))
    fixed = 1024 * 128_256 * 14 + 8192 * 4096 * 2
    for gpu, sms in (("NVIDIA H200", 132), ("NVIDIA GeForce RTX 4090", 128), ("NVIDIA A100-SXM4-80GB", 108)):
        got = vllm_activation_bytes(spec, max_batched_tokens=8192, max_num_seqs=1024, gpu=gpu)
        assert got == fixed + sms * 128_256 * 4, gpu


# --- round 4 (seed 4): kvsize/weights.py --------------------------------------------------------------------


def test_weights_dtype_bits_of_int4_and_nvfp4() -> None:
    """--weights-dtype re-prices Llama-3.1-8B's published 8,030,261,248 parameters; embeddings and lm_head
    (2 x 128,256 x 4,096 = 1,050,673,152) stay at bf16. int4: 4 bits + a 16-bit scale and a 4-bit zero per group
    of 128 = 4 + 20/128 bits (AutoAWQ / GPTQ defaults): (6,979,588,096 x 4.15625 + 1,050,673,152 x 16) / 8 =
    5,727,460,432 B. nvfp4: 4 bits + an e4m3 scale per 16 = 4.5 bits: (6,979,588,096 x 4.5 + 16,810,770,432) / 8
    = 6,027,364,608 B."""
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights

    loaded = load_model_config("meta-llama/Llama-3.1-8B")
    rest, kept = 8_030_261_248 - 1_050_673_152, 1_050_673_152
    assert find_weights(loaded, weights_dtype="int4").bytes == (rest * 4 + rest * 20 // 128 + kept * 16) // 8
    assert find_weights(loaded, weights_dtype="int4").bytes == 5_727_460_432
    # awq and gptq name the same 4-bit, group-128 format (WEIGHT_BITS)
    assert find_weights(loaded, weights_dtype="awq").bytes == find_weights(loaded, weights_dtype="gptq").bytes
    assert find_weights(loaded, weights_dtype="gptq").bytes == 5_727_460_432
    assert find_weights(loaded, weights_dtype="nvfp4").bytes == (rest * 9 // 2 + kept * 16) // 8 == 6_027_364_608


def test_safetensors_header_limit_is_100_mib(tmp_path: Path) -> None:
    """The safetensors format caps the header at 100 MiB (104,857,600 B): a length of exactly that in a file long
    enough passes the length check (and then fails as JSON: the sparse file holds zeros); one byte more does not."""
    import struct as _struct

    from kvsize.errors import ConfigError
    from kvsize.weights import read_safetensors_header

    limit = 100 * 1024 * 1024
    for length, message in ((limit, "not UTF-8|not valid JSON"), (limit + 1, "does not fit")):
        path = tmp_path / f"model-{length}.safetensors"
        with path.open("wb") as out:
            out.write(_struct.pack("<Q", length))
            out.truncate(8 + limit + 16)  # sparse: no data written
        with pytest.raises(ConfigError, match=message):
            read_safetensors_header(path)


def test_compressed_tensors_fp4_groups_of_32_are_mxfp4_and_of_16_nvfp4() -> None:
    """compressed-tensors float 4-bit weights: group 32 is MXFP4, one e8m0 scale per 32 = 4.25 bits
    (compressed_tensors_w4a4_mxfp4.py create_weights@0.33.0); group 16 is NVFP4, an e4m3 scale per 16 = 4.5 bits."""
    from fractions import Fraction

    from kvsize.weights import quant_scheme

    def bits(group: int) -> Fraction:
        weights = {"num_bits": 4, "type": "float", "group_size": group}
        quant = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": weights}}}
        raw = {"quantization_config": quant}
        scheme = quant_scheme(raw)
        assert scheme is not None
        return scheme.groups[0][1].bits

    assert bits(32) == Fraction(17, 4) and bits(16) == Fraction(9, 2)


def test_parts_outside_the_layer_list_stay_at_the_model_dtype() -> None:
    """weights.py _priced_bits: with a per-layer count, every quantized kind is priced layer by layer under its
    checkpoint names; what the count leaves outside the layers (here 1,000 attention parameters, as a vision
    tower's would be) is not a decoder Linear and stays at the model dtype. Without a layer list the kinds are
    priced by kind (model.layers.0.<kind>)."""
    from fractions import Fraction

    from kvsize.params import ParamEstimate
    from kvsize.weights import QuantScheme, _Format, _priced_bits

    fp8 = QuantScheme("fp8", ((("Linear",), _Format(Fraction(8), "fp8")),), ())
    raw = {"model_type": "llama", "num_hidden_layers": 1}
    layered = ParamEstimate(
        total=3000, active=None, breakdown={"attention": 3000}, notes=(), layers=(("attention", {"attention": 2000}),)
    )
    bits, _ = _priced_bits(raw, layered, fp8, Fraction(16))
    assert bits == 2000 * 8 + 1000 * 16
    flat = ParamEstimate(total=3000, active=None, breakdown={"attention": 3000}, notes=())
    assert _priced_bits(raw, flat, fp8, Fraction(16))[0] == 3000 * 8


# --- round 4 (seed 4): kvsize/calibration.py ----------------------------------------------------------------


def test_figure_error_against_a_logged_one_and_zero() -> None:
    """calibration.Figure.error_pct: 100 x (predicted - logged) / logged; only a logged 0 is special (0 when the
    prediction is 0 too, else infinite, which fails any tolerance and is null in JSON, rounded to 4 places)."""
    import math

    from kvsize.calibration import Figure

    assert Figure("x", 1.0, 1.5, "GiB").error_pct == 50.0
    assert Figure("x", 0.0, 0.0, "GiB").error_pct == 0.0
    assert math.isinf(Figure("x", 0.0, 1.0, "GiB").error_pct)
    assert Figure("x", 0.0, 1.0, "GiB").as_dict()["error_pct"] is None
    # 100 x 0.0001 / 3 = 0.003333...%: four decimals kept
    assert Figure("x", 3.0, 3.0001, "GiB").as_dict()["error_pct"] == 0.0033


def test_calibration_from_a_log_without_parallel_settings_is_tp1_pp1() -> None:
    """calibration_from_log: a vLLM log that names no tensor_parallel_size / pipeline_parallel_size ran on one
    GPU (vLLM's defaults, 1 and 1)."""
    from kvsize.calibration import calibration_from_log
    from kvsize.engine_log import parse_log

    text = (
        "INFO 04-22 15:12:00 [v1/engine/core.py:105] Initializing a V1 LLM engine (v0.19.0) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct'\n"
        "INFO 04-24 16:33:00 [gpu_model_runner.py:1316] Model loading took 14.9889 GiB and 3.652170 seconds\n"
        "DEBUG [v1/worker/gpu_worker.py:435] Memory profiling takes 17.55 seconds. Total non KV cache memory: "
        "16.13GiB; torch peak memory increase: 0.89GiB; non-torch forward increase memory: 0.25GiB; weights "
        "memory: 14.99GiB.\n"
    )
    cal = calibration_from_log(parse_log(text), gpu="h100", model="meta-llama/Llama-3.1-8B-Instruct")
    assert cal is not None and (cal.tp, cal.pp) == (1, 1)
    assert cal.activation_bytes == round(0.89 * 1024**3) and cal.non_torch_bytes == round(0.25 * 1024**3)


# --- round 4 (seed 4): kvsize/engines/vllm.py and kvsize/engines/sglang.py -------------------------------------


def test_attention_free_prefix_caching_needs_both_the_release_and_the_model() -> None:
    """vllm.py prefix_caching, an attention-free model with no choice stated: on only where the release keeps
    prefix caching for attention-free models (0.11.1: MambaModelConfig, the SupportsMambaPrefixCaching models) and
    the model is one of them; 0.12.0 turns it off for attention-free models (is_prefix_caching_supported) though
    mamba2 is still on the list."""
    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("mistralai/Mamba-Codestral-7B-v0.1")
    assert entry is not None
    spec = parse_config(load_registry_config(entry))
    assert spec.model_type == "mamba2"
    assert get_engine("vllm", "0.11.1").prefix_caching(spec) is True
    assert get_engine("vllm", "0.12.0").prefix_caching(spec) is False


def test_vllm_scheduler_on_the_cpu_platform_scales_with_the_world_size() -> None:
    """vllm_scheduler.batch_defaults on the CPU platform: 2,048 tokens and 128 sequences per rank for the API
    server; VllmEngine.scheduler's default is one rank (tp 1, pp 1)."""
    from kvsize.engines import get_engine
    from kvsize.engines.context import EngineContext

    cpu = EngineContext(device=Device(64 * 1024**3, name="cpu", platform="cpu"))
    engine = get_engine("vllm", "0.33.0", context=cpu)
    assert (engine.scheduler(8192).max_num_batched_tokens, engine.scheduler(8192).max_num_seqs) == (2048, 128)
    assert engine.scheduler(8192, tp=2).max_num_batched_tokens == 4096


def test_sglang_kv_bytes_per_token_sum_every_rank() -> None:
    """SglangEngine.estimate: each layer's cell summed over the tp ranks. Llama-3.1-8B at tp 2: 4 KV heads per
    rank x 128 x 2 (K, V) x 2 B = 2,048 B per layer per rank; 32 layers x 2 ranks x 2,048 = 131,072 B per token
    (the tp-1 figure, as no head is replicated)."""
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("meta-llama/Llama-3.1-8B")
    assert entry is not None
    spec = parse_config(load_registry_config(entry))
    est = get_engine("sglang", "0.5.9").estimate(spec, ctx=1024, batch=1, kv_dtype=KvDtype.BF16, tp=2)
    assert est.kv_bytes_per_token == 32 * 2 * 2048 == 131_072


def test_sglang_mamba_pool_when_the_state_share_is_below_one_request() -> None:
    """sglang.py _stage_pool (0.5.7+ MambaPool, max_mamba_cache_size + 1 slots): the state share of the budget
    is rest x 0.9 / 1.9 (mamba_full_memory_ratio); with less than one request's state there, max_mamba is
    max(int((share - per_req) // per_req), 0) = 0 and the pool still keeps its one slot, so KV gets
    rest - per_req. With 1.5 requests' state of budget the share is 0.71 of one: KV keeps half a request's state."""
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert entry is not None
    spec = parse_config(load_registry_config(entry))
    engine = get_engine("sglang", "0.5.9")
    per_req = sum(engine.state_bytes(spec, layer.state) * n for layer, n in spec.layer_groups() if layer.state)
    pool = engine.pool(spec, available_bytes=per_req * 3 // 2, kv_dtype=KvDtype.BF16)
    half = per_req * 3 // 2 - per_req
    per_token = sum(
        engine.attention_bytes_per_token(layer.attention, KvDtype.BF16) * n
        for layer, n in spec.layer_groups()
        if layer.attention is not None
    )
    assert pool.max_total_num_tokens == half // per_token


# --- round 5 (seed 5): cache_fields, config, engines, engine_log, params ---------------------------------------

# vLLM 0.19 on one H100 (tests/data/logs/manifest.json), the start-up log the engine_log tests edit.
LLAMA_8B_LOG = Path(__file__).parent / "data" / "logs" / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"


def test_recurrent_gemma_fields_are_read_only_for_recurrent_gemma() -> None:
    # cache_fields.py: block_types / lru_width / conv1d_width / attention_window_size are RecurrentGemma's
    # (modeling_recurrent_gemma.py); on a Llama they change what a layer keeps and kvsize does not read them there.
    from kvsize.cache_fields import UnmodelledFields
    from kvsize.config import parse_config

    llama = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}
    with pytest.raises(UnmodelledFields, match="lru_width"):
        parse_config({**llama, "lru_width": 512})


def test_config_width_limit_is_two_to_the_thirtieth() -> None:
    # config.py _scalar_int: an informational width up to 1 << 30 = 1,073,741,824; one more is bad input.
    from kvsize.config import parse_config
    from kvsize.errors import ConfigError

    llama = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}
    assert parse_config({**llama, "intermediate_size": 1 << 30}).intermediate_size == 1_073_741_824
    with pytest.raises(ConfigError, match="between 1 and 1073741824"):
        parse_config({**llama, "intermediate_size": (1 << 30) + 1})


def test_vllm_block_size_one_is_accepted() -> None:
    # vLLM's CacheConfig has taken block_size 1 (config/cache.py BlockSize Literal[1, 8, 16, 32, 64, 128]); only
    # values below 1 are refused.
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine

    spec = _registry_spec("meta-llama/Llama-3.1-8B")
    assert VllmEngine("0.19.0", block_size=1).block_size(spec, KvDtype.BF16, 1) == 1
    with pytest.raises(UsageError, match="must be positive"):
        VllmEngine("0.19.0", block_size=0)


def test_vllm_skip_layers_realign_only_when_the_skipped_page_is_larger() -> None:
    # Platform._align_heterogeneous_kv_block_size (0.33): the block grows only when the skipped layers' page per
    # token S exceeds the primary P: bf16 skipped over a bf16 primary (S = P) keeps --block-size 8; over an fp8
    # primary (S = 2P) it becomes max(8, 16 x cdiv(16 x 2P, 16 x P)) = 32.
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine

    spec = _registry_spec("meta-llama/Llama-3.1-8B")
    engine = VllmEngine("0.33.0", block_size=8, kv_cache_dtype_skip_layers="0")
    assert engine.block_size(spec, KvDtype.BF16, 1) == 8
    assert engine.block_size(spec, KvDtype.FP8_E4M3, 1) == 32


def test_sglang_0_5_4_mamba2_without_radix_keeps_512_slots() -> None:
    # model_runner.py handle_max_mamba_cache@0.5.4: radix cache off (forced for nemotron_h) and no
    # --max-running-requests -> max_mamba_cache_size = 512, one slot per request (ratio 1).
    from kvsize.dtypes import KvDtype
    from kvsize.engines.sglang import SglangEngine

    pool = SglangEngine("0.5.4").pool(
        _registry_spec("nvidia/Nemotron-H-56B-Base-8K"), available_bytes=40 * GIB, kv_dtype=KvDtype.BF16
    )
    assert (pool.max_mamba_cache_size, pool.mamba_request_limit) == (512, 512)


def test_sglang_running_requests_with_no_context_does_not_divide_by_zero() -> None:
    # int(pool / context_len x 512) with the context taken as at least 1: 10,000 x 512 clamped to 4,096.
    from kvsize.engines.sglang import RULES_0523, default_max_running_requests

    assert default_max_running_requests(10_000, 0, rules=RULES_0523) == 4096


def test_sglang_tiered_reserve_edges_are_strict() -> None:
    # server_args.py __post_init__@0.4.9.post2: `gpu_mem < 35 * 1024` ... `< 90 * 1024` ... `< 160 * 1024`, else
    # 32 * 1024 MiB: a card of exactly 160 GiB takes 32 GiB, one MiB less takes 12 + 1/2 GiB.
    assert tiered_reserve_mib(160 * 1024, 1) == 32 * 1024
    assert tiered_reserve_mib(160 * 1024 - 1, 1) == 12.5 * 1024
    assert tiered_reserve_mib(35 * 1024, 1) == 10 * 1024
    assert tiered_reserve_mib(35 * 1024 - 1, 1) == pytest.approx(2.9 * 1024)


def test_sglang_prefill_graph_buckets() -> None:
    # arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes@0.5.23: 4..32 by 4, 48..256 by 16,
    # 288..512 by 32, 576..1024 by 64, 1280..4096 by 256, then 4608.. by 512.
    from kvsize.engines.sglang import prefill_graph_sizes

    sizes = prefill_graph_sizes(5120)
    assert sizes[:8] == [4, 8, 12, 16, 20, 24, 28, 32]
    assert sizes[8:22] == [48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]
    assert sizes[22:30] == [288, 320, 352, 384, 416, 448, 480, 512]
    assert sizes[-3:] == [4096, 4608, 5120]


def test_llamacpp_layer_split_allows_one_gpu_per_layer() -> None:
    # llama_model::load_tensors: device(il) = floor(il x n / (n_layer + 1)); 4 layers on 4 GPUs -> 0, 0, 1, 2 (the
    # fourth GPU holds none); 5 GPUs for 4 layers is refused.
    from kvsize.engines.llamacpp import llamacpp_layer_split

    assert llamacpp_layer_split(4, 4) == [range(0, 2), range(2, 3), range(3, 4), range(0, 0)]
    with pytest.raises(UsageError, match="exceeds"):
        llamacpp_layer_split(4, 5)


def test_llamacpp_bytes_per_token_count_the_attention_layers() -> None:
    # llama.cpp f16 cache of Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B per token.
    import kvsize

    est = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=4096, engine="llamacpp")
    assert est.scenarios[0].kv_bytes_per_token == 131_072


def test_deepseek_moe_layers_start_at_zero_by_default() -> None:
    # DeepseekV2Config / DeepseekV3Config: first_k_dense_replace defaults to 0 (every layer a MoE layer when
    # moe_layer_freq is 1): a config without it counts as one that says 0, not 1.
    from kvsize.params import estimate_parameters
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("deepseek-ai/DeepSeek-V3")
    assert entry is not None
    raw = dict(load_registry_config(entry))
    without = {k: v for k, v in raw.items() if k != "first_k_dense_replace"}
    assert estimate_parameters(without).total == estimate_parameters({**raw, "first_k_dense_replace": 0}).total
    assert estimate_parameters(without).total != estimate_parameters({**raw, "first_k_dense_replace": 1}).total


def test_whisper_decoder_positions_default_to_448() -> None:
    # WhisperConfig: max_target_positions = 448 by default; a config without it counts 448 learned positions.
    from kvsize.params import estimate_parameters
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("openai/whisper-small")
    assert entry is not None
    raw = dict(load_registry_config(entry))
    without = {k: v for k, v in raw.items() if k != "max_target_positions"}
    assert estimate_parameters(without).total == estimate_parameters({**raw, "max_target_positions": 448}).total


def test_vllm_log_reads_a_max_num_batched_tokens_that_is_not_the_default() -> None:
    # vLLM's config line "max_num_batched_tokens=2048." (a deployment's --max-num-batched-tokens 2048).
    from kvsize.engine_log import parse_log

    text = LLAMA_8B_LOG.read_text()
    assert "max_num_batched_tokens=8192." in text
    text = "\n".join(
        line
        for line in text.replace("max_num_batched_tokens=8192.", "max_num_batched_tokens=2048.").splitlines()
        if "Defaulting max_num_batched_tokens" not in line
    )
    log = parse_log(text)
    assert log is not None and log.settings["max_num_batched_tokens"] == 2048


def test_a_log_cut_before_the_kv_cache_has_no_kv_figure() -> None:
    # EngineLog.has_kv_figure: a vLLM log that ends at "Model loading took" printed no KV figure; the whole log did.
    from kvsize.engine_log import parse_log

    text = LLAMA_8B_LOG.read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[: next(i for i, line in enumerate(lines) if "Model loading took" in line) + 1])
    whole, head = parse_log(text), parse_log(cut)
    assert whole is not None and whole.has_kv_figure()
    assert head is not None and not head.has_kv_figure()


def test_a_zero_count_is_no_count() -> None:
    # engine_log.py _count: vLLM's counts are positive (max_num_seqs=0 is no setting), 1 is the least.
    from kvsize.engine_log import _count

    assert _count(0) is None and _count(1) == 1 and _count("32k") == 32 * 1024


def test_one_cut_line_is_named_in_the_singular() -> None:
    from kvsize.engine_log import MAX_LINE_CHARS, parse_log

    text = LLAMA_8B_LOG.read_text()
    log = parse_log(text + "\n" + "x" * (MAX_LINE_CHARS + 10))
    assert log is not None
    assert any(n.startswith("1 line longer than") for n in log.notes), log.notes


# --- round 6 (seed 6): weights, params, engines/sglang, engines/hf, fit, cache_fields ----------------------------


def test_hub_count_of_int16_tensors_is_two_bytes_each() -> None:
    # safetensors' dtype table: I16 is a 16-bit integer (2 bytes), as U16, F16 and BF16
    from kvsize.weights import weights_from_hub_counts

    assert weights_from_hub_counts({"I16": 1000, "U16": 10}, "o/m").bytes == 2 * 1010


def test_a_bad_hub_count_is_shown_cut_to_forty_characters() -> None:
    from kvsize.errors import ConfigError
    from kvsize.weights import weights_from_hub_counts

    with pytest.raises(ConfigError) as caught:
        weights_from_hub_counts({"F32": "x" * 100}, "o/m")  # type: ignore[dict-item]
    shown = "'" + "x" * 39 + "..."  # repr's quote and 39 characters: 40, then the ellipsis
    assert shown in str(caught.value) and "x" * 40 not in str(caught.value)


def test_bitsandbytes_double_quant_bits_by_hand() -> None:
    # bitsandbytes functional.quantize_4bit: 4 bits, an fp32 absmax per block of 64 (4.5 bits); with double quant
    # the absmax is 8-bit with an fp32 absmax per 256 blocks: 4 + 8/64 + 32/(64 x 256) bits. The 4-layer Llama of
    # tests/test_reliability_gates.py: 708,837,376 Linear parameters; embeddings and lm_head 524,288,000 B and the
    # norms 73,728 B stay in bf16. Double: 354,418,688 + 11,075,584 + 173,056 = 365,667,328 B of Linears.
    import kvsize

    tiny = {**TINY, "intermediate_size": 11008}  # tests/test_reliability_gates.py's TINY

    def weights(quant: dict[str, Any]) -> int:
        config = {**tiny, "quantization_config": {"quant_method": "bitsandbytes", **quant}}
        fit = kvsize.estimate(config, ctx=8192, gpu="h100", engine="formula").scenarios[0].gpu
        assert fit is not None
        return int(fit.weights_bytes)

    rest = 524_288_000 + 73_728
    assert weights({"load_in_4bit": True}) == 708_837_376 * 45 // 80 + rest == 923_082_752
    double = weights({"load_in_4bit": True, "bnb_4bit_use_double_quant": True})
    assert double == 354_418_688 + 11_075_584 + 173_056 + rest == 890_029_056


def test_zamba2_adapter_rank_defaults_to_128() -> None:
    # transformers Zamba2Config: adapter_rank defaults to 128 (the hub's Zamba2-7B states lora_rank 128)
    from kvsize.params import estimate_parameters

    raw = registry_config("Zyphra/Zamba2-7B")
    stated = estimate_parameters(raw).total
    unstated = estimate_parameters({k: v for k, v in raw.items() if k != "lora_rank"}).total
    assert unstated == stated
    assert estimate_parameters({**raw, "lora_rank": 129}).total != stated


def test_sglang_extra_buffer_by_model_type_when_no_architecture_is_named() -> None:
    # uses_mamba_extra_buffer: the architectures decide when the config names them, else the model type
    import msgspec

    from kvsize.config import parse_config
    from kvsize.engines.sglang import uses_mamba_extra_buffer

    def spec_of(hub_id: str) -> ArchSpec:
        return msgspec.structs.replace(parse_config(registry_config(hub_id)), architectures=())

    assert uses_mamba_extra_buffer(spec_of("Qwen/Qwen3-Next-80B-A3B-Thinking"))  # qwen3_next
    assert not uses_mamba_extra_buffer(spec_of("mistralai/Mamba-Codestral-7B-v0.1"))  # mamba2


def test_hf_old_mla_rule_refuses_deepseek_sparse_attention() -> None:
    # kvsize read transformers' DynamicIndexedLayer in 5.24; under the <5.15 per-head MLA rule it refuses DSA,
    # and 5.24 sizes it
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.engines.base import UnsupportedArchitecture

    raw = registry_config("deepseek-ai/DeepSeek-V3.2")
    spec = parse_config(raw)
    with pytest.raises(UnsupportedArchitecture, match="5.24 only"):
        get_engine("hf", "5.14.0", raw_config=raw).estimate(spec, ctx=64, batch=1, kv_dtype=KvDtype.BF16)
    assert get_engine("hf", "5.24.0", raw_config=raw).estimate(spec, ctx=64, batch=1, kv_dtype=KvDtype.BF16)


def _not_understood(raw: dict[str, Any]) -> list[str]:
    """The fields the never-silent guard refuses in a flat config, as kvsize.config.parse_config asks it."""
    from kvsize.cache_fields import unknown_cache_fields
    from kvsize.config import KNOWN_MODEL_TYPES

    return [f.field for f in unknown_cache_fields(raw, raw, "", raw["model_type"], KNOWN_MODEL_TYPES)]


def test_indexer_types_with_shared_layers_refused_outside_glm5() -> None:
    # `shared` indexer layers are read for GLM-5.2's type only (its transformers class reads the schedule);
    # DeepSeek-V3.2's reads none, so a list naming shared layers there is refused by name

    raw = registry_config("deepseek-ai/DeepSeek-V3.2")
    layers = raw["num_hidden_layers"]
    assert _not_understood({**raw, "indexer_types": ["full"] * layers}) == []  # every layer keeps its indexer
    assert _not_understood({**raw, "indexer_types": ["full"] + ["shared"] * (layers - 1)}) == ["indexer_types"]


def test_unknown_type_with_heads_and_a_recurrent_layout_reads_its_state() -> None:
    # an unknown model type with attention heads, Mamba state fields and attn_layer_indices (which layers attend)
    # gets recurrent layers to size, so its state fields are understood; without the layout field they are not
    hybrid = {
        "model_type": "some_new_hybrid",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "mamba_d_state": 64,
        "attn_layer_indices": [3],
    }
    assert _not_understood(hybrid) == []
    assert _not_understood({k: v for k, v in hybrid.items() if k != "attn_layer_indices"}) == ["mamba_d_state"]


def test_sglang_swa_pool_with_no_full_layers_by_hand() -> None:
    # gpt-oss-20b with every layer sliding (layer_types): SGLang's hybrid SWA pool has no full layers, so one
    # cell is every pooled layer's K and V: 24 x 8 KV heads x 64 x 2 x 2 B = 49,152 B, and both pools get the
    # same tokens: 49,152,000 B hold 1,000
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    raw = registry_config("openai/gpt-oss-20b")
    spec = parse_config({**raw, "layer_types": ["sliding_attention"] * raw["num_hidden_layers"]})
    pool = get_engine("sglang").pool(spec, available_bytes=1000 * 24 * 8 * 64 * 2 * 2, kv_dtype=KvDtype.BF16)
    assert pool.cell_size == 49_152
    assert pool.max_total_num_tokens == pool.swa_max_total_num_tokens == 1000


def test_sglang_pure_ssm_pool_without_a_context_length_is_empty() -> None:
    # no KV on the stage: SGLang falls back to the context length; a config that states none gives no tokens,
    # never a negative count
    import msgspec

    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    spec = msgspec.structs.replace(parse_config(registry_config("mistralai/Mamba-Codestral-7B-v0.1")), max_context=None)
    assert get_engine("sglang").pool(spec, available_bytes=40 * GIB, kv_dtype=KvDtype.BF16).max_total_num_tokens == 0


def test_hf_old_mla_rule_needs_the_head_dims_and_524_does_not() -> None:
    # The <5.15 per-head MLA rule sizes K and V per head from qk_nope_head_dim and v_head_dim; a spec that
    # lacks them (and no raw config to read them from) is refused there, while 5.24's latent rule needs neither.
    import msgspec

    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.engines.base import UnsupportedArchitecture
    from kvsize.spec import AttentionKind

    spec = parse_config(registry_config("deepseek-ai/DeepSeek-V3"))
    bare = msgspec.structs.replace(
        spec,
        layers=tuple(
            msgspec.structs.replace(
                layer,
                attention=msgspec.structs.replace(layer.attention, qk_nope_head_dim=None, v_head_dim=None),
            )
            if layer.attention is not None and layer.attention.kind is AttentionKind.MLA
            else layer
            for layer in spec.layers
        ),
    )
    with pytest.raises(UnsupportedArchitecture, match="needs qk_nope_head_dim and v_head_dim"):
        get_engine("hf", "5.14.0").estimate(bare, ctx=64, batch=1, kv_dtype=KvDtype.BF16)
    latent = get_engine("hf", "5.24.0").estimate(bare, ctx=64, batch=1, kv_dtype=KvDtype.BF16)
    assert latent.kv_bytes_per_token == 61 * (512 + 64) * 2


def test_a_shown_value_of_41_characters_is_cut() -> None:
    # _shown cuts past 40 characters: a 39-letter string's repr is 41 long, so it is cut to 40 and marked
    from kvsize.errors import ConfigError
    from kvsize.weights import weights_from_hub_counts

    with pytest.raises(ConfigError) as caught:
        weights_from_hub_counts({"F32": "y" * 39}, "o/m")  # type: ignore[dict-item]
    assert "'" + "y" * 39 + "..." in str(caught.value)


# --- round 8 (seed 8): a fresh sample of three mutants per module ------------------------------------------------


def test_vllm_hybrid_alignment_is_32_for_head_256_on_sm100_only_in_0_11_to_0_17() -> None:
    # 0.13 HybridAttentionMambaModelConfig: kernel block alignment 32 when the device is capability 10.x and the
    # attention head size is 256 (Qwen3-Next: head_dim 256), else 16; 0.18 dropped it (blackwell_hd256_align32).
    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.engines.context import EngineContext

    spec = parse_config(registry_config("Qwen/Qwen3-Next-80B-A3B-Thinking"))

    def align(version: str, capability: tuple[int, int]) -> int:
        device = Device(total_memory_bytes=180 * GIB, capability=capability)
        return get_engine("vllm", version, EngineContext(device=device))._hybrid_alignment(spec, 16)

    assert align("0.13.0", (10, 0)) == 32
    assert align("0.13.0", (9, 0)) == 16
    assert align("0.13.0", (12, 0)) == 16  # 12.x is not sm_10x


def test_sglang_047_fraction_above_96_gib_takes_the_48_gib_term() -> None:
    # server_args.py ServerArgs.__post_init__@0.4.7 (by_parallel_48g): above 96 GiB the fraction is
    # min(f + 48 GiB x (1 - f) / M, (M - 18 GiB) / M) with f 0.88 above 80 GiB. An AMD card of 262,144 MiB:
    # 0.88 + 49,152 x 0.12 / 262,144 = 0.90250 against (262,144 - 18,432) / 262,144 = 0.92969: the first.
    from kvsize.engines.sglang import early_mem_fraction_static
    from kvsize.engines.sglang_releases import RULES_047

    got = early_mem_fraction_static(262_144, tp=1, pp=1, amd=True, rules=RULES_047)
    assert got == pytest.approx(0.88 + 49_152 * (1 - 0.88) / 262_144)


def test_gpt_neo_default_attention_types_are_12_pairs() -> None:
    # GPTNeoConfig (transformers 5.24): attention_types defaults to [[["global", "local"], 12]]: 24 layers,
    # 12 global and 12 local (window 256).
    from kvsize.config import parse_config

    config = {
        "model_type": "gpt_neo",
        "num_layers": 24,
        "hidden_size": 64,
        "num_heads": 4,
        "vocab_size": 100,
        "max_position_embeddings": 2048,
    }
    kinds = [layer.attention.kind.value for layer in parse_config(config).layers if layer.attention is not None]
    assert kinds == ["full", "sliding"] * 12


def test_vllm_sampler_takes_32000_words_when_the_config_names_no_vocabulary() -> None:
    # budget.py vllm_activation_bytes: `spec.vocab_size or 32_000` (LlamaConfig's default): a spec without a
    # vocabulary costs what vocab_size 32,000 does.
    import msgspec

    from kvsize.budget import vllm_activation_bytes
    from kvsize.config import parse_config

    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))
    none, given = msgspec.structs.replace(spec, vocab_size=None), msgspec.structs.replace(spec, vocab_size=32_000)
    # 256 batched tokens: the sampler (1,024 x vocab x 14 B + the top-k buffer) outweighs the forward pass.
    kwargs: dict[str, Any] = {"max_batched_tokens": 256, "max_num_seqs": 1024, "gpu": "NVIDIA H100 80GB HBM3"}
    assert vllm_activation_bytes(none, **kwargs) == vllm_activation_bytes(given, **kwargs)
    assert vllm_activation_bytes(none, **kwargs) != vllm_activation_bytes(
        msgspec.structs.replace(spec, vocab_size=32_001), **kwargs
    )


def test_a_v1_log_without_its_v1_banner_is_still_v1() -> None:
    # engine_log.py: V0 only when none of "V1 LLM engine", "v1/", "gpu_worker.py" is in the log. An llm-d log
    # with its "V1 LLM engine" line dropped still prints v1/worker/gpu_worker.py paths: V1.
    from kvsize.engine_log import parse_log

    path = Path(__file__).parent / "data" / "logs" / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"
    text = "\n".join(line for line in path.read_text().splitlines() if "V1 LLM engine" not in line)
    log = parse_log(text)
    assert log is not None and log.settings["engine_generation"] == "V1"


def test_weights_dtype_names_read_as_a_kv_dtype() -> None:
    # weights.py weight_bits: a name that is not a weights dtype but parses as a KV dtype of the same width is
    # taken as it ("half" -> fp16, 16 bits).
    from kvsize.weights import weight_bits

    assert weight_bits("half") == 16


def test_quantization_config_inside_the_text_config() -> None:
    # weights.py quant_scheme: a wrapper without a quantization_config of its own uses its text_config's.
    from kvsize.weights import quant_scheme

    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    scheme = quant_scheme({"model_type": "llava", "text_config": {"quantization_config": fp8}})
    assert scheme is not None and scheme.method == "fp8"
    assert quant_scheme({"model_type": "llava", "text_config": {}}) is None


def test_nemotron_h_top_k_above_the_experts_activates_them_all() -> None:
    # params.py _nemotron_h_moe: top_k = min(num_experts_per_tok, n_routed_experts); asking for more experts
    # than exist makes every expert active (active = total), never more than total.
    from kvsize.params import estimate_parameters

    raw = registry_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    many = {**raw, "num_experts_per_tok": raw["n_routed_experts"] + 5}
    counted = estimate_parameters(many)
    assert counted.active == counted.total


def test_zamba2_intermediate_size_defaults_to_4_hidden() -> None:
    # transformers Zamba2Config: intermediate_size None -> 4 x hidden_size (5.24).
    from kvsize.params import estimate_parameters

    raw = registry_config("Zyphra/Zamba2-7B")
    without = {k: v for k, v in raw.items() if k not in ("intermediate_size", "ffn_hidden_size")}
    given = {**without, "intermediate_size": 4 * raw["hidden_size"]}
    assert estimate_parameters(without).total == estimate_parameters(given).total


def test_qwen3_5_vision_spatial_merge_defaults_to_2() -> None:
    # Qwen3_5VisionConfig (transformers 5.24): spatial_merge_size 2 when the config leaves it out.
    from kvsize.params import estimate_parameters

    raw = registry_config("Qwen/Qwen3.5-9B")
    vision = {k: v for k, v in raw["vision_config"].items() if k != "spatial_merge_size"}
    assert (
        estimate_parameters({**raw, "vision_config": vision}).breakdown["vision"]
        == estimate_parameters({**raw, "vision_config": {**vision, "spatial_merge_size": 2}}).breakdown["vision"]
    )


def test_raw_mla_head_dims_needs_both_integers() -> None:
    # hf.py raw_mla_head_dims: (qk_nope_head_dim, v_head_dim) only when both are integers (not booleans).
    from kvsize.engines.hf import raw_mla_head_dims

    assert raw_mla_head_dims({"qk_nope_head_dim": 128, "v_head_dim": 128}) == (128, 128)
    assert raw_mla_head_dims({"qk_nope_head_dim": 128}) is None
    assert raw_mla_head_dims({"v_head_dim": 128}) is None
    assert raw_mla_head_dims({"qk_nope_head_dim": True, "v_head_dim": 128}) is None


# --- round 12 (seed 12): weights, engines/trtllm, engines/hf again, five each -------------------------------------


def test_fp4_weight_widths_count_their_scales() -> None:
    # weights.py WEIGHT_BITS: MXFP4 packs 4-bit e2m1 weights with one 8-bit E8M0 scale per 32 (OCP MX), 4.25 bits a
    # weight; NVFP4 one 8-bit e4m3 scale per 16, 4.5 bits.
    from fractions import Fraction

    from kvsize.weights import weight_bits

    assert weight_bits("mxfp4") == Fraction(17, 4)
    assert weight_bits("nvfp4") == Fraction(9, 2)


def test_trtllm_vswa_prefix_inside_the_window_is_all_shared() -> None:
    # TrtllmEngine.prefix_shared_tokens with VSWA: blocks before max(0, ctx - W) are gone. gpt-oss (W 128), blocks of
    # 32, a 64-token prefix at ctx 100: nothing is out of the window (100 - 128 < 0), so both prefix blocks are
    # shared: 64 tokens (a negative skip would count 96).
    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.spec import AttentionKind

    spec = parse_config(registry_config("openai/gpt-oss-20b"))
    sliding = next(
        layer.attention
        for layer in spec.layers
        if layer.attention is not None and layer.attention.kind is AttentionKind.SLIDING
    )
    engine = get_engine("trtllm", vswa=True)
    assert engine.prefix_shared_tokens(spec, sliding, 64, 100, 32) == 64


def test_hf_static_cache_holds_exactly_its_length() -> None:
    # StaticCache(max_cache_len=N) holds a context of exactly N tokens; N + 1 is refused.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))
    engine = get_engine("hf", cache_implementation="static", max_cache_len=4096)
    assert engine.estimate(spec, ctx=4096, batch=1, kv_dtype=KvDtype.BF16).kv_cache_bytes == 4096 * 32 * 8 * 128 * 4
    with pytest.raises(UsageError, match="cannot hold ctx 4097"):
        engine.estimate(spec, ctx=4097, batch=1, kv_dtype=KvDtype.BF16)


# --- round 15 (--seed 15, the lines stop 34 changed) -------------------------------------------------------


def test_measured_pool_says_so_on_unified_memory_only() -> None:
    # budget.kv_budget, vLLM 0.34's measured pool: the unified-memory note (what the OS leaves free) is on the
    # DGX Spark's rule, never on a discrete card's.
    from kvsize.budget import UNIFIED_MEASURED_NOTE

    assert UNIFIED_MEASURED_NOTE in llama_8b_budget("0.34.0", "dgx-spark").rule
    assert UNIFIED_MEASURED_NOTE not in llama_8b_budget("0.34.0", "h100").rule


def test_no_cuda_graph_charge_before_vllm_estimates_them() -> None:
    # vLLM 0.19 captures its CUDA graphs after the KV cache is sized (the estimate is subtracted from 0.20,
    # VllmRules.cuda_graph_estimate): nothing is charged, to the byte, and the budget is the remainder.
    budget = llama_8b_budget("0.19.0", "h100")
    assert budget.cuda_graph_bytes == 0
    parts = budget.weights_bytes + budget.activation_bytes + budget.non_torch_bytes + budget.cuda_graph_bytes
    assert budget.kv_budget_bytes == budget.requested_bytes - parts - budget.rope_table_bytes


def test_a_16_bit_weights_dtype_is_cast_whole_under_float32() -> None:
    # weights._widened: --weights-dtype bf16 is an unquantized pricing, so --dtype float32 casts it whole (2 x),
    # where a quantized one would be refused. Llama-3.1-8B: 8,030,261,248 parameters x 4 B.
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights

    loaded = load_model_config("meta-llama/Llama-3.1-8B")
    found = find_weights(loaded, model_dtype="bf16", weights_dtype="bf16", served_dtype="fp32")
    assert found.bytes == 8_030_261_248 * 4


# --- round 19 (--seed 19, a fresh sample of every module, on 87797d7) ----------------------------------------------


def test_sglang_refuses_variable_gqa_counting_only_layers_with_heads() -> None:
    # configs/model_config.py get_total_num_kv_heads raises for nemotron-nas with several kv-head counts; the set
    # is taken over the layers that have KV heads (the no-op attention blocks have none).
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.engines.base import UnsupportedArchitecture

    raw = registry_config("nvidia/Llama-3_3-Nemotron-Super-49B-v1")
    blocks = raw["block_configs"]
    grouped = [i for i, b in enumerate(blocks) if (b.get("attention") or {}).get("n_heads_in_group")]
    blocks[grouped[0]]["attention"]["n_heads_in_group"] = 16  # 64 / 16 = 4 KV heads beside the others' 8
    with pytest.raises(UnsupportedArchitecture, match="variable GQA"):
        get_engine("sglang", None).estimate(parse_config(raw), ctx=1024, batch=1, kv_dtype=KvDtype.BF16)


def test_gemma3_text_window_defaults_to_4096() -> None:
    # transformers 5.25 Gemma3TextConfig: sliding_window = 4096 when the config leaves it out
    from kvsize.config import parse_config

    raw = registry_config("google/gemma-3-1b-it")
    raw.pop("sliding_window")
    windows = {layer.attention.window for layer in parse_config(raw).layers if layer.attention is not None}
    assert windows == {4096, None}


def test_refusal_names_eight_fields_then_counts_the_rest() -> None:
    from kvsize.config import parse_config
    from kvsize.errors import KvsizeError

    raw = registry_config("meta-llama/Llama-3.1-8B")
    raw["model_type"] = "brand_new"
    for i in range(10):
        raw[f"kv_window_{i}"] = 1
    with pytest.raises(KvsizeError) as info:
        parse_config(raw)
    text = str(info.value)
    assert "kv_window_7 and 2 more" in text and "kv_window_8" not in text


def test_sampler_buffer_counts_gb200s_148_sms() -> None:
    # The Triton top-k/top-p buffer: min(next_power_of_2(programs), num_sm) rows of vocab fp32, programs =
    # min(num_sm, rows); at 1,024 sequences that is num_sm rows. B200 / GB200: 148 SMs, H100 SXM 132 (NVIDIA
    # Blackwell and Hopper architecture whitepapers). Llama-3.1-8B's 128,256 words: (148 - 132) x 128,256 x 4 B.
    from kvsize.budget import vllm_activation_bytes
    from kvsize.config import parse_config

    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))

    def peak(gpu: str) -> int:
        return vllm_activation_bytes(spec, max_batched_tokens=8192, max_num_seqs=1024, gpu=gpu)

    assert peak("NVIDIA GB200") - peak("NVIDIA H100 80GB HBM3") == 16 * 128_256 * 4


def test_tied_embeddings_exactly_the_weights_split_by_stage() -> None:
    # A tied-embedding model whose weights are exactly its table (body 0): with pp 2 the first stage holds the
    # input embedding and the last a copy of it as the head, each the whole table, not half of it each.
    from kvsize.budget import weights_on_busiest_rank
    from kvsize.config import parse_config

    spec = parse_config(registry_config("google/gemma-2-2b"))
    assert spec.tied_embeddings and spec.model_dtype == "fp32"  # the checkpoint's float32: 4 B per element
    table = spec.vocab_size * spec.hidden_size * 4
    assert weights_on_busiest_rank(spec, table, pp=2).bytes == table == 256_000 * 2304 * 4


def test_pipeline_stages_alone_are_a_multi_gpu_budget() -> None:
    # tp 1 x pp 2 is two GPUs: vLLM 0.20-0.33 estimate the multi-GPU CUDA-graph figure (budget.py
    # CUDA_GRAPH_TP), as at tp 2
    from kvsize.budget import CUDA_GRAPH_TP, CUDA_GRAPH_TP1, BudgetSettings, kv_budget
    from kvsize.config import parse_config
    from kvsize.profiles import resolve_gpu

    assert CUDA_GRAPH_TP != CUDA_GRAPH_TP1
    profile = resolve_gpu("h100")
    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))

    def graphs(tp: int, pp: int) -> int:
        return kv_budget(
            "vllm", "0.21.0", spec, memory_bytes=profile.memory_bytes, weights_bytes=8 * GIB, tp=tp, pp=pp,
            settings=BudgetSettings(), device=Device.from_profile(profile),
        ).cuda_graph_bytes  # fmt: skip

    assert graphs(1, 2) == graphs(2, 1) == CUDA_GRAPH_TP
    assert graphs(1, 1) == CUDA_GRAPH_TP1


def test_two_cut_lines_are_plural() -> None:
    from kvsize.engine_log import MAX_LINE_CHARS, parse_log

    long = "x" * (MAX_LINE_CHARS + 10)
    log = parse_log(f"INFO vLLM API server version 0.19.0\n{long}\n{long}\n")
    assert any(n.startswith("2 lines longer than") for n in log.notes), log.notes


def test_prefix_share_off_hits_nothing() -> None:
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine
    from kvsize.serving import prefix_share

    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))
    off = prefix_share(
        get_engine("vllm", None), spec, prefix_len=4096, prompt_len=8192, ctx=8192, kv_dtype=KvDtype.BF16,
        enabled=False,
    )  # fmt: skip
    assert (off.enabled, off.hit_tokens) == (False, 0)


def test_prefill_flops_are_two_per_parameter_per_new_token() -> None:
    # 2 x 1,000 parameters x (100 - 40) new tokens + 2 x 2 layers x width 8 x (100^2 - 40^2)
    from kvsize.serving import prefill_flops

    flops = prefill_flops(active_parameters=1000, num_layers=2, attention_width=8, tokens=100, cached=40)
    assert flops == 2 * 1000 * 60 + 2 * 2 * 8 * (100 * 100 - 40 * 40) == 388_800


def test_a_quant_group_of_2_to_the_20_is_the_largest_read() -> None:
    # weights.py MAX_QUANT_BLOCK = 1 << 20: a group of 1,048,576 weights is read, one more is refused
    from kvsize.weights import quant_scheme

    def config(group: int) -> dict[str, Any]:
        return {
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": group}}
                },
            }
        }

    assert quant_scheme(config(1 << 20)) is not None
    with pytest.raises(Exception, match="group_size"):
        quant_scheme(config((1 << 20) + 1))


def test_llamacpp_serves_256_sequences_at_most() -> None:
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    spec, engine = parse_config(registry_config("meta-llama/Llama-3.1-8B")), get_engine("llamacpp", None)
    # 256 x 256 cells x 32 layers x 8 heads x 128 x 2 x 2 B (LLAMA_MAX_SEQ = 256: src/llama-cparams.h)
    assert engine.estimate(spec, ctx=256, batch=256, kv_dtype=KvDtype.FP16).kv_cache_bytes == 256 * 256 * 131_072
    with pytest.raises(UsageError, match="at most 256 sequences"):
        engine.estimate(spec, ctx=256, batch=257, kv_dtype=KvDtype.FP16)


def test_llamacpp_sliding_cells_are_the_smaller_of_ctx_and_the_window_span() -> None:
    # llama-kv-cache-iswa.cpp: a sequence's SWA cells are pad(min(n_ctx, W + n_ubatch), 256): Gemma 3 1B's window
    # 512 + ubatch min(ctx, 512); at ctx 256 the context binds (256), at 4,096 the window (1,024)
    from kvsize.config import parse_config
    from kvsize.engines import get_engine

    spec, engine = parse_config(registry_config("google/gemma-3-1b-it")), get_engine("llamacpp", None)
    sliding = next(layer.attention for layer in spec.layers if layer.attention and layer.attention.window)
    assert engine.tokens_allocated(sliding, 256) == 256
    assert engine.tokens_allocated(sliding, 4096) == 1024
    notes = engine.estimate_notes(spec)
    assert any("iSWA cache" in n for n in notes)
    assert not any("iSWA" in n for n in engine.estimate_notes(parse_config(registry_config("meta-llama/Llama-3.1-8B"))))


def _check_llama(tmp_path: Path, require: str, name: str = "d") -> tuple[int, str]:
    """`kvsize check` on one Llama-3.1-8B deployment on an H100 with `require` (its flow mapping): the exit code
    and stdout + stderr on one line."""
    from typer.testing import CliRunner

    from kvsize.cli.app import app

    path = tmp_path / "c.yaml"
    path.write_text(
        f"deployments:\n  - name: {name}\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require: {require}\n"
    )
    result = CliRunner().invoke(app, ["check", str(path)])
    return result.exit_code, " ".join((result.stdout + result.stderr).split())


def test_capacity_deployment_needs_a_name(tmp_path: Path) -> None:
    code, out = _check_llama(tmp_path, "{ctx: 8192}", name='""')
    assert code == 2 and "deployments.0.name" in out


def test_steady_state_requirement_fails_without_its_workload(tmp_path: Path) -> None:
    # min_steady_state_concurrency 0.5 with no prompt_len / output_len: the steady state is unknown, taken as 0
    code, out = _check_llama(tmp_path, "{ctx: 8192, min_steady_state_concurrency: 0.5}")
    assert code == 1 and "steady-state concurrency is 0.0, below 0.5 (give prompt_len and output_len)" in out


def test_vllm_tpu_v5e_batch_defaults() -> None:
    # engine/arg_utils.py EngineArgs.get_batch_defaults (TPU): V5E 512 batched tokens for the API server, 1,024
    # for the LLM class; 256 sequences
    v5e = Device(total_memory_bytes=16 * GIB, name="V5E", platform="tpu")  # type: ignore[arg-type]
    assert batch_defaults("0.34.0", v5e, UsageContext.API_SERVER) == (512, 256)
    assert batch_defaults("0.34.0", v5e, UsageContext.LLM_CLASS) == (1024, 256)


def test_fp8_ds_mla_is_one_byte_per_element_outside_vllm() -> None:
    # The formula engine prices fp8_ds_mla at its element width, 1 B (vLLM's own 656 B token layout is its engine
    # rule): DeepSeek-V3.2's 61 layers x (576-element latent + 128-element indexer key) x 1 B = 42,944 B per token.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    spec = parse_config(registry_config("deepseek-ai/DeepSeek-V3.2"))
    est = get_engine("formula", None).estimate(spec, ctx=1000, batch=1, kv_dtype=KvDtype.FP8_DS_MLA)
    assert est.kv_bytes_per_token == 61 * (576 + 128) == 42_944


def test_an_unread_release_takes_the_flags_of_its_neighbours() -> None:
    # SGLang 0.4.9.post7 lies between the read 0.4.9.post6 and 0.4.10: only flags both accept, not those of the
    # release before 0.4.9.post6
    from kvsize.launch import release_flags

    merged = set(release_flags("sglang", "0.4.9.post7").flags)
    assert merged == set(release_flags("sglang", "0.4.9.post6").flags) & set(release_flags("sglang", "0.4.10").flags)


def test_llamacpp_launch_notes_layers_only_over_several_stages() -> None:
    from typer.testing import CliRunner

    from kvsize.cli.app import app

    args = ["meta-llama/Llama-3.1-8B", "--ctx", "8192", "--gpu", "h100", "--engine", "llamacpp", "--emit", "llamacpp"]
    one = CliRunner().invoke(app, args)
    assert "splits layers over every visible GPU" not in one.stdout + one.stderr
    two = CliRunner().invoke(app, [*args, "--pp", "2"])
    assert "splits layers over every visible GPU" in " ".join((two.stdout + two.stderr).split())


def test_mllama_vision_tower_counted_module_by_module() -> None:
    # Llama-3.2-90B-Vision's tower (transformers 5.25 modeling_mllama.py MllamaVisionModel) + multi_modal_projector:
    # patch conv 3 x 14 x 14 x 1,280 + class 1,280; gated positional 1 + 1,601 x 1,280 (1,601 = (560 / 14)^2 + 1);
    # tile positional Embedding(9, 4 x 1,601 x 1,280) (9 = 8 aspect ratios + 1); pre / post tile embeddings
    # 2 x (1 + 9 x 4 x 1,280); layernorm_pre / post 2 x 2 x 1,280; 32 layers of 4 x 1,280^2 (no attention bias)
    # + fc1 1,280 x 5,120 + 5,120 + fc2 5,120 x 1,280 + 1,280 + 2 layernorms (19,672,320 each) and 8 global layers
    # with 2 gates more; projector 7,680 x 8,192 + 8,192. The meta-device MllamaVisionModel has 863,567,379.
    from kvsize.params import estimate_parameters

    layer = 4 * 1280 * 1280 + (1280 * 5120 + 5120) + (5120 * 1280 + 1280) + 2 * 2 * 1280
    tower = (
        3 * 14 * 14 * 1280 + 1280 + 1 + 1601 * 1280 + 9 * 4 * 1601 * 1280 + 2 * (1 + 9 * 4 * 1280) + 4 * 1280
        + 32 * layer + 8 * (layer + 2)
    )  # fmt: skip
    assert tower == 863_567_379
    counted = estimate_parameters(registry_config("meta-llama/Llama-3.2-90B-Vision-Instruct"))
    assert counted.breakdown["vision"] == tower + 7680 * 8192 + 8192


# --- round 21 (--seed 21, a fresh sample of 18 modules, on 56e8825) ------------------------------------------------


def test_llamacpp_old_kv_self_size_line_reads_both_types() -> None:
    # llama.cpp before the unified cache: "KV self size = T MiB, K (type): K MiB, V (type): V MiB"
    from kvsize.engine_log import parse_log

    log = parse_log(
        "llama_new_context_with_model: n_ctx      = 4096\n"
        "llama_new_context_with_model: KV self size  =  512.00 MiB, K (f16):  320.00 MiB, V (q8_0):  192.00 MiB\n"
    )
    assert log is not None and (log.settings["type_k"], log.settings["type_v"]) == ("f16", "q8_0")
    assert log.figures["kv_size_mib"] == 512.0


def test_prefill_compute_bound_splits_over_tp() -> None:
    # fit.py speed_bound: the prefill's compute floor is 2 x active parameters x tokens / (peak FLOPs x tp); at
    # 128k tokens an 8B model is compute-bound, so tp 2 halves it
    import json

    from typer.testing import CliRunner

    from kvsize.cli.app import app

    def prefill(tp: str) -> float:
        out = (
            CliRunner()
            .invoke(app, ["meta-llama/Llama-3.1-8B", "--ctx", "131072", "--gpu", "h100", "--tp", tp, "--json"])
            .stdout
        )
        return float(json.loads(out)["scenarios"][0]["gpu"]["speed"]["prefill_seconds_min"])

    one, two = prefill("1"), prefill("2")
    assert two == pytest.approx(one / 2, rel=1e-9)


def test_a_seven_byte_safetensors_file_is_too_short(tmp_path: Path) -> None:
    from kvsize.errors import KvsizeError
    from kvsize.weights import read_safetensors_header

    path = tmp_path / "model.safetensors"
    path.write_bytes(bytes(7))
    with pytest.raises(KvsizeError, match="only 7 bytes"):
        read_safetensors_header(path)


def test_capacity_yaml_tag_error_names_its_line(tmp_path: Path) -> None:
    # capacity_file.py load: the YAML error's line (mark.line is 0-based) goes to the GitHub annotation
    import os
    import subprocess
    import sys

    path = tmp_path / "c.yaml"
    path.write_text("deployments:\n  - name: d\n    model: !!python/object:os.system echo\n")
    run = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GITHUB_ACTIONS": "true"},
    )
    assert run.returncode == 2
    assert f"::error file={path},line=3," in run.stdout + run.stderr


def test_one_deployment_is_singular(tmp_path: Path) -> None:
    code, out = _check_llama(tmp_path, "{ctx: 8192}")
    assert code == 0 and "1 deployment: 1 pass, 0 fail" in out


def test_a_single_llamacpp_cache_has_no_total_row() -> None:
    # calibration.py: the "KV size" total row only for more than one cache (iSWA: the SWA and non-SWA halves)
    from kvsize.calibration import Deployment, check_log
    from kvsize.engine_log import parse_log

    text = (Path(__file__).parent / "data/logs/llamacpp-cuda-phi3-mini.log").read_text()
    log = parse_log(text)
    assert log is not None and len(log.caches) == 1
    names = [f.name for f in check_log(log, Deployment()).figures]
    assert "KV size" not in names


def test_calibration_card_mismatch_names_a_memory_only_card() -> None:
    from kvsize.calibration import Calibration, CalibrationTarget, calibration_mismatches

    cal = Calibration(model="meta-llama/Llama-3.1-8B", gpu="h100")
    target = CalibrationTarget(model="meta-llama/Llama-3.1-8B", gpu=None, engines=("vllm",), engine_version=None)
    assert any("a card given by its memory only" in m for m in calibration_mismatches(cal, target))


def test_steady_state_requests_bound_is_a_billion() -> None:
    from kvsize.deployment import MAX_REQUESTS, read_positive_number

    assert MAX_REQUESTS == 10**9
    assert read_positive_number(10**9) == 10**9
    with pytest.raises(UsageError):
        read_positive_number(10**9 + 1)


def test_llamacpp_per_head_mla_without_rope_dims() -> None:
    # llama.cpp b7445-b8164 (no MLA pinning): K and V per head, K = n_head x (nope + rope). DeepSeek-V2-Lite with
    # qk_rope_head_dim 0: K 16 x 128 and V 16 x 128 at f16 = 4,096 + 4,096 B per cell and layer
    import json

    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    raw = json.loads((Path(__file__).parent / "data/configs/deepseek-ai--DeepSeek-V2-Lite.json").read_text())
    raw["qk_rope_head_dim"] = 0
    spec = parse_config(raw)
    attn = next(layer.attention for layer in spec.layers if layer.attention is not None)
    assert get_engine("llamacpp", "b7445").row_bytes_per_cell(spec, attn, KvDtype.FP16) == 16 * 128 * 2 * 2


def test_vllm_all_mode_mamba_blocks_add_the_speculative_ones() -> None:
    # vLLM 0.22 MambaSpec in "all" mode (Nemotron-H, a SupportsMambaPrefixCaching model, now "all" under
    # speculation too): cdiv(max_model_len, block) + num_speculative_tokens blocks: cdiv(1,000, 16) + 2 = 65;
    # 0.21 keeps "align" while speculating: 2 + 2 speculative = 4 (no checkpoint blocks before 0.33)
    from kvsize.config import parse_config
    from kvsize.engines.vllm import VllmEngine

    spec = parse_config(registry_config("nvidia/Nemotron-H-56B-Base-8K"))
    state = next(layer.state for layer in spec.layers if layer.state is not None)
    new = VllmEngine("0.22.0", num_speculative_tokens=2, enable_prefix_caching=True)
    old = VllmEngine("0.21.0", num_speculative_tokens=2, enable_prefix_caching=True)
    assert (new.mamba_mode(spec), new.mamba_blocks(spec, state, 1000, 16)) == ("all", 63 + 2)
    assert (old.mamba_mode(spec), old.mamba_blocks(spec, state, 1000, 16)) == ("align", 4)


def test_latency_ttft_compute_floor_splits_over_tp() -> None:
    # fit.py latency_bounds: TTFT >= max(2 x active parameters x batch x ctx / (peak x tp), weights read / bw);
    # 8e9 parameters x 100,000 tokens x 2 = 1.6e15 FLOPs over 1e15 FLOP/s = 1.6 s, at tp 2 0.8 s (the weights
    # read, 1 GB at 1 TB/s = 1 ms, is far below)
    from kvsize.fit import Hardware, latency_bounds

    hw = Hardware(bandwidth_bytes_per_s=10**12, bf16_flops=10**15, active_parameters=8 * 10**9)

    def ttft(tp: int) -> float | None:
        (row,) = latency_bounds(
            weights_per_gpu=10**9, kv_per_request=lambda ctx: 0, hardware=hw, contexts=[100_000], batches=[1],
            itl_ms=50, tp=tp,
        )  # fmt: skip
        return row.ttft_seconds_min

    assert ttft(1) == pytest.approx(1.6) and ttft(2) == pytest.approx(0.8)


def test_one_request_is_singular_in_a_failure(tmp_path: Path) -> None:
    # capacity_file.py _plural: "1 request of 131,072 tokens take ..." (Llama-3.1-8B at 128k on an H100)
    code, out = _check_llama(tmp_path, "{ctx: 131072, max_kv_fraction: 0.01}")
    assert code == 1 and "1 request of 131,072 tokens take" in out and "1 requests" not in out


# --- round 22 (--seed 22, stop 37) ------------------------------------------------------------------------------


def test_nvfp4_ds_mla_storage_is_the_engines_nope_packing() -> None:
    # vllm.py _mla_bytes_per_token: NoPE e2m1 (2 per byte) + one e4m3 scale per 16 = 9 B per 16 elements; the
    # 512 NoPE elements take 288 B, + 64 RoPE e4m3 = 352 B (what --explain shows as the format's storage).
    from kvsize.dtypes import KvDtype
    from kvsize.engines.base import storage_text

    storage = KvDtype.NVFP4_DS_MLA.storage
    assert storage.bytes_for(512) == 512 // 2 + 512 // 16 == 288
    assert storage.bytes_for(512) + 64 == 352
    assert storage_text(KvDtype.NVFP4_DS_MLA).startswith("9 B per 16 elements")


def test_sglang_old_kv_line_with_one_unreadable_size_keeps_neither() -> None:
    # engine_log.py, SGLang ~0.4.1 "KV Cache is allocated. K size: X GB, V size: Y GB": K and V go in together
    from kvsize.engine_log import parse_log

    log = parse_log(
        "[2025] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1)\n"
        "[2025] KV Cache is allocated. K size: 27.13 GB, V size: nan GB\n[2025] max_total_num_tokens=444500\n"
    )
    assert log is not None and log.engine == "sglang"
    assert "k_size_gb" not in log.figures and "v_size_gb" not in log.figures


def test_an_unread_release_is_named_with_or_without_its_trailing_zero() -> None:
    # releases.py _release_of: 0.15 and 0.15.0 are one release; vLLM 0.15.x was never read (UNREAD_RELEASES)
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    for typed in ("0.15", "0.15.0", "0.15.1"):
        note = VLLM_RELEASES.resolve(typed).note
        assert note is not None and "source was not read" in note, typed
    assert VLLM_RELEASES.resolve("0.14.0").note is None


def test_sglang_pure_ssm_caches_no_kv_rows() -> None:
    # sglang.py layer_request_bytes: a stage with no attention layer has no row in the KV pool (0 bytes per token),
    # so _stage_pool falls back to the context length (--max-total-tokens unset), not a pool of negative rows
    import kvsize
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    s = kvsize.estimate("mistralai/Mamba-Codestral-7B-v0.1", ctx=4096, engine="sglang").scenarios[0]
    assert s.kv_bytes_per_token == 0
    assert s.bytes_per_request == s.state_bytes_per_request > 0
    spec = parse_config(registry_config("mistralai/Mamba-Codestral-7B-v0.1"))
    pool = get_engine("sglang", "0.5.23")._stage_pool(spec, spec.layers, 10 << 30, KvDtype.BF16, 1)  # type: ignore[attr-defined]
    assert pool.max_total_num_tokens == (spec.max_context or 0) == 0  # Mamba-Codestral states no context length
    assert pool.cell_size == 0


def test_sglang_all_sliding_hybrid_swa_pool_rounds_to_pages() -> None:
    # sglang.py _stage_pool with every layer pooled (no full layer): full = swa = rest // cell // page x page.
    # A Mistral-shaped tiny model opting in with is_hybrid_swa (0.5.23 swa_config_opt_in): 2 layers x 2 KV heads x
    # 64 x (K + V) x 2 B = 512 B per layer and token, cell 1,024 B; 1,000,000 B // 1,024 = 976 tokens, in pages of
    # 64: 960.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines import get_engine

    raw = {
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_size": 256,
        "sliding_window": 128,
        "max_position_embeddings": 4096,
        "is_hybrid_swa": True,
    }
    spec = parse_config(raw)
    engine = get_engine("sglang", "0.5.23", block_size=64)  # --page-size
    pool = engine._stage_pool(spec, spec.layers, 1_000_000, KvDtype.BF16, 1)  # type: ignore[attr-defined]
    assert engine.page_size == 64  # type: ignore[attr-defined]
    assert pool.max_total_num_tokens == 1_000_000 // 1024 // 64 * 64 == 960
    assert pool.max_total_num_tokens == pool.swa_max_total_num_tokens


def test_sglang_053_decode_graph_batch_on_a_24gb_card_at_tp4() -> None:
    # sglang_releases.py TIERS_053: under 35 GiB, chunk 2048 and decode CUDA-graph max_bs 16 below tp 4, 80 at tp 4
    from kvsize.engines.sglang import sglang_gpu_defaults
    from kvsize.engines.sglang_releases import RULES_053

    assert sglang_gpu_defaults(24_564, 4, RULES_053) == (2048, 80)
    assert sglang_gpu_defaults(24_564, 2, RULES_053) == (2048, 16)


def test_vllm_max_requests_leave_the_null_block_out() -> None:
    # vllm.py pool: max_requests = (num_blocks - 1) // blocks per request (the null block is never handed out).
    # Llama-3.1-8B at 1,024 tokens in blocks of 16 (0.19): 64 blocks per request of 2 MiB each; a budget of exactly
    # 640 blocks admits (640 - 1) // 64 = 9 requests, not 10.
    from kvsize.config import parse_config
    from kvsize.dtypes import KvDtype
    from kvsize.engines.vllm import VllmEngine

    spec = parse_config(registry_config("meta-llama/Llama-3.1-8B"))
    pool = VllmEngine("0.19.0").pool(
        spec, available_bytes=640 * 16 * 131_072, max_model_len=1024, kv_dtype=KvDtype.BF16
    )
    assert pool.num_blocks == 640
    assert pool.max_requests == 9


def test_evict_refuses_an_empty_cache() -> None:
    # serving.py evict: --tokens must be positive (0 is refused, not evaluated)
    from kvsize.serving import evict

    with pytest.raises(UsageError, match="--tokens and --block-size must be positive"):
        evict(0, 0, 16)
    with pytest.raises(UsageError, match="must be positive"):
        evict(16, 0, 0)


def test_zamba2_shared_attention_adapter_counts_as_transformers_builds_it() -> None:
    # params.py Zamba2: with use_shared_attention_adapter, each hybrid layer adds q, k, v LoRA adapters of
    # rank x (attention width in + out): 3 x rank x 2 x attention_hidden_size (2 x hidden_size).
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.zamba2 import Zamba2ForCausalLM

    from kvsize.params import estimate_parameters

    base = {
        "model_type": "zamba2",
        "hidden_size": 64,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "attention_head_dim": 32,
        "mamba_d_state": 16,
        "mamba_headdim": 16,
        "n_mamba_heads": 8,
        "mamba_ngroups": 1,
        "intermediate_size": 128,
        "vocab_size": 128,
        "adapter_rank": 8,
        "num_mem_blocks": 1,
        "hybrid_layer_ids": [2, 5],
        "layers_block_type": ["mamba", "mamba", "hybrid", "mamba", "mamba", "hybrid"],
    }

    def transformers_count(**changes: Any) -> int:
        config = CONFIG_MAPPING["zamba2"](**{k: v for k, v in {**base, **changes}.items() if k != "model_type"})
        with torch.device("meta"):
            model = Zamba2ForCausalLM(config)
        return sum(p.numel() for p in model.parameters())

    on, off = {"use_shared_attention_adapter": True}, {"use_shared_attention_adapter": False}
    ours = estimate_parameters({**base, **on}).total - estimate_parameters({**base, **off}).total
    theirs = transformers_count(**on) - transformers_count(**off)
    assert ours == theirs == 2 * 3 * 8 * 2 * (2 * 64)
