"""vLLM --enforce-eager: no CUDA graphs, so none are kept back from the KV budget.

Source (vLLM 0.21.0 v1/worker/gpu_worker.py determine_available_memory): the CUDA-graph estimate is profiled
only `if current_platform.is_cuda() and compilation_config.cudagraph_mode != CUDAGraphMode.NONE`, and
config/vllm.py sets cudagraph_mode NONE under enforce_eager ("Enforce eager set, disabling torch.compile and
CUDAGraphs"). 0.34.0 gpu_worker.py compile_or_warm_up_model: `if not self.model_config.enforce_eager:
cuda_graph_memory_bytes = self.model_runner.capture_model()`, before the measured pool is committed. Before
0.20 the graphs are captured after the pool is sized, so the flag changes nothing there.
"""

from __future__ import annotations

from pathlib import Path

from tiny_configs import llama_8b_budget
from typer.testing import CliRunner

from kvsize.budget import CUDA_GRAPH_CAPTURED_TP1, CUDA_GRAPH_TP1
from kvsize.cli.app import app
from kvsize.engine_log import parse_log
from kvsize.profiles import resolve_gpu

H100 = resolve_gpu("h100")
LOGS = Path(__file__).parent / "data" / "logs"


def _budget(version: str, eager: bool) -> int:
    return int(llama_8b_budget(version, "h100", enforce_eager=eager).kv_budget_bytes)


def test_no_graph_estimate_from_0_20() -> None:
    assert _budget("0.20.0", True) - _budget("0.20.0", False) == CUDA_GRAPH_TP1  # 805,306,368 B (0.75 GiB)
    assert _budget("0.19.0", True) == _budget("0.19.0", False)  # captured after sizing: nothing to take back


def test_no_captured_graphs_in_the_measured_pool() -> None:
    # 0.34: the pool is what is free after capture; eager captures nothing (the utilisation cap does not bind
    # on an H100 at 1.0, so the warm-up bound decides and gains the graphs byte for byte)
    assert _budget("0.34.0", True) - _budget("0.34.0", False) == CUDA_GRAPH_CAPTURED_TP1


def test_the_log_says_so() -> None:
    # vLLM prints the flag in its non-default args dict and in the engine's config line
    text = (LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log").read_text()
    assert "enforce_eager=False" in text
    plain = parse_log(text)
    eager = parse_log(text.replace("enforce_eager=False", "enforce_eager=True"))
    assert plain is not None and eager is not None
    assert "enforce_eager" not in plain.settings and eager.settings["enforce_eager"] is True
    args = parse_log(text.replace("'enable_prefix_caching': False}", "'enforce_eager': True}"))
    assert args is not None and args.settings["enforce_eager"] is True


def test_cli_flag_sizes_and_emits_it() -> None:
    runner = CliRunner()
    base = ["meta-llama/Llama-3.1-8B", "--ctx", "8192", "--gpu", "h100", "--engine-version", "0.21", "--json"]
    import json

    plain = json.loads(runner.invoke(app, base).stdout)
    eager = json.loads(runner.invoke(app, [*base, "--enforce-eager"]).stdout)
    p, e = plain["scenarios"][0]["gpu"]["budget"], eager["scenarios"][0]["gpu"]["budget"]
    assert p["cuda_graph_bytes"] == CUDA_GRAPH_TP1 and e["cuda_graph_bytes"] == 0
    assert e["kv_budget_bytes"] - p["kv_budget_bytes"] == CUDA_GRAPH_TP1
    emitted = runner.invoke(app, [*base[:-1], "--enforce-eager", "--emit", "vllm"]).stdout
    assert "--enforce-eager" in emitted
    assert "--enforce-eager" not in runner.invoke(app, [*base[:-1], "--emit", "vllm"]).stdout
