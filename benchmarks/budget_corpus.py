"""The budget's error on the published start-up logs of tests/data/logs, per engine and GPU.

For each vLLM / SGLang log whose model config and card kvsize knows, the KV memory the engine logged as
available is compared with kvsize's budget from the card alone (GPU profile, the log's utilisation and batch
settings, tp/pp, kvsize's own weights). Run it against any kvsize tree to compare releases:

    PYTHONPATH=. python benchmarks/budget_corpus.py            # this tree
    PYTHONPATH=/path/to/other/tree python benchmarks/budget_corpus.py --logs-from .

Only kvsize.budget, kvsize.weights, kvsize.config, kvsize.resolve and kvsize.profiles of the tree on the path
are used; the log parser is always this tree's (loaded by file path), so older trees can be measured too.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent.parent
GIB = 1024**3


def load_parser(root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvsize_engine_log_corpus", root / "kvsize" / "engine_log.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# Logs left out of the measurement, each with the cause kvsize cannot model from the card alone.
EXCLUDED = {
    # SGLang 0.4.1.post7 on a Jetson AGX Orin 64GB (unified memory): the budget is 0.5 x the free memory before
    # loading, which get_available_gpu_memory (utils.py@0.4.1.post7) reads from torch.cuda.mem_get_info, i.e. what
    # the OS and other programs left free: 8.82 = 19.81 - 0.5 x F gives F = 21.98 GiB free of 64 GiB. kvsize's
    # figure assumes all of it free and says it is an upper bound (budget.py SGLANG_UNIFIED_NOTE).
    "sglang-jetson-tinyllama": "unified memory: the OS's free memory at start-up is not known from the card",
    # The issue excerpt keeps one line ("Available KV cache memory: 8.11 GiB"): no release, no weights, profile
    # or CUDA-graph line to say which part differs, and the server ran the LMCache KV connector
    # (kv_transfer_config), whose buffers kvsize does not model. kvsize's budget from the card is 10.23 GiB
    # (+26%) with the July 2025 release's rules; the SGLang log of the same issue is within 0.2%.
    "vllm-21348-h100-qwen3-235b-fp8-tp4": "the log keeps only its KV figure (no release, weights or profile lines) "
    "and runs the LMCache KV connector, which kvsize does not model",
}


# The engines whose budget from the card this measures; the others' logs are left out with the reason.
ENGINE_BUDGETS = ("vllm", "sglang")
NOT_MEASURED_ENGINES = {
    "llamacpp": "llama.cpp sizes its cache from -c (the context asked for), not from a share of the card",
    "trtllm": "TensorRT-LLM 0.5-0.13 (these logs' releases) predates the release kvsize models (1.2)",
}


def _unversioned(log: Any) -> str | None:
    """The tree's own choice for a log that prints no release (trees before 0.34's era: the newest)."""
    try:
        from kvsize.calibration import unversioned_vllm_release
    except ImportError:
        return None
    return unversioned_vllm_release(log)


def log_release(engine: str, version: str | None) -> str | None:
    """The release a log is sized with: its own (its era's rules), None when it prints none (the newest read);
    raises UsageError for a release older than the oldest kvsize has read (the row is then left out)."""
    from kvsize.engines import get_engine

    return get_engine(engine, version).version if version else None


def _run_dtype(engine: str, version: str | None, spec: Any, profile: Any) -> str:
    """The engine's run dtype on the log's card; the checkpoint's on trees without Engine.run_dtype."""
    from kvsize.engines import get_engine
    from kvsize.engines.context import Device, EngineContext

    rules = get_engine(engine, version, EngineContext(device=Device.from_profile(profile)))
    return rules.run_dtype(spec) if hasattr(rules, "run_dtype") else spec.model_dtype


def budget_cases(root: Path = HERE) -> list[dict[str, Any]]:
    """One row per log with a predictable budget: id, engine, gpu, logged and predicted KV memory (GiB)."""
    return corpus(root)[0]


def corpus(root: Path = HERE) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the measured rows, every other log of the manifest with the reason it is not measured)."""
    from kvsize.budget import BudgetSettings, kv_budget
    from kvsize.config import parse_config
    from kvsize.errors import KvsizeError, UsageError
    from kvsize.profiles import resolve_gpu
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights

    try:  # the busiest rank's weights (pipeline stages hold the embeddings); older trees split evenly
        from kvsize.budget import weights_on_busiest_rank as on_rank
    except ImportError:
        on_rank = None
    parser = load_parser(root)
    takes_device = "device" in inspect.signature(kv_budget).parameters
    rows: list[dict[str, Any]] = []
    left_out: dict[str, str] = {}
    for entry in json.loads((root / "tests/data/logs/manifest.json").read_text()):
        entry_id = entry["id"]
        if entry_id in EXCLUDED:
            left_out[entry_id] = EXCLUDED[entry_id]
            continue
        if entry["engine"] not in ENGINE_BUDGETS:
            left_out[entry_id] = NOT_MEASURED_ENGINES.get(
                entry["engine"], f"{entry['engine']}: this measures the budgets of vLLM and SGLang logs only"
            )
            continue
        if not entry.get("config"):
            left_out[entry_id] = "its model's config.json is not in the repository (registry or tests/data/configs)"
            continue
        if not entry.get("gpu"):
            left_out[entry_id] = "the log does not say which card it ran on"
            continue
        log = parser.parse_log((root / "tests/data/logs" / f"{entry_id}.log").read_text())
        f, s = log.figures, log.settings
        if entry["engine"] == "vllm":
            logged = f.get("available_kv_min_gib") or f.get("available_kv_gib")
            util = s.get("gpu_memory_utilization") or entry.get("gpu_memory_utilization")
        else:
            logged = (f.get("k_size_gb", 0.0) + f.get("v_size_gb", 0.0)) or None
            util = s.get("mem_fraction_static")
        if not logged:
            left_out[entry_id] = "the log prints no KV memory figure"
            continue
        if not util and entry["engine"] == "vllm":
            left_out[entry_id] = "the log prints no gpu_memory_utilization (and the source states none)"
            continue
        try:
            # a log printing no release is sized with the manifest's `rules_release` (the release its date and
            # format place it in; see its `rules_release_reason`), else as `kvsize log` sizes it (the newest release
            # whose pool sizing the log's lines show: kvsize.calibration.unversioned_vllm_release)
            version = log_release(
                entry["engine"], log.engine_version or entry.get("rules_release") or _unversioned(log)
            )
        except UsageError as exc:
            left_out[entry_id] = f"not modelled: {exc}"
            continue
        config = entry["config"]
        try:  # a config kvsize cannot load, size or price is a reason too, not a crash
            loaded = load_model_config(str(root / config) if config.startswith("tests/") else config)
            spec = parse_config(loaded.raw, source=loaded.location)
            dtype = {"float32": "fp32"}.get(str(s.get("dtype")))
            if dtype:
                spec = msgspec.structs.replace(spec, model_dtype=dtype)
            # the dtype the engine runs the checkpoint in (Engine.run_dtype: float32 checkpoints in 16 bits)
            served = _run_dtype(entry["engine"], version, spec, resolve_gpu(entry["gpu"]))
            cast = {"served_dtype": served} if served != spec.model_dtype else {}
            weights = find_weights(
                loaded, model_dtype=spec.model_dtype, weights_dtype=entry.get("weights_dtype"), **cast
            ).bytes
            spec = msgspec.structs.replace(spec, model_dtype=served)
        except KvsizeError as exc:
            left_out[entry_id] = f"its config is not sized: {exc}"
            continue
        tp, pp = entry["tp"], entry["pp"]
        profile = resolve_gpu(entry["gpu"])
        fields = inspect.signature(BudgetSettings).parameters
        # the log's vLLM switches, as `kvsize log` reads them (calibration.py), where this tree models them
        switches = {
            field: s.get(key) is True
            for field, key in (
                ("enforce_eager", "enforce_eager"),
                ("expert_parallel", "enable_expert_parallel"),
                ("skip_mm_profiling", "skip_mm_profiling"),
            )
            if field in fields and entry["engine"] == "vllm"
        }
        settings = BudgetSettings(
            gpu_util=float(util) if util else None,
            max_batched_tokens=s.get("max_num_batched_tokens"),
            max_num_seqs=s.get("max_num_seqs"),
            **(
                {"max_model_len": s.get("max_model_len") or entry.get("max_model_len")}
                if "max_model_len" in fields
                else {}
            ),
            **switches,
        )
        extra: dict[str, Any] = {}
        if takes_device:
            from kvsize.engines.context import Device

            extra["device"] = Device.from_profile(profile)
        budget = kv_budget(
            entry["engine"],
            version,
            spec,
            memory_bytes=profile.memory_bytes,
            weights_bytes=on_rank(spec, weights, tp=tp, pp=pp, engine=entry["engine"]).bytes
            if on_rank
            else -(-weights // (tp * pp)),
            tp=tp,
            pp=pp,
            settings=settings,
            **extra,
        )
        predicted = budget.kv_budget_bytes / GIB
        rows.append(
            {
                "id": entry_id,
                "engine": entry["engine"],
                "gpu": entry["gpu"],
                "tp": tp,
                "pp": pp,
                "logged_gib": float(logged),
                "predicted_gib": round(predicted, 3),
                "error_pct": 100 * (predicted - float(logged)) / float(logged),
            }
        )
    return rows, left_out


def summary(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, float, float]]:
    """(engine, gpu or 'all', logs, median |error| %, worst |error| %)."""
    out = []
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["engine"], r["gpu"]), []).append(abs(r["error_pct"]))
        groups.setdefault((r["engine"], "all"), []).append(abs(r["error_pct"]))
    for (engine, gpu), errors in sorted(groups.items()):
        out.append((engine, gpu, len(errors), statistics.median(errors), max(errors)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs-from", type=Path, default=HERE, help="the tree holding tests/data/logs")
    ap.add_argument("--rows", action="store_true", help="print every log's row too")
    args = ap.parse_args()
    rows, left_out = corpus(args.logs_from.resolve())
    if args.rows:
        for r in rows:
            print(
                f"{r['id']:52s} {r['gpu']:24s} tp{r['tp']} pp{r['pp']} logged {r['logged_gib']:7.2f} "
                f"kvsize {r['predicted_gib']:7.2f} GiB  {r['error_pct']:+7.2f}%"
            )
    print(f"{'engine':8s} {'gpu':24s} {'logs':>4s} {'median':>8s} {'worst':>8s}")
    for engine, gpu, n, median, worst in summary(rows):
        print(f"{engine:8s} {gpu:24s} {n:4d} {median:7.2f}% {worst:7.2f}%")
    for entry_id, reason in left_out.items():
        print(f"excluded {entry_id}: {reason}")


if __name__ == "__main__":
    main()
