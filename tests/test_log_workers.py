"""vLLM logs that print every worker's figures, the budget advice line's parts, and a negative CUDA-graph figure.

- Every worker logs its own "Available KV cache memory", "GPU KV cache size" and "Maximum concurrency" (0.10.2);
  unify_kv_cache_configs (v1/core/kv_cache_utils.py, read in 0.10.1.1) gives all of them the smallest num_blocks,
  so the pool is the least worker's.
- gpu_worker.py's advice after capture: "Actual usage is W GiB for weight, A GiB for peak activation, N GiB for
  non-torch memory, and G GiB for CUDAGraph memory" (0.10.2); "C GiB for consumed memory (weights + non-torch),
  A GiB for peak activation, and G GiB for CUDAGraph memory" (0.33, 0.34 gpu_worker.py).
"""

from __future__ import annotations

from pathlib import Path

from kvsize.calibration import Deployment, check_log
from kvsize.config import parse_config
from kvsize.engine_log import parse_log
from kvsize.engines.context import Device
from kvsize.profiles import resolve_gpu
from kvsize.resolve import load_model_config

LOGS = Path(__file__).parent / "data" / "logs"
L40S_QWEN = LOGS / "vllm-l40s8-qwen3-235b-fp8-tp8-ep.log"


def test_the_least_worker_sizes_the_pool() -> None:
    log = parse_log(L40S_QWEN.read_text())
    assert log is not None
    # 8 workers: 10.64 (TP1, 2, 5, 6), 10.65 (TP3, 7), 10.68 (TP0, 4); pools 238,208 ... 237,344
    assert log.figures["available_kv_min_gib"] == 10.64
    assert log.figures["pool_tokens"] == 237_344
    assert log.figures["max_concurrency_x"] == 7.24
    # the pool from the least worker's memory: 94 layers x 1 KV head per rank (4 heads over tp 8, replicated) x
    # 128 x (K + V) x 2 B = 48,128 B per token; floor(10.64 GiB / (16 x 48,128 B)) = 14,836 blocks = 237,376 tokens
    spec = parse_config(
        load_model_config(str(Path(__file__).parent / "data/configs/Qwen--Qwen3-235B-A22B-FP8.json")).raw
    )
    dep = Deployment(spec=spec, tp=8, pp=1, device=Device.from_profile(resolve_gpu("l40s")))
    pool = next(f for f in check_log(log, dep).figures if f.name == "pool tokens")
    assert round(10.64 * 2**30) // (16 * 48_128) * 16 == 237_376
    assert (pool.logged, pool.predicted) == (237_344, 237_376)


def test_one_worker_or_equal_workers_keep_the_first_figures() -> None:
    line = "INFO [gpu_worker.py:298] Available KV cache memory: 11.03 GiB\n"
    text = (
        "INFO Initializing a V1 LLM engine (v0.10.1.1) with config: model='m', tensor_parallel_size=2\n"
        + line * 2
        + "INFO [kv_cache_utils.py:849] GPU KV cache size: 412,944 tokens\n"
        + "INFO [kv_cache_utils.py:853] Maximum concurrency for 16,384 tokens per request: 25.20x\n"
    )
    log = parse_log(text)
    assert log is not None
    assert "available_kv_min_gib" not in log.figures
    assert (log.figures["available_kv_gib"], log.figures["pool_tokens"]) == (11.03, 412_944)


def test_the_advice_line_gives_the_profile_parts() -> None:
    log = parse_log(L40S_QWEN.read_text())
    assert log is not None
    assert (log.figures["activation_peak_gib"], log.figures["non_torch_gib"]) == (1.4, 0.18)
    later = (
        "INFO Initializing a V1 LLM engine (v0.33.0) with config: model='m'\n"
        "INFO [gpu_worker.py:1045] Free memory on device (78.6/79.18 GiB) on startup. Desired GPU memory utilization "
        "is (0.92, 72.85 GiB). Actual usage is 15.51 GiB for consumed memory (weights + non-torch), 1.25 GiB for "
        "peak activation, and 0.62 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with ...\n"
    )
    log = parse_log(later)
    assert log is not None
    assert log.figures["activation_peak_gib"] == 1.25
    assert "non_torch_gib" not in log.figures  # that form folds it into the consumed memory


def test_a_negative_cuda_graph_figure_is_read() -> None:
    log = parse_log((LOGS / "vllm-armlp-dgx-spark-mistral-7b-gptq.log").read_text())
    assert log is not None
    assert log.figures["cuda_graph_gib"] == -0.03
    assert not any("cuda_graph_gib" in note for note in log.notes)


def test_a_restarted_engine_keeps_the_first_start_ups_workers() -> None:
    # a log with a second start-up appended (half the memory): the first run's figures, as every other reader keeps
    first = L40S_QWEN.read_text()
    second = first.replace("Available KV cache memory: 10.6", "Available KV cache memory: 5.3").replace(
        "GPU KV cache size: 23", "GPU KV cache size: 11"
    )
    log = parse_log(first + "\n" + second)
    assert log is not None
    assert (log.figures["available_kv_min_gib"], log.figures["pool_tokens"]) == (10.64, 237_344)


def test_one_unreadable_worker_line_does_not_hide_the_others() -> None:
    text = L40S_QWEN.read_text().replace(
        "Available KV cache memory: 10.64 GiB", "Available KV cache memory: nan GiB", 1
    )
    log = parse_log(text)
    assert log is not None
    assert log.figures["available_kv_min_gib"] == 10.64  # three of the other workers print 10.64
    assert sum("available_kv_gib left out" in n for n in log.notes) == 1
