"""Time `kvsize check` on 1,000 deployments (the capacity-check budget: under 2 s of CPU).

    python benchmarks/check_1000.py

Writes a capacity file of 1,000 deployments mixing registry models, GPUs, engines, dtypes, tp and
requirement kinds to a temporary folder, then runs the check in-process and reports CPU and wall time.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

import yaml

MODELS = ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B",
          "deepseek-ai/DeepSeek-V3", "google/gemma-3-4b-it", "mistralai/Mistral-7B-Instruct-v0.3",
          "Qwen/Qwen3-Next-80B-A3B-Thinking", "openai/gpt-oss-20b"]
GPUS = ["h100", "h200", "b200", "a100-80gb", "mi300x", "l40s"]
ENGINES = ["vllm", "sglang", "formula"]
REQUIREMENTS = [{"ctx": "8k", "min_concurrency": 16}, {"ctx": "32k", "batch": 4},
                {"ctx": "128k", "max_kv_fraction": 0.8}, {"ctx": "4k", "min_pool_tokens": 100_000}]


def capacity_file(n: int = 1000) -> dict[str, object]:
    combos = itertools.cycle(itertools.product(MODELS, GPUS, ENGINES, (1, 2, 4, 8), REQUIREMENTS))
    deployments = []
    for i, (model, gpu, engine, tp, req) in zip(range(n), combos, strict=False):
        if engine == "formula" and "min_pool_tokens" in req:  # no pool to hold them: bad input (exit 2)
            req = {"ctx": req["ctx"], "min_concurrency": 4}
        deployments.append({"name": f"d{i}", "model": model, "gpu": gpu, "engine": engine, "tp": tp,
                            "kv_dtype": "fp8" if i % 3 == 0 else "auto", "require": req})
    return {"deployments": deployments}


def main() -> None:
    from kvsize.capacity_file import check_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capacity.yaml"
        path.write_text(yaml.safe_dump(capacity_file()), encoding="utf-8")
        cpu, wall = time.process_time(), time.perf_counter()
        results = check_file(path)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    failed = sum(not r.passed for r in results)
    print(f"{len(results)} deployments checked ({failed} failing their requirement): "
          f"{cpu:.2f} s CPU, {wall:.2f} s wall")


if __name__ == "__main__":
    main()
