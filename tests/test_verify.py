"""`kvsize verify` / `--verify`: real runs on the CPU (and the meta device) whose cache must equal --engine hf.

Models are registry families shrunk where the cache does not care (hidden size, MLP widths, vocabulary, expert
counts) and cut to their first few layers with --layers; every field that sizes the cache (KV heads, head dims,
MLA ranks, linear-attention heads, conv kernels) stays as the real config has it, and windows shrink to 16 so
that a 40-token context runs past them. Random weights: the cache's size does not depend on them.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.config import parse_config
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.hf import HfEngine
from kvsize.errors import UsageError
from kvsize.registry import load_registry_config, registry_entries
from kvsize.resolve import load_model_config
from kvsize.spec import AttentionKind
from kvsize.verify import (
    VerifyOptions,
    VerifyResult,
    compare,
    extrapolate,
    measure_cache,
    render_markdown,
    truncate_layers,
    verify,
)

runner = CliRunner()

# Widths that do not size the cache, shrunk so that random init and a forward take milliseconds.
SHRINK = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "vocab_size": 512,
    "q_lora_rank": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "experts_per_token": 2,
    "n_group": 1,
    "topk_group": 1,
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network, no real HF cache: every model is built from its config with random weights."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("KVSIZE_DEBUG", raising=False)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """One intra-op thread: tiny CPU forwards gain nothing from more, and shared CI cores make them erratic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(tmp_path: Path, hub_id: str, **overrides: Any) -> Path:
    """A registry config with SHRINK applied (head_dim pinned first when it was derived from hidden_size)."""
    raw = copy.deepcopy(load_registry_config(registry_entries()[hub_id.lower()]))
    spec = parse_config(raw)
    text = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw
    attn = next(layer.attention for layer in spec.layers if layer.attention is not None)
    if attn.kind is not AttentionKind.MLA and "head_dim" not in text:
        text["head_dim"] = attn.head_dim
    text.update({key: value for key, value in SHRINK.items() if key in text})
    if "pad_token_id" in text:
        text["pad_token_id"] = 0  # the real one lies outside the shrunk vocabulary
    text.update(overrides)
    folder = tmp_path / hub_id.replace("/", "--")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return folder


def run(path: Path | str, **options: Any) -> VerifyResult:
    options.setdefault("device", "cpu")
    return verify(load_model_config(str(path)), VerifyOptions(**options))


FAMILIES = {
    # label: (registry model, config overrides, --layers, contexts)
    "GQA llama-3.1": ("meta-llama/Llama-3.1-8B", {}, 2, (40,)),
    "MHA llama-2": ("meta-llama/Llama-2-7b-hf", {}, 2, (40,)),
    "MQA gemma": ("google/gemma-2b", {}, 2, (40,)),
    "MLA deepseek-v3": ("deepseek-ai/DeepSeek-V3", {}, 2, (40,)),
    "sliding gemma-2": ("google/gemma-2-2b", {"sliding_window": 16}, 2, (12, 40)),
    "sliding gpt-oss": ("openai/gpt-oss-20b", {"sliding_window": 16}, 2, (40,)),
    "hybrid qwen3-next": ("Qwen/Qwen3-Next-80B-A3B-Thinking", {}, 4, (40,)),
}


@pytest.mark.parametrize("label", sorted(FAMILIES))
def test_measured_cache_equals_the_prediction(tmp_path: Path, label: str) -> None:
    hub_id, overrides, layers, contexts = FAMILIES[label]
    result = run(tiny(tmp_path, hub_id, **overrides), layers=layers, contexts=contexts, batches=(1, 2))
    assert result.passed and result.weights == "random" and result.layers_built == layers
    for s in result.scenarios:
        assert s.match is True and s.status == "match", s.reasons
        assert s.measured_bytes == s.predicted_bytes > 0
        assert [r.measured_bytes for r in s.layers] == [r.predicted_bytes for r in s.layers]
        assert s.allocator_delta_bytes is None  # CPU: logical bytes only
        # The full model, scaled from the layers built, equals the prediction for every layer of it.
        assert s.full_model is not None and s.full_model.measured_bytes == s.full_model.predicted_bytes
    assert any("random weights" in note for note in result.notes)


def test_sliding_layers_keep_a_view_of_the_last_concatenation(tmp_path: Path) -> None:
    """Logical bytes are W-1 tokens; the storage behind them is the last torch.cat (W tokens after a decode)."""
    result = run(tiny(tmp_path, "google/gemma-2-2b", sliding_window=16), layers=2, contexts=(40,))
    (s,) = result.scenarios
    sliding, full = s.layers  # gemma-2: layer 0 slides, layer 1 is global
    assert sliding.kind == "sliding" and full.kind == "full"
    assert sliding.measured_bytes is not None and sliding.storage_bytes == sliding.measured_bytes * 16 // 15
    assert full.storage_bytes == full.measured_bytes
    assert s.finding is not None and "view of the last concatenation" in s.finding


def test_static_and_fp8_caches(tmp_path: Path) -> None:
    gemma = tiny(tmp_path, "google/gemma-2-2b", sliding_window=16)
    static = run(gemma, layers=2, contexts=(40,), cache_implementation="static", max_cache_len=48)
    assert static.passed and static.scenarios[0].cache_implementation == "static"
    llama = tiny(tmp_path, "meta-llama/Llama-3.2-1B-Instruct")
    fp8 = run(llama, layers=2, contexts=(40,), kv_dtypes=("fp8",))
    (s,) = fp8.scenarios
    # 2 layers x 8 KV heads x (64 + 64) x 1 B x 40 tokens; plus one fp32 scale each for K and V per layer.
    assert s.match and s.measured_bytes == 2 * 8 * 128 * 40 and s.scalar_bytes == 2 * 2 * 4


def test_meta_device_full_size_dry_run() -> None:
    """DeepSeek-V3 at full size (61 layers, 671B parameters) on the meta device: shapes only, no memory."""
    result = run("deepseek-ai/DeepSeek-V3", device="meta", contexts=(4096,))
    (s,) = result.scenarios
    assert result.device == "meta" and result.layers_built == 61 and s.match
    assert s.measured_bytes == 61 * 1152 * 4096  # (512 + 64) x 2 B per token per layer
    assert any("meta device" in note for note in result.notes)


def test_a_wrong_prediction_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = HfEngine.layer_bytes

    def off_by_two(self: HfEngine, *args: Any, **kwargs: Any) -> list[int]:
        values = real(self, *args, **kwargs)
        return [values[0] + 2, *values[1:]]

    monkeypatch.setattr(HfEngine, "layer_bytes", off_by_two)
    path = tiny(tmp_path, "meta-llama/Llama-3.1-8B")
    result = run(path, layers=2, contexts=(40,))
    (s,) = result.scenarios
    assert not result.passed and s.match is False and s.status == "mismatch"
    assert s.difference_bytes == -2 and "layer 0 (full)" in s.reasons[0]
    cli = runner.invoke(app, ["verify", str(path), "--device", "cpu", "--layers", "2", "--ctx", "40", "--json"])
    assert cli.exit_code == 1
    assert json.loads(cli.stdout)["scenarios"][0]["match"] is False


def test_cli_json_report_and_the_size_flag(tmp_path: Path) -> None:
    path = tiny(tmp_path, "meta-llama/Llama-3.1-8B")
    report = tmp_path / "report.md"
    args = [str(path), "--device", "cpu", "--layers", "2", "--ctx", "40", "--batch", "1,2", "--json"]
    cli = runner.invoke(app, ["verify", *args, "--report", str(report)])
    assert cli.exit_code == 0, cli.stderr
    data = json.loads(cli.stdout)
    assert {"model", "device", "weights", "scenarios"} <= data.keys()
    assert data["device"] == "cpu" and data["weights"] == "random"
    first = data["scenarios"][0]
    for key in ("ctx", "batch", "kv_dtype", "predicted_bytes", "measured_bytes", "match", "layers"):
        assert key in first
    assert [(s["ctx"], s["batch"]) for s in data["scenarios"]] == [(40, 1), (40, 2)]
    # 2 layers x 8 KV heads x 256 x 2 B x 40 tokens x 2 requests
    assert data["scenarios"][1]["measured_bytes"] == 2 * 8 * 256 * 2 * 40 * 2
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("# kvsize verify") and "| 40 | 2 | bf16 |" in markdown and "PASS" in markdown
    same = runner.invoke(app, [*args, "--verify"])  # kvsize MODEL ... --verify
    assert same.exit_code == 0 and json.loads(same.stdout)["scenarios"] == data["scenarios"]


def test_verification_options_need_verify() -> None:
    cli = runner.invoke(app, ["meta-llama/Llama-3.1-8B", "--device", "cpu"])
    assert cli.exit_code == 2 and "--verify" in cli.stderr


def test_cuda_without_a_gpu_is_an_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cli = runner.invoke(app, ["verify", "meta-llama/Llama-3.1-8B", "--device", "cuda"])
    assert cli.exit_code == 3 and "no CUDA GPU" in cli.stderr


def test_big_models_on_the_cpu_need_layers() -> None:
    with pytest.raises(UsageError, match="8.0B-parameter model on the CPU") as info:
        run("meta-llama/Llama-3.1-8B")
    assert info.value.hint is not None and "--layers" in info.value.hint


def test_missing_extra_exits_3_with_the_install_hint() -> None:
    blocker = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "transformers"):
                    raise ImportError(f"No module named {name!r}", name=name)
                return None
        sys.meta_path.insert(0, Block())
        sys.argv = ["kvsize", "verify", "meta-llama/Llama-3.1-8B", "--device", "meta"]
        from kvsize.cli import main
        main()
        """
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True)
    assert done.returncode == 3
    assert 'pip install -e ".[verify]"' in done.stderr and "Traceback" not in done.stderr


# --- the pure half: compare, truncate, extrapolate, measure ---------------------------------------------


def test_compare_logical_bytes_exactly_and_the_allocator_within_tolerance() -> None:
    ok = compare([100, 200], [100, 200], rel_tol=0.02, allocator_delta=306)
    assert ok.match and ok.logical_match and ok.allocator_ok and ok.difference_bytes == 0
    off = compare([100, 200], [100, 201], rel_tol=0.02)
    assert not off.match and off.difference_bytes == 1 and "layer 1" in off.reasons[0]
    alloc = compare([100, 200], [100, 200], rel_tol=0.02, allocator_delta=400)
    assert alloc.logical_match and not alloc.match and alloc.allocator_difference_pct is not None
    short = compare([1, 2, 3], [1, 2], rel_tol=0.0)
    assert not short.match and "3 cache layers" in short.reasons[0]
    with pytest.raises(UsageError):
        compare([1], [1], rel_tol=-1)


def test_truncate_layers_cuts_per_layer_fields() -> None:
    raw = {
        "model_type": "x",
        "text_config": {
            "num_hidden_layers": 6,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
            "cross_attention_layers": [1, 4],
            "num_kv_shared_layers": 3,
            "eos_token_id": [1, 2],
        },
    }
    cut, notes = truncate_layers(raw, 4)
    text = cut["text_config"]
    assert text["num_hidden_layers"] == 4 and text["layer_types"] == ["sliding_attention"] * 4
    assert text["cross_attention_layers"] == [1] and text["num_kv_shared_layers"] == 1  # layer 3 of 6 shares
    assert text["eos_token_id"] == [1, 2] and "first 4 of 6" in notes[0]
    assert raw["text_config"]["num_hidden_layers"] == 6  # the input is left alone
    assert truncate_layers({"num_hidden_layers": 2}, 8) == ({"num_hidden_layers": 2}, [])


def test_extrapolate_needs_every_layer_kind_among_the_built() -> None:
    raw = load_registry_config(registry_entries()["google/gemma-3-1b-it"])
    full = parse_config(raw)
    built = parse_config(truncate_layers(raw, 2)[0])  # two sliding layers, no global one
    assert extrapolate(full, built, [10, 10]) is None
    built6 = parse_config(truncate_layers(raw, 6)[0])
    assert extrapolate(full, built6, [1, 1, 1, 1, 1, 100]) == 22 + 4 * 100  # 22 sliding, 4 global layers


def test_measure_cache_counts_views_and_scalars_apart() -> None:
    class Layer:
        def __init__(self) -> None:
            full = torch.zeros(2, 4, 10, 8)
            self.keys = full[:, :, -3:, :]  # a view: 3 tokens shown, 10 stored
            self.values = torch.zeros(2, 4, 3, 8)
            self.cumulative_length = torch.tensor(10)
            self.states = {0: torch.zeros(2, 16, dtype=torch.bfloat16)}

    class Cache:
        layers = [Layer(), Layer()]

    measure = measure_cache(Cache())
    assert measure.layer_bytes == (2 * (2 * 4 * 3 * 8 * 4) + 2 * 16 * 2,) * 2
    assert measure.storage_bytes == (2 * 4 * 10 * 8 * 4 + 2 * 4 * 3 * 8 * 4 + 2 * 16 * 2,) * 2
    assert measure.scalar_bytes == 2 * 8


def test_markdown_report_lists_layers() -> None:
    result = run("deepseek-ai/DeepSeek-V3", device="meta", contexts=(64,), layers=2)
    markdown = render_markdown(result)
    assert "| 0 | mla | 73,728 | 73,728 | 0 |" in markdown  # 64 tokens x (512 + 64) x 2 B per layer
    assert "built only the first 2 of 61 decoder layers" in markdown


def test_settings_the_cache_cannot_have_fail_before_building(tmp_path: Path) -> None:
    gemma = tiny(tmp_path, "google/gemma-2-2b", sliding_window=16)
    with pytest.raises(UnsupportedArchitecture, match="all full attention"):
        run(gemma, layers=2, contexts=(40,), kv_dtypes=("fp8",))
    with pytest.raises(UsageError, match="cannot hold ctx"):
        run(gemma, layers=2, contexts=(40,), cache_implementation="static", max_cache_len=20)


def test_local_weights_are_loaded(tmp_path: Path) -> None:
    """A folder with a safetensors checkpoint is loaded (not random), and the cache still matches."""
    import transformers

    folder = tiny(tmp_path, "meta-llama/Llama-3.2-1B-Instruct", num_hidden_layers=2)
    config = transformers.AutoConfig.from_pretrained(folder)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    result = run(folder, contexts=(24,))
    assert result.weights == "loaded" and result.passed
    assert any(f"weights loaded from {folder}" in note for note in result.notes)


def _verify_process(tmp_path: Path, raw: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kvsize verify CONFIG --device meta --ctx 256` as a real process, on `raw` written to tmp_path."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return subprocess.run(
        [sys.executable, "-m", "kvsize", "verify", str(path), "--device", "meta", "--ctx", "256"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_config_transformers_cannot_read_is_one_line_exit_2(tmp_path: Path) -> None:
    # EXAONE 4.0 without layer_types: its class builds them from sliding_window_pattern "LLLG" with
    # `(i + 1) % sliding_window_pattern`, a TypeError in transformers 5.25 (configuration_exaone4.py), raised by
    # the config class before any model exists. Run as a real process: one line, exit 2, no traceback.
    from tiny_configs import registry_config

    raw = registry_config("LGAI-EXAONE/EXAONE-4.0-32B")
    raw.pop("layer_types", None)
    assert isinstance(raw.get("sliding_window_pattern"), str)
    run = _verify_process(tmp_path, raw)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and "cannot read this config: TypeError" in run.stderr


def test_a_run_transformers_refuses_is_an_environment_error(tmp_path: Path) -> None:
    # GraniteMoeHybridConfig's own default layer_types (every layer "linear_attention", configuration_
    # granitemoehybrid.py): transformers builds the model but its forward raises (no attention layer for the
    # mask). That is the installed transformers' limit: exit 3, one line.
    raw = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "layer_types": ["linear_attention", "linear_attention"],
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "shared_intermediate_size": 128,
        "mamba_n_heads": 8,
        "mamba_n_groups": 1,
        "mamba_d_state": 16,
        "mamba_d_head": 64,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "torch_dtype": "bfloat16",
    }
    run = _verify_process(tmp_path, raw)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 3 and "transformers could not run the model" in run.stderr, run.stderr


def test_a_model_that_keeps_its_state_in_its_modules_is_not_verified(tmp_path: Path) -> None:
    # RecurrentGemma keeps its RG-LRU states and local-attention KV in its modules (modeling_recurrent_gemma.py,
    # transformers 5.25): its forward returns no cache object, so the verifier has nothing to measure. That is
    # exit 3 naming why, not a 100% mismatch.
    raw = {
        "architectures": ["RecurrentGemmaForCausalLM"],
        "model_type": "recurrent_gemma",
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "lru_width": 256,
        "attention_window_size": 64,
        "conv1d_width": 4,
        "vocab_size": 1024,
        "block_types": ["recurrent", "recurrent", "attention"],
        "torch_dtype": "bfloat16",
    }
    run = _verify_process(tmp_path, raw)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 3 and "returned no cache object for recurrent_gemma" in run.stderr, run.stderr
