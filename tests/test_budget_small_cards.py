"""SGLang's budget before 0.4.9.post2 and on unified memory (issue 23, "budget truth beyond the H100").

Causes read from SGLang's source (paths under python/sglang/srt/, sdists 0.4.0 .. 0.4.9.post1 from PyPI):
- L4 x4 log (sglang-l4x4-qwq-32b-tp4, 2025-03-08, ~0.4.3): server_args.py ServerArgs.__post_init__@0.4.3.post4
  sets mem_fraction_static by tp alone (0.85 at tp 4); kvsize sized it with 0.5.23's reserve formula (0.675).
- Jetson log (sglang-jetson-tinyllama, 0.4.1.post7): utils.py get_available_gpu_memory@0.4.1.post7 reads
  torch.cuda.mem_get_info, the OS's free memory on an integrated GPU: not known from the card, so flagged.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from kvsize.budget import BudgetSettings, kv_budget
from kvsize.config import parse_config
from kvsize.engine_log import EngineLog, parse_log
from kvsize.engines import get_engine
from kvsize.engines.context import Device
from kvsize.engines.sglang import SglangEngine, spec_mem_fraction_static
from kvsize.errors import UsageError
from kvsize.profiles import resolve_gpu
from kvsize.resolve import load_model_config
from kvsize.spec import ArchSpec

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"
L4_MIB = 23034  # nvidia-smi memory.total of an L4 (gpu_profiles/l4.yaml sources)
H100_MIB = 81559
H200_MIB = 143771
GIB = 1024**3


def _spec(repo: str) -> ArchSpec:
    loaded = load_model_config(repo)
    return parse_config(loaded.raw, source=loaded.location)


def fraction(version: str, mib: int, tp: int = 1, pp: int = 1, amd: bool = False) -> float:
    spec = _spec("Qwen/Qwen2.5-32B")
    rules = SglangEngine(version).rules
    return spec_mem_fraction_static(spec, mib * 1024**2, tp=tp, pp=pp, amd=amd, rules=rules)


def test_era_of_old_releases() -> None:
    assert get_engine("sglang", "0.4.1.post7").rules_name == "0.4.0"
    assert get_engine("sglang", "0.4.2").rules_name == "0.4.0"
    assert get_engine("sglang", "0.4.3.post4").rules_name == "0.4.3"  # its RoPE tables in float32
    assert get_engine("sglang", "0.4.6").rules_name == "0.4.6"
    assert get_engine("sglang", "0.4.9.post1").rules_name == "0.4.9"
    with pytest.raises(UsageError, match="older than the oldest"):
        get_engine("sglang", "0.3.6")


def test_fraction_by_tp_0_4_0_to_0_4_5() -> None:
    # server_args.py __post_init__@0.4.3.post4: tp >= 16 0.79, >= 8 0.81, >= 4 0.85, >= 2 0.87, else 0.88,
    # whatever the card (an L4 and an H200 alike); pp does not count.
    assert fraction("0.4.3.post4", L4_MIB, tp=4) == 0.85
    assert fraction("0.4.3.post4", L4_MIB, tp=1) == 0.88
    assert fraction("0.4.1.post7", H200_MIB, tp=8) == 0.81
    assert fraction("0.4.5", H200_MIB, tp=16) == 0.79
    assert fraction("0.4.0", L4_MIB, tp=2, pp=2) == 0.87  # tp 2: pp ignored


def test_fraction_0_4_6_large_cards() -> None:
    # server_args.py __post_init__@0.4.6: the tp table up to 81,920 MiB, else (gpu_mem - 13 x 1024) / gpu_mem.
    assert fraction("0.4.6", H100_MIB, tp=2) == 0.87
    assert fraction("0.4.6", H200_MIB) == pytest.approx((143771 - 13312) / 143771)  # 0.90741


def test_fraction_0_4_7_parallel_and_48g() -> None:
    # server_args.py __post_init__@0.4.7: the table by tp x pp (2 x 2 = 4 -> 0.85, where 0.4.5 gives 0.87);
    # H200: 0.88, then min(0.88 + 49152 x 0.12 / 143771, (143771 - 18432) / 143771) = min(0.92103, 0.87180).
    assert fraction("0.4.7", H100_MIB, tp=2, pp=2) == 0.85
    assert fraction("0.4.7", H200_MIB) == pytest.approx((143771 - 18432) / 143771)
    # over 180,000 MiB on CUDA: 0.79 (an AMD card of that size takes the 96 GiB branch instead)
    assert fraction("0.4.7", 183_359) == 0.79
    assert fraction("0.4.7", 196_592, amd=True) == pytest.approx(
        min(0.88 + 49152 * 0.12 / 196592, (196592 - 18432) / 196592)
    )


def test_fraction_0_4_8_tiered() -> None:
    # server_args.py __post_init__@0.4.8: reserve (2.8 + tp x pp / 10) GiB under 35 GiB:
    # round((23034 - 3.2 x 1024) / 23034, 3) = round(0.85774, 3) = 0.858.
    assert fraction("0.4.8", L4_MIB, tp=4) == 0.858


def _log(name: str) -> EngineLog:
    log = parse_log((LOGS / name).read_text())
    assert log is not None
    return log


def test_l4_log_fraction_identity() -> None:
    # model_runner.py profile_max_num_token@0.4.3.post4: KV = avail after load - (1 - f) x avail before
    # = 6.09 - 0.15 x 21.63 = 2.8455 GiB; the log's K + V = 1.42 + 1.42 = 2.84: f = 0.85, the tp-4 default.
    log = _log("sglang-l4x4-qwq-32b-tp4.log")
    kv = log.figures["k_size_gb"] + log.figures["v_size_gb"]
    assert abs(6.09 - 0.15 * 21.63 - kv) < 0.01


def test_h100_pr4760_default_fraction() -> None:
    # 2025-03-25 (~0.4.4), no fraction printed: 63.48 - (1 - f) x (63.48 + 15.11) = 54.04 gives f = 0.880, the
    # tp-1 default of server_args.py __post_init__@0.4.4 (0.5.23's formula gives 0.83 for this model on an H100).
    log = _log("sglang-pr4760-llama31-8b.log")
    kv = log.figures["k_size_gb"] + log.figures["v_size_gb"]
    assert 1 - (63.48 - kv) / (63.48 + 15.11) == pytest.approx(0.88, abs=0.001)
    assert fraction("0.4.4", H100_MIB) == 0.88


def test_l4_budget_from_card() -> None:
    # visible = 23,612,293,120 (l4.yaml cuda_total_bytes: CUDA deviceQuery's total on an L4, 21.99 GiB);
    # requested = ceil(23,612,293,120 x 0.85) = 20,070,449,152; weights = 65,527,752,704 / 4 = 16,381,938,176
    # (registry bf16 safetensors; the log loaded dtype=torch.bfloat16); RoPE table = 131,072 positions x 128 x
    # 4 B (float32 on CUDA from 0.4.3: layers/rotary_embedding.py RotaryEmbedding.__init__) = 67,108,864;
    # KV = 20,070,449,152 - 16,381,938,176 - 67,108,864 = 3,621,402,112 B = 3.37 GiB.
    # The log's 2.84 GiB is lower: SGLang starts from 21.63 GiB free after NCCL init (kvsize: 21.99) and loading
    # took 15.54 GiB (kvsize: 15.26); neither is known from the card.
    spec = _spec("Qwen/Qwen2.5-32B")
    profile = resolve_gpu("l4")
    budget = kv_budget(
        "sglang",
        get_engine("sglang", "0.4.3.post4").version,
        spec,
        memory_bytes=profile.memory_bytes,
        weights_bytes=65_527_752_704 // 4,
        tp=4,
        device=Device.from_profile(profile),
    )
    assert budget.utilization == 0.85
    assert profile.cuda_total_bytes == 23_612_293_120
    assert budget.requested_bytes == math.ceil(23_612_293_120 * 0.85) == 20_070_449_152
    assert budget.rope_table_bytes == 131_072 * 128 * 4 == 67_108_864
    assert budget.kv_budget_bytes == 20_070_449_152 - 16_381_938_176 - 67_108_864 == 3_621_402_112


def test_jetson_flagged_and_excluded() -> None:
    # 0.4.1.post7 with --mem-fraction-static 0.5: 8.82 = 19.81 - 0.5 x F, F = 21.98 GiB free of 64 GiB at start.
    log = _log("sglang-jetson-tinyllama.log")
    kv = log.figures["k_size_gb"] + log.figures["v_size_gb"]
    assert (19.81 - kv) / 0.5 == pytest.approx(21.98, abs=0.01)
    spec = _spec("TinyLlama/TinyLlama-1.1B-Chat-v1.0")
    profile = resolve_gpu("jetson-agx-orin-64gb")
    budget = kv_budget(
        "sglang",
        "0.4.1.post7",
        spec,
        memory_bytes=profile.memory_bytes,
        weights_bytes=2 * GIB,
        settings=BudgetSettings(gpu_util=0.5),
        device=Device.from_profile(profile),
    )
    assert "unified memory" in budget.rule and "upper bound" in budget.rule
    # utils.py get_available_gpu_memory@0.4.1.post7: torch.cuda.mem_get_info; utils/common.py@0.5.9:
    # props.is_integrated -> psutil.virtual_memory().available (0.5.8 still mem_get_info).
    assert "torch.cuda.mem_get_info" in budget.rule
    assert SglangEngine("0.5.8").rules.unified_free == "mem_get_info"
    later = kv_budget(
        "sglang",
        "0.5.9",
        spec,
        memory_bytes=profile.memory_bytes,
        weights_bytes=2 * GIB,
        settings=BudgetSettings(gpu_util=0.5),
        device=Device.from_profile(profile),
    )
    assert "psutil.virtual_memory().available" in later.rule
    # a discrete card of the same size gets no such note
    plain = kv_budget("sglang", "0.5.9", spec, memory_bytes=profile.memory_bytes, weights_bytes=2 * GIB)
    assert "unified memory" not in plain.rule
    spec_ = importlib.util.spec_from_file_location("budget_corpus_small", ROOT / "benchmarks" / "budget_corpus.py")
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module
    spec_.loader.exec_module(module)
    assert "sglang-jetson-tinyllama" in module.EXCLUDED
    manifest = {e["id"]: e for e in json.loads((LOGS / "manifest.json").read_text())}
    assert manifest["sglang-l4x4-qwq-32b-tp4"]["rules_release"] == "0.4.3.post4"
