"""A small mutation-testing runner for the modules that decide kvsize's answer.

    .venv/bin/python benchmarks/mutants.py --modules kvsize/budget.py kvsize/units.py \\
        --per-module 10 --seed 1 --report docs/testing.md [--json benchmarks/mutants.json]

Each mutant changes one operator in one module, AST-based: a comparison flipped (`<` <-> `<=`, `>` <-> `>=`,
`==` <-> `!=`, `in` <-> `not in`, `is` <-> `is not`), an integer constant moved by +1 or -1, `and` <-> `or`,
an arithmetic operator swapped (`+` <-> `-`, `*` -> `//`, `/` and `//` -> `*`, `%` -> `//`, `**` -> `*`),
a bool return negated (`return True` <-> `return False`; `return x` -> `return not (x)` in a `-> bool`
function), a `not` dropped, or a `max(` / `min(` bound removed (the call replaced by one of its arguments).
Annotations are never mutated (they are not evaluated here).

The package is copied once into a temporary tree (every other top-level entry of the repository linked beside
it, so tests find their data at the same relative paths); each mutant is written over its module there and the
module's MAPPED test files run against it (`pytest -x -q -n 0 --no-header -p no:cacheprovider FILES`, from
the temporary tree, bytecode off), with a per-mutant timeout. A failing or timed-out run kills the mutant.
Before the mutants, the unmutated module (as `ast.unparse` writes it, the same path the mutants take) must
pass those tests, or the module is skipped.

Mutants are sampled per module with `random.Random(f"{seed}:{module}")` from the full list sorted by
position, so a run is deterministic for a seed. The score is killed / (sampled - equivalent), the equivalent
mutants being those listed with their reason in EQUIVALENT below. With `--report`, the table and the
survivors replace the text between the `<!-- mutants:begin -->` and `<!-- mutants:end -->` markers of that
markdown file (appended if the markers are missing). A benchmark, not a gate: it exits 0 whatever the score.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- mutants:begin -->", "<!-- mutants:end -->"

# Module -> the test files that pin its rules (files that import it directly, plus those that reach it
# through the engine or CLI). A module not listed gets the test files that import it by name.
TEST_MAP: dict[str, list[str]] = {
    "kvsize/engines/vllm_releases.py": [  # the eras' switches, read by every vLLM sizing
        "tests/test_mm_profile.py",
        "tests/test_qwen_windows.py",
        "tests/test_vllm_eras.py",
        "tests/test_vllm_034.py",
        "tests/test_engine_vllm.py",
        "tests/test_engine_vllm_truth.py",
        "tests/test_vllm_gemma4.py",
        "tests/test_vllm_mimo.py",
        "tests/test_mutants_killed.py",
        "tests/test_mm_limits.py",
    ],
    "kvsize/engines/vllm_scheduler.py": [
        "tests/test_vllm_eras.py",
        "tests/test_engine_vllm_truth.py",
        "tests/test_vllm_gemma4.py",  # the DGX Spark log's batch tier (vllm#39734)
        "tests/test_mutants_killed.py",
    ],
    "kvsize/engines/releases.py": [
        "tests/test_engine_releases.py",
        "tests/test_vllm_eras.py",
        "tests/test_mutants_killed.py",
    ],
    "kvsize/budget.py": [
        "tests/test_budget_truth.py",
        "tests/test_budget_cards.py",
        "tests/test_planner.py",
        "tests/test_engine_logs.py",
        "tests/test_rope_tables.py",
        "tests/test_engine_sglang_releases.py",
        "tests/test_vllm_034.py",  # the measured pool of vLLM 0.34 (_vllm_measured)
        "tests/test_mxfp4_padding.py",  # vllm_mxfp4_padding
        "tests/test_enforce_eager.py",  # BudgetSettings.enforce_eager
        "tests/test_mm_profile.py",  # the multimodal profile peak (_profile_peak)
        "tests/test_language_model_only.py",
        "tests/test_expert_parallel.py",
        "tests/test_mutants_killed.py",
        "tests/test_mm_limits.py",
    ],
    "kvsize/mm_profile.py": ["tests/test_mm_profile.py", "tests/test_mm_limits.py", "tests/test_mutants_killed.py"],
    "kvsize/rope_tables.py": ["tests/test_rope_tables.py", "tests/test_budget_small_cards.py"],
    "kvsize/units.py": ["tests/test_units.py", "tests/test_range_errors.py", "tests/test_mutants_killed.py"],
    "kvsize/engine_log.py": [
        "tests/test_log_workers.py",
        "tests/test_reliability_log.py",
        "tests/test_log_corpus.py",
        "tests/test_log_command.py",
        "tests/test_vllm_034.py",  # 0.34's "Memory after warmup" and "Free memory on device" lines
        "tests/test_enforce_eager.py",  # enforce_eager in the args dict and the config line
        "tests/test_language_model_only.py",
        "tests/test_expert_parallel.py",
        "tests/test_mutants_killed.py",
        "tests/test_mm_limits.py",
        "tests/test_mm_profile.py",
    ],
    # calibration.py: kvsize log's checks, the corpus, the budget parts and 0.34's release of an unversioned log.
    "kvsize/calibration.py": [
        "tests/test_log_workers.py",
        "tests/test_log_command.py",
        "tests/test_log_corpus.py",
        "tests/test_log_parts.py",
        "tests/test_reliability_log.py",
        "tests/test_vllm_034.py",
        "tests/test_mxfp4_padding.py",
        "tests/test_enforce_eager.py",
        "tests/test_language_model_only.py",
        "tests/test_expert_parallel.py",
        "tests/test_mutants_killed.py",
        "tests/test_mm_limits.py",
        "tests/test_mm_profile.py",
    ],
    "kvsize/engines/sglang.py": [
        "tests/test_engine_sglang_releases.py",
        "tests/test_engines_sglang_trtllm_llamacpp.py",
        "tests/test_engine_truth_others.py",
        "tests/test_serving.py",  # the radix cache's page-aligned prefix hits (prefix_shared_tokens)
        "tests/test_served_dtype.py",  # float32 checkpoints run in fp16 / bf16 (served_dtype)
        "tests/test_sglang_mimo.py",
        "tests/test_sglang_gemma4.py",
        "tests/test_mutants_killed.py",
    ],
    # deployment.py: the settings' readers, shared by the CLI and capacity files
    "kvsize/deployment.py": [
        "tests/test_reliability_gates.py",
        "tests/test_capacity.py",
        "tests/test_mm_limits.py",
        "tests/test_mutants_killed.py",
    ],
    # sglang_releases.py: the eras' switches, read by every SGLang sizing
    "kvsize/engines/sglang_releases.py": [
        "tests/test_mutants_killed.py",
        "tests/test_engine_sglang_releases.py",
        "tests/test_sglang_gemma4.py",
        "tests/test_sglang_mimo.py",
        "tests/test_engines_sglang_trtllm_llamacpp.py",
    ],
    # fit.py: the files that import it (the speed, latency and --bench-result bounds, the pool figures, the
    # context limits) besides the verdicts and the max-context search.
    "kvsize/fit.py": [
        "tests/test_verdicts.py",
        "tests/test_max_context_search.py",
        "tests/test_latency_bounds.py",
        "tests/test_speed_moe.py",
        "tests/test_bench_result.py",
        "tests/test_capacity.py",
        "tests/test_overrides.py",
        "tests/test_mm_profile.py",
        "tests/test_mxfp4_padding.py",
        "tests/test_mutants_killed.py",
        "tests/test_sglang_gemma4.py",
    ],
    # serving.py: the files that import it, and the CLI's hand-worked shared-prefix sizes (test_advice_truth.py).
    "kvsize/serving.py": [
        "tests/test_serving.py",
        "tests/test_reliability_readers.py",
        "tests/test_advice_truth.py",
        "tests/test_mutants_killed.py",
    ],
    # config.py: the parser's own tests, the never-silent corpus, the family files worked from transformers, and
    # the registry's hand-derived shapes (tests/expected_kv.py through test_registry_models.py).
    "kvsize/cache_fields.py": [
        "tests/test_saved_config_variants.py",
        "tests/test_deepseek_v4.py",
        "tests/test_families_2026.py",
        "tests/test_families_round4.py",
        "tests/test_families_round5.py",
        "tests/test_hostile_inputs.py",
        "tests/test_never_silent.py",
        "tests/test_ergo.py",
        "tests/test_mutants_killed.py",
    ],
    "kvsize/config.py": [
        "tests/test_saved_config_variants.py",
        "tests/test_qwen_windows.py",
        "tests/test_class_layer_patterns.py",
        "tests/test_config.py",
        "tests/test_never_silent.py",
        "tests/test_registry_models.py",
        "tests/test_families_2026.py",
        "tests/test_families_round4.py",
        "tests/test_families_round5.py",
        "tests/test_deepseek_v4.py",
        "tests/test_ergo.py",
        "tests/test_mxfp4_padding.py",
        "tests/test_mm_profile.py",
        "tests/test_mutants_killed.py",
    ],
    "kvsize/capacity_file.py": [
        "tests/test_capacity.py",
        "tests/test_check_memo.py",
        "tests/test_reliability_gates.py",
        "tests/test_reliability_round3.py",  # kvsize check --calibration for the whole file
        "tests/test_mutants_killed.py",
    ],
    "kvsize/weights.py": [
        "tests/test_saved_config_variants.py",
        "tests/test_weights.py",
        "tests/test_quantized_weights.py",
        "tests/test_reliability_sources.py",
        "tests/test_engine_logs.py",
        "tests/test_served_dtype.py",
        "tests/test_weights_named.py",
        "tests/test_budget_cards.py",  # --dtype float32 doubles an unquantized checkpoint
        "tests/test_log_command.py",  # kvsize log of a float32 run
        "tests/test_reliability_gates.py",  # float8 configs served in bf16
        "tests/test_language_model_only.py",
        "tests/test_mutants_killed.py",
        "tests/test_mm_limits.py",
    ],
    "kvsize/params.py": [
        "tests/test_params.py",
        "tests/test_reliability_sources.py",
        "tests/test_speed_moe.py",
        "tests/test_mutants_killed.py",
    ],
    # engines/formula.py: reached through the engine registry (`--engine formula`), never imported by name.
    "kvsize/engines/formula.py": [
        "tests/test_sizing.py",
        "tests/test_families_round5.py",
        "tests/test_deepseek_v4.py",
        "tests/test_serving.py",
        "tests/test_registry_models.py",
        "tests/test_mutants_killed.py",
    ],
    # spec.py / dtypes.py: the records and storage formats every engine reads; the files that pin their
    # invariants and byte counts by hand (not all 28 that import them, for time).
    "kvsize/spec.py": [
        "tests/test_sizing.py",
        "tests/test_records.py",
        "tests/test_config.py",
        "tests/test_families_round5.py",
        "tests/test_mm_profile.py",
        "tests/test_mutants_killed.py",
    ],
    "kvsize/dtypes.py": [
        "tests/test_sizing.py",
        "tests/test_engine_vllm_truth.py",
        "tests/test_engines_sglang_trtllm_llamacpp.py",
        "tests/test_engine_llamacpp_releases.py",
        "tests/test_mutants_killed.py",
    ],
    "kvsize/engines/trtllm.py": [
        "tests/test_engine_trtllm_releases.py",
        "tests/test_engines_sglang_trtllm_llamacpp.py",
        "tests/test_engine_truth_others.py",
        "tests/test_serving.py",  # block reuse's whole blocks and VSWA windows (prefix_shared_tokens)
        "tests/test_mutants_killed.py",
    ],
    "kvsize/engines/llamacpp.py": [
        "tests/test_engine_llamacpp_releases.py",
        "tests/test_engines_sglang_trtllm_llamacpp.py",
        "tests/test_engine_truth_others.py",
        "tests/test_mutants_killed.py",
    ],
    # engines/hf.py: its own tests and the transformers oracles (meta device: shapes, no memory)
    "kvsize/engines/hf.py": [
        "tests/test_engine_hf.py",
        "tests/test_hf_oracle.py",
        "tests/test_families_round4.py",  # MiMo-V2-Flash's fixed layout (HfEngine._check_mimo)
        "tests/test_families_round5.py",
        "tests/test_deepseek_v4.py",
        "tests/test_max_context_search.py",  # DeepSeek-V4's falling bytes (HfEngine.peak_request_bytes)
        "tests/test_mutants_killed.py",
    ],
    # engines/vllm.py: the files that import it, and those that size through the default engine by hand.
    "kvsize/engines/vllm.py": [
        "tests/test_qwen_windows.py",
        "tests/test_engine_vllm.py",
        "tests/test_engine_vllm_truth.py",
        "tests/test_vllm_eras.py",
        "tests/test_engine_logs.py",
        "tests/test_sizing.py",
        "tests/test_families_2026.py",
        "tests/test_log_corpus.py",
        "tests/test_serving.py",  # prefix caching's whole blocks and windows (prefix_shared_tokens)
        "tests/test_vllm_gemma4.py",
        "tests/test_vllm_mimo.py",
        "tests/test_vllm_034.py",
        "tests/test_mutants_killed.py",
    ],
}

# Mutants that cannot change any result, keyed by their id (module:line:col:operator), with the reason.
_SGLANG_SHARED_ROW = (
    "SglangEngine.attention_bytes_per_token is never called with a SHARED layer: layer_request_bytes sizes a "
    "shared layer's row with `_reference` (SGLang gives every layer of the stage a buffer), the SWA pool takes "
    "sliding / chunked layers and drops SHARED from the full ones, and the base paths that would pass one are "
    "overridden; the early return is also redundant (the fallthrough gives 0: head_dim 0). Checked by "
    "instrumenting the method over the SGLang test files, Gemma 3n's 15 shared layers (before SGLang refused Gemma "
    "3n) and a Llama config with num_kv_shared_layers 2 (estimate, pool and prefix share; bf16 and nvfp4; 0.5.4 "
    "and 0.5.23): no SHARED call. Only a direct call with a SHARED layer sees it, and no test should pin 0 there: "
    "SGLang's own figure for such a layer is the reference row."
)
_NO_BLOCK_FALLBACK = (
    "`block = engine.block_size(...) or 1` falls back only for engines whose block_size is None (formula, hf, "
    "llama.cpp), and `block` is read only by their prefix_shared_tokens: formula's ignores it (exact tokens), "
    "hf and llama.cpp share nothing (shares_prefixes False: the call is not even made). vLLM, SGLang and "
    "TensorRT-LLM never return None or 0 (their defaults replace a 0 block size)."
)
_ANNOTATED_PAIR = (
    "`kind, meta = get_args(info.type)[:2]`: every DeploymentSettings field is Annotated[type, Meta] (checked: "
    "get_args gives exactly 2 items for each), so [:3] slices the same two; a field with a second metadata would "
    "fail the unpacking at import, under every test."
)
_FIRST_KEY_LINE = (
    "`_line_of` looks for the key only once no key equals `part` (`found` is None): then the `!=` twin takes the "
    "mapping's first key, whose line is the mapping node's own start line (a block or flow mapping starts at its "
    "first key), which is what the original returns as `line` when no key matches. An empty mapping gives None "
    "both ways."
)
_HIT_WITHIN_CTX = (
    "formula prefix_shared_tokens is called only by serving.py prefix_share, with hit = min(prefix_len, ctx, "
    "prompt_len): hit <= ctx already, so min(hit, ctx) is hit."
)
_POSITIVE_MINIMUM = (
    "`(steady or 0) < req.min_steady_state_concurrency`: the minimum is a positive number (deployment.py "
    "read_positive_number, units.parse_number: above 0), so a missing or zero steady state is below it as 0 and as "
    "-1 alike; any other steady value is used as it is."
)
_LIGHTNING_NO_CONV = (
    "config.py _lightning_state: conv_channels=1 with conv_kernel=1, so every engine keeps conv_kernel - 1 = 0 "
    "convolution inputs (Engine.conv_state_kept; TensorRT-LLM's conv_dim // tp x kept) and hf's lightning branch "
    "returns the K^T V state alone: the channel count multiplies 0 everywhere it is read."
)
_PREFILL_BUCKET_END = (
    "sglang.py prefill_graph_sizes: range(288, 513, 32) and range(288, 514, 32) yield the same buckets, 288 .. 512 "
    "(the next, 544, is past either end)."
)
_NVML_ZERO = (
    "batch_defaults reads `memory` only against the 160 GiB and 70 GiB tier bounds, so the 0 GiB a failed NVML "
    "query gives (arg_utils.py: device_memory = 0) and -1 or 1 byte fall in the same small tier; the note names "
    "the cause from _reads_no_total, not from this value."
)

_FIT_ZERO_BUDGET = (
    "memory_fits = kv_budget_bytes >= 0 and batch x per_request <= kv_budget_bytes: with `> 0` the two differ "
    "only at a budget of exactly 0 bytes with a request of 0 bytes, and every model kvsize sizes caches something "
    "per request (an attention layer storing no elements, or a spec without attention or state, is refused by "
    "spec.py), so at a 0-byte budget both say no."
)
_TRT_POOL_RUNTIME_DEFAULT = (
    "TrtllmPool.runtime_bytes_per_token is read nowhere (grep: only its constructor sets it), so its default, which "
    "only the empty-pool fallback TrtllmPool(0, 0, 0, 0, bs) takes, changes no figure."
)
_TRT_NO_SHARED_PREFIX = (
    "TrtllmEngine.prefix_shared_tokens returns 0 for CROSS and SHARED layers, and no call reaches it with one: "
    "serving.prefix_share passes each layer's own attention, never its cross-attention (layer.cross), and "
    "TensorRT-LLM refuses the models with SHARED layers (Gemma 3n, Gemma 4's KV-shared layers; check_layout)."
)
_HF_V4_ONE_HEAD = (
    "DeepSeek-V4's sliding layers are parsed with num_kv_heads=1 whatever the config says (config.py: 'DeepSeek-V4 "
    "caches one K = V head'), so 2 x heads and 2 // heads are both 2."
)

_DEEPSTACK_COUNT_ONLY = (
    "params.py _qwen3_5_vision counts one merger per deepstack_visual_indexes entry: the default list's values "
    "(which layers feed them) do not size the tower, only its length (3)."
)

_START_USE_ROUNDING = (
    "calibration.py _vllm_budget_parts: the start-up use is the difference of two figures vLLM prints with two "
    "decimals (format_gib), so rounding it to 2 or to 3 decimals gives the same number."
)
_SERVED_WIDTHS = (
    "weights.py _widened: a served dtype is fp16, bf16 or fp32 (--dtype: kvsize.engines.context.SERVED_DTYPES), 16 "
    "or 32 bits, so `<= 16` and `<= 17` part them the same."
)
_QWEN3_ALL_FULL = (
    "engines/vllm.py served_attention: a partly sliding Qwen config reaches it only as Qwen3 at 0.34+ (check_supported "
    "refuses Qwen2 at any release and Qwen3 before 0.34), where both sides of `and` are true; any other config is "
    "not partly sliding, so the third condition is false either way: `and` and `or` decide the same."
)
_UNUSED_DEFAULTS = (
    "fit.py grown_request_bytes: its callers (max_context, and the search test's oracle) pass tp and pp, so "
    "the defaults of 1 are never read."
)
_NONZERO_SIGN = (
    "a sign test under `if padding:` / `if budget.loading_padding_bytes:` (a nonzero integer): `> 0`, `>= 0` and "
    "`> -1` decide the same."
)
_PLAN_FIT_TP = (
    "fit.py plan_fit: its one caller (api.py _scenario) passes tp and pp, so the default of 1 is never read."
)
_LRU_SIZE = "capacity_file.py _loaded's lru_cache size: how many configs stay cached, not what they size."
_MAMBA2_CLASS_HEAD_DIM = (
    "config.py Mamba-2 `head_dim or 64`: a mamba2 config without head_dim takes transformers' Mamba2Config "
    "default 64 first (kvsize/data/head_dim_defaults.json, config.class_defaults), and every other model type "
    "without one returns a Mamba-1 state above, so the fallback is never read."
)
_SPLIT_POOL_BINDS = (
    "fit.py plan_fit `min(by_memory, split[1])`: a request's SWA slots fit the SWA pool's 0.8 share below its "
    "cap, so b x (full x ctx + swa x slots) <= full tokens x (full + 0.8 x swa) = the budget at the pools' longest "
    "context: the byte search never finds a shorter one, and the pools' figure is the minimum."
)
_LIFE_SUM_BASE = (
    "serving.py affine_life_sum `b - a <= 1 or <linear>`: with b - a <= 1 the midpoint is a, and size(a) x (b - a) "
    "= fa x (b - a) + fb x 0 holds for any size: the linear test is true wherever the base case is, so `and` "
    "decides the same."
)
_SGLANG_NO_REFERENCE = (
    "sglang.py layer_request_bytes `if ref is None: return 0, 0, state`: a model with state takes the hybrid branch "
    "above, and one without state always has an attention layer to size rows with, so the model-level reference "
    "is never missing here."
)
_SGLANG_SERIES_DEPTH = (
    "sglang_releases.py the 0.5.16-0.5.17 era's series_depth: at depth 2 its span is still `0.5.16-0.5.17` (the "
    "next era, 0.5.18, shares both series), and span() is the only reader."
)
_TRTLLM_NO_ATTENTION = (
    "trtllm.py pool's empty TrtllmPool: reached only when no pipeline stage has an attention layer, and "
    "check_serves refuses every attention-free architecture (no _torch/models implementation)."
)
EQUIVALENT: dict[str, str] = {
    "kvsize/engines/sglang.py:854:19:0 -> -1": _SGLANG_NO_REFERENCE,
    "kvsize/engines/sglang_releases.py:284:79:3 -> 2": _SGLANG_SERIES_DEPTH,
    "kvsize/engines/trtllm.py:430:68:0 -> -1": _TRTLLM_NO_ATTENTION,
    "kvsize/serving.py:570:11:or -> and": _LIFE_SUM_BASE,
    "kvsize/fit.py:819:20:min(...) -> arg 1": _SPLIT_POOL_BINDS,
    "kvsize/fit.py:755:14:1 -> 2": _PLAN_FIT_TP,
    "kvsize/capacity_file.py:315:19:256 -> 257": _LRU_SIZE,
    "kvsize/config.py:1630:27:64 -> 65": _MAMBA2_CLASS_HEAD_DIM,
    "kvsize/calibration.py:347:49:> -> >=": _NONZERO_SIGN,
    "kvsize/calibration.py:347:58:0 -> -1": _NONZERO_SIGN,
    "kvsize/fit.py:787:26:> -> >=": _NONZERO_SIGN,
    "kvsize/fit.py:787:35:0 -> -1": _NONZERO_SIGN,
    "kvsize/fit.py:787:35:0 -> 1": _NONZERO_SIGN + " The change is a padding or a tower, never one byte.",
    "kvsize/fit.py:639:95:1 -> 0": _UNUSED_DEFAULTS,
    "kvsize/fit.py:639:95:1 -> 2": _UNUSED_DEFAULTS,
    "kvsize/fit.py:639:108:1 -> 0": _UNUSED_DEFAULTS,
    "kvsize/fit.py:639:108:1 -> 2": _UNUSED_DEFAULTS,
    "kvsize/engines/vllm.py:386:19:and -> or": _QWEN3_ALL_FULL,
    "kvsize/weights.py:741:36:16 -> 17": _SERVED_WIDTHS,
    "kvsize/weights.py:734:58:16 -> 15": (
        "weights.py _widened: --weights-dtype names a format of 4, 4.x, 8, 16 or 32 bits (WEIGHT_BITS), none between "
        "15 and 16, so `>= 16` and `>= 15` part them the same."
    ),
    "kvsize/calibration.py:241:73:2 -> 3": _START_USE_ROUNDING,
    "kvsize/params.py:1189:33:8 -> 9": _DEEPSTACK_COUNT_ONLY,
    "kvsize/params.py:1189:33:8 -> 7": _DEEPSTACK_COUNT_ONLY,
    "kvsize/fit.py:812:18:>= -> >": _FIT_ZERO_BUDGET,
    "kvsize/engines/trtllm.py:146:35:0 -> 1": _TRT_POOL_RUNTIME_DEFAULT,
    "kvsize/engines/trtllm.py:297:19:0 -> 1": _TRT_NO_SHARED_PREFIX,
    "kvsize/engines/hf.py:434:19:* -> //": _HF_V4_ONE_HEAD,
    "kvsize/engines/vllm_scheduler.py:89:17:0 -> -1": _NVML_ZERO,
    "kvsize/engines/vllm_scheduler.py:89:17:0 -> 1": _NVML_ZERO,
    "kvsize/config.py:1440:22:1 -> 2": _LIGHTNING_NO_CONV,
    "kvsize/capacity_file.py:444:67:0 -> -1": _POSITIVE_MINIMUM,
    "kvsize/capacity_file.py:82:42:2 -> 3": _ANNOTATED_PAIR,
    "kvsize/capacity_file.py:230:56:== -> !=": _FIRST_KEY_LINE,
    "kvsize/engines/formula.py:94:26:min(...) -> arg 0": _HIT_WITHIN_CTX,
    "kvsize/engines/formula.py:95:15:min(...) -> arg 0": _HIT_WITHIN_CTX,
    "kvsize/engines/sglang.py:629:19:0 -> -1": _SGLANG_SHARED_ROW,
    "kvsize/engines/sglang.py:629:19:0 -> 1": _SGLANG_SHARED_ROW,
    "kvsize/serving.py:86:53:1 -> 2": _NO_BLOCK_FALLBACK,
    "kvsize/serving.py:86:53:1 -> 0": _NO_BLOCK_FALLBACK,
    "kvsize/engines/sglang.py:287:26:513 -> 514": _PREFILL_BUCKET_END,
}


@dataclass
class Mutant:
    module: str
    line: int
    col: int
    op: str
    before: str
    after: str
    index: int = field(repr=False)  # position of the node in ast.walk order
    variant: int = field(repr=False)
    status: str = "not run"
    seconds: float = 0.0

    @property
    def id(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.op}"


COMPARE_FLIP: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BINOP_SWAP: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.And: "and",
    ast.Or: "or",
}


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside an annotation (never evaluated: the modules use postponed annotations)."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(sub) for root in roots for sub in ast.walk(root)}


def _returns_bool(func: ast.AST) -> bool:
    returns = getattr(func, "returns", None)
    return (isinstance(returns, ast.Name) and returns.id == "bool") or (
        isinstance(returns, ast.Constant) and returns.value == "bool"
    )


def _bool_functions(tree: ast.AST) -> set[int]:
    """ids of the Return nodes that belong directly to a function annotated `-> bool`."""
    out: set[int] = set()

    def visit(node: ast.AST, in_bool: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, _returns_bool(child))
            else:
                if isinstance(child, ast.Return) and in_bool:
                    out.add(id(child))
                visit(child, in_bool)

    visit(tree, False)
    return out


def _variants(node: ast.AST, bool_returns: set[int]) -> list[tuple[str, ast.AST]]:
    """Every (operator name, mutated copy of `node`) that applies to this node."""
    out: list[tuple[str, ast.AST]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in COMPARE_FLIP:
                new = copy.deepcopy(node)
                new.ops[i] = COMPARE_FLIP[type(op)]()
                out.append((f"{SYMBOL[type(op)]} -> {SYMBOL[COMPARE_FLIP[type(op)]]}", new))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        for delta in (1, -1):
            out.append((f"{node.value} -> {node.value + delta}", ast.Constant(node.value + delta)))
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append((f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}", new))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP_SWAP:
        new = copy.deepcopy(node)
        new.op = BINOP_SWAP[type(node.op)]()
        out.append((f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}", new))
    elif isinstance(node, ast.Return) and node.value is not None:
        value = node.value
        if isinstance(value, ast.Constant) and type(value.value) is bool:
            out.append((f"return {value.value} -> {not value.value}", ast.Return(ast.Constant(not value.value))))
        elif id(node) in bool_returns and not (isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)):
            out.append(("return x -> not x", ast.Return(ast.UnaryOp(ast.Not(), copy.deepcopy(value)))))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not x -> x", copy.deepcopy(node.operand)))
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("max", "min")
        and len(node.args) >= 2
        and not node.keywords
        and not any(isinstance(a, ast.Starred) for a in node.args)
    ):
        for i, arg in enumerate(node.args):
            out.append((f"{node.func.id}(...) -> arg {i}", copy.deepcopy(arg)))
    return out


def enumerate_mutants(module: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    skip = _annotation_nodes(tree)
    bool_returns = _bool_functions(tree)
    mutants: list[Mutant] = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        variants = _variants(node, bool_returns)
        before = ast.unparse(node).splitlines()[0][:80] if variants else ""
        for variant, (op, new) in enumerate(variants):
            after = ast.unparse(ast.fix_missing_locations(new)).splitlines()[0][:80]
            mutants.append(Mutant(module, node.lineno, node.col_offset, op, before, after, index, variant))
    return mutants


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, new: ast.AST) -> None:
        self.target, self.new = target, new

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return ast.copy_location(self.new, node)
        return super().visit(node)


def mutated_source(source: str, mutant: Mutant) -> str:
    tree = ast.parse(source)
    bool_returns = _bool_functions(tree)
    target = next(node for i, node in enumerate(ast.walk(tree)) if i == mutant.index)
    _, new = _variants(target, bool_returns)[mutant.variant]
    return ast.unparse(ast.fix_missing_locations(_Replace(target, new).visit(tree)))


def mapped_tests(module: str) -> list[str]:
    if module in TEST_MAP:
        return [t for t in TEST_MAP[module] if (ROOT / t).exists()]
    dotted = module.removesuffix(".py").replace("/", ".")
    parent, _, name = dotted.rpartition(".")
    needles = (dotted, f"from {parent} import {name}")
    return sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").glob("test_*.py")
        if any(n in p.read_text(encoding="utf-8") for n in needles)
    )


def make_tree(tmp: Path, ref: str | None, overlay: list[str]) -> str:
    """The package copied, every other top-level entry linked, so relative paths resolve as in the repo; or,
    with `ref`, the whole tree of that commit (a stable base while the working tree is being edited) with the
    `overlay` files of the working tree copied over it. Returns what the tree is, in words."""
    if ref is not None:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", ref], capture_output=True, text=True, check=True
        ).stdout.strip()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        for name in overlay:
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp / name)
        return f"commit {commit[:12]}" + (f" with {', '.join(overlay)} from the working tree" if overlay else "")
    for entry in ROOT.iterdir():
        if entry.name in ("kvsize", ".git", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"):
            continue
        (tmp / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "kvsize", tmp / "kvsize", ignore=shutil.ignore_patterns("__pycache__"))
    return "the working tree"


def run_tests(
    tmp: Path, tests: list[str], timeout: float, why: list[str] | None = None, options: tuple[str, ...] = ("-x",)
) -> tuple[str, float]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "pytest", *options, "-q", "-n", "0", "--no-header", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start
    if why is not None:
        why.extend(proc.stdout.decode(errors="replace").splitlines())
    return ("survived" if proc.returncode == 0 else "killed"), time.monotonic() - start


def changed_lines(module: str, since: str, ref: str | None) -> set[int]:
    """Lines of `module` (at `ref`, else in the working tree) that `git diff` adds or changes since `since`."""
    target = [since, ref] if ref else [since]
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "-U0", *target, "--", module], capture_output=True, text=True, check=True
    ).stdout
    lines: set[int] = set()
    for hunk in diff.splitlines():
        if hunk.startswith("@@"):
            added = hunk.split()[2].lstrip("+")  # "+start[,count]"
            start, _, count = added.partition(",")
            lines.update(range(int(start), int(start) + (int(count) if count else 1)))
    return lines


def sample_mutants(module: str, source: str, per_module: int, seed: int, lines: set[int] | None) -> tuple[int, list]:
    """(candidates, the sample): `per_module` of the module's mutants (those on `lines` only, when given), drawn
    with random.Random(f"{seed}:{module}") from the list sorted by position."""
    everything = sorted(enumerate_mutants(module, source), key=lambda m: (m.line, m.col, m.op))
    if lines is not None:
        everything = [m for m in everything if m.line in lines]
    rng = random.Random(f"{seed}:{module}")
    picked = rng.sample(everything, min(per_module, len(everything)))
    return len(everything), sorted(picked, key=lambda m: (m.line, m.col, m.op))


def run_module(
    tmp: Path,
    module: str,
    per_module: int,
    seed: int,
    log: bool,
    known: dict[str, str] | None = None,
    lines: set[int] | None = None,
) -> tuple[list[Mutant], dict]:
    """Sample and run `module`'s mutants; those `known` to be killed already (by id) keep that status."""
    path = tmp / module
    original = path.read_text(encoding="utf-8")
    tests = [t for t in mapped_tests(module) if (tmp / t).exists()]
    candidates, sample = sample_mutants(module, original, per_module, seed, lines)
    info = {"module": module, "tests": tests, "candidates": candidates, "baseline": "pass", "seconds": 0.0}
    try:
        path.write_text(ast.unparse(ast.parse(original)), encoding="utf-8")
        # The unmutated module runs every mapped test once; a test that fails already is deselected (and named
        # in the report), since it cannot tell a mutant from the original.
        why: list[str] = []
        status, seconds = run_tests(tmp, tests, timeout=900, why=why, options=("-rf",))
        failing = [line.split()[1] for line in why if line.startswith("FAILED ")]
        info["deselected"] = failing
        tests = [*tests, *(f"--deselect={t}" for t in failing)]
        if failing:
            status, seconds = run_tests(tmp, tests, timeout=900, why=why)
        info["seconds"] = round(seconds, 1)
        if status != "survived" or not info["tests"]:
            info["baseline"] = "fails unmutated" if info["tests"] else "no mapped tests"
            print("\n".join(why[-15:]), file=sys.stderr)
            return [], info
        limit = 3 * seconds + 30
        for m in sample:
            if (known or {}).get(m.id) in ("killed", "timeout"):
                m.status = (known or {})[m.id]
                continue
            path.write_text(mutated_source(original, m), encoding="utf-8")
            m.status, m.seconds = run_tests(tmp, tests, limit)
            m.seconds = round(m.seconds, 1)
            if log:
                print(f"{m.status:9} {m.seconds:6.1f}s {m.id}  {m.before} => {m.after}", file=sys.stderr, flush=True)
    finally:
        path.write_text(original, encoding="utf-8")
    return sample, info


def markdown(results: list[tuple[list[Mutant], dict]], command: str, base: str) -> str:
    lines = [
        f"Measured on {base} with:",
        "",
        "```",
        command,
        "```",
        "",
        "| module | candidates | sampled | killed | survived | equivalent | score (killed / non-equivalent) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    survivors: list[Mutant] = []
    for sample, info in results:
        if info["baseline"] != "pass":
            lines.append(f"| `{info['module']}` | {info['candidates']} | - | - | - | - | {info['baseline']} |")
            continue
        killed = sum(m.status in ("killed", "timeout") for m in sample)
        equivalent = [m for m in sample if m.status == "survived" and m.id in EQUIVALENT]
        alive = [m for m in sample if m.status == "survived" and m.id not in EQUIVALENT]
        survivors += alive + equivalent
        live = len(sample) - len(equivalent)
        score = f"{100 * killed / live:.0f}% ({killed}/{live})" if live else "-"
        lines.append(
            f"| `{info['module']}` | {info['candidates']} | {len(sample)} | {killed} | {len(alive)} | "
            f"{len(equivalent)} | {score} |"
        )
    total = [m for sample, _ in results for m in sample]
    killed = sum(m.status in ("killed", "timeout") for m in total)
    live = len(total) - sum(m.status == "survived" and m.id in EQUIVALENT for m in total)
    if live:
        lines.append(f"| **all** | | {len(total)} | {killed} | | | **{100 * killed / live:.0f}% ({killed}/{live})** |")
    for _, info in results:
        if info.get("deselected"):
            lines += [
                "",
                f"Deselected for `{info['module']}` (failing before any mutation): "
                + ", ".join(f"`{t}`" for t in info["deselected"]),
            ]
    lines += ["", "Surviving mutants:" if survivors else "No mutant survived.", ""]
    for m in survivors:
        why = f" Equivalent: {EQUIVALENT[m.id]}" if m.id in EQUIVALENT else " **Not killed.**"
        lines.append(f"- `{m.id}`: `{m.before}` => `{m.after}`.{why}")
    return "\n".join(lines) + "\n"


def write_report(path: Path, text: str) -> None:
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{BEGIN}\n{text}{END}"
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + block + old[old.index(END) + len(END) :]
    else:
        new = old + ("\n" if old else "") + block + "\n"
    path.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", required=True, help="module paths relative to the repository")
    parser.add_argument("--per-module", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", type=Path, help="markdown file whose mutants block is replaced")
    parser.add_argument("--json", type=Path, help="where to write the per-mutant results")
    parser.add_argument("--ref", help="mutate the tree of this commit (e.g. HEAD), not the working tree")
    parser.add_argument(
        "--with",
        dest="overlay",
        nargs="*",
        default=[],
        help="with --ref: working-tree files copied over that tree (e.g. new test files)",
    )
    parser.add_argument(
        "--rerun", type=Path, help="a previous --json report: its killed mutants are kept, the others run again"
    )
    parser.add_argument(
        "--changed-since",
        metavar="COMMIT",
        help="sample only mutants on the lines git diff adds or changes since COMMIT (a change's own rules)",
    )
    parser.add_argument("--list", action="store_true", help="list the sampled mutants, run nothing")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/mutants.py " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = {
        module: changed_lines(module, args.changed_since, args.ref) if args.changed_since else None
        for module in args.modules
    }
    if args.list:
        for module in args.modules:
            source = (
                subprocess.run(
                    ["git", "-C", str(ROOT), "show", f"{args.ref}:{module}"], capture_output=True, text=True, check=True
                ).stdout
                if args.ref
                else (ROOT / module).read_text(encoding="utf-8")
            )
            for m in sample_mutants(module, source, args.per_module, args.seed, lines[module])[1]:
                print(f"{m.id}  {m.before} => {m.after}  [{', '.join(mapped_tests(module))}]")
        return 0
    known = (
        {
            m["id"]: m["status"]
            for module in json.loads(args.rerun.read_text(encoding="utf-8"))
            for m in module["mutants"]
        }
        if args.rerun
        else None
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="kvsize-mutants-") as name:
        tmp = Path(name)
        base = make_tree(tmp, args.ref, args.overlay)
        for module in args.modules:
            results.append(run_module(tmp, module, args.per_module, args.seed, not args.quiet, known, lines[module]))
    text = markdown(results, command, base)
    print(text)
    if args.json:
        payload = [{**info, "mutants": [asdict(m) | {"id": m.id} for m in sample]} for sample, info in results]
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    if args.report:
        write_report(args.report, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
