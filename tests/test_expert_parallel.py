"""vLLM --enable-expert-parallel: the MoE layers' tensor-parallel size becomes 1 and their expert-parallel size tp
(model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make, 0.19.0), so each rank holds E / tp whole
experts. Two budget parts follow: the fused-MoE workspace (fused_moe.py intermediate_cache1..3, sized with the
layer's intermediate_size_per_partition) runs at the full expert width, and MXFP4 experts are padded at it
(quantization/mxfp4.py Mxfp4MoEMethod.create_weights)."""

from __future__ import annotations

import json

from tiny_configs import registry_config
from typer.testing import CliRunner

from kvsize.budget import vllm_activation_bytes, vllm_mxfp4_padding
from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.engines.context import Device
from kvsize.engines.vllm_releases import VLLM_RELEASES
from kvsize.profiles import resolve_gpu


def test_the_moe_workspace_at_the_full_expert_width() -> None:
    # Qwen3-235B-A22B: top-8 of 128 experts of width 1,536, hidden 4,096, bf16. At tp 8, 8,192 batched tokens:
    # tp splits the width to 192; expert parallelism keeps 1,536: 8,192 x 8 x 3 x (1,536 - 192) x 2 B more.
    spec = parse_config(registry_config("Qwen/Qwen3-235B-A22B"))
    args = {"max_batched_tokens": 8192, "max_num_seqs": 1024, "tp": 8, "gpu": "NVIDIA H100 80GB HBM3"}
    assert (spec.experts_per_token, spec.moe_intermediate_size, spec.hidden_size) == (8, 1536, 4096)
    ep = vllm_activation_bytes(spec, **args, expert_parallel=True)
    assert ep - vllm_activation_bytes(spec, **args) == 8192 * 8 * 3 * (1536 - 192) * 2 == 528_482_304


def test_mxfp4_padding_per_whole_expert() -> None:
    # gpt-oss-120b on 4 x A100 (Marlin): 32 whole experts per rank, I 2,880 -> 2,944, H -> 3,072:
    # w13 32 x 5,888 x 1,536 + w2 32 x 3,072 x 1,472 + scales 32 x (5,888 x 96 + 3,072 x 92) + biases
    # 32 x 8,960 x 2 = 461,815,808 B a layer, x 36 = 16,625,369,088 (15.48 GiB, against 16.18 with tp).
    spec = parse_config(registry_config("openai/gpt-oss-120b"))
    rules = VLLM_RELEASES.resolve("0.19.0").era.rules
    a100 = Device.from_profile(resolve_gpu("a100-80gb"))
    padding, rule = vllm_mxfp4_padding(spec, rules, a100, 4, 1, expert_parallel=True)
    layer = 32 * 5888 * 1536 + 32 * 3072 * 1472 + 32 * (5888 * 96 + 3072 * 92) + 32 * 8960 * 2
    assert layer == 461_815_808
    assert padding == 36 * layer - 36 * 1_694_269_440 // 4
    assert "32 whole experts per rank (expert parallel)" in rule and "intermediate 2880 -> 2944" in rule
    assert vllm_mxfp4_padding(spec, rules, a100, 4, 1)[0] == 2_120_712_192  # tensor parallel, as before


def test_cli_flag_budget_and_launch() -> None:
    runner = CliRunner()
    base = ["Qwen/Qwen3-235B-A22B-FP8", "--gpu", "h100", "--tp", "8", "--ctx", "32768", "--engine-version", "0.19"]
    plain = json.loads(runner.invoke(app, [*base, "--json"]).stdout)["scenarios"][0]["gpu"]["budget"]
    ep = json.loads(runner.invoke(app, [*base, "--json", "--enable-expert-parallel"]).stdout)["scenarios"][0]["gpu"]
    assert ep["budget"]["activation_bytes"] > plain["activation_bytes"]
    assert (
        "--enable-expert-parallel" in runner.invoke(app, [*base, "--enable-expert-parallel", "--emit", "vllm"]).stdout
    )


def test_kvsize_log_reads_it() -> None:
    # The llm-d Llama 4 Scout log (vLLM 0.19, tp 4, 8,192 batched tokens) with the switch in its args: the
    # predicted KV memory drops by the workspace's growth, 8,192 x top-1 x 3 x (8,192 - 8,192 / 4) x 2 B.
    from pathlib import Path

    from kvsize.calibration import Deployment, check_log
    from kvsize.engine_log import parse_log

    path = Path(__file__).parent / "data/logs/llmd-meta-llama-llama-4-scout-tp4pp1dp1-8192.log"
    text = path.read_text()
    switched = text.replace(
        "'enable_prefix_caching': False}", "'enable_prefix_caching': False, 'enable_expert_parallel': True}"
    )
    assert switched != text
    profile = resolve_gpu("h100")
    spec = parse_config(registry_config("meta-llama/Llama-4-Scout-17B-16E-Instruct"))
    dep = Deployment(
        spec=spec, memory_bytes=profile.memory_bytes, device=Device.from_profile(profile), weights_bytes=2**37
    )
    kv = {}
    for name, t in (("tp", text), ("ep", switched)):
        log = parse_log(t)
        assert log is not None
        kv[name] = next(f.predicted for f in check_log(log, dep).figures if f.name == "available KV memory")
    assert parse_log(switched).settings["enable_expert_parallel"] is True  # type: ignore[union-attr]
    assert round((kv["tp"] - kv["ep"]) * 2**30) == 8192 * 1 * 3 * (8192 - 2048) * 2
