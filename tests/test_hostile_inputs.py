"""Hostile configs, paths and command-line values given to `kvsize`, beyond the bad-input matrix of test_cli.py.

The contract for every bad input: exit code 2 (3 for the environment), nothing on stdout, exactly one stderr
line starting "Error: ", no traceback, and an answer within a few seconds of CPU time (wall-clock time is the
machine's load, not kvsize's). Most cases go through typer's CliRunner on `kvsize.cli.app`; the ones that could
hang or that need a real process (a FIFO, the console entry point) run `python -m kvsize` under a generous hang
guard, failing as "hung".

Bugs found while writing these tests were fixed; their tests stay as regression tests.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiny_configs import registry_config
from typer.testing import CliRunner, Result

from kvsize.cli import app

LLAMA_8B = "meta-llama/Llama-3.1-8B"
FEW_SECONDS = 10.0  # CPU seconds one invocation may spend (in-process, or a child's); its load-free cost
HANG_GUARD_S = 60  # wall clock: a process with no answer by then hung (a busy machine is slow, never this slow)

# 4 layers, 32 heads, 8 KV heads, head_dim 4096 / 32 = 128: 4 x 8 x 256 x 2 B = 16384 B per token in bf16.
TINY: dict[str, Any] = {
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
    start = time.process_time()  # this process's CPU time: another job on the machine does not count
    result = runner.invoke(app, list(args))
    spent = time.process_time() - start
    assert spent < FEW_SECONDS, f"took {spent:.1f} CPU s: {args}"
    return result


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_config(folder: Path, data: Any, name: str = "config.json") -> Path:
    """`data` as JSON, or as the file's exact text (str) or bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def assert_rejected(result: Result, exit_code: int = 2) -> str:
    """The error contract: the exit code, nothing on stdout, one stderr line starting 'Error: '."""
    assert result.exit_code == exit_code, (result.exit_code, result.stdout[-500:], result.stderr[-2000:],
                                           result.exception)
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not a crash
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("Error: ")
    return lines[0]


def run_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    try:
        return subprocess.run([sys.executable, "-m", "kvsize", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env={**base, "HF_HUB_OFFLINE": "1", **(env or {})},
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no answer within {timeout:g} s from kvsize {' '.join(args)[:300]}")


def assert_process_rejected(proc: subprocess.CompletedProcess[str], exit_code: int = 2) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("Error: ")
    return lines[0]


# --- config files that are not a model's config ----------------------------------------------------------

FIVE_MIB = 5 * 1024 * 1024
CONFIG_CONTENTS: dict[str, tuple[str | bytes, str]] = {
    # name: (file content, text the error line must contain)
    "json-number": ("42", "JSON object"),
    "json-float": ("3.5", "JSON object"),
    "json-string": ('"a config"', "JSON object"),
    "json-null": ("null", "JSON object"),
    "json-true": ("true", "JSON object"),
    "empty-file": ("", "not valid JSON"),
    "whitespace-only": ("  \n\t\n", "not valid JSON"),
    "utf8-bom": ("\ufeff" + json.dumps(TINY), "not valid JSON"),
    "latin-1": (b'{"model_type": "caf\xe9"}', "not UTF-8"),
    "trailing-nul": (json.dumps(TINY) + "\x00", "not valid JSON"),
    "nested-lists-100k": ("[" * 100_000, "nested too deeply"),
    "nested-lists-100k-closed": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "nested-objects-100k": ('{"a":' * 100_000, "nested too deeply"),
    "nested-in-a-field": (json.dumps(TINY)[:-1] + ', "text_config": ' + "[" * 100_000 + "]" * 100_000 + "}",
                          "nested too deeply"),
    "5-mib": (json.dumps({**TINY, "padding": "x" * FIVE_MIB}), "too large"),
    "float-overflow-literal": (json.dumps(TINY).replace('"num_hidden_layers": 4', '"num_hidden_layers": 1e400'),
                               "num_hidden_layers"),
}


@pytest.mark.parametrize("name", list(CONFIG_CONTENTS))
def test_config_file_that_is_no_model(tmp_path: Path, name: str) -> None:
    content, needle = CONFIG_CONTENTS[name]
    path = write_config(tmp_path, content)
    line = assert_rejected(invoke(str(path), "--ctx", "8k"))
    assert needle in line
    assert str(path) in line or "config.json" in line


def test_integer_literal_with_5000_digits(tmp_path: Path) -> None:
    text = json.dumps(TINY).replace('"num_hidden_layers": 4', '"num_hidden_layers": ' + "9" * 5000)
    path = write_config(tmp_path, text)
    assert_rejected(invoke(str(path), "--ctx", "8k"))


# --- NaN, Infinity and absurd numbers in the fields the parser reads --------------------------------------

NAN_FIELDS = (
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
    "max_position_embeddings", "sliding_window", "v_head_dim", "num_kv_shared_layers", "attention_chunk_size",
)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("field", NAN_FIELDS)
def test_nan_and_infinity_in_parsed_fields(tmp_path: Path, field: str, value: float) -> None:
    path = write_config(tmp_path, json.dumps({**TINY, field: value}))  # json writes NaN / Infinity literals
    assert field in assert_rejected(invoke(str(path), "--ctx", "8k"))


@pytest.mark.parametrize("layers", [100_001, 2**31, 2**63, 2**64, 10**30, -(10**30), 1e20],
                         ids=lambda v: f"layers={v}")
def test_absurd_layer_counts(tmp_path: Path, layers: int | float) -> None:
    path = write_config(tmp_path, {**TINY, "num_hidden_layers": layers})
    assert "num_hidden_layers" in assert_rejected(invoke(str(path), "--ctx", "8k"))


MLA = {"model_type": "deepseek_v3"}
BAD_SHAPES: dict[str, tuple[dict[str, Any], str]] = {
    # name: (fields over TINY, text the error line must contain)
    "heads-not-dividing-hidden": ({"hidden_size": 4100}, "must divide hidden_size"),  # 4100 % 32 = 4
    "kv-heads-above-heads": ({"num_key_value_heads": 64}, "must divide num_attention_heads"),  # 32 % 64 = 32
    "kv-heads-zero": ({"num_key_value_heads": 0}, "num_key_value_heads"),
    "heads-zero": ({"num_attention_heads": 0}, "num_attention_heads"),
    "hidden-zero": ({"hidden_size": 0}, "hidden_size"),
    "head-dim-negative": ({"head_dim": -128}, "head_dim"),
    "head-dim-huge": ({"head_dim": 2**40}, "head_dim"),
    "v-head-dim-zero": ({"v_head_dim": 0}, "v_head_dim"),
    # MLA fields only on an MLA model type: on llama kvsize's guard refuses them as unmodelled (cache_fields)
    "kv-lora-rank-zero": ({**MLA, "kv_lora_rank": 0, "qk_rope_head_dim": 64}, "kv_lora_rank"),
    "qk-rope-negative": ({**MLA, "kv_lora_rank": 512, "qk_rope_head_dim": -1}, "qk_rope_head_dim"),
    "mla-without-rope-dim": ({**MLA, "kv_lora_rank": 512}, "qk_rope_head_dim"),
    "max-positions-zero": ({"max_position_embeddings": 0}, "max_position_embeddings"),
    "sliding-window-negative": ({"sliding_window": -1}, "sliding_window"),
    "use-sliding-window-string": ({"sliding_window": 16, "use_sliding_window": "yes"}, "use_sliding_window"),
    "window-pattern-bad-letters": ({"sliding_window": 16, "sliding_window_pattern": "LXG"}, "sliding_window_pattern"),
    "window-pattern-empty": ({"sliding_window": 16, "sliding_window_pattern": ""}, "sliding_window_pattern"),
    "layer-types-too-short": ({"layer_types": ["full_attention"] * 3}, "layer_types"),
    "layer-types-a-string": ({"layer_types": "full_attention"}, "layer_types"),
    "layer-types-ints": ({"layer_types": [0, 1, 0, 1]}, "layer_types"),
    "layer-types-unknown": ({"layer_types": ["warp_attention"] * 4}, "layer_types"),
    "layer-types-sliding-no-window": ({"layer_types": ["sliding_attention"] * 4}, "sliding_window"),
    "hybrid-pattern-too-short": ({"hybrid_override_pattern": "M*"}, "hybrid_override_pattern"),
    "hybrid-pattern-bad-chars": ({"hybrid_override_pattern": "M*Xx"}, "hybrid_override_pattern"),
    "block-configs-too-short": ({"block_configs": [{"attention": {"n_heads_in_group": 8}}]}, "block_configs"),
    "block-configs-no-attention": ({"block_configs": [{}] * 4}, "block_configs"),
    "cross-layer-out-of-range": ({"cross_attention_layers": [4]}, "cross_attention_layers"),
    "cross-layer-negative": ({"cross_attention_layers": [-1]}, "cross_attention_layers"),
    "cross-layers-without-vision": ({"cross_attention_layers": [1]}, "vision_config"),
    "no-rope-layers-too-short": ({"attention_chunk_size": 8192, "no_rope_layers": [1, 0]}, "no_rope_layers"),
    "kv-shared-all-layers": ({"num_kv_shared_layers": 4}, "num_kv_shared_layers"),
    "model-type-a-list": ({"model_type": ["llama"]}, "model_type"),
    "text-config-without-fields": ({"text_config": {"model_type": "my_arch"}}, "num_hidden_layers"),
}


@pytest.mark.parametrize("name", list(BAD_SHAPES))
def test_inconsistent_dimensions(tmp_path: Path, name: str) -> None:
    fields, needle = BAD_SHAPES[name]
    path = write_config(tmp_path, {**TINY, **fields})
    assert needle in assert_rejected(invoke(str(path), "--ctx", "8k"))


def test_layer_types_too_long(tmp_path: Path) -> None:
    # transformers rejects len(layer_types) != num_hidden_layers; which of the two is right is unknowable.
    path = write_config(tmp_path, {**TINY, "layer_types": ["full_attention"] * 8})
    assert "layer_types" in assert_rejected(invoke(str(path), "--ctx", "8k"))


@pytest.mark.parametrize("text_config", ["meta-llama/Llama-3.1-8B", ["a"], 7], ids=["string", "list", "number"])
def test_text_config_not_an_object(tmp_path: Path, text_config: Any) -> None:
    path = write_config(tmp_path, {**TINY, "text_config": text_config})
    assert "text_config" in assert_rejected(invoke(str(path), "--ctx", "8k"))


def test_text_config_string_without_top_level_fields(tmp_path: Path) -> None:
    raw = registry_config("llava-hf/llava-1.5-7b-hf")
    raw["text_config"] = "not an object"
    path = write_config(tmp_path, raw)
    assert_rejected(invoke(str(path), "--ctx", "8k"))


# --- booleans, floats and strings in every integer field the parser reads ---------------------------------

# Each family's fields on a model type that has that family: kvsize reads kv_lora_rank only as DeepSeek MLA,
# attention_chunk_size only as Llama 4 chunking, Mamba fields only for recurrent model types (cache_fields.READ);
# on llama its guard would refuse the base itself as unmodelled.
def _jamba() -> dict[str, Any]:
    # vocab_size: transformers JambaConfig's default; kvsize has no jamba defaults, and a card counts the weights
    return {**TINY, "model_type": "jamba", "num_hidden_layers": 8, "attn_layer_period": 4, "attn_layer_offset": 2,
            "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "vocab_size": 65536}


def _llama4() -> dict[str, Any]:
    return {**TINY, "model_type": "llama4_text", "attention_chunk_size": 8192, "no_rope_layer_interval": 4}


def _deepseek() -> dict[str, Any]:
    return {**TINY, "model_type": "deepseek_v3", "kv_lora_rank": 512, "qk_rope_head_dim": 64}


def _without(raw: dict[str, Any], *keys: str) -> dict[str, Any]:
    """TINY-like without `keys`, as qwen2: llama's transformers defaults would fill the canonical names back."""
    return {**{k: v for k, v in raw.items() if k not in keys}, "model_type": "qwen2"}


# field label: (base config, path to the field). Each base reaches the read of its field (checked below).
INT_FIELDS: dict[str, tuple[Callable[[], dict[str, Any]], tuple[str | int, ...]]] = {
    "num_hidden_layers": (lambda: dict(TINY), ("num_hidden_layers",)),
    "n_layer": (lambda: {**_without(TINY, "num_hidden_layers"), "n_layer": 4}, ("n_layer",)),
    "num_layers": (lambda: {**_without(TINY, "num_hidden_layers"), "num_layers": 4}, ("num_layers",)),
    "num_attention_heads": (lambda: dict(TINY), ("num_attention_heads",)),
    "n_head": (lambda: {**_without(TINY, "num_attention_heads"), "n_head": 32}, ("n_head",)),
    "num_key_value_heads": (lambda: dict(TINY), ("num_key_value_heads",)),
    "n_head_kv": (lambda: dict(TINY), ("n_head_kv",)),
    "num_kv_heads": (lambda: dict(TINY), ("num_kv_heads",)),
    "num_attention_groups": (lambda: _without(TINY, "num_key_value_heads"), ("num_attention_groups",)),
    "multi_query_group_num": (lambda: dict(TINY), ("multi_query_group_num",)),
    "hidden_size": (lambda: dict(TINY), ("hidden_size",)),
    "n_embd": (lambda: {**_without(TINY, "hidden_size"), "n_embd": 4096}, ("n_embd",)),
    "head_dim": (lambda: dict(TINY), ("head_dim",)),
    "kv_channels": (lambda: dict(TINY), ("kv_channels",)),
    "v_head_dim": (lambda: dict(TINY), ("v_head_dim",)),
    "max_position_embeddings": (lambda: dict(TINY), ("max_position_embeddings",)),
    "n_positions": (lambda: _without(TINY, "max_position_embeddings"), ("n_positions",)),
    "seq_length": (lambda: _without(TINY, "max_position_embeddings"), ("seq_length",)),
    "sliding_window": (lambda: dict(TINY), ("sliding_window",)),
    "sliding_window_pattern": (lambda: {**TINY, "sliding_window": 16}, ("sliding_window_pattern",)),
    "max_window_layers": (lambda: {**TINY, "sliding_window": 16, "use_sliding_window": True},
                          ("max_window_layers",)),
    "attention_chunk_size": (_llama4, ("attention_chunk_size",)),
    "no_rope_layer_interval": (_llama4, ("no_rope_layer_interval",)),
    "num_kv_shared_layers": (lambda: dict(TINY), ("num_kv_shared_layers",)),
    "kv_lora_rank": (_deepseek, ("kv_lora_rank",)),
    "qk_rope_head_dim": (_deepseek, ("qk_rope_head_dim",)),
    "attn_config.kv_n_heads": (
        lambda: {"model_type": "mpt", "n_layers": 2, "n_heads": 8, "d_model": 1024, "max_seq_len": 2048,
                 "attn_config": {"kv_n_heads": 2}},
        ("attn_config", "kv_n_heads"),
    ),
    "attn_layer_period": (_jamba, ("attn_layer_period",)),
    "attn_layer_offset": (_jamba, ("attn_layer_offset",)),
    "mamba_d_state": (_jamba, ("mamba_d_state",)),
    "mamba_d_conv": (_jamba, ("mamba_d_conv",)),
    "mamba_expand": (_jamba, ("mamba_expand",)),
    "full_attention_interval": (lambda: registry_config("Qwen/Qwen3-Next-80B-A3B-Thinking"),
                                ("full_attention_interval",)),
    **{
        key: (lambda: registry_config("Qwen/Qwen3-Next-80B-A3B-Thinking"), (key,))
        for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                    "linear_value_head_dim", "linear_conv_kernel_dim")
    },
    **{
        f"mamba2.{key}": (lambda: registry_config("mistralai/Mamba-Codestral-7B-v0.1"), (key,))
        for key in ("state_size", "conv_kernel", "expand", "head_dim", "n_groups", "num_heads")
    },
    **{
        f"zamba2.{key}": (lambda: registry_config("Zyphra/Zamba2-7B"), (key,))
        for key in ("mamba_headdim", "mamba_ngroups", "conv_dimension", "expansion_factor")
    },
    **{
        f"vision_config.{key}": (lambda: registry_config("meta-llama/Llama-3.2-90B-Vision-Instruct"),
                                 ("vision_config", key))
        for key in ("image_size", "patch_size", "max_num_tiles")
    },
    "text_config.num_key_value_heads": (lambda: registry_config("meta-llama/Llama-3.2-90B-Vision-Instruct"),
                                        ("text_config", "num_key_value_heads")),
    "block_configs[0].attention.n_heads_in_group": (
        lambda: registry_config("nvidia/Llama-3_3-Nemotron-Super-49B-v1"),
        ("block_configs", 0, "attention", "n_heads_in_group"),
    ),
}


NOT_UNDERSTOOD = "does not understand"  # kvsize.cache_fields.refusal's wording


def with_field(label: str, value: Any) -> dict[str, Any]:
    make, path = INT_FIELDS[label]
    raw = make()
    target: Any = raw
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return raw


@pytest.mark.parametrize("label", list(INT_FIELDS))
def test_integer_field_bases_parse_and_read_the_field(tmp_path: Path, label: str) -> None:
    """Each base config sizes fine, and a string in the field is refused by name: the field is really read."""
    make, _ = INT_FIELDS[label]
    # vLLM removed Mllama (Llama 3.2 Vision) in 0.10.2: size those bases with the formula.
    engine = ("--engine", "formula") if label.startswith(("vision_config", "text_config")) else ()
    ok = invoke(str(write_config(tmp_path / "ok", make())), "--ctx", "8k", "--json", *engine)
    assert ok.exit_code == 0, ok.stderr
    line = assert_rejected(invoke(str(write_config(tmp_path / "str", with_field(label, "8"))), "--ctx", "8k"))
    assert label.rsplit(".", 1)[-1] in line
    assert NOT_UNDERSTOOD not in line  # the parser's type check, not the unmodelled-fields guard


@pytest.mark.parametrize("value", [True, False, 7.5, -0.5], ids=["true", "false", "7.5", "-0.5"])
@pytest.mark.parametrize("label", list(INT_FIELDS))
def test_boolean_and_float_in_integer_fields(tmp_path: Path, label: str, value: Any) -> None:
    path = write_config(tmp_path, with_field(label, value))
    line = assert_rejected(invoke(str(path), "--ctx", "8k"))
    assert label.rsplit(".", 1)[-1] in line
    # refused as a bad value, not as unmodelled: a false is no "off" for an integer field the parser reads
    assert NOT_UNDERSTOOD not in line


@pytest.mark.parametrize("field", ["cross_attention_layers", "no_rope_layers"])
@pytest.mark.parametrize("item", [True, 1.0, "1", None], ids=["true", "1.0", "str", "null"])
def test_non_integers_in_integer_lists(tmp_path: Path, field: str, item: Any) -> None:
    extra = {"attention_chunk_size": 8192} if field == "no_rope_layers" else {}
    path = write_config(tmp_path, {**TINY, **extra, field: [1, item, 0, 1]})
    assert field in assert_rejected(invoke(str(path), "--ctx", "8k"))


# --- fields only the weights estimate reads (a card is given and no weights size is known) ----------------



@pytest.mark.parametrize(("field", "value"), [
    pytest.param("vocab_size", float("nan"), id="vocab_size-NaN"),
    pytest.param("intermediate_size", float("inf"), id="intermediate_size-Infinity"),
    pytest.param("num_local_experts", float("nan"), id="num_local_experts-NaN"),
    pytest.param("num_local_experts", float("inf"), id="num_local_experts-Infinity"),
])
def test_nan_in_weights_fields_with_a_card(tmp_path: Path, field: str, value: float) -> None:
    """With a card and no published weights size, the weights are counted from the config (kvsize.params)."""
    path = write_config(tmp_path, json.dumps({**TINY, field: value}))
    assert field in assert_rejected(invoke(str(path), "--ctx", "8k", "--gpu-mem", "24GiB"))


# --- config strings that reach the table ------------------------------------------------------------------

@pytest.mark.parametrize("model_type", ["[/]", "[bold]x", "\ud800"], ids=["markup-close", "markup-tag", "surrogate"])
def test_model_type_that_is_no_plain_name_is_refused(tmp_path: Path, model_type: str) -> None:
    """Rich markup or a lone surrogate once broke the table (MarkupError, PydanticSerializationError); a
    model_type is now a plain name or a one-line error."""
    path = write_config(tmp_path, json.dumps({**TINY, "model_type": model_type}))  # ensure_ascii keeps \ud800
    assert "model_type" in assert_rejected(invoke(str(path), "--ctx", "8k"))


# --- custom code is never imported ------------------------------------------------------------------------

def _canary_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A model folder whose auto_map names modules that create `marker` when imported."""
    folder, marker = tmp_path / "model", tmp_path / "code-ran"
    code = f"open({str(marker)!r}, 'w').close()\n"
    for module in ("modeling_canary", "configuration_canary", "canary"):
        write_config(folder, code, name=f"{module}.py")
    write_config(folder, code, name="__init__.py")
    auto_map = {"AutoConfig": "configuration_canary.CanaryConfig", "AutoModel": "modeling_canary.Canary",
                "AutoModelForCausalLM": ["canary.Canary", "canary.Fast"], "AutoTokenizer": "org/repo--canary.Tok"}
    write_config(folder, {**TINY, "auto_map": auto_map, "text_config": {**TINY, "auto_map": auto_map}})
    return folder, marker


def test_auto_map_module_is_never_imported_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, marker = _canary_folder(tmp_path)
    monkeypatch.chdir(folder)  # importable from the working directory and from sys.path
    monkeypatch.syspath_prepend(str(folder))
    for ref in (str(folder), str(folder / "config.json"), "."):
        result = invoke(ref, "--ctx", "8k", "--gpu-mem", "24GiB", "--json")
        assert result.exit_code == 0, result.stderr
        assert any("auto_map" in note for note in json.loads(result.stdout)["notes"])
    assert not marker.exists()


def test_auto_map_module_is_never_imported_by_the_process(tmp_path: Path) -> None:
    folder, marker = _canary_folder(tmp_path)
    proc = run_process(".", "--ctx", "8k", "--json", cwd=folder, env={"PYTHONPATH": str(folder)})
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


# --- paths that are not a readable config file ------------------------------------------------------------

def test_symlink_loop_as_the_model_path(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert_rejected(invoke(str(tmp_path / "a"), "--ctx", "8k"))
    assert_process_rejected(run_process(str(tmp_path / "a"), "--ctx", "8k"))


def test_symlink_loop_named_config_json_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").symlink_to(folder / "config.json")
    assert_rejected(invoke(str(folder), "--ctx", "8k"))
    assert_rejected(invoke(str(folder / "config.json"), "--ctx", "8k"))


def test_dangling_symlink_config(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").symlink_to(tmp_path / "nowhere.json")
    assert_rejected(invoke(str(folder), "--ctx", "8k"))
    assert_rejected(invoke(str(folder / "config.json"), "--ctx", "8k"))


def test_directory_named_config_json(tmp_path: Path) -> None:
    (tmp_path / "model" / "config.json").mkdir(parents=True)
    assert_rejected(invoke(str(tmp_path / "model"), "--ctx", "8k"))
    assert_rejected(invoke(str(tmp_path / "model" / "config.json"), "--ctx", "8k"))


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_device_files(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    assert_rejected(invoke(device, "--ctx", "8k"))


@pytest.mark.parametrize("where", ["given-directly", "inside-a-folder"])
def test_fifo_does_not_hang(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    fifo = folder / ("config.json" if where == "inside-a-folder" else "pipe.json")
    os.mkfifo(fifo)
    ref = folder if where == "inside-a-folder" else fifo
    # Nobody ever writes to the FIFO: a reader blocks forever, and run_process fails as "hung".
    assert_process_rejected(run_process(str(ref), "--ctx", "8k"))


def test_unreadable_config(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    path = write_config(tmp_path, TINY)
    path.chmod(0)
    try:
        assert "cannot read" in assert_rejected(invoke(str(path), "--ctx", "8k"))
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("suffix", ["", "/config.json"], ids=["folder", "file"])
def test_path_component_too_long(tmp_path: Path, suffix: str) -> None:
    assert_rejected(invoke(str(tmp_path / ("x" * 300)) + suffix, "--ctx", "8k"))


@pytest.mark.parametrize("ref", ["~no-such-user-kvsize/config.json", "~no-such-user-kvsize"])
def test_home_of_unknown_user(ref: str) -> None:
    assert_rejected(invoke(ref, "--ctx", "8k"))


def test_path_with_nul_byte() -> None:
    assert_rejected(invoke("/tmp/a\x00b/config.json", "--ctx", "8k"))


# --- numbers and lists on the command line ----------------------------------------------------------------

BAD_OPTIONS: list[tuple[list[str], str]] = [
    # (arguments after the model, text the error line must contain)
    (["--ctx", "99999999999999999999999"], "99999999999999999999999"),
    (["--ctx", "-0"], "-0"),
    (["--ctx", "0k"], "0k"),
    (["--ctx", "-8k"], "-8k"),
    (["--ctx", "1.5"], "1.5"),
    (["--ctx", "1e3"], "1e3"),
    (["--ctx", "0x10"], "0x10"),
    (["--ctx", "NaN"], "NaN"),
    (["--ctx", "inf"], "inf"),
    (["--ctx", "128kk"], "128kk"),
    (["--ctx", "128KiB"], "128KiB"),
    (["--ctx", "1G"], "1G"),
    (["--ctx", "8k,abc"], "abc"),
    (["--ctx", " "], "token count"),
    (["--ctx", ",,"], "token count"),
    (["--ctx", "99999999999999999999999k"], "2^40"),
    (["--max-model-len", "-1"], "-1"),
    (["--batch", "-1"], "-1"),
    (["--batch", "1.5"], "1.5"),
    (["--batch", "0x2"], "0x2"),
    (["--batch", "1e2"], "1e2"),
    (["--batch", "99999999999999999999999"], "99999999999999999999999"),
    (["--batch", "2,-1"], "-1"),
    (["--batch", ",,"], "batch"),
    (["--batch", "1k"], "1k"),
    (["--kv-dtype", ",,"], ",,"),
    (["--kv-dtype", "bf16,,fp7"], "fp7"),
    (["--kv-dtype", "nan"], "nan"),
    (["--gpu-mem", "99999999999999999999999GiB"], "99999999999999999999999GiB"),
    (["--gpu-mem", "NaN"], "NaN"),
    (["--gpu-mem", "inf"], "inf"),
    (["--gpu-mem", "1e400"], "1e400"),
    (["--gpu-mem", "24Q"], "24Q"),
    (["--gpu-mem", "24GiBB"], "24GiBB"),
    (["--gpu-mem", "0.5"], "gpu-mem"),  # rounds to 0 bytes
    (["--gpu", "h100", "--reserve", "-1GiB"], "-1GiB"),
    (["--gpu", "h100", "--reserve", "NaN"], "NaN"),
    (["--gpu", "h100", "--weights-mem", "NaN"], "NaN"),
    (["--gpu", "h100", "--weights-mem", "-5GiB"], "-5GiB"),
    (["--encoder-len", "1.5"], "encoder-len"),
    (["--encoder-len", "abc"], "encoder-len"),
    (["--tp", "0"], "0"),
    (["--tp", "1.5"], "1.5"),
    (["--pp", "-1"], "-1"),
    (["--block-size", "0"], "0"),
]


@pytest.mark.parametrize(("args", "needle"), BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_numbers_on_the_command_line(args: list[str], needle: str) -> None:
    assert needle in assert_rejected(invoke(LLAMA_8B, *args))


EMPTY_OPTIONS = [
    pytest.param(["--ctx", ""], id="--ctx"),
    pytest.param(["--max-model-len", ""], id="--max-model-len"),
    pytest.param(["--batch", ""], id="--batch"),
    pytest.param(["--kv-dtype", ""], id="--kv-dtype"),
    pytest.param(["--engine", ""], id="--engine"),
    pytest.param(["--engine-version", ""], id="--engine-version"),
    pytest.param(["--tp", ""], id="--tp"),
    pytest.param(["--pp", ""], id="--pp"),
    pytest.param(["--block-size", ""], id="--block-size"),
    pytest.param(["--max-num-batched-tokens", ""], id="--max-num-batched-tokens"),
    pytest.param(["--gpu", ""], id="--gpu"),
    pytest.param(["--gpu-mem", ""], id="--gpu-mem"),
    pytest.param(["--gpu", "h100", "--reserve", ""], id="--reserve"),
    pytest.param(["--gpu", "h100", "--weights-mem", ""], id="--weights-mem"),
    pytest.param(["--encoder-len", ""], id="--encoder-len"),
    pytest.param(["--revision", ""], id="--revision"),
]


@pytest.mark.parametrize("args", EMPTY_OPTIONS)
def test_empty_option_values(args: list[str]) -> None:
    assert_rejected(invoke(LLAMA_8B, *args, "--json"))


def test_empty_model_reference_variants() -> None:
    for ref in ("\t", "\n", "''"):
        assert_rejected(invoke(ref, "--ctx", "8k"))


def _json(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_duplicate_contexts_give_one_scenario() -> None:
    scenarios = _json(LLAMA_8B, "--ctx", "8k,8k,8192", "--kv-dtype", "bf16")["scenarios"]
    assert [s["ctx"] for s in scenarios] == [8192]


def test_empty_items_in_a_batch_list_are_skipped() -> None:
    # `--batch 1,,2` reads as 1 and 2 (empty items of a list are dropped, as in ' 8k , 32k ').
    scenarios = _json(LLAMA_8B, "--ctx", "8k", "--batch", "1,,2", "--kv-dtype", "bf16")["scenarios"]
    assert [s["batch"] for s in scenarios] == [1, 2]


def test_ctx_beyond_the_maximum_is_a_note_with_the_figure(tmp_path: Path) -> None:
    path = write_config(tmp_path, TINY)  # max_position_embeddings 8192
    data = _json(str(path), "--ctx", "16k", "--kv-dtype", "bf16", "--engine", "formula")
    [scenario] = data["scenarios"]
    # 16384 tokens x 16384 B per token (4 layers x 8 heads x 256 x 2 B) = 268435456 B, given despite the limit.
    assert (scenario["ctx"], scenario["kv_cache_bytes"]) == (16384, 268435456)
    assert any("16,384" in note and "8,192" in note for note in data["notes"])

    table = invoke(str(path), "--ctx", "16k", "--kv-dtype", "bf16", "--engine", "formula")
    assert table.exit_code == 0
    assert table.stderr == ""
    assert "256.00 MiB" in table.stdout
    assert any("16,384" in line and "8,192" in line for line in table.stdout.splitlines())


# --- a few of the above through a real process -----------------------------------------------------------

@pytest.mark.parametrize(("content", "args"), [
    ("42", ["--ctx", "8k"]),
    ("[" * 100_000, ["--ctx", "8k"]),
    (json.dumps(TINY), ["--ctx", "99999999999999999999999"]),
    (json.dumps({**TINY, "hidden_size": float("nan")}), ["--ctx", "8k"]),
], ids=["json-number", "deep-nesting", "ctx-overflow", "nan-hidden-size"])
def test_bad_inputs_through_a_process(tmp_path: Path, content: str, args: list[str]) -> None:
    path = write_config(tmp_path, content)
    assert_process_rejected(run_process(str(path), *args))  # within HANG_GUARD_S, or it fails as "hung"


@pytest.mark.slow
def test_largest_accepted_layer_count_answers_quickly(tmp_path: Path) -> None:
    path = write_config(tmp_path, {**TINY, "num_hidden_layers": 100_000})  # config.MAX_LAYERS
    proc = run_process(str(path), "--ctx", "8k", "--kv-dtype", "bf16", "--engine", "formula", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # 100000 layers x 8 heads x 256 x 2 B x 8192 tokens = 3355443200000 B.
    assert json.loads(proc.stdout)["scenarios"][0]["kv_cache_bytes"] == 3355443200000


LARGEST = 100_000  # config.MAX_LAYERS
# 100,000-layer shapes: label -> (config, {layer kind: count} worked from the config).
HUNDRED_THOUSAND_LAYERS: dict[str, tuple[dict[str, Any], dict[str, int]]] = {
    "llama": ({**TINY, "num_hidden_layers": LARGEST}, {"full": LARGEST}),
    # every 6th layer full (i % 6 == 5: i = 5, 11, ..., 99995, so (99995 - 5) / 6 + 1 = 16666), the rest sliding
    "layer-types": ({**TINY, "num_hidden_layers": LARGEST, "sliding_window": 4096,
                     "layer_types": ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(LARGEST)]},
                    {"sliding": LARGEST - 16666, "full": 16666}),
    # Jamba: attention where i % 4 == 2 (25,000 layers), Mamba elsewhere (75,000)
    "hybrid-mamba": ({**_jamba(), "num_hidden_layers": LARGEST}, {"mamba": 75_000, "full": 25_000}),
}
ENGINES_AND_ALL = ("vllm", "sglang", "trtllm", "llamacpp", "hf", "formula", "all")
# Engines that have no model for a shape: they must refuse it quickly, with this text (exit 2).
REFUSED_SHAPES = {("hybrid-mamba", "trtllm"): "no implementation for this architecture"}  # no Jamba in _arch_index


def _answer_on_a_card(tmp_path: Path, shape: str, engine: str, limit: float) -> None:
    config, kinds = HUNDRED_THOUSAND_LAYERS[shape]
    path = write_config(tmp_path, config)
    started = children_cpu_s()
    proc = run_process(str(path), "--ctx", "8k", "--gpu", "h100", "--engine", engine, "--json")  # or "hung"
    spent = children_cpu_s() - started  # the child's CPU time: a busy machine's wait does not count
    refusal = REFUSED_SHAPES.get((shape, engine))
    if refusal is not None:
        assert proc.returncode == 2 and refusal in proc.stderr, proc.stderr[-2000:]
    else:
        # 100,000 layers of weights do not fit one H100: the answer is "no", exit 1 (kvsize/cli/size.py).
        assert proc.returncode == 1, proc.stderr[-2000:]
        groups = json.loads(proc.stdout)["architecture"]["layers"]
        assert {g["kind"]: g["count"] for g in groups} == kinds
    # Was 4-17 s per engine (per-layer pydantic validation and hashing, per-layer loops in the engines and
    # the parameter count); about a second of CPU now, start-up included.
    assert spent < limit, f"{engine} took {spent:.1f} CPU s on {shape}"


def test_largest_accepted_layer_count_answers_quickly_under_every_engine(tmp_path: Path) -> None:
    _answer_on_a_card(tmp_path, "layer-types", "all", limit=10)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES_AND_ALL)
@pytest.mark.parametrize("shape", list(HUNDRED_THOUSAND_LAYERS))
def test_largest_accepted_layer_count_on_a_card_answers_quickly(tmp_path: Path, shape: str, engine: str) -> None:
    # Once took 40-160 s: the max-context search re-sized every layer per step. Layers are now grouped once.
    _answer_on_a_card(tmp_path, shape, engine, limit=10)
