"""A float32 checkpoint as the serving engines run it: vLLM and SGLang cast it to 16 bits with --dtype auto, so
its weights, activations and auto KV cache take 2 bytes an element, not the checkpoint's 4.

Sources: vLLM config/model.py _resolve_auto_dtype ("if config_dtype == torch.float32: preferred", the platform's
first supported dtype: bfloat16 from compute capability 8.0, float16 before); SGLang 0.5.9
srt/configs/model_config.py _get_and_verify_dtype (float32 -> bfloat16 for model types starting "gemma", float16
for every other: "Following the common practice, we use float16 for float32 models"). The weights are created
in that dtype and the checkpoint's tensors copied into them on load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_configs import registry_config
from typer.testing import CliRunner

import kvsize
from kvsize.cli import app
from kvsize.dtypes import KvDtype
from kvsize.weights import WeightsSize, _loaded_as, weights_from_hub_counts

ROOT = Path(__file__).resolve().parents[1]
GRANITE_8B_FP32 = ROOT / "tests/data/configs/ibm-granite--granite-3.1-8b-instruct.json"
GRANITE_8B_LOG = ROOT / "tests/data/logs/llmd-granite-3-1-8b-tp1pp1dp1-8192.log"

# Llama-3.1-8B by hand: embeddings and lm_head 128,256 x 4,096 = 525,336,576 each; a layer holds q and o
# 4,096 x 4,096, k and v 4,096 x 1,024, the MLP 3 x 4,096 x 14,336 and two norms: 218,112,000; 32 layers plus the
# final norm 4,096: 6,979,584,000 + 1,050,673,152 + 4,096 parameters.
LLAMA_8B_PARAMS = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * 128256 * 4096 + 4096


def _llama_8b(dtype: str) -> dict[str, Any]:
    return {**registry_config("meta-llama/Llama-3.1-8B"), "torch_dtype": dtype}


def _first(config: Any, **options: Any) -> Any:
    return kvsize.estimate(config, ctx=8192, gpu=options.pop("gpu", "h100"), **options).scenarios[0]


def test_llama_parameter_count_is_the_published_one() -> None:
    assert LLAMA_8B_PARAMS == 8_030_261_248


def test_vllm_holds_a_float32_checkpoint_in_bf16() -> None:
    s = _first(_llama_8b("float32"), engine="vllm")
    assert s.gpu.weights_bytes == 2 * LLAMA_8B_PARAMS  # not 4 x: vLLM casts on load
    assert s.kv_dtype is KvDtype.BF16
    formula = _first(_llama_8b("float32"), engine="formula")
    assert formula.gpu.weights_bytes == 4 * LLAMA_8B_PARAMS  # the checkpoint as stored: no engine casts it


def test_vllm_on_turing_holds_it_in_fp16() -> None:
    s = _first(_llama_8b("float32"), engine="vllm", gpu="t4")  # sm_75: no bfloat16, float16 is first
    assert s.gpu.weights_bytes == 2 * LLAMA_8B_PARAMS
    assert s.kv_dtype is KvDtype.FP16


def test_a_16_bit_checkpoint_keeps_its_width() -> None:
    # the near twin: bf16 stays bf16 (2 B), and fp16 on a T4 too; only float32 is narrowed
    assert _first(_llama_8b("bfloat16"), engine="vllm").gpu.weights_bytes == 2 * LLAMA_8B_PARAMS
    assert _first(_llama_8b("float16"), engine="vllm", gpu="t4").gpu.weights_bytes == 2 * LLAMA_8B_PARAMS


@pytest.mark.parametrize(("model_type", "expected"), [("llama", KvDtype.FP16), ("gemma2", KvDtype.BF16)])
def test_sglang_runs_float32_in_fp16_and_gemma_in_bf16(model_type: str, expected: KvDtype) -> None:
    from kvsize.config import parse_config
    from kvsize.engines import get_engine

    spec = parse_config({**_llama_8b("float32"), "model_type": model_type}, source="t")
    engine = get_engine("sglang")
    assert engine.run_dtype(spec) == expected.value
    assert engine.auto_kv_dtype(spec, KvDtype.FP32) is expected
    assert engine.auto_kv_dtype(spec, KvDtype.FP8_E4M3) is KvDtype.FP8_E4M3  # a config's fp8 KV scheme is kept


def test_sglang_weights_and_auto_kv_of_a_float32_checkpoint() -> None:
    s = _first(_llama_8b("float32"), engine="sglang")
    assert s.gpu.weights_bytes == 2 * LLAMA_8B_PARAMS
    assert s.kv_dtype is KvDtype.FP16
    assert s.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # K and V, 32 layers x 8 heads x 128, 2 bytes


def test_dtype_half_on_a_float32_checkpoint_halves_the_weights() -> None:
    s = _first(_llama_8b("float32"), engine="vllm", dtype="half")
    assert s.gpu.weights_bytes == 2 * LLAMA_8B_PARAMS and s.kv_dtype is KvDtype.FP16


def test_given_weights_are_not_scaled() -> None:
    s = _first(_llama_8b("float32"), engine="vllm", weights_bytes=20 * 2**30)
    assert s.gpu.weights_bytes == 20 * 2**30


def test_published_float32_size_is_halved_under_vllm() -> None:
    # google/gemma-2-2b ships float32: 10,457,367,552 tensor bytes published (kvsize/models/weights.json)
    assert _first("google/gemma-2-2b", engine="vllm").gpu.weights_bytes == 10_457_367_552 // 2
    assert _first("google/gemma-2-2b", engine="formula").gpu.weights_bytes == 10_457_367_552


def test_hub_counts_cast_only_the_float32_tensors() -> None:
    counts = {"F32": 1000, "BF16": 300, "I64": 2}
    assert weights_from_hub_counts(counts, "o/m").bytes == 1000 * 4 + 300 * 2 + 2 * 8
    cast = weights_from_hub_counts(counts, "o/m", "bf16")
    assert cast.bytes == 1000 * 2 + 300 * 2 + 2 * 8
    assert "F32 loaded as bf16" in cast.source


def test_loaded_as_scales_by_the_widths() -> None:
    measured = WeightsSize(1001, "x")
    assert _loaded_as(measured, "fp32", "bf16").bytes == 501  # ceil(1001 / 2)
    assert _loaded_as(measured, "bf16", "fp32").bytes == 2002  # --dtype float32: every weight cast up on load
    assert _loaded_as(measured, "bf16", "fp16") is measured
    assert _loaded_as(measured, "fp32", None) is measured


def test_a_float32_granite_log_prices_the_weights_vllm_loaded() -> None:
    # ibm-granite/granite-3.1-8b-instruct revision 96fedcd states torch_dtype float32; vLLM 0.19.0 ran it as
    # dtype=torch.bfloat16 and logged "Model loading took 15.25 GiB": the bf16 weights, not twice that.
    result = CliRunner().invoke(
        app, ["log", str(GRANITE_8B_LOG), "--config", str(GRANITE_8B_FP32), "--gpu", "h100", "--json"]
    )
    figures = {f["name"]: f for f in json.loads(result.stdout)["figures"]}
    weights = figures["weights per rank"]
    # by hand: a layer holds q and o 4,096 x 4,096, k and v 4,096 x 1,024, the MLP 3 x 4,096 x 12,800 and two
    # norms; 40 layers, the tied embedding 49,155 x 4,096 once and the final norm: 8,170,848,256 parameters at
    # 2 bytes, plus the RoPE table 131,072 positions x 128 x 2 bytes (kvsize/rope_tables.py)
    params = 40 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12800 + 2 * 4096) + 49155 * 4096 + 4096
    assert params == 8_170_848_256
    assert weights["logged"] == 15.25
    assert weights["predicted"] == (2 * params + 131072 * 128 * 2) / 2**30


@pytest.mark.parametrize(
    ("log", "config"),
    [
        ("sglang-docs-h100-llama31-8b.log", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log", "meta-llama/Llama-3.1-8B-Instruct"),
    ],
)
def test_a_float32_copy_of_a_config_checks_a_log_as_the_bf16_one(tmp_path: Path, log: str, config: str) -> None:
    # The engine ran the model in bf16 either way (SGLang and vLLM cast a float32 checkpoint to 16 bits), so a
    # config that says float32 predicts every figure of the log as the bfloat16 config does: weights, KV, pool.
    raw = registry_config(config)
    paths = []
    for dtype in ("bfloat16", "float32"):
        path = tmp_path / dtype / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**raw, "torch_dtype": dtype}))
        paths.append(path)
    figures = []
    for path in paths:
        result = CliRunner().invoke(
            app, ["log", str(ROOT / "tests/data/logs" / log), "--config", str(path), "--gpu", "h100", "--json"]
        )
        figures.append({f["name"]: f["predicted"] for f in json.loads(result.stdout)["figures"]})
    assert figures[0] == figures[1]
    assert len(figures[0]) >= 3
