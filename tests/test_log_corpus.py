"""The corpus of published engine start-up logs (tests/data/logs, manifest.json: source, model, GPU, layout).

Two figures are tested separately (issue 11):
- pool tokens / blocks / concurrency given the KV memory the log says was available: the engine's paging
  arithmetic, within 0.2% (or the log's print resolution, when that is coarser);
- the KV memory predicted from the card alone: the budget (kvsize.budget), measured over the corpus.
The logs are the engines' own text, kept verbatim with their source; nothing here was produced by kvsize.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from kvsize.calibration import Deployment, check_log
from kvsize.config import parse_config
from kvsize.engine_log import GIB, EngineLog, parse_log
from kvsize.engines.context import Device
from kvsize.errors import UsageError
from kvsize.profiles import resolve_gpu
from kvsize.resolve import load_model_config

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"
MANIFEST: list[dict[str, Any]] = json.loads((LOGS / "manifest.json").read_text())
BY_ID = {e["id"]: e for e in MANIFEST}


def load(entry_id: str) -> EngineLog:
    log = parse_log((LOGS / f"{entry_id}.log").read_text())
    assert log is not None, entry_id
    return log


def spec_for(entry: dict[str, Any]) -> Any:
    config = entry["config"]
    loaded = load_model_config(str(ROOT / config) if config.startswith("tests/") else config)
    return parse_config(loaded.raw, source=loaded.location)


# --- the corpus itself ------------------------------------------------------------------------------------


def test_corpus_size_and_composition() -> None:
    engines = {e["engine"] for e in MANIFEST}
    assert len(MANIFEST) >= 40
    assert engines == {"vllm", "sglang", "llamacpp", "trtllm"}
    gpus = {e["gpu"] for e in MANIFEST if e["gpu"]}
    assert {"h100-sxm", "a100-80gb", "l40s", "l4", "rtx-3090"} <= gpus
    assert any(e["tp"] > 1 for e in MANIFEST) and any(e["pp"] > 1 for e in MANIFEST)


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["id"] for e in MANIFEST])
def test_every_log_is_placed_and_sourced(entry: dict[str, Any]) -> None:
    assert entry["source"] and (LOGS / f"{entry['id']}.log").is_file()
    assert load(entry["id"]).engine == entry["engine"]


# --- paging arithmetic: pool figures given the logged KV memory ---------------------------------------------

POOL_CASES = [e for e in MANIFEST if e.get("config") and e["engine"] in ("vllm", "sglang", "trtllm", "llamacpp")]


def resolution_pct(figure: Any, log: EngineLog) -> float:
    """The error the log's own rounding allows: KV memory printed to 0.01 GiB (GB for SGLang)."""
    if figure.basis == "the logged KV memory":
        kv = log.figures.get("available_kv_min_gib") or log.figures["available_kv_gib"]
        return 100 * 0.005 / kv
    if figure.basis == "the logged K + V size":
        return 100 * 0.01 / (log.figures.get("k_size_gb", 0) + log.figures.get("v_size_gb", 0))
    if figure.unit == "x":  # concurrency printed with two decimals
        return 100 * 0.005 / figure.logged
    return 0.0


# Logs whose release kvsize refuses (issue 22: a log is checked with its own release's rules): older than the
# oldest release read (vLLM 0.8.5), or a build without release tags. Each is refused, never checked.
REFUSED_RELEASES = {
    "vllm-15815-l40s-qwen25-32b-tp2": "vLLM 0.7.1 is not modelled: older than the oldest",
    "vllm-pr4650-deepseek-v2-lite": "vLLM 0.5.0.post1 is not modelled: older than the oldest",
    "vllm-pr20665-l4-deepseek-v2-lite-tp2pp2": "checkout without release tags",
}


# Pools kvsize does not reproduce from the logged KV memory, each pinned at its measured figures so that a change
# shows: Qwen3-235B-A22B-FP8 at tp 4 (94 layers x 1 KV head per rank x 128 x (K + V) x 2 B = 48,128 B per token):
# 8.11 GiB / 48,128 B = 180,935 -> 180,928 tokens in blocks of 16, the log says 178,880 (128 blocks fewer); the
# excerpt (an issue report, LMCache connector on, no release printed) has no line that says why.
POOL_UNEXPLAINED = {"vllm-21348-h100-qwen3-235b-fp8-tp4": (178_880, 180_928)}


@pytest.mark.parametrize("entry", POOL_CASES, ids=[e["id"] for e in POOL_CASES])
def test_pool_given_logged_kv_memory(entry: dict[str, Any]) -> None:
    log = load(entry["id"])
    if entry["id"] in POOL_UNEXPLAINED:
        dep = Deployment(spec=spec_for(entry), tp=entry["tp"], pp=entry["pp"], max_model_len=entry.get("max_model_len"))
        pool = next(f for f in check_log(log, dep).figures if f.name == "pool tokens")
        assert (pool.logged, pool.predicted) == POOL_UNEXPLAINED[entry["id"]]
        return
    if entry["id"] in REFUSED_RELEASES:
        with pytest.raises(UsageError, match=REFUSED_RELEASES[entry["id"]]):
            check_log(log, Deployment(spec=spec_for(entry), tp=entry["tp"], pp=entry["pp"]))
        return
    spec = None if entry["engine"] == "llamacpp" else spec_for(entry)
    dep = Deployment(
        spec=spec,
        tp=entry["tp"],
        pp=entry["pp"],
        max_model_len=None if log.settings.get("max_model_len") else entry.get("max_model_len"),
        # the card the log ran on: vLLM's batch defaults (a sliding group's in-flight blocks) key on it
        device=Device.from_profile(resolve_gpu(entry["gpu"])) if entry.get("gpu") else None,
    )
    figures = [
        f for f in check_log(log, dep).figures if f.basis != "the card" and not f.basis.startswith("kvsize's weights")
    ]
    if not figures:
        pytest.skip("the log prints no pool figure (or not the KV memory it came from)")
    for f in figures:
        allowed = max(0.2, resolution_pct(f, log))
        assert abs(f.error_pct) <= allowed, (f, allowed)


def test_pool_coverage() -> None:
    """The paging test covers every engine and most of the corpus's models with a config."""
    covered = {e["engine"] for e in POOL_CASES}
    assert covered == {"vllm", "sglang", "trtllm", "llamacpp"} and len(POOL_CASES) >= 35


# --- the budget: KV memory from the card alone ------------------------------------------------------------


def _budget_rows() -> list[dict[str, Any]]:
    spec = importlib.util.spec_from_file_location("budget_corpus", ROOT / "benchmarks" / "budget_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    rows: list[dict[str, Any]] = module.budget_cases(ROOT)
    return rows


BUDGET_ROWS = _budget_rows()
# Logs whose budget error has a cause kvsize does not model (README "Budget accuracy"); each stays in the
# measurement, and this list may only shrink. Empty: Llama 4 Scout's 2.5 GiB per rank is its RoPE table
# (kvsize/rope_tables.py), and the RTX 3090 log is vLLM 0.6.4 (V0), left out as older than kvsize models.
# Qwen2.5-72B at tp 2 (added with its config in this round): a 3.04 GiB pool, so kvsize's 0.16 GiB over it is
# +5.1%; its parts are each within 3% (weights 67.72 against 67.80, activation 2.23 against 2.29 GiB) and which
# 0.08 GiB of weights vLLM loads beyond the parameter count is not found yet.
# The A100 40GB run at tp 2 puts its two ranks on two nodes (Ray, one GPU per node): its 0.73 GiB over the pool is
# 0.71 GiB more held outside the KV cache than the same model at tp 2 on one node (the 80GB logs beside it, -0.16
# GiB); kvsize models the ranks of one node (NCCL over NVLink/PCIe), not NCCL over the network.
# The T4 log serves google/gemma-4-E2B-it-qat-w4a16-ct, whose quantization_config (which modules stay in 16 bits)
# is not in the repository: priced int4 throughout (manifest weights_dtype), its weights are 0.79 GiB under the
# logged load, and the KV error of +3.1% is what remains after the other parts.
# Two L40S logs at tp > 1 over PCIe (no NVLink), added unseen in stop 37 with the A100 40GB and DGX Spark logs (both
# within 1%):
# - Qwen3-235B-A22B FP8 at tp 8 with --enable-expert-parallel (0.10.2) prints its parts: the profile's activation
#   peak is 1.40 GiB against kvsize's 0.87 (16 whole experts per rank, block FP8 on Triton at sm_89), and its
#   weights are 0.18 GiB above kvsize's count. Neither is traced to a tensor in the source yet.
# - Llama-3-70B AWQ at tp 2 (0.16.0) holds 0.49 GiB more outside the KV cache than kvsize's parts. The log prints
#   no parts to say which, and its weights and pool are within 0.2%.
UNMODELLED: set[str] = {
    "llmd-qwen-qwen2-5-72b-instruc-tp2pp1dp1-8192",
    "vllm-dennislee22-a100-40gb-qwen2-7b-tp2-ray",
    "vllm-xbill9-t4-gemma-4-e2b-qat-w4a16",
    "vllm-l40s8-qwen3-235b-fp8-tp8-ep",
    "vllm-kagaho-l40s-llama3-70b-awq-tp2",
}


def test_budget_corpus_median_and_worst() -> None:
    vllm = [abs(r["error_pct"]) for r in BUDGET_ROWS if r["engine"] == "vllm"]
    assert len(vllm) >= 30
    assert statistics.median(vllm) <= 2.0
    modelled = [r for r in BUDGET_ROWS if r["engine"] == "vllm" and r["id"] not in UNMODELLED]
    worst = max(modelled, key=lambda r: abs(r["error_pct"]))
    assert abs(worst["error_pct"]) <= 5.0, worst
    for gpu in {r["gpu"] for r in modelled}:  # per card: 2% median, 5% worst
        errors = [abs(r["error_pct"]) for r in modelled if r["gpu"] == gpu]
        assert statistics.median(errors) <= 2.0 and max(errors) <= 5.0, gpu


# SGLang's logs whose budget error has a cause kvsize does not model. QwQ-32B at tp 4 on four PCIe L4s: the log's
# own parts give its KV to the log's rounding (0.85 x 21.63 free before loading - 15.54 loaded = 2.85 GB against
# K + V = 2.84), and kvsize's parts differ in two inputs: 0.36 GiB more in use before loading than one rank's CUDA
# context (the NCCL communicators and P2P mappings of tp 4 over PCIe, which kvsize counts only as NVLS buffers on
# NVSwitch cards), and 0.22 GiB held after loading beyond the weights and RoPE tables. `kvsize log` names both.
SGLANG_UNMODELLED: set[str] = {"sglang-l4x4-qwq-32b-tp4"}


def test_sglang_budget_per_card() -> None:
    """SGLang's logs on the same terms: 2% median and 5% worst per card, the listed logs apart (and still off)."""
    rows = [r for r in BUDGET_ROWS if r["engine"] == "sglang"]
    assert len(rows) >= 4
    modelled = [r for r in rows if r["id"] not in SGLANG_UNMODELLED]
    for gpu in {r["gpu"] for r in modelled}:
        errors = [abs(r["error_pct"]) for r in modelled if r["gpu"] == gpu]
        assert statistics.median(errors) <= 2.0 and max(errors) <= 5.0, gpu
    errors = {r["id"]: abs(r["error_pct"]) for r in rows}
    assert all(errors[entry_id] > 5.0 for entry_id in SGLANG_UNMODELLED)


def test_budget_unmodelled_list_is_current() -> None:
    """Each listed log is in the measurement and still outside 5% (else it leaves the list), or outside 2% where it
    alone would carry its card's median past 2%."""
    errors = {r["id"]: abs(r["error_pct"]) for r in BUDGET_ROWS}
    past_median = {"vllm-xbill9-t4-gemma-4-e2b-qat-w4a16", "vllm-kagaho-l40s-llama3-70b-awq-tp2"}
    for entry_id in UNMODELLED:
        assert errors[entry_id] > (2.0 if entry_id in past_median else 5.0), entry_id


def test_every_log_is_measured_or_left_out_with_its_reason() -> None:
    """The budget corpus accounts for every log of the manifest: measured, or listed with why it is not."""
    spec = importlib.util.spec_from_file_location("budget_corpus_all", ROOT / "benchmarks" / "budget_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    rows, left_out = module.corpus(ROOT)
    measured = {r["id"] for r in rows}
    assert measured | set(left_out) == {e["id"] for e in MANIFEST}
    assert not measured & set(left_out)
    assert all(len(reason) > 20 for reason in left_out.values()), left_out
    # the V0 logs are out for their release, not measured with another release's rules
    assert left_out["vllm-10517-rtx3090-llama31-8b"].startswith("not modelled: vLLM 0.6.4 ")
    assert "older than the oldest" in left_out["vllm-pr10511-h100-llama3-8b"]


V1_PROFILED = [
    e["id"]
    for e in MANIFEST
    if e["engine"] == "vllm"
    and e["pp"] == 1  # pipeline stages print their parts in an order of their own
    and "torch peak memory increase" in (LOGS / f"{e['id']}.log").read_text()
]


@pytest.mark.parametrize("entry_id", V1_PROFILED)
def test_budget_identity_from_logged_parts(entry_id: str) -> None:
    """determine_available_memory (v1/worker/gpu_worker.py, 0.19): available = requested - weights -
    torch peak increase - non-torch increase; with the parts the log printed the identity holds to rounding."""
    text = (LOGS / f"{entry_id}.log").read_text()
    log = load(entry_id)
    f = log.figures
    requested = float(re.search(r"Requested memory: [\d.]+ \(util\), ([\d.]+) GiB", text).group(1))  # type: ignore[union-attr]
    parts = f["weights_gib"] + f["activation_peak_gib"] + f["non_torch_gib"]
    assert abs(requested - parts - f["available_kv_gib"]) <= 0.02 + 1e-9


def test_budget_rows_have_sources() -> None:
    for r in BUDGET_ROWS:
        assert BY_ID[r["id"]]["source"]
        assert r["logged_gib"] * GIB > 0


def test_unmeasurable_logs_are_listed_not_crashed_on(tmp_path: Path) -> None:
    """A log from an engine the corpus does not measure, or naming a config kvsize cannot load, is left out with
    its reason (the corpus is run on logs other people add)."""
    spec = importlib.util.spec_from_file_location("budget_corpus_tmp", ROOT / "benchmarks" / "budget_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    logs = tmp_path / "tests" / "data" / "logs"
    logs.mkdir(parents=True)
    (tmp_path / "kvsize").symlink_to(ROOT / "kvsize", target_is_directory=True)  # the parser is loaded from here
    manifest = [
        {"id": "other-engine", "engine": "lmdeploy", "config": "x/y", "gpu": "h100", "tp": 1, "pp": 1},
        {
            "id": "no-config",
            "engine": "vllm",
            "config": "tests/data/configs/missing.json",
            "gpu": "h100",
            "tp": 1,
            "pp": 1,
        },
    ]
    (logs / "manifest.json").write_text(json.dumps(manifest))
    (logs / "other-engine.log").write_text("nothing\n")
    (logs / "no-config.log").write_text(
        "INFO [entrypoints/utils.py:233] non-default args: {'gpu_memory_utilization': 0.9}\n"
        "INFO [v1/worker/gpu_worker.py:436] Available KV cache memory: 10.00 GiB\n"
    )
    rows, left_out = module.corpus(tmp_path)
    assert rows == []
    assert "lmdeploy" in left_out["other-engine"]
    assert left_out["no-config"].startswith("its config is not sized")
