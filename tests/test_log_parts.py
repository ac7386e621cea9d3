"""`kvsize log` sets each part of the budget beside the one the engine printed, so a user sees which part to
calibrate; the verdict stays on the figures the parts add up to (weights, KV memory, pool)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kvsize.calibration import Deployment, Figure, LogCheck, check_log
from kvsize.engine_log import parse_log
from kvsize.profiles import resolve_gpu

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"
GIB = 1024**3


def run_log(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "log", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def test_vllm_parts_beside_the_printed_ones() -> None:
    # Llama 4 Scout, vLLM 0.19 at tp 4 on H100s: "torch peak memory increase: 3.19GiB; non-torch forward increase
    # memory: 2.17GiB"; kvsize's non-torch at tp > 1 on an NVSwitch card is budget.py NON_TORCH_NVLS =
    # 2,233,382,912 B (2.08 GiB). 0.19 prints a CUDA-graph estimate but does not subtract it: no such row.
    code, data = run_log(str(LOGS / "llmd-meta-llama-llama-4-scout-tp4pp1dp1-8192.log"))
    parts = {f["name"]: f for f in data["figures"] if f.get("part")}
    # and the encoder's batch: "budget of 8192 tokens, and profiled with 3 image items" (17 tiles x 144 tokens)
    assert set(parts) == {"activation peak", "non-torch", "encoder budget", "encoder items profiled"}
    assert (parts["encoder items profiled"]["logged"], parts["encoder items profiled"]["predicted"]) == (3, 3)
    assert parts["non-torch"]["logged"] == 2.17 and parts["non-torch"]["predicted"] == 2_233_382_912 / GIB
    assert parts["activation peak"]["logged"] == 3.19
    # the verdict is the KV memory's (+0.94%: inside 1%, outside 0.5%), not the parts' (non-torch -4.1%)
    assert parts["non-torch"]["error_pct"] < -4
    assert code == 0 and data["pass"] is True
    strict, stricter = run_log(str(LOGS / "llmd-meta-llama-llama-4-scout-tp4pp1dp1-8192.log"), "--tolerance", "0.5")
    assert strict == 1 and stricter["pass"] is False


def test_a_part_that_differs_does_not_fail_the_check() -> None:
    # gemma-3-27b: the profile run's torch peak was 3.99 GiB; kvsize's (the sampler phase plus the 32 dummy
    # images and their encoder outputs, tests/test_mm_profile.py) is 4,227,761,152 B = 3.94 GiB, 1.3% under;
    # the KV memory is still within 1% (19.66 against 19.53): exit 0
    code, data = run_log(str(LOGS / "llmd-google-gemma-3-27b-it-tp1pp1dp1-8192.log"))
    parts = {f["name"]: f for f in data["figures"] if f.get("part")}
    assert parts["activation peak"]["logged"] == 3.99
    assert parts["activation peak"]["predicted"] == 4_227_761_152 / GIB
    assert parts["activation peak"]["error_pct"] < -1
    assert parts["non-torch"]["predicted"] == 268_435_456 / GIB  # NON_TORCH_TP1 at tp 1
    assert code == 0 and data["pass"] is True


def test_cuda_total_is_a_part_only_when_the_card_is_given() -> None:
    # Without --gpu the card is the log's own total (nothing to compare); with --gpu h100 kvsize starts from its
    # profile: 79.65 GiB less the 0.46 GiB CUDA context = 79.19 GiB, the total vLLM printed
    log = parse_log((LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log").read_text())
    from kvsize.config import parse_config
    from kvsize.registry import find_entry, load_registry_config

    entry = find_entry("meta-llama/Llama-3.1-8B-Instruct")
    assert entry is not None
    spec = parse_config(load_registry_config(entry))
    plain = check_log(log, Deployment(spec=spec, weights_bytes=16_060_522_496))
    assert "CUDA total" not in {f.name for f in plain.figures}
    h100 = resolve_gpu("h100")
    given = check_log(log, Deployment(spec=spec, weights_bytes=16_060_522_496, memory_bytes=h100.memory_bytes))
    visible = next(f for f in given.figures if f.name == "CUDA total")
    assert visible.part and visible.logged == 79.19
    assert visible.predicted == (85_520_809_984 - 494_927_872) / GIB


def test_sglang_free_memory_before_loading_is_a_part() -> None:
    # 4 x L4, SGLang (~0.4.3): "Load weight begin. avail mem=21.63 GB", kvsize starts from the L4's CUDA total,
    # 23,612,293,120 B = 21.99 GiB (gpu_profiles/l4.yaml): the 0.36 GiB NCCL took before loading is what differs
    code, data = run_log(
        str(LOGS / "sglang-l4x4-qwq-32b-tp4.log"), "--gpu", "l4", "--config", "Qwen/Qwen2.5-32B",
        "--engine-version", "0.4.3.post4",
    )  # fmt: skip
    parts = {f["name"]: f for f in data["figures"] if f.get("part")}
    free = parts["free memory before loading"]
    assert free["logged"] == 21.63 and free["predicted"] == 23_612_293_120 / GIB
    assert code == 1


def test_verdict_counts_only_the_judged_figures() -> None:
    check = LogCheck(engine="vllm", engine_version="0.19.0", model="m")
    check.figures.append(Figure("available KV memory", 10.0, 10.05, "GiB", "the card"))
    check.figures.append(Figure("activation peak", 1.0, 2.0, "GiB", "the card", part=True))
    assert check.passed(1.0)
    check.figures.append(Figure("pool tokens", 1000, 1100, "tokens", "the logged KV memory"))
    assert not check.passed(1.0)
    assert check.as_dict()["figures"][1]["part"] is True and "part" not in check.as_dict()["figures"][0]
