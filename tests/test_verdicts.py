"""Verdicts a person acts on (audit of issue 12, defects 6, 7, 11, 14, 15).

- A ctx past the model's maximum: each engine's own rule, from its source. vLLM 0.34.0 raises at start-up
  (vllm/config/model.py _get_and_verify_max_len, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1), SGLang 0.5.23 raises
  (srt/configs/model_config.py ModelConfig._derive_context_length, unless
  SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1), TensorRT-LLM 1.2.0 lowers max_seq_len to its maximum
  (_torch/pyexecutor/model_engine.py PyTorchModelEngine._init_max_seq_len, unless
  TLLM_ALLOW_LONG_MAX_MODEL_LEN=1): the scenario does not fit, exit 1. llama.cpp only warns
  (src/llama-context.cpp: n_ctx_seq > n_ctx_train), transformers checks nothing: a fit with a warning.
- `kvsize plan --kv-dtype q8_0` (vLLM has none): exit 2, one Error line.
- The KV table's title with tp x pp > 1 says the figures are summed over the GPUs, "per GPU" the most loaded.
- The memory bar: every part present shows (one cell at least), the legend lists every symbol drawn.
- The prefix-caching rule paragraph prints with --explain only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsize.config import parse_config
from kvsize.engines import get_engine
from kvsize.fit import context_limit, engine_max_context
from kvsize.report import bar_cells
from tests.test_terminal import assert_uncut, in_terminal
from tests.tiny_configs import TINY

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = "meta-llama/Llama-3.1-8B"


def spec_of(**changes: Any) -> Any:
    config = {**TINY, **changes}
    return parse_config({k: v for k, v in config.items() if v is not None}, source="test")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args], capture_output=True, text=True, timeout=180, env=env, cwd=ROOT
    )


# --- each engine's maximum context, worked from its source --------------------------------------------------

# TINY states max_position_embeddings 8192.
MAXIMA = [
    # (rope_scaling, vllm, sglang, trtllm)
    pytest.param(None, 8192, 8192, 8192, id="no rope scaling: the config's 8,192 everywhere"),
    # linear is scaled by all three: 8192 x 4 = 32,768.
    pytest.param({"rope_type": "linear", "factor": 4.0}, 32768, 32768, 32768, id="linear x4"),
    # legacy "type" key, dynamic NTK x2: 16,384.
    pytest.param({"type": "dynamic", "factor": 2.0}, 16384, 16384, 16384, id="legacy type dynamic x2"),
    # llama3 is already scaled in the config: none of them multiplies.
    pytest.param({"rope_type": "llama3", "factor": 8.0}, 8192, 8192, 8192, id="llama3 unscaled"),
    # yarn: vLLM and TensorRT-LLM never scale it; SGLang scales unless original_max_position_embeddings is
    # stated (get_context_length): 4 x 8192 = 32,768 without it, 8,192 with it.
    pytest.param({"rope_type": "yarn", "factor": 4.0}, 8192, 32768, 8192, id="yarn without original max"),
    pytest.param(
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
        8192,
        8192,
        8192,
        id="yarn with original max",
    ),
    # A factor of 1.5: vLLM int(8192 x 1.5) = 12,288; SGLang int(1.5 x 8192) = 12,288; TensorRT-LLM
    # ceil(8192 x 1.5) = 12,288.
    pytest.param({"rope_type": "linear", "factor": 1.5}, 12288, 12288, 12288, id="linear x1.5"),
]


@pytest.mark.parametrize(("rope", "vllm", "sglang", "trtllm"), MAXIMA)
def test_engine_maximum_context(rope: dict[str, Any] | None, vllm: int, sglang: int, trtllm: int) -> None:
    spec = spec_of(rope_scaling=rope)
    assert engine_max_context(get_engine("vllm"), spec) == vllm
    assert engine_max_context(get_engine("sglang"), spec) == sglang
    assert engine_max_context(get_engine("trtllm"), spec) == trtllm
    # llama.cpp's n_ctx_train and transformers: the config's figure, unscaled.
    assert engine_max_context(get_engine("llamacpp"), spec) == 8192
    assert engine_max_context(get_engine("hf"), spec) == 8192


def test_transformers_5_rope_parameters_are_read_too() -> None:
    spec = spec_of(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    assert engine_max_context(get_engine("vllm"), spec) == 16384  # 8192 x 2


def test_no_maximum_in_the_config() -> None:
    spec = spec_of(max_position_embeddings=None, model_type="acme-unknown")  # no transformers default to fill
    assert spec.max_context is None
    # vLLM: no key -> a given max_model_len is taken as is; SGLang and TensorRT-LLM default to 2,048.
    assert engine_max_context(get_engine("vllm"), spec) is None
    assert engine_max_context(get_engine("sglang"), spec) == 2048
    assert engine_max_context(get_engine("trtllm"), spec) == 2048
    assert context_limit(get_engine("vllm"), spec, 1 << 20) is None


@pytest.mark.parametrize(
    ("config", "maximum"),
    [
        # max_position_embeddings 131,072 with llama3 RoPE (factor 8, already applied): 131,072.
        ("meta-llama/Llama-3.1-8B", 131072),
        # gpt2: n_positions 1,024, absolute positions.
        ("openai-community/gpt2", 1024),
        # 163,840 with yarn x40 and original_max_position_embeddings 4,096: unscaled by all three.
        ("deepseek-ai/DeepSeek-V3", 163840),
    ],
)
def test_real_configs(config: str, maximum: int) -> None:
    # The hub configs as the offline registry holds them (kvsize/models/registry.jsonl, each with its source):
    # inside the repository, so every clone runs this.
    from kvsize.resolve import load_model_config

    spec = parse_config(load_model_config(config).raw, source=config)
    for name in ("vllm", "sglang", "trtllm", "llamacpp", "hf"):
        assert engine_max_context(get_engine(name), spec) == maximum, name
    assert context_limit(get_engine("vllm"), spec, maximum) is None  # at the maximum: fine
    refused = context_limit(get_engine("vllm"), spec, maximum + 1)
    assert refused is not None and refused.refuses and refused.maximum == maximum
    assert refused.override == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    assert refused.source == "vllm/config/model.py _get_and_verify_max_len"
    assert refused.reason == (
        f"ctx {maximum + 1:,} is past the model's maximum context {maximum:,}: vLLM 0.34.0 refuses a longer "
        "max_model_len at start-up"
    )
    warned = context_limit(get_engine("llamacpp"), spec, maximum + 1)
    assert warned is not None and not warned.refuses and warned.override is None


def test_what_each_engine_does() -> None:
    spec = spec_of()
    ctx = 8193  # one past 8,192
    expected = {
        "vllm": (True, "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
        "sglang": (True, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
        "trtllm": (True, "TLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
        "llamacpp": (False, None),
        "hf": (False, None),
        "formula": (False, None),
    }
    for name, (refuses, override) in expected.items():
        limit = context_limit(get_engine(name), spec, ctx)
        assert limit is not None, name
        assert (limit.refuses, limit.override, limit.maximum, limit.ctx) == (refuses, override, 8192, ctx), name


@given(ctx=st.integers(min_value=1, max_value=1 << 24), factor=st.sampled_from([1.0, 2.0, 4.0]))
def test_refused_exactly_past_the_maximum(ctx: int, factor: float) -> None:
    spec = spec_of(rope_scaling={"rope_type": "linear", "factor": factor})
    limit = context_limit(get_engine("vllm"), spec, ctx)
    assert (limit is not None) == (ctx > 8192 * factor)


# --- what a person sees -------------------------------------------------------------------------------------


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_llama_past_its_maximum_does_not_fit(colour: bool) -> None:
    # 262,144 > 131,072 (Llama 3.1's max_position_embeddings; llama3 RoPE is not scaled again by vLLM).
    code, screen = in_terminal(LLAMA_8B, "--ctx", "256k", "--gpu", "h100", colour=colour)
    assert code == 1
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "does not fit: ctx 262,144 is past the model's maximum context 131,072: vLLM 0.34.0 refuses" in flat
    assert "_get_and_verify_max_len" not in flat  # the source is rule text: --explain
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides it" in flat
    assert "past max ctx" in screen  # the bar's verdict: the memory holds it, the engine refuses it
    code, screen = in_terminal(LLAMA_8B, "--ctx", "256k", "--gpu", "h100", "--explain", colour=colour)
    assert code == 1 and "(vllm/config/model.py _get_and_verify_max_len)" in " ".join(screen.split())


def test_llama_at_its_maximum_fits() -> None:
    code, screen = in_terminal(LLAMA_8B, "--ctx", "128k", "--gpu", "h100", colour=False)
    assert code == 0
    assert "past the model's maximum" not in " ".join(screen.split())


def test_gpt2_past_1024_per_engine() -> None:
    # gpt2: n_positions 1,024. vLLM and SGLang refuse 4,096 (exit 1); llama.cpp runs it with a warning (exit 0).
    for engine, code, needle in [
        ("vllm", 1, "does not fit: ctx 4,096 is past the model's maximum context 1,024: vLLM"),
        ("sglang", 1, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 overrides it"),
        ("llamacpp", 0, "warning: ctx 4,096 is past the model's maximum context 1,024: llama.cpp b11312 runs it"),
        ("hf", 0, "warning: ctx 4,096 is past the model's maximum context 1,024: Hugging Face transformers"),
    ]:
        proc = run("openai-community/gpt2", "--ctx", "4k", "--gpu", "l4", "--engine", engine)
        assert proc.returncode == code, (engine, proc.stderr)
        assert needle in " ".join(proc.stdout.split()), engine
    # TensorRT-LLM has no gpt2 in its PyTorch flow: Llama 3.1 past 131,072 instead.
    proc = run(LLAMA_8B, "--ctx", "256k", "--gpu", "h200", "--engine", "trtllm")
    assert proc.returncode == 1
    flat = " ".join(proc.stdout.split())
    assert (
        "TensorRT-LLM 1.2.0 lowers max_seq_len to 131,072: requests of 262,144 tokens are not served" in flat
        and "TLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in flat
    )


def test_engine_all_groups_the_verdicts() -> None:
    proc = run("openai-community/gpt2", "--ctx", "4k", "--gpu", "l4", "--engine", "all")
    assert proc.returncode == 1  # vLLM and SGLang refuse 4,096 > 1,024
    flat = " ".join(proc.stdout.split())
    refused = flat.index("does not fit: ctx 4,096 is past the model's maximum context 1,024: vLLM 0.34.0 refuses")
    assert "SGLang 0.5.23 refuses a longer --context-length at start-up" in flat
    assert refused < flat.index("warning: ctx 4,096 is past the model's maximum context 1,024")
    assert flat.count("is past the model's maximum context") == 2  # one line per verdict, not per engine


def test_json_carries_the_limit() -> None:
    proc = run("openai-community/gpt2", "--ctx", "4k", "--gpu", "l4", "--json")
    assert proc.returncode == 1
    gpu = json.loads(proc.stdout)["scenarios"][0]["gpu"]
    assert gpu["fits"] is False
    limit = gpu["context_limit"]
    assert (limit["ctx"], limit["maximum"], limit["refuses"]) == (4096, 1024, True)
    assert limit["override"] == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    assert (limit["engine"], limit["source"]) == ("vLLM 0.34.0", "vllm/config/model.py _get_and_verify_max_len")


def test_check_fails_with_the_engines_rule(tmp_path: Path) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(
        "deployments:\n"
        "  - name: long\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require:\n      ctx: 262144\n"
        "  - name: long-with-floor\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require:\n"
        "      ctx: 262144\n      min_concurrency: 1\n"
    )
    proc = run("check", str(capacity), "--json")
    assert proc.returncode == 1
    for result in json.loads(proc.stdout)["deployments"]:
        assert result["pass"] is False
        assert result["reason"].startswith("ctx 262,144 is past the model's maximum context 131,072: vLLM 0.34.0")
        assert "(vllm/config/model.py _get_and_verify_max_len); VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in result["reason"]
        assert "over the budget" not in result["reason"]  # the memory holds it: not the reason


def test_plan_past_the_maximum_is_no_with_the_reason() -> None:
    proc = run("plan", LLAMA_8B, "--ctx", "256k", "--gpus", "h100,h200")
    assert proc.returncode == 1
    assert "┃" not in proc.stdout  # no empty table
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in " ".join(proc.stdout.split())


def test_plan_kv_dtype_the_engine_lacks_is_bad_input() -> None:
    proc = run("plan", LLAMA_8B, "--ctx", "8k", "--concurrency", "4", "--kv-dtype", "q8_0")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: vLLM 0.34.0 has no q8_0 KV cache")
    # llama.cpp has q8_0: the same request ranks GPUs.
    assert (
        run("plan", LLAMA_8B, "--ctx", "8k", "--kv-dtype", "q8_0", "--engine", "llamacpp", "--gpus", "h100").returncode
        == 0
    )


# --- the KV table's title with tp x pp > 1 ------------------------------------------------------------------


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_kv_title_says_what_is_summed(colour: bool) -> None:
    # Llama-3.1-8B at 8,192 tokens: 131,072 B per token x 8,192 = 1.00 GiB per request over both ranks; tp 2
    # splits the 8 KV heads 4 + 4, so the most loaded GPU holds 512.00 MiB.
    code, screen = in_terminal(LLAMA_8B, "--ctx", "8k", "--gpu", "h100", "--tp", "2", colour=colour)
    assert code == 0
    assert_uncut(screen)
    assert "KV cache, summed over all 2 GPUs (tp 2 x pp 1); per GPU: the most loaded one" in screen
    row = next(line for line in screen.splitlines() if line.lstrip().startswith("8,192"))
    assert "1.00 GiB" in row and "512.00 MiB" in row


def test_kv_title_tp1_is_plain() -> None:
    code, screen = in_terminal(LLAMA_8B, "--ctx", "8k", "--gpu", "h100", colour=False)
    assert code == 0
    assert "\nKV cache\n" in screen and "summed over" not in screen


# --- the memory bar ----------------------------------------------------------------------------------------


def test_bar_cells_by_hand() -> None:
    # 1.40 GiB of weights on a 140.40 GiB card at width 50: 0.4986 of a cell, still one cell.
    gib = 1 << 30
    cells = dict(bar_cells([("weights", 14 * gib // 10), ("free", 139 * gib)], 50))
    assert cells == {"weights": 1, "free": 49}
    assert bar_cells([("weights", 0), ("free", 10)], 20) == [("free", 20)]
    assert bar_cells([], 20) == []


@given(
    values=st.lists(st.integers(min_value=0, max_value=1 << 50), min_size=1, max_size=4),
    width=st.integers(min_value=4, max_value=80),
)
def test_bar_cells_add_up_and_show_every_part(values: list[int], width: int) -> None:
    parts = [(f"p{i}", v) for i, v in enumerate(values)]
    cells = bar_cells(parts, width)
    if any(values):
        assert sum(c for _, c in cells) == width
    assert [k for k, _ in cells] == [k for k, v in parts if v > 0]
    assert all(c >= 1 for _, c in cells)


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_small_weights_show_in_bar_and_legend(colour: bool) -> None:
    code, screen = in_terminal("Qwen/Qwen3-0.6B", "--ctx", "1k", "--gpu", "h200", colour=colour)
    assert code == 0
    bar = next(line for line in screen.splitlines() if line.startswith("1k x1"))
    assert bar.split()[3].startswith("█")  # the weights' one cell, first
    assert "█ weights" in screen


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_overflow_plus_is_in_the_legend(colour: bool) -> None:
    code, screen = in_terminal(
        "google/gemma-3-27b-it", "--ctx", "128k", "--gpu", "h100", "--kv-dtype", "fp8", "--batch", "4",
        "--engine-version", "0.33", colour=colour,
    )  # fmt: skip
    assert code == 1
    assert_uncut(screen)
    assert "×+ " in screen  # the run past the card's edge ends in '+'
    assert "+ longer than drawn" in " ".join(screen.split())


# --- the prefix-caching rule behind --explain ---------------------------------------------------------------


def test_prefix_rule_behind_explain() -> None:
    args = [LLAMA_8B, "--gpu", "h100", "--ctx", "8k", "--batch", "64", "--prefix-len", "2k"]
    default = run(*args)
    assert default.returncode == 0
    flat = " ".join(default.stdout.split())
    assert "remove_skipped_blocks" not in flat
    assert "rule: vLLM 0.34.0 prefix caching (--explain prints it)" in flat
    explained = " ".join(run(*args, "--explain").stdout.split())
    assert "whole blocks only" in explained and "remove_skipped_blocks" in explained


# --- the maximum as each engine derives it, everywhere it is shown ----------------------------------------------


def test_max_ctx_is_capped_at_the_engines_own_maximum(tmp_path: Path) -> None:
    """TINY with linear RoPE x4: vLLM 0.34.0 accepts 8,192 x 4 = 32,768 (_get_and_verify_max_len scales
    max_position_embeddings by a linear factor); transformers checks nothing, so its max ctx stays at the
    config's 8,192. The memory holds far more on an H100: 16,384 B per token (tiny_configs.TINY)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}))
    for engine, maximum in [("vllm", 32768), ("hf", 8192)]:
        proc = run(str(config), "--ctx", "8k", "--gpu", "h100", "--engine", engine, "--json")
        assert proc.returncode == 0, proc.stderr
        fit = json.loads(proc.stdout)["scenarios"][0]["gpu"]
        assert fit["max_context"] == maximum, engine
        assert fit["max_context_by_memory"] > maximum
        table = run(str(config), "--ctx", "8k", "--gpu", "h100", "--engine", engine).stdout
        row = next(line for line in table.splitlines() if line.strip().startswith("8,192"))
        assert row.split("│")[-1].strip() == f"{maximum:,}", engine  # the table's "max ctx" is the JSON's


def test_without_a_card_the_note_follows_each_engines_maximum(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}))
    notes = json.loads(run(str(config), "--ctx", "16k", "--engine", "vllm", "--json").stdout)["notes"]
    assert not any("maximum context" in n for n in notes)  # 16,384 <= 32,768: vLLM serves it
    notes = json.loads(run(str(config), "--ctx", "16k", "--engine", "hf", "--json").stdout)["notes"]
    assert any("ctx 16,384 is past the model's maximum context 8,192: Hugging Face" in n for n in notes)


def test_a_refused_context_is_advised_a_shorter_context_only() -> None:
    """Memory changes (fp8, tp, a larger card) cannot make vLLM accept 262,144 > 131,072 tokens of Llama 3.1:
    the one suggestion is the longest context it serves that the memory holds."""
    proc = run(LLAMA_8B, "--ctx", "256k", "--gpu", "h100", "--json")
    assert proc.returncode == 1
    suggestions = json.loads(proc.stdout)["scenarios"][0]["gpu"]["suggestions"]
    assert [s["change"] for s in suggestions] == ["--ctx 131072"]
    assert suggestions[0]["fits"] is True


def test_speed_bound_counts_only_the_requests_the_cap_runs() -> None:
    """--batch 4 with --max-num-seqs 2: vLLM 0.34.0 runs 2 (Scheduler.schedule admits while len(running) <
    max_num_seqs), the other 2 wait holding no KV, so a decode step reads the weights and 2 requests' KV:
    (16,060,522,496 + 2 x 17,179,869,184) B / 3.35e12 B/s (h100-sxm memory_bandwidth_bytes_per_s)."""
    proc = run(LLAMA_8B, "--ctx", "128k", "--batch", "4", "--max-num-seqs", "2", "--gpu", "h100", "--json")
    speed = json.loads(proc.stdout)["scenarios"][0]["gpu"]["speed"]
    step = (16_060_522_496 + 2 * 17_179_869_184) / 3_350_000_000_000
    assert speed["requests"] == 2
    assert speed["decode_step_seconds_min"] == pytest.approx(step, rel=1e-12)
    assert speed["decode_tokens_per_s_max"] == pytest.approx(2 / step, rel=1e-12)
    table = run(LLAMA_8B, "--ctx", "128k", "--batch", "4", "--max-num-seqs", "2", "--gpu", "h100").stdout
    screen = " ".join(table.split())
    assert "speed bound at 2 x 131,072 (the engine's cap; 2 of the batch wait): decode <= 66 tok/s" in screen


# --- which config keys each engine reads its maximum from ---------------------------------------------------

KEY_CASES = [
    # (keys added to TINY (max_position_embeddings 8192 unless replaced), vLLM, SGLang, TensorRT-LLM, hf)
    # Command-R v01 style: model_max_length overrides in vLLM (derive_max_model_len_and_key: "For Command-R /
    # Cohere"), is SGLang's 4th key before max_position_embeddings; TRT-LLM and transformers read the 8,192.
    ({"model_max_length": 131072}, 131072, 131072, 8192, 8192),
    # Qwen (v1) style: seq_length 2,048 beside max_position_embeddings 8,192. vLLM takes the smallest key,
    # SGLang's first key is seq_length, TRT-LLM reads max_position_embeddings.
    ({"seq_length": 2048}, 2048, 2048, 8192, 8192),
    # seq_length alone (ChatGLM style; a model type whose transformers config has no default
    # max_position_embeddings, unlike llama's 2,048): TRT-LLM finds no max_position_embeddings, its 2,048 default.
    ({"model_type": "chatglm_like", "max_position_embeddings": None, "seq_length": 32768}, 32768, 32768, 2048, 32768),
    # n_positions alone (GPT-2 style): transformers' attribute map serves it as max_position_embeddings.
    ({"model_type": "gpt_like", "max_position_embeddings": None, "n_positions": 1024}, 1024, 1024, 1024, 1024),
]


@pytest.mark.parametrize(("keys", "vllm", "sglang", "trtllm", "hf"), KEY_CASES)
def test_each_engine_reads_its_own_context_keys(
    keys: dict[str, Any], vllm: int, sglang: int, trtllm: int, hf: int
) -> None:
    spec = spec_of(**keys)
    for name, expected in [("vllm", vllm), ("sglang", sglang), ("trtllm", trtllm), ("hf", hf)]:
        assert engine_max_context(get_engine(name), spec) == expected, name


def test_command_r_style_long_context_is_served_by_vllm(tmp_path: Path) -> None:
    """32k on a config stating max_position_embeddings 8,192 and model_max_length 131,072: vLLM serves it
    (exit 0, no refusal); transformers runs it with a warning (it reads 8,192)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "model_max_length": 131072}))
    proc = run(str(config), "--ctx", "32k", "--gpu", "h100", "--json")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["scenarios"][0]["gpu"]["context_limit"] is None
    proc = run(str(config), "--ctx", "32k", "--gpu", "h100", "--engine", "hf", "--json")
    limit = json.loads(proc.stdout)["scenarios"][0]["gpu"]["context_limit"]
    assert proc.returncode == 0 and limit["maximum"] == 8192 and limit["refuses"] is False
