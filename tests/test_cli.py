"""The `kvsize` command line: its JSON contract, its grids, its GPU arithmetic and its one-line errors.

Every expected number is worked out by hand in a comment next to the assertion, never read back from kvsize.
Most tests go through typer's CliRunner (which keeps stdout and stderr apart); a few run a real
`python -m kvsize` process to prove the console entry point and the one-line stderr end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kvsize.cli import app
from kvsize.registry import registry_entries

LLAMA_8B = "meta-llama/Llama-3.1-8B"
H100_MEMORY = 85520809984  # h100-sxm: nvidia-smi 81559 MiB = 81559 x 1048576 B
GIB = 2**30

# A small GQA model: 4 layers, 32 query heads, 8 KV heads, head_dim 4096 / 32 = 128.
# Per token: 4 layers x 8 heads x 128 x 2 (K and V) = 8192 elements -> bf16 16384 B, fp32 32768 B.
TINY_GQA: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}

runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def run_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = invoke(*args, "--json")
    assert result.exit_code == code, result.stderr
    assert result.stderr == ""
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def write_config(folder: Path, data: Any, name: str = "config.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def assert_one_line_error(result: Result, exit_code: int = 2) -> str:
    """The error contract: the exit code, nothing on stdout, one stderr line starting 'Error: '."""
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not a crash
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


# --- commands, version, default command ---------------------------------------------------------------


def test_version_prints_name_and_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"kvsize {version('kvsize')}\n"
    assert result.stderr == ""


def test_model_alone_is_the_size_command() -> None:
    plain = invoke(LLAMA_8B, "--ctx", "8k,32k", "--batch", "1,4", "--json")
    explicit = invoke("size", LLAMA_8B, "--ctx", "8k,32k", "--batch", "1,4", "--json")
    assert plain.exit_code == explicit.exit_code == 0
    assert plain.stdout == explicit.stdout
    assert json.loads(plain.stdout)["model"] == LLAMA_8B


def test_table_output_shows_the_figures() -> None:
    result = invoke(LLAMA_8B, "--ctx", "128k", "--gpu", "h100")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    # 131072 B/token and 131072 tokens x 131072 B = 2^34 B = 16.00 GiB.
    for text in ("131,072 B", "16.00 GiB", "h100-sxm", "fits"):
        assert text in result.stdout


def test_gpus_json_lists_all_profiles() -> None:
    result = invoke("gpus", "--json")
    assert result.exit_code == 0
    profiles = json.loads(result.stdout)["gpus"]  # one object, as the help says
    assert len(profiles) == 54
    by_id = {p["id"]: p for p in profiles}
    assert by_id["h100-sxm"]["memory_bytes"] == H100_MEMORY
    assert "h100" in by_id["h100-sxm"]["aliases"]


def test_models_json_lists_the_registry() -> None:
    result = invoke("models", "--json")
    assert result.exit_code == 0
    models = json.loads(result.stdout)["models"]  # one object, as the help says
    assert len(models) == len(registry_entries()) >= 160
    ids = [m["hub_id"] for m in models]
    assert LLAMA_8B in ids
    assert len(set(ids)) == len(ids)
    assert all(isinstance(m["summary"], str) and m["summary"] for m in models)


def test_gpus_and_models_tables_render() -> None:
    gpus = invoke("gpus")
    models = invoke("models")
    assert gpus.exit_code == models.exit_code == 0
    assert "h100-sxm" in gpus.stdout
    assert LLAMA_8B in models.stdout


# --- the JSON contract and the seed figures -----------------------------------------------------------


def test_json_shape() -> None:
    data = run_json(LLAMA_8B, "--ctx", "8k", "--gpu", "h100")
    assert set(data) == {"model", "source", "architecture", "notes", "scenarios"}
    arch = data["architecture"]
    for key in ("model_type", "attention", "num_layers", "num_attention_heads", "max_context", "model_dtype"):
        assert key in arch
    assert (arch["model_type"], arch["num_layers"], arch["num_attention_heads"]) == ("llama", 32, 32)
    assert (arch["max_context"], arch["model_dtype"]) == (131072, "bf16")
    # One group of 32 full layers: 8 KV heads x (128 + 128) = 2048 elements per token per layer.
    [group] = arch["layers"]
    assert {k: group[k] for k in ("kind", "count", "num_kv_heads", "head_dim", "head_dim_v", "window",
                                  "elements_per_token")} == {
        "kind": "full", "count": 32, "num_kv_heads": 8, "head_dim": 128, "head_dim_v": 128, "window": None,
        "elements_per_token": 2048}
    assert isinstance(data["notes"], list)
    [scenario] = data["scenarios"]
    for key in ("engine", "rule", "ctx", "batch", "kv_dtype", "kv_bytes_per_token", "state_bytes_per_request",
                "bytes_per_request", "kv_cache_bytes", "layers", "gpu"):
        assert key in scenario
    for key in ("kv_bytes_per_token", "state_bytes_per_request", "bytes_per_request", "kv_cache_bytes"):
        assert type(scenario[key]) is int
    assert set(scenario["gpu"]) == {"name", "memory_bytes", "weights_bytes", "weights_source",
                                    "weights_estimated", "reserve_bytes", "reserve_rule", "kv_budget_bytes",
                                    "fits", "memory_fits", "max_concurrency", "max_context", "max_context_by_memory",
                                    "budget",
                                    "kv_pool_tokens", "kv_pool_swa_tokens",
                                    "concurrency", "speed", "offload", "concurrency_cap", "cap_binds",
                                    "max_concurrency_by_memory",
                                    "suggestions", "steady_state_concurrency",
                                    "workload", "throughput", "prefill_saved_seconds", "context_limit"}
    for key in ("memory_bytes", "weights_bytes", "reserve_bytes", "kv_budget_bytes", "max_concurrency",
                "kv_pool_tokens"):
        assert type(scenario["gpu"][key]) is int
    assert type(scenario["gpu"]["concurrency"]) is float
    for key in ("tp", "pp", "kv_cache_bytes_per_gpu", "engine_version", "block_size"):
        assert key in scenario


def test_gpu_is_null_without_a_card() -> None:
    data = run_json(LLAMA_8B, "--ctx", "8k")
    assert data["scenarios"][0]["gpu"] is None


def test_seed_llama_3_1_8b() -> None:
    [s] = run_json(LLAMA_8B, "--ctx", "131072", "--kv-dtype", "bf16")["scenarios"]
    # 32 layers x 8 KV heads x 128 head_dim x 2 (K, V) x 2 B (bf16) = 131072 B per token.
    assert s["kv_bytes_per_token"] == 131072
    # 131072 tokens x 131072 B = 2^17 x 2^17 = 2^34 = 17179869184 B (16 GiB).
    assert s["kv_cache_bytes"] == 17179869184
    assert s["bytes_per_request"] == 17179869184
    assert (s["ctx"], s["batch"], s["kv_dtype"], s["state_bytes_per_request"]) == (131072, 1, "bf16", 0)


def test_seed_llama_3_1_70b_instruct() -> None:
    [s] = run_json("meta-llama/Llama-3.1-70B-Instruct", "--ctx", "128k", "--kv-dtype", "bf16")["scenarios"]
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 327680 B per token.
    assert s["kv_bytes_per_token"] == 327680
    # 327680 x 131072 = 42949672960 B (40 GiB).
    assert s["kv_cache_bytes"] == 42949672960


def test_seed_deepseek_v3_mla() -> None:
    data = run_json("deepseek-ai/DeepSeek-V3", "--ctx", "8k", "--kv-dtype", "bf16")
    # MLA caches one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per layer:
    # 61 layers x 576 x 2 B = 70272 B per token.
    assert data["scenarios"][0]["kv_bytes_per_token"] == 70272
    assert data["architecture"]["attention"] == "MLA"


def test_seed_h100_fit_with_given_weights() -> None:
    [s] = run_json(LLAMA_8B, "--gpu", "h100", "--weights-mem", "16060522496", "--ctx", "8k", "--engine",
                   "formula")["scenarios"]
    gpu = s["gpu"]
    # h100 = the H100 SXM profile: 85520809984 B.
    assert (gpu["name"], gpu["memory_bytes"]) == ("h100-sxm", 85520809984)
    assert (gpu["weights_bytes"], gpu["weights_estimated"]) == (16060522496, False)
    # reserve = 85520809984 - floor(85520809984 x 92 / 100) = 85520809984 - 78679145185 = 6841664799.
    assert gpu["reserve_bytes"] == 6841664799
    # budget = 85520809984 - 16060522496 - 6841664799 = 62618622689.
    assert gpu["kv_budget_bytes"] == 62618622689
    # one request of 8192 tokens x 131072 B = 1073741824 B; 62618622689 // 1073741824 = 58.
    assert gpu["max_concurrency"] == 58
    assert gpu["fits"] is True
    # longest single request the budget holds: 62618622689 // 131072 = 477742 tokens; past the model's maximum
    # (max_position_embeddings 131072), so max_context stops there and the memory's figure is its own field.
    assert (gpu["max_context"], gpu["max_context_by_memory"]) == (131072, 477742)


def test_custom_card_reserve_and_weights_overrides() -> None:
    [s] = run_json(LLAMA_8B, "--gpu-mem", "24GiB", "--reserve", "2GiB", "--weights-mem", "15GiB",
                   "--ctx", "8k")["scenarios"]
    gpu = s["gpu"]
    # 24 GiB = 25769803776 B; budget = 24 - 15 - 2 = 7 GiB = 7516192768 B.
    assert gpu["memory_bytes"] == 25769803776
    assert (gpu["reserve_bytes"], gpu["reserve_rule"]) == (2147483648, "card - weights - reserve (given)")
    assert (gpu["weights_bytes"], gpu["weights_source"]) == (16106127360, "given")
    assert gpu["kv_budget_bytes"] == 7516192768
    # 8192 x 131072 B = 1 GiB per request -> 7 requests.
    assert gpu["max_concurrency"] == 7


def test_custom_card_default_reserve() -> None:
    gpu = run_json(LLAMA_8B, "--gpu-mem", "24GiB", "--ctx", "8k", "--engine", "formula")["scenarios"][0]["gpu"]
    # 25769803776 x 92 = 2370821947392; // 100 = 23708219473; reserve = 25769803776 - 23708219473.
    assert gpu["reserve_bytes"] == 2061584303


def test_weights_beyond_the_card_do_not_fit() -> None:
    # Exit 1: with --gpu, a scenario that does not fit is the answer "no" (as `kvsize check`).
    gpu = run_json(LLAMA_8B, "--gpu", "h100", "--weights-mem", "100GiB", "--ctx", "8k", "--engine",
                   "formula", code=1)["scenarios"][0]["gpu"]
    # 85520809984 - 107374182400 - 6841664799 = -28695037215: negative budget, nothing fits.
    assert gpu["kv_budget_bytes"] == -28695037215
    assert (gpu["fits"], gpu["max_concurrency"]) == (False, 0)


def test_batch_that_does_not_fit() -> None:
    args = (LLAMA_8B, "--gpu", "h100", "--weights-mem", "16060522496", "--ctx", "128k", "--batch", "4")
    gpu = run_json(*args, "--engine", "formula", code=1)["scenarios"][0]["gpu"]
    # 4 x 16 GiB = 68719476736 B > budget 62618622689; 62618622689 // 17179869184 = 3 requests.
    assert (gpu["fits"], gpu["max_concurrency"]) == (False, 3)
    # each of 4 requests: 62618622689 // (4 x 131072) = 119435 tokens.
    assert gpu["max_context"] == 119435
    # vLLM allocates whole 16-token blocks: the longest context is 119435 rounded down to 16 = 119424.
    same_budget = ("--reserve", "6841664799")  # the formula's default reserve, stated
    assert run_json(*args, *same_budget, "--engine", "vllm", code=1)["scenarios"][0]["gpu"]["max_context"] == 119424


# --- grids ---------------------------------------------------------------------------------------------


def test_grid_order_and_count() -> None:
    scenarios = run_json(LLAMA_8B, "--ctx", "8k,32k", "--batch", "1,8", "--kv-dtype", "bf16,fp8")["scenarios"]
    # dtype outermost, then ctx, then batch: 2 x 2 x 2 = 8 scenarios.
    assert [(s["kv_dtype"], s["ctx"], s["batch"]) for s in scenarios] == [
        ("bf16", 8192, 1), ("bf16", 8192, 8), ("bf16", 32768, 1), ("bf16", 32768, 8),
        ("fp8_e4m3", 8192, 1), ("fp8_e4m3", 8192, 8), ("fp8_e4m3", 32768, 1), ("fp8_e4m3", 32768, 8),
    ]
    # bf16: batch x ctx x 131072 B, e.g. 8 x 32768 x 131072 = 34359738368.
    assert [s["kv_cache_bytes"] for s in scenarios[:4]] == [
        1073741824, 8589934592, 4294967296, 34359738368]
    for bf16, fp8 in zip(scenarios[:4], scenarios[4:], strict=True):
        assert fp8["kv_bytes_per_token"] * 2 == bf16["kv_bytes_per_token"]
        assert fp8["kv_cache_bytes"] * 2 == bf16["kv_cache_bytes"]


@pytest.mark.parametrize(("ctx", "expected"), [
    ("131072", [131072]),
    ("128k", [131072]),  # 128 x 1024
    ("128K", [131072]),
    ("1M", [1048576]),  # 1024 x 1024
    ("8k,32k,128k", [8192, 32768, 131072]),
    (" 8k , 32k ", [8192, 32768]),
    ("8k,8192,8K", [8192]),  # duplicates collapse
])
def test_ctx_spellings(ctx: str, expected: list[int]) -> None:
    scenarios = run_json(LLAMA_8B, "--ctx", ctx)["scenarios"]
    assert [s["ctx"] for s in scenarios] == expected


def test_max_model_len_is_an_alias_of_ctx() -> None:
    assert [s["ctx"] for s in run_json(LLAMA_8B, "--max-model-len", "4k")["scenarios"]] == [4096]


def test_default_contexts_end_at_the_model_maximum() -> None:
    ctxs = [s["ctx"] for s in run_json(LLAMA_8B)["scenarios"]]
    assert ctxs == sorted(set(ctxs))
    assert ctxs[-1] == 131072  # Llama-3.1's max_position_embeddings
    assert len(ctxs) > 1


def test_batch_and_dtype_lists_collapse_duplicates() -> None:
    scenarios = run_json(LLAMA_8B, "--ctx", "8k", "--batch", "2,2,4", "--kv-dtype", "fp8,fp8_e4m3,FP8")[
        "scenarios"]
    assert [(s["kv_dtype"], s["batch"]) for s in scenarios] == [("fp8_e4m3", 2), ("fp8_e4m3", 4)]
    # fp8: 32 x 8 x 128 x 2 x 1 B = 65536 B per token.
    assert scenarios[0]["kv_bytes_per_token"] == 65536


def test_ctx_beyond_the_model_maximum_gets_a_note() -> None:
    data = run_json(LLAMA_8B, "--ctx", "1M")
    assert any("1,048,576" in note and "131,072" in note for note in data["notes"])


def test_kv_dtype_auto_follows_the_config_and_says_so(tmp_path: Path) -> None:
    data = run_json(LLAMA_8B, "--ctx", "8k")
    assert data["scenarios"][0]["kv_dtype"] == "bf16"
    assert any("auto" in note and "bf16" in note for note in data["notes"])

    path = write_config(tmp_path / "fp32", {**TINY_GQA, "torch_dtype": "float32"})
    data = run_json(str(path), "--ctx", "1k", "--engine", "formula")
    [s] = data["scenarios"]
    # fp32: 4 x 8 x 128 x 2 x 4 B = 32768 B per token.
    assert (s["kv_dtype"], s["kv_bytes_per_token"]) == ("fp32", 32768)
    assert any("auto" in note and "fp32" in note for note in data["notes"])
    # vLLM serves float32 checkpoints in bfloat16 (config/model.py _resolve_auto_dtype: "Downcast for float32
    # models" to the platform's first dtype), so its auto KV cache is bf16: 4 x 8 x 128 x 2 x 2 B = 16384 B.
    [s] = run_json(str(path), "--ctx", "1k")["scenarios"]
    assert (s["kv_dtype"], s["kv_bytes_per_token"]) == ("bf16", 16384)


def test_kv_dtype_auto_picks_fp8_from_a_kv_cache_scheme(tmp_path: Path) -> None:
    scheme = {"quantization_config": {"kv_cache_scheme": {"type": "float", "num_bits": 8}}}
    path = write_config(tmp_path, {**TINY_GQA, **scheme})
    [s] = run_json(str(path), "--ctx", "1k")["scenarios"]
    # fp8: 4 x 8 x 128 x 2 x 1 B = 8192 B per token.
    assert (s["kv_dtype"], s["kv_bytes_per_token"]) == ("fp8_e4m3", 8192)


# --- where configs come from ---------------------------------------------------------------------------


def test_registry_lookup_ignores_case() -> None:
    data = run_json("META-LLAMA/llama-3.1-8b", "--ctx", "8k")
    assert data["model"] == LLAMA_8B  # printed as the hub spells it
    assert data["source"].startswith("registry:")
    assert data["scenarios"][0]["kv_bytes_per_token"] == 131072


def test_local_config_file_and_folder(tmp_path: Path) -> None:
    path = write_config(tmp_path / "tiny", TINY_GQA)
    for ref in (str(path), str(path.parent)):
        data = run_json(ref, "--ctx", "8k", "--batch", "2")
        assert data["source"].startswith("local:")
        assert data["source"].endswith("config.json")
        [s] = data["scenarios"]
        # 4 x 8 x 128 x 2 x 2 B = 16384 B per token; 2 requests x 8192 tokens x 16384 B = 268435456 B.
        assert s["kv_bytes_per_token"] == 16384
        assert s["kv_cache_bytes"] == 268435456


def test_local_config_on_a_custom_card_estimates_weights(tmp_path: Path) -> None:
    path = write_config(tmp_path, TINY_GQA)
    data = run_json(str(path), "--ctx", "8k", "--gpu-mem", "24GiB")
    gpu = data["scenarios"][0]["gpu"]
    assert gpu["weights_estimated"] is True
    assert gpu["weights_bytes"] > 0
    assert any("weights" in note for note in data["notes"])


def test_auto_map_is_noted_and_never_run(tmp_path: Path) -> None:
    data = run_json("deepseek-ai/DeepSeek-V3", "--ctx", "8k")
    assert any("auto_map" in note and "none was run" in note for note in data["notes"])

    # A canary module the config points at: importing it would leave a file behind.
    folder = tmp_path / "custom"
    marker = tmp_path / "code-ran"
    write_config(folder, f"open({str(marker)!r}, 'w').close()\n", name="modeling_canary.py")
    write_config(folder, {**TINY_GQA, "auto_map": {"AutoConfig": "modeling_canary.CanaryConfig",
                                                   "AutoModelForCausalLM": "modeling_canary.Canary"}})
    data = run_json(str(folder), "--ctx", "8k")
    assert any("auto_map" in note for note in data["notes"])
    assert not marker.exists()


# --- bad input: exit 2, one line -----------------------------------------------------------------------

BAD_CONFIGS: dict[str, Any] = {
    "broken.json": '{"num_hidden_layers": 4,',
    "list.json": "[1, 2, 3]",
    "no_fields.json": {"model_type": "my_custom_arch", "hidden_size": 4096},
    "no_heads.json": {"model_type": "my_custom_arch", "num_hidden_layers": 4, "hidden_size": 4096},
    "negative_layers.json": {**TINY_GQA, "num_hidden_layers": -3},
    "kv_not_dividing.json": {**TINY_GQA, "num_key_value_heads": 5},  # 32 % 5 != 0
    "head_dim_zero.json": {**TINY_GQA, "head_dim": 0},
    "layers_string.json": {**TINY_GQA, "num_hidden_layers": "32"},
    "layers_huge.json": {**TINY_GQA, "num_hidden_layers": 10**12},
}


@pytest.mark.parametrize(("name", "needle"), [
    ("broken.json", "not valid JSON"),
    ("list.json", "JSON object"),
    ("no_fields.json", "num_hidden_layers"),
    ("no_heads.json", "num_attention_heads"),
    ("negative_layers.json", "num_hidden_layers"),
    ("kv_not_dividing.json", "num_key_value_heads"),
    ("head_dim_zero.json", "head_dim"),
    ("layers_string.json", "num_hidden_layers"),
    ("layers_huge.json", "num_hidden_layers"),
])
def test_bad_config_files(tmp_path: Path, name: str, needle: str) -> None:
    path = write_config(tmp_path, BAD_CONFIGS[name], name=name)
    line = assert_one_line_error(invoke(str(path), "--ctx", "8k"))
    assert needle in line


def test_missing_file_and_empty_folder(tmp_path: Path) -> None:
    assert "no such file" in assert_one_line_error(invoke("./nope/config.json"))
    (tmp_path / "empty").mkdir()
    assert "no config.json" in assert_one_line_error(invoke(str(tmp_path / "empty")))


@pytest.mark.parametrize(("args", "needle"), [
    (["--ctx", "0"], "token count"),
    (["--ctx", "-5"], "token count"),
    (["--ctx=-5"], "token count"),
    (["--ctx", "abc"], "token count"),
    (["--ctx", "128q"], "token count"),
    (["--ctx", "1.5k"], "token count"),
    (["--ctx", "8k,,0"], "token count"),
    (["--ctx", "1099511627777"], "2^40"),  # 2^40 + 1 tokens
    (["--batch", "0"], "'0'"),
    (["--batch", "x"], "'x'"),
    (["--kv-dtype", "fp7"], "fp7"),
    (["--kv-dtype", "bf16,fp7"], "fp7"),
    (["--gpu", "h10"], "h100"),
    (["--gpu-mem", "0"], "'0'"),
    (["--gpu-mem", "lots"], "lots"),
    (["--gpu-mem", "-24GiB"], "-24GiB"),
    (["--reserve", "lots", "--gpu", "h100"], "lots"),
    (["--weights-mem", "lots", "--gpu", "h100"], "lots"),
    (["--engine", "vllm2"], "vllm2"),
])
def test_bad_options(args: list[str], needle: str) -> None:
    line = assert_one_line_error(invoke(LLAMA_8B, *args))
    assert needle in line


def test_unknown_gpu_hint_lists_close_names() -> None:
    line = assert_one_line_error(invoke(LLAMA_8B, "--gpu", "h10"))
    assert "h10" in line
    assert "h100-sxm" in line  # the id of the h100 alias
    assert "kvsize gpus" in line


@pytest.mark.parametrize("ref", ["../../etc/passwd", "/etc/hostname", "bad id!", "a/b/c", "", "   "])
def test_bad_model_references(ref: str) -> None:
    assert_one_line_error(invoke(ref, "--ctx", "8k"))


def test_usage_errors_exit_2_without_stdout() -> None:
    for args in (["size"], [LLAMA_8B, "--bogus"], [LLAMA_8B, "--encoder-len", "-1"], ["gpus", "extra"]):
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert result.stdout == "", args
        assert "Traceback" not in result.stderr


# --- bugs found while writing these tests, now fixed -------------------------------------------------


@pytest.mark.parametrize("args", [["size"], [LLAMA_8B, "--bogus"], [LLAMA_8B, "--encoder-len", "-1"]])
def test_usage_errors_are_one_line(args: list[str]) -> None:
    assert_one_line_error(invoke(*args))


@pytest.mark.parametrize("args", [["--ctx", "²"], ["--ctx", "²k"], ["--batch", "²"]])
def test_superscript_digits_are_rejected_cleanly(args: list[str]) -> None:
    assert_one_line_error(invoke(LLAMA_8B, *args))


def test_zero_reserve_is_accepted() -> None:
    gpu = run_json(LLAMA_8B, "--gpu", "h100", "--reserve", "0", "--weights-mem", "16060522496",
                   "--ctx", "8k")["scenarios"][0]["gpu"]
    # budget = 85520809984 - 16060522496 - 0 = 69460287488.
    assert gpu["kv_budget_bytes"] == 69460287488


def test_batch_error_names_the_batch() -> None:
    line = assert_one_line_error(invoke(LLAMA_8B, "--batch", "0"))
    assert "batch" in line.lower()
    assert "token" not in line.lower()


# --- through a real process ----------------------------------------------------------------------------


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN")}
    return subprocess.run([sys.executable, "-m", "kvsize", *args], capture_output=True, text=True, timeout=60,
                          env={**base, "HF_HUB_OFFLINE": "1", **(env or {})}, check=False)


def test_process_json_output() -> None:
    proc = _run(LLAMA_8B, "--ctx", "128k", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    # 2^34 B, as in test_seed_llama_3_1_8b.
    assert json.loads(proc.stdout)["scenarios"][0]["kv_cache_bytes"] == 17179869184


def test_process_bad_input_is_one_line() -> None:
    proc = _run("./nope/config.json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("Error: ")


def test_process_hub_unreachable_is_exit_3(tmp_path: Path) -> None:
    proc = _run("some-org/not-a-registry-model", "--ctx", "8k", env={"HF_HOME": str(tmp_path)})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("Error: ")
    assert "local cache" in line
    assert "network" in line
