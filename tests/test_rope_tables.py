"""RoPE tables and the busiest rank's weights: two parts of the memory an engine loads besides the KV cache.

Every figure is worked by hand from the config and the engine's source (kvsize/rope_tables.py cites the
classes): bytes = positions x rotary_dim x element bytes, per distinct RoPE, on every rank.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvsize.budget import BudgetSettings, kv_budget, load_rope_tables, weights_on_busiest_rank
from kvsize.calibration import Calibration
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.profiles import resolve_gpu
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

ROOT = Path(__file__).resolve().parent.parent
GIB = 1024**3
H100 = Device.from_profile(resolve_gpu("h100"))
MI300X = Device.from_profile(resolve_gpu("mi300x"))


def registry_spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None
    return parse_config(load_registry_config(entry))


def llama_like(**extra: Any) -> ArchSpec:
    """A small Llama: 4 layers, 8 heads of 64 (hidden 512), 4,096 positions, plus `extra` fields."""
    raw = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "vocab_size": 1000,
        "rope_theta": 10000.0,
        "torch_dtype": "bfloat16",
        **extra,
    }
    return parse_config(raw)


def vllm_bytes(spec: ArchSpec, version: str = "0.19.0", device: Device | None = H100) -> int:
    return load_rope_tables("vllm", version, spec, device).bytes


def sglang_bytes(spec: ArchSpec, version: str = "0.5.9", device: Device | None = H100) -> int:
    return load_rope_tables("sglang", version, spec, device).bytes


# --- real configs ---------------------------------------------------------------------------------------------


def test_llama_31_8b_one_table_per_engine_rule() -> None:
    spec = registry_spec("meta-llama/Llama-3.1-8B-Instruct")
    # llama3 type: base RotaryEmbedding over max_position_embeddings; rotary_dim = head_dim 128
    assert vllm_bytes(spec) == 131_072 * 128 * 2 == 33_554_432  # model dtype (bf16)
    assert sglang_bytes(spec, "0.4.3") == 131_072 * 128 * 4  # float32 on CUDA from 0.4.3
    assert sglang_bytes(spec, "0.4.2") == 131_072 * 128 * 2  # 0.4.2 casts to the model's dtype
    assert sglang_bytes(spec, "0.5.9", MI300X) == 131_072 * 128 * 2  # not CUDA: the model's dtype


def test_llama_4_scout_ten_million_positions() -> None:
    # max_position_embeddings 10,485,760 (the llama3 factor does not scale the table): 2.5 GiB on every rank
    spec = registry_spec("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert vllm_bytes(spec) == 10_485_760 * 128 * 2 == 5 * GIB // 2


def test_gemma_3_linear_table_and_the_local_one() -> None:
    # global layers: linear x8 -> 131,072 x 8 positions (LinearScalingRotaryEmbedding max_len); local layers:
    # a default RoPE at rope_local_base_freq (vllm gemma3.py), 131,072 positions; head_dim 256
    spec = registry_spec("google/gemma-3-4b-it")
    assert vllm_bytes(spec) == (131_072 * 8 + 131_072) * 256 * 2 == 603_979_776
    # Gemma 2: one RoPE for every layer (no local base)
    assert vllm_bytes(registry_spec("google/gemma-2-2b-it")) == 8192 * 256 * 2


def test_yarn_counts_the_original_maximum_times_the_factor() -> None:
    # gpt-oss-20b: get_rope passes original_max_position_embeddings (4,096) and YaRN aranges 4,096 x 32 =
    # 131,072 positions of 64; its near twin, max_position x factor, would be 32x larger
    spec = registry_spec("openai/gpt-oss-20b")
    assert vllm_bytes(spec) == 4096 * 32 * 64 * 2 == 16_777_216
    assert vllm_bytes(spec) != 131_072 * 32 * 64 * 2


def test_deepseek_mla_table_is_float32_from_vllm_0_14() -> None:
    # DeepSeek-V3: yarn factor 40 over 4,096 -> 163,840 positions of qk_rope_head_dim 64;
    # DeepseekScalingRotaryEmbedding keeps float32 where FlashInfer applies it (0.14.0+), bf16 before
    spec = registry_spec("deepseek-ai/DeepSeek-V3")
    assert vllm_bytes(spec, "0.19.0") == 163_840 * 64 * 4 == 41_943_040
    assert vllm_bytes(spec, "0.13.0") == 163_840 * 64 * 2
    assert vllm_bytes(spec, "0.19.0", MI300X) == 163_840 * 64 * 2  # no FlashInfer off CUDA


def test_longrope_concatenates_short_and_long_tables() -> None:
    # Phi-3.5-mini: original_max_position_embeddings 4,096 sits at the top level; the short table covers it and
    # the long one max_position 131,072; head 3,072 / 32 = 96
    spec = registry_spec("microsoft/Phi-3.5-mini-instruct")
    assert vllm_bytes(spec) == (4096 + 131_072) * 96 * 2 == 25_952_256


def test_mrope_is_four_times_the_positions_in_vllm_only() -> None:
    # Qwen2.5-VL-7B: `type: mrope` with mrope_section; vLLM's MRotaryEmbedding caches 4 x 128,000 positions,
    # SGLang's passes max_position through (and keeps float32)
    spec = registry_spec("Qwen/Qwen2.5-VL-7B-Instruct")
    assert vllm_bytes(spec) == 128_000 * 4 * 128 * 2 == 131_072_000
    assert sglang_bytes(spec) == 128_000 * 128 * 4 == 65_536_000


def test_partial_rotary_factor_narrows_the_table() -> None:
    # phi-2: 0.4 x head 80 = 32 rotated, fp16, 2,048 positions; Qwen3-Next: 0.25 x 256 = 64 over 262,144
    assert vllm_bytes(registry_spec("microsoft/phi-2")) == 2048 * 32 * 2
    assert vllm_bytes(registry_spec("Qwen/Qwen3-Next-80B-A3B-Thinking")) == 262_144 * 64 * 2


def test_models_without_rope_have_no_table() -> None:
    # Jamba's attention has no positional encoding; GPT-2 learns positions; Mamba has no attention
    for hub_id in ("ai21labs/AI21-Jamba-1.5-Mini", "openai-community/gpt2", "mistralai/Mamba-Codestral-7B-v0.1"):
        tables = load_rope_tables("vllm", "0.19.0", registry_spec(hub_id), H100)
        assert tables.bytes == 0, hub_id


# --- each type's rule against its near twin (synthetic Llamas: head 64, 4,096 positions) ---------------------


def test_scaled_types_and_their_unscaled_twins() -> None:
    assert vllm_bytes(llama_like()) == 4096 * 64 * 2
    assert vllm_bytes(llama_like(rope_scaling={"rope_type": "linear", "factor": 2.5})) == 10_240 * 64 * 2
    assert vllm_bytes(llama_like(rope_scaling={"type": "dynamic", "factor": 4.0})) == 16_384 * 64 * 2
    # dynamic with `alpha` (DynamicNTKAlphaRotaryEmbedding) keeps max_position
    assert vllm_bytes(llama_like(rope_scaling={"rope_type": "dynamic", "alpha": 1000.0})) == 4096 * 64 * 2
    # llama3 scales frequencies, not positions
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 512}
    assert vllm_bytes(llama_like(rope_scaling={**llama3, "low_freq_factor": 1, "high_freq_factor": 4})) == 4096 * 128
    # a factor whose product is not whole: torch.arange(4096 x 1.1) has ceil(4505.6) = 4506 rows
    assert vllm_bytes(llama_like(rope_scaling={"rope_type": "linear", "factor": 1.1})) == 4506 * 64 * 2
    # fp32 models: fp32 tables
    assert vllm_bytes(llama_like(torch_dtype="float32")) == 4096 * 64 * 4


def test_an_unread_rope_type_is_counted_and_said() -> None:
    spec = llama_like(rope_scaling={"rope_type": "su", "factor": 2.0})
    tables = load_rope_tables("vllm", "0.19.0", spec, H100)
    assert tables.bytes == 4096 * 64 * 2 and tables.unread_types == ("su",)
    assert "su not read" in tables.rule


def test_rope_table_is_a_budget_part() -> None:
    spec = registry_spec("meta-llama/Llama-3.1-8B-Instruct")
    args: dict[str, Any] = {
        "memory_bytes": resolve_gpu("h100").memory_bytes,
        "weights_bytes": 16_060_522_496,
        "device": H100,
    }
    counted = kv_budget("vllm", "0.19.0", spec, **args)
    given = kv_budget("vllm", "0.19.0", spec, settings=BudgetSettings(rope_table_bytes=0), **args)
    assert counted.rope_table_bytes == 33_554_432 and given.rope_table_bytes == 0
    assert given.kv_budget_bytes - counted.kv_budget_bytes == 33_554_432
    assert "RoPE tables" in counted.rule and "RoPE tables" not in given.rule
    assert counted.kv_budget_bytes == (
        counted.requested_bytes
        - counted.weights_bytes
        - counted.rope_table_bytes
        - counted.activation_bytes
        - counted.non_torch_bytes
        - counted.cuda_graph_bytes
    )
    # TensorRT-LLM and the card-minus-reserve engines count none
    assert kv_budget("trtllm", None, spec, **args).rope_table_bytes == 0


def test_measured_weights_already_hold_the_tables() -> None:
    # a calibration's weights per rank are vLLM's "Model loading took": the tables are in them
    cal = Calibration(model="m", gpu="h100", engine="vllm", tp=1, pp=1, weights_per_rank_bytes=15 * GIB)
    assert cal.budget_settings(BudgetSettings()).rope_table_bytes == 0
    assert (
        Calibration(model="m", gpu="h100", engine="vllm", tp=1, pp=1).budget_settings(BudgetSettings()).rope_table_bytes
        is None
    )


def test_scout_log_weights_per_rank_include_the_table() -> None:
    # Model loading took 53.12 GiB (vLLM 0.19, tp 4): 108,641,793,536 params x 2 B / 4 + 2.5 GiB of RoPE table =
    # 57,005,251,328 B = 53.090 GiB; the even split alone (50.59 GiB) was 4.8% short
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvsize",
            "log",
            "tests/data/logs/llmd-meta-llama-llama-4-scout-tp4pp1dp1-8192.log",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    figures = {f["name"]: f for f in json.loads(done.stdout)["figures"]}
    assert figures["weights per rank"]["predicted"] == pytest.approx(
        (108_641_793_536 * 2 // 4 + 10_485_760 * 128 * 2) / GIB, abs=1e-9
    )
    assert abs(figures["weights per rank"]["logged"] - figures["weights per rank"]["predicted"]) < 0.05


# --- the busiest rank's weights ---------------------------------------------------------------------------------

LLAMA_8B_WEIGHTS = 16_060_522_496
LLAMA_8B_TABLE = 128_256 * 4096 * 2  # vocab x hidden x bf16 = 1,050,673,152
LLAMA_8B_BODY = LLAMA_8B_WEIGHTS - 2 * LLAMA_8B_TABLE  # untied: embedding and head = 13,959,176,192


def test_pipeline_stage_with_the_embedding_holds_the_most() -> None:
    # pp 4 over 32 layers: 8 each; stage 0 = 8/32 of the body + the embedding = 4,540,467,200 B (4.23 GiB; the
    # vLLM 0.19 pp-4 log: "Model loading took 4.26 GiB" with its 32 MiB RoPE table), not 16.06 GB / 4 = 3.74 GiB
    spec = registry_spec("meta-llama/Llama-3.1-8B-Instruct")
    assert LLAMA_8B_BODY == 13_959_176_192
    busiest = weights_on_busiest_rank(spec, LLAMA_8B_WEIGHTS, pp=4)
    assert busiest.bytes == LLAMA_8B_BODY * 8 // 32 + LLAMA_8B_TABLE == 4_540_467_200
    assert not busiest.even and "stage 0 of 4 (8 of 32 layers + the input embedding)" in busiest.rule
    # tensor parallelism alone: the even split
    assert weights_on_busiest_rank(spec, LLAMA_8B_WEIGHTS, tp=4).bytes == LLAMA_8B_WEIGHTS // 4
    # tp 2 x pp 2: each stage's share halved
    assert weights_on_busiest_rank(spec, LLAMA_8B_WEIGHTS, tp=2, pp=2).bytes == -(
        -(LLAMA_8B_BODY * 16 // 32 + LLAMA_8B_TABLE) // 2
    )


def test_uneven_stages_follow_each_engines_split() -> None:
    # 32 layers on 3 stages: vLLM gives the remainder to the stages before the last ([11, 11, 10]), SGLang to
    # the last ones ([10, 11, 11]); the 11-layer stage with a table is stage 0 in vLLM and stage 2 in SGLang
    spec = registry_spec("meta-llama/Llama-3.1-8B-Instruct")
    expected = LLAMA_8B_BODY * 11 // 32 + LLAMA_8B_TABLE
    vllm = weights_on_busiest_rank(spec, LLAMA_8B_WEIGHTS, pp=3, engine="vllm")
    sglang = weights_on_busiest_rank(spec, LLAMA_8B_WEIGHTS, pp=3, engine="sglang")
    assert vllm.bytes == sglang.bytes == expected
    assert "stage 0 of 3 (11 of 32 layers + the input embedding)" in vllm.rule
    assert "stage 2 of 3 (11 of 32 layers + the output head)" in sglang.rule


def test_a_tied_head_is_copied_to_the_last_stage() -> None:
    # gemma-2-2b-it ties its head: the checkpoint holds one table, the last stage loads a copy
    spec = registry_spec("google/gemma-2-2b-it")
    assert spec.tied_embeddings
    weights = 5_228_683_776  # 2,614,341,888 parameters x 2 B
    table = 256_000 * 2304 * 2
    body = weights - table
    assert weights_on_busiest_rank(spec, weights, pp=2).bytes == body * 13 // 26 + table


# --- inputs that tell each rule from its near twin (mutation round 4, seed 4, kvsize/rope_tables.py) ----------


def test_yarn_with_a_maximum_that_is_not_original_times_factor() -> None:
    # gpt-oss and DeepSeek state max_position = original x factor, so the two readings agree there; here they do
    # not: original 1,024 x factor 8 = 8,192 positions (get_rope passes the original), not max_position 4,096
    yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 1024}
    assert vllm_bytes(llama_like(rope_scaling=yarn)) == 8192 * 64 * 2
    # without the original, vLLM's get_rope would fail (KeyError): kvsize counts max_position and says so
    no_original = load_rope_tables("vllm", "0.19.0", llama_like(rope_scaling={"rope_type": "yarn", "factor": 8.0}))
    assert no_original.bytes == 4096 * 64 * 2 and no_original.unread_types == ("yarn",)


def test_mrope_scales_with_yarn_and_linear_in_vllm() -> None:
    # MRotaryEmbedding(original_max x 4) with YaRN: arange(max_position_embeddings x scaling_factor) over 4 x 1,024
    # x 2 = 8,192 positions; linear with an mrope_section: 4,096 x 4 x 2 = 32,768
    section = {"mrope_section": [8, 12, 12]}
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 1024, **section}
    assert vllm_bytes(llama_like(rope_scaling=yarn)) == 1024 * 4 * 2 * 64 * 2
    assert sglang_bytes(llama_like(rope_scaling=yarn)) == 1024 * 2 * 64 * 4  # SGLang: no x4, float32
    linear = {"rope_type": "linear", "factor": 2.0, **section}
    assert vllm_bytes(llama_like(rope_scaling=linear)) == 4096 * 4 * 2 * 64 * 2


def test_flashinfer_head_sizes_keep_deepseek_tables_in_float32() -> None:
    # deepseek_scaling_rope.py use_flashinfer: head_size in [64, 128, 256, 512]; any other stays in the model dtype
    import msgspec

    v3 = registry_spec("deepseek-ai/DeepSeek-V3")
    assert v3.rope_table is not None
    for rotary, element in ((128, 4), (256, 4), (512, 4), (96, 2), (127, 2), (129, 2), (255, 2), (513, 2)):
        table = msgspec.structs.replace(v3.rope_table, rotary_dim=rotary)
        spec = msgspec.structs.replace(v3, rope_table=table)
        assert vllm_bytes(spec) == 163_840 * rotary * element, rotary


def test_gemma_3_local_table_once_whatever_the_config_style() -> None:
    base = {
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2048,
        "max_position_embeddings": 32_768,
        "sliding_window": 1024,
        "torch_dtype": "bfloat16",
    }
    table = 32_768 * 256 * 2
    # transformers 4: one `rope_scaling` for the global layers, the local base apart -> two tables
    assert vllm_bytes(parse_config({**base, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})) == 5 * table
    assert vllm_bytes(parse_config({**base, "rope_scaling": {"rope_type": "default"}})) == 2 * table
    assert vllm_bytes(parse_config(base)) == 2 * table  # no rope key: the family's two RoPEs
    # transformers 5: rope_parameters per layer type already holds the local one -> still two, not three
    nested = {
        "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1_000_000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    }
    assert vllm_bytes(parse_config({**base, "rope_parameters": nested})) == 4 * table + table
    # each layer type's entry is its own RoPE (vllm gemma3.py reads config.rope_parameters[layer_type]): two
    # defaults with their own rope_theta are two tables; two scaled entries add no local one
    defaults = {"full_attention": {"rope_type": "default", "rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}}
    assert vllm_bytes(parse_config({**base, "rope_parameters": defaults})) == 2 * table
    scaled = {k: {"rope_type": "linear", "factor": 2.0} for k in ("full_attention", "sliding_attention")}
    assert vllm_bytes(parse_config({**base, "rope_parameters": scaled})) == 4 * table


def test_rules_name_their_engine_and_list_no_read_type() -> None:
    spec = registry_spec("meta-llama/Llama-3.1-8B-Instruct")
    vllm = load_rope_tables("vllm", "0.19.0", spec, H100)
    sglang = load_rope_tables("sglang", "0.5.9", spec, H100)
    assert vllm.unread_types == () == sglang.unread_types
    assert "vLLM rotary_embedding/base.py" in vllm.rule and "SGLang" not in vllm.rule
    assert "SGLang layers/rotary_embedding.py" in sglang.rule
    assert "131,072 x 128 x 2 B (llama3)" in vllm.rule and "131,072 x 128 x 4 B" in sglang.rule


def test_qwen3_vl_and_qwen3_5_take_mrope_once_from_vllm_0_32() -> None:
    # models/qwen3_vl.py mrope_positions_factor (0.32+): 1 unless video pruning is on, for Qwen3-VL and Qwen3.5's
    # decoder layers; Qwen2.5-VL keeps MRotaryEmbedding's default 4. Qwen3-VL-32B: 262,144 positions x head 128
    spec = registry_spec("Qwen/Qwen3-VL-32B-Instruct")
    assert spec.rope_table is not None and spec.rope_table.max_position == 262_144
    assert vllm_bytes(spec, "0.31.0") == 262_144 * 4 * 128 * 2
    assert vllm_bytes(spec, "0.32.0") == 262_144 * 128 * 2
    assert vllm_bytes(registry_spec("Qwen/Qwen2.5-VL-7B-Instruct"), "0.33.0") == 128_000 * 4 * 128 * 2
