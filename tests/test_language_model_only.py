"""vLLM --language-model-only (0.17.0+): a multimodal model served for text.

Source: vLLM 0.19.0 config/multimodal.py MultiModalConfig.language_model_only ("disables all multimodal inputs
by setting all modality limits to 0"), get_limit_per_prompt returning 0; with no modality the profile run builds
no encoder dummy (v1/worker/gpu_model_runner.py profile_run), and the models build no tower. The flag is in
engine/arg_utils.py from 0.17.0 (kvsize/data/engine_flags/vllm.json). The towers' sizes are kvsize/params.py's
counts: Qwen2.5-VL-7B's vision tower and merger 676,550,144 parameters (modeling_qwen2_5_vl.py), Gemma 4 E2B's
vision 168,544,704 + audio 307,184,384.
"""

from __future__ import annotations

import json
from pathlib import Path

from tiny_configs import registry_config
from typer.testing import CliRunner

from kvsize.budget import vllm_activation_bytes
from kvsize.calibration import Deployment, check_log
from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.engine_log import parse_log
from kvsize.profiles import resolve_gpu
from kvsize.weights import tower_bytes

LOGS = Path(__file__).parent / "data" / "logs"
runner = CliRunner()
QWEN = ["Qwen/Qwen2.5-VL-7B-Instruct", "--ctx", "32768", "--gpu", "h100", "--json"]


def _gpu(args: list[str]) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)["scenarios"][0]["gpu"]  # type: ignore[no-any-return]


def test_no_encoder_profile_and_no_towers() -> None:
    full = _gpu([*QWEN, "--engine-version", "0.19"])
    text = _gpu([*QWEN, "--engine-version", "0.19", "--language-model-only"])
    spec = parse_config(registry_config("Qwen/Qwen2.5-VL-7B-Instruct"))
    # the profile is the language model's alone: 8,192 tokens, 1,024 sequences on an H100 (vllm_scheduler)
    language = vllm_activation_bytes(
        spec, max_batched_tokens=8192, max_num_seqs=1024, tp=1, gpu="NVIDIA H100 80GB HBM3"
    )
    assert text["budget"]["activation_bytes"] == language < full["budget"]["activation_bytes"]
    # published 8,292,166,656 parameters x 2 B, less the tower's 676,550,144 x 2 B
    assert tower_bytes(registry_config("Qwen/Qwen2.5-VL-7B-Instruct"), "bf16") == 1_353_100_288
    assert full["budget"]["weights_bytes"] == 16_584_333_312
    assert text["budget"]["weights_bytes"] == 16_584_333_312 - 1_353_100_288


def test_refused_before_0_17() -> None:
    result = runner.invoke(app, [*QWEN, "--engine-version", "0.16", "--language-model-only"])
    assert result.exit_code == 2
    assert "--language-model-only was added in vLLM 0.17.0" in " ".join(result.stderr.split())


def test_emitted_with_the_command() -> None:
    args = ["Qwen/Qwen2.5-VL-7B-Instruct", "--ctx", "32768", "--gpu", "h100", "--emit", "vllm"]
    assert "--language-model-only" in runner.invoke(app, [*args, "--language-model-only"]).stdout
    assert "--language-model-only" not in runner.invoke(app, args).stdout


def test_kvsize_log_reads_it() -> None:
    # The T4 log's args with the switch on: the weights figure drops the towers (951,458,176 B at fp16).
    text = (LOGS / "vllm-xbill9-t4-gemma-4-e2b-qat-w4a16.log").read_text()
    switched = text.replace("'max_num_seqs': 8}", "'max_num_seqs': 8, 'language_model_only': True}")
    assert switched != text
    raw = registry_config("google/gemma-4-E2B-it")
    spec = parse_config(raw)
    towers = tower_bytes(raw, "fp16")
    assert towers == (168_544_704 + 307_184_384) * 2
    profile = resolve_gpu("t4")
    from kvsize.engines.context import Device

    dep = Deployment(
        spec=spec,
        memory_bytes=profile.memory_bytes,
        device=Device.from_profile(profile),
        weights_bytes=10 * 2**30,
        tower_bytes=towers,
        max_model_len=16384,
    )
    logs = {name: parse_log(t) for name, t in (("plain", text), ("text", switched))}
    assert logs["text"] is not None and logs["text"].settings["language_model_only"] is True
    figures = {
        name: next(f for f in check_log(log, dep).figures if f.name == "weights per rank")  # type: ignore[arg-type]
        for name, log in logs.items()
    }
    assert round((figures["plain"].predicted - figures["text"].predicted) * 2**30) == towers
    assert figures["text"].basis == "kvsize's weights without towers + RoPE tables"


def test_towers_split_over_tp() -> None:
    # tp 2: the weights' half, 16,584,333,312 / 2, less the tower's half, 1,353,100,288 / 2 (the tower's linear
    # layers are sharded like the language model's, mm_encoder_tp_mode "weights")
    text = _gpu([*QWEN, "--engine-version", "0.19", "--language-model-only", "--tp", "2"])
    assert text["budget"]["weights_bytes"] == 8_292_166_656 - 676_550_144


def test_no_towers_counted_is_nothing_taken() -> None:
    # a text model has no tower; a config the counter cannot read (no hidden_size) is 0, not a guess
    assert tower_bytes(registry_config("meta-llama/Llama-3.1-8B"), "bf16") == 0
    assert tower_bytes({"architectures": ["X"], "model_type": "unknown_xyz"}, "bf16") == 0


def test_a_log_deployment_without_tower_counts_takes_nothing() -> None:
    # Deployment.tower_bytes defaults to none: a --language-model-only log checked without them keeps the
    # weights figure as it is, to the byte
    text = (LOGS / "vllm-xbill9-t4-gemma-4-e2b-qat-w4a16.log").read_text()
    switched = parse_log(text.replace("'max_num_seqs': 8}", "'max_num_seqs': 8, 'language_model_only': True}"))
    plain = parse_log(text)
    assert switched is not None and plain is not None
    dep = Deployment(
        spec=parse_config(registry_config("google/gemma-4-E2B-it")), weights_bytes=10 * 2**30, max_model_len=16384
    )
    a, b = (next(f for f in check_log(log, dep).figures if f.name == "weights per rank") for log in (plain, switched))
    assert a.predicted == b.predicted and a.basis == b.basis
