"""Published engine start-up logs reproduced from the same inputs (tests/data/engine_logs.json has the
verbatim log lines and their sources).

- Engine pools (issue: engine-true sizing): given the KV memory the log says was available, the pool the
  engine logged (vLLM "# GPU blocks" / "GPU KV cache size: N tokens" / "Maximum concurrency", SGLang
  "#tokens", TensorRT-LLM bytes for N tokens) must come out within 2%.
- Budgets (issue: capacity planning): given the GPU, utilisation and max_model_len, the KV memory vLLM and
  SGLang logged as available must come out within 5%.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsize.budget import BudgetSettings, kv_budget
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.sglang import SglangEngine
from kvsize.engines.vllm import VllmEngine
from kvsize.registry import find_entry, load_registry_config
from kvsize.resolve import load_model_config
from kvsize.spec import ArchSpec
from kvsize.weights import find_weights

GIB = 1024**3
H100 = 85_520_809_984  # gpu_profiles/h100-sxm.yaml: nvidia-smi 81,559 MiB; vLLM logs "total_gpu_memory 79.19GiB"
LOGS = json.loads((Path(__file__).parent / "data" / "engine_logs.json").read_text())


def spec_of(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config(load_registry_config(entry))


def case(model: str, version_prefix: str = "") -> dict[str, object]:
    found = [c for c in LOGS if c["model"] == model and str(c["engine_version"]).startswith(version_prefix)]
    assert found, (model, version_prefix)
    return found[0]  # type: ignore[no-any-return]


def near(value: float, expected: float, tolerance: float) -> bool:
    return abs(value - expected) <= tolerance * expected


# --- vLLM pools --------------------------------------------------------------------------------------------

# (registry config, log case model, engine_version prefix, tp, log figure to compare)
VLLM_TOKENS = [
    # llm-d-incubation/llm-d-planner accuracy sweep, vLLM 0.19.0 on H100: "GPU KV cache size: N tokens"
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "0.19", 1),
    ("google/gemma-3-4b-it", "google/gemma-3-4b-it", "0.19", 1),
    ("google/gemma-2-2b-it", "google/gemma-2-2b-it", "0.19", 1),
    ("openai/gpt-oss-20b", "openai/gpt-oss-20b", "0.19", 2),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "0.19", 4),
]


@pytest.mark.parametrize(("hub_id", "model", "version", "tp"), VLLM_TOKENS, ids=[c[0] for c in VLLM_TOKENS])
def test_vllm_pool_tokens_and_concurrency(hub_id: str, model: str, version: str, tp: int) -> None:
    log = case(model, version)
    figures = log["figures"]
    assert isinstance(figures, dict)
    engine = VllmEngine("0.19")
    pool = engine.pool(
        spec_of(hub_id),
        available_bytes=int(figures["available_kv_gib"] * GIB),
        max_model_len=int(log["max_model_len"]),
        kv_dtype=KvDtype.BF16,
        tp=tp,
    )  # type: ignore[arg-type]
    assert near(pool.kv_pool_tokens, figures["kv_cache_tokens"], 0.02), (pool, figures)
    assert near(pool.concurrency, figures["max_concurrency"], 0.02), (pool, figures)


VLLM_BLOCKS = [
    # vllm-project/vllm#10517 (v0.6.x, RTX 3090): 3.81 GiB available -> "# GPU blocks: 1952"
    ("meta-llama/Llama-3.1-8B-Instruct", 3.81, 1, 1952),
    # vllm-project/vllm#15815 (v0.7.1, 2x L40S, tp 2): 7.71 GiB available -> "# GPU blocks: 3947"
    ("Qwen/Qwen2.5-32B", 7.71, 2, 3947),
    # casys-kaist/LLMServingSim vLLM 0.28 dump (RTX PRO 6000): 70.14 GiB -> 35,913 blocks
    ("meta-llama/Llama-3.1-8B", 70.14, 1, 35913),
]


@pytest.mark.parametrize(("hub_id", "available_gib", "tp", "blocks"), VLLM_BLOCKS, ids=[c[0] for c in VLLM_BLOCKS])
def test_vllm_gpu_blocks(hub_id: str, available_gib: float, tp: int, blocks: int) -> None:
    pool = VllmEngine("0.33").pool(  # the logs' releases page in 16-token blocks, as 0.33 does (not 0.34's 64)
        spec_of(hub_id), available_bytes=int(available_gib * GIB), max_model_len=4096, kv_dtype=KvDtype.BF16, tp=tp
    )
    assert near(pool.num_blocks, blocks, 0.02), pool


# --- SGLang pools ------------------------------------------------------------------------------------------

SGLANG = [
    # docs.sglang.ai send_request notebook (~0.4.1): "KV Cache is allocated. #tokens: 444500, K size: 27.13 GB"
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct", 1, 27.13, 444_500),
    # Qwen3-0.6B under WSL (0.4.6.post2): "#tokens: 15387, K size: 0.82 GB"
    ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", 1, 0.82, 15_387),
    # didier-durand/llms-in-clouds, QwQ-32B (Qwen2.5-32B shapes) on 4x L4, tp 4: "#tokens: 46611, K size: 1.42 GB"
    ("Qwen/Qwen2.5-32B", "Qwen/QwQ-32B", 4, 1.42, 46_611),
]


@pytest.mark.parametrize(("hub_id", "model", "tp", "k_gib", "tokens"), SGLANG, ids=[c[1] for c in SGLANG])
def test_sglang_pool_tokens(hub_id: str, model: str, tp: int, k_gib: float, tokens: int) -> None:
    assert any(c["model"].startswith(model) for c in LOGS if c["engine"] == "sglang")
    # SGLang prints GB as bytes / 2^30; the pool holds K and V of the same size.
    pool = SglangEngine().pool(spec_of(hub_id), available_bytes=int(2 * k_gib * GIB), kv_dtype=KvDtype.BF16, tp=tp)
    assert near(pool.max_total_num_tokens, tokens, 0.02), pool


def test_trtllm_bytes_per_token() -> None:
    # NVIDIA/TensorRT-LLM#1400 (0.8, Llama-2-7B shapes, fp16 KV): 69,524,783,104 bytes for 132,608 tokens.
    est = get_engine("trtllm").estimate(
        spec_of("meta-llama/Llama-2-7b-hf"), ctx=132_608, batch=1, kv_dtype=KvDtype.FP16
    )
    assert est.kv_bytes_per_token * 132_608 == 69_524_783_104


# --- budgets -----------------------------------------------------------------------------------------------

BUDGETS = [
    # (registry config, log model, tp): llm-d-planner vLLM 0.19.0 on H100, "Available KV cache memory"
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", 1),
    ("google/gemma-3-4b-it", "google/gemma-3-4b-it", 1),
    ("google/gemma-2-2b-it", "google/gemma-2-2b-it", 1),
    ("openai/gpt-oss-20b", "openai/gpt-oss-20b", 2),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", 1),
]


@pytest.mark.parametrize(("hub_id", "model", "tp"), BUDGETS, ids=[c[0] for c in BUDGETS])
def test_vllm_budget_within_5_percent(hub_id: str, model: str, tp: int) -> None:
    log = case(model, "0.19")
    figures = log["figures"]
    assert isinstance(figures, dict)
    spec = spec_of(hub_id)
    weights = find_weights(load_model_config(hub_id), model_dtype=spec.model_dtype).bytes
    budget = kv_budget(
        "vllm",
        "0.19",
        spec,
        memory_bytes=H100,
        weights_bytes=-(-weights // tp),
        tp=tp,
        settings=BudgetSettings(gpu_util=float(log["gpu_memory_utilization"])),
    )  # type: ignore[arg-type]
    assert near(budget.kv_budget_bytes / GIB, figures["available_kv_gib"], 0.05), budget


def test_vllm_budget_llama4_scout_tp4() -> None:
    # vLLM logged 53.12 GiB of weights per GPU: 1/4 of the 108.6B bf16 parameters (50.59 GiB) plus the RoPE table
    # every rank builds over max_position_embeddings, 10,485,760 x 128 x 2 B = 2.5 GiB (kvsize/rope_tables.py)
    log = case("meta-llama/Llama-4-Scout-17B-16E-Instruct", "0.19")
    spec = spec_of("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    weights = find_weights(load_model_config("meta-llama/Llama-4-Scout-17B-16E-Instruct")).bytes
    budget = kv_budget(
        "vllm",
        "0.19",
        spec,
        memory_bytes=H100,
        weights_bytes=-(-weights // 4),
        tp=4,
        settings=BudgetSettings(gpu_util=0.95),
    )
    assert budget.rope_table_bytes == 10_485_760 * 128 * 2
    assert near((budget.weights_bytes + budget.rope_table_bytes) / GIB, 53.12, 0.002)
    assert near(budget.kv_budget_bytes / GIB, log["figures"]["available_kv_gib"], 0.02)  # type: ignore[index]


def test_vllm_budget_older_release() -> None:
    # vllm-project/vllm#10511 (Dec 2024, Meta-Llama-3-8B on H100, util 0.9): "the rest ... for KV Cache is 53.29GiB"
    spec = spec_of("meta-llama/Meta-Llama-3-8B")
    budget = kv_budget(
        "vllm", "0.19", spec, memory_bytes=H100, weights_bytes=16_060_522_496, settings=BudgetSettings(gpu_util=0.9)
    )
    assert near(budget.kv_budget_bytes / GIB, 53.29, 0.05)


def test_sglang_budget_within_5_percent() -> None:
    # SGLang docs notebook: mem_fraction_static 0.88, 78.81 GB free before loading, 63.72 after (weights 15.09);
    # K + V = 2 x 27.13 GB = 54.26 GB.
    spec = spec_of("meta-llama/Llama-3.1-8B-Instruct")
    budget = kv_budget(
        "sglang", None, spec, memory_bytes=H100, weights_bytes=16_060_522_496, settings=BudgetSettings(gpu_util=0.88)
    )
    assert near(budget.kv_budget_bytes / GIB, 2 * 27.13, 0.05)
