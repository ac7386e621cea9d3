"""Read an engine's start-up log: which engine and version, the scenario it ran, and the figures it printed. Pure.

Line formats, by engine (each pattern names the source line that prints it):

- vLLM V1 (0.8 -> 0.33): "Initializing a V1 LLM engine (vX) with config: model=..." (v1/engine/core.py),
  "non-default args: {...}" (entrypoints/utils.py), "Model loading took X GiB" (v1/worker/gpu_model_runner.py),
  "Memory profiling takes ... torch peak memory increase: X GiB; non-torch forward increase memory: X GiB",
  "Available KV cache memory: X GiB" (v1/worker/gpu_worker.py determine_available_memory),
  "Estimated CUDA graph memory: X GiB total", "GPU KV cache size: N tokens" and "Maximum concurrency for N
  tokens per request: Xx" (v1/core/kv_cache_utils.py); "# GPU blocks: N" before 0.8.
- vLLM V0 (<= 0.10): "Initializing an LLM engine (vX)" / "Initializing a V0 LLM engine (vX)", "Loading model
  weights took X GB" (worker/model_runner.py; GB is bytes / 2**30), "Memory profiling results: total_gpu_memory=
  ... kv_cache_size=X GiB gpu_memory_utilization=U" (worker/worker.py), "# GPU blocks: N, # CPU blocks: M".
- SGLang: "Load weight end. type=..., avail mem=X GB, mem usage=X GB.", "KV Cache is allocated. #tokens: N,
  K size: X GB, V size: X GB" (model_executor/model_runner.py; GB is bytes / 2**30), "max_total_num_tokens=N,
  ... max_running_requests=N, context_len=N" (managers/scheduler.py), "server_args=ServerArgs(...)".
- llama.cpp: "print_info: n_layer = N" (and n_head_kv, n_embd_head_k/v, n_swa; "llm_load_print_meta:" before
  2025), "llama_context: n_ctx = N" / "n_seq_max", "llama_kv_cache[_unified]: size = X MiB (N cells, L layers,
  S/T seqs), K (f16): X MiB, V (f16): X MiB" (src/llama-kv-cache.cpp), "llama_kv_cache_iswa: creating [non-]SWA
  KV cache, size = N cells"; older "llama_new_context_with_model: KV self size = X MiB".
- TensorRT-LLM: "[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)." and "Allocate N bytes
  for k/v cache. / Using N tokens in paged KV cache." (batch_manager/kvCacheManager.cpp), "Number of blocks in
  KV cache primary pool: N", "[MemUsageChange] Allocated X GiB for runtime buffers / decoder".

Figures are kept in the units the log prints them in (GiB, MiB, tokens); `gib_bytes` turns them into bytes.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import msgspec

GIB = 1024**3
MIB = 1024**2
V0_LONG = 32_768  # vLLM V0 turned chunked prefill on by default above this max_model_len

ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")


class LlamaCppCache(msgspec.Struct):
    """One `llama_kv_cache: size = ...` line: a KV cache (the whole one, or the SWA / non-SWA half)."""

    size_mib: float
    cells: int
    layers: int
    seqs: int
    k_type: str
    v_type: str
    k_mib: float
    v_mib: float
    swa: bool | None = None
    """True: the SWA half of an iswa cache; False: its non-SWA half; None: a single cache."""


class EngineLog(msgspec.Struct):
    """What one start-up log says."""

    engine: str
    engine_version: str | None = None
    model: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    """The scenario: max_model_len, gpu_util, tp, pp, kv_cache_dtype, dtype, quantization, block_size,
    max_num_batched_tokens, max_num_seqs, mem_fraction_static, page_size, n_ctx, n_seq_max, ..."""
    figures: dict[str, float] = msgspec.field(default_factory=dict)
    """Logged numbers, in the log's units (names end in _gib, _mib, _tokens, _blocks, _x)."""
    hparams: dict[str, int] = msgspec.field(default_factory=dict)
    """llama.cpp's printed hyper-parameters (n_layer, n_head_kv, n_embd_head_k, n_embd_head_v, n_swa)."""
    caches: list[LlamaCppCache] = msgspec.field(default_factory=list)
    lines: int = 0


def gib_bytes(gib: float) -> int:
    return round(gib * GIB)


# --- recognising the engine -----------------------------------------------------------------------------------

_MARKERS: dict[str, tuple[str, ...]] = {
    "vllm": (
        "LLM engine (v",
        "Available KV cache memory",
        "GPU KV cache size:",
        "# GPU blocks:",
        "Memory profiling results",
        "vLLM API server version",
        "Model loading took",
        "Loading model weights took",
        "kv_cache_utils.py",
        "gpu_worker.py",
    ),
    "sglang": ("KV Cache is allocated", "Load weight end.", "max_total_num_tokens=", "server_args=ServerArgs"),
    "llamacpp": ("print_info:", "llm_load_print_meta:", "llama_context:", "llama_kv_cache", "llama_new_context"),
    "trtllm": ("[TensorRT-LLM]", "paged KV cache", "[MemUsageChange]", "KV cache primary pool"),
}


def detect_engine(text: str) -> str | None:
    """The engine whose marker lines the log holds most of; None when there is none."""
    counts = {name: sum(text.count(m) for m in markers) for name, markers in _MARKERS.items()}
    best = max(counts, key=lambda name: counts[name])
    return best if counts[best] > 0 else None


# --- helpers --------------------------------------------------------------------------------------------------


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _first(pattern: str, text: str, flags: int = 0) -> re.Match[str] | None:
    return re.search(pattern, text, flags)


def _set_float(figures: dict[str, float], name: str, pattern: str, text: str) -> None:
    m = _first(pattern, text)
    if m and name not in figures:
        figures[name] = _num(m.group(1))


def _dict_literal(text: str, start: int) -> dict[str, Any] | None:
    """The Python dict literal that opens at text[start] ('{'), parsed safely (ast.literal_eval)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                try:
                    value = ast.literal_eval(text[start : i + 1])
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return None
                return value if isinstance(value, dict) else None
        elif text[i] == "\n":
            return None
    return None


def _kv_pairs(segment: str) -> dict[str, str]:
    """key=value pairs of a config dump ("model='x', tensor_parallel_size=2, ...")."""
    return {m.group(1): m.group(2).strip("'\"") for m in re.finditer(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,\s)]+)", segment)}


_COUNT_KEYS = (
    "max_model_len",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
)


def _count(value: object) -> int | None:
    """A positive count as vLLM's arguments print it: 8192, '8192', '32k' / '1M' (binary, as vLLM parses them)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    m = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*", str(value))
    if not m:
        return None
    scale = {"": 1, "k": 1024, "m": 1024**2}[m.group(2).lower()]
    return int(m.group(1)) * scale or None


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


# --- vLLM -----------------------------------------------------------------------------------------------------


def _parse_vllm(text: str, log: EngineLog) -> None:
    s, f = log.settings, log.figures
    m = _first(r"LLM engine \(v([\w.+\-]+)\)", text) or _first(r"vLLM API server version ([\w.+\-]+)", text)
    if m:
        log.engine_version = m.group(1)
    args_at = text.find("non-default args: {")
    args = _dict_literal(text, args_at + len("non-default args: ")) if args_at >= 0 else None
    if args:
        for key in (
            "max_model_len",
            "gpu_memory_utilization",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "kv_cache_dtype",
            "dtype",
            "quantization",
            "block_size",
            "max_num_batched_tokens",
            "max_num_seqs",
            "kv_cache_memory_bytes",
        ):
            if key in args:
                s[key] = _count(args[key]) if key in _COUNT_KEYS else args[key]
        model = args.get("model") or args.get("model_tag")
        if isinstance(model, str):
            log.model = model
    m = _first(r"LLM engine \(v[^)]*\) with config: (.*)", text)
    if m:
        cfg = _kv_pairs(m.group(1))
        log.model = log.model or cfg.get("model")
        for key, name in (
            ("max_seq_len", "max_model_len"),
            ("tensor_parallel_size", "tensor_parallel_size"),
            ("pipeline_parallel_size", "pipeline_parallel_size"),
        ):
            value = _int_or_none(cfg.get(key))
            if value is not None:
                s.setdefault(name, value)
        for key in ("kv_cache_dtype", "quantization"):
            if cfg.get(key) not in (None, "None"):
                s.setdefault(key, cfg[key])
        if cfg.get("dtype"):
            s.setdefault("dtype", cfg["dtype"].replace("torch.", ""))
    m = _first(r"max_num_batched_tokens=(\d+)", text) or _first(r"Defaulting max_num_batched_tokens to (\d+)", text)
    if m:
        s.setdefault("max_num_batched_tokens", int(m.group(1)))
    m = _first(r"Defaulting max_num_seqs to (\d+)", text)
    if m:
        s.setdefault("max_num_seqs", int(m.group(1)))
    m = (
        _first(r"Requested memory: ([\d.]+) \(util\)", text)
        or _first(r"gpu_memory_utilization[= ]\(?([\d.]+)", text)
        or _first(r"gpu_memory_utilization +([\d.]+)", text)
    )
    if m:
        s.setdefault("gpu_memory_utilization", float(m.group(1)))
    _set_float(f, "weights_gib", r"Model loading took ([\d.]+) ?Gi?B", text)
    _set_float(f, "weights_gib", r"Loading model weights took ([\d.]+) ?Gi?B", text)
    _set_float(f, "available_kv_gib", r"Available KV cache memory: ([\d.]+) ?GiB", text)
    _set_float(f, "available_kv_gib", r"kv_cache_size=([\d.]+)GiB", text)
    _set_float(f, "available_kv_gib", r"reserved for KV Cache is ([\d.]+) ?GiB", text)
    _set_float(f, "available_kv_gib", r"available_kv_cache_memory +([\d.]+) ?GiB", text)
    _set_float(f, "weights_gib", r"model weights take +([\d.]+) ?GiB", text)
    _set_float(f, "total_memory_gib", r"total_memory=([\d.]+)GiB", text)
    _set_float(f, "total_memory_gib", r"total_gpu_memory=([\d.]+)GiB", text)
    _set_float(f, "total_memory_gib", r"total_gpu_memory \(([\d.]+)GiB\)", text)
    _set_float(f, "total_memory_gib", r"total_gpu_memory +([\d.]+)GiB", text)
    _set_float(f, "initial_free_gib", r"free_memory=([\d.]+)GiB", text)
    _set_float(f, "activation_peak_gib", r"torch peak memory increase: ([\d.]+) ?GiB", text)
    _set_float(f, "activation_peak_gib", r"activation peak memory takes ([\d.]+) ?GiB", text)
    _set_float(f, "non_torch_gib", r"non-torch forward increase memory: ([\d.]+) ?GiB", text)
    _set_float(f, "non_torch_gib", r"non_torch_memory=([\d.]+)GiB", text)
    _set_float(f, "non_torch_gib", r"non-torch memory takes ([\d.]+) ?GiB", text)
    _set_float(f, "non_torch_gib", r"non_torch_memory(?: takes)? +([\d.]+) ?GiB", text)
    _set_float(f, "activation_peak_gib", r"PyTorch activation peak memory(?: takes)? +([\d.]+) ?GiB", text)
    _set_float(f, "cuda_graph_estimate_gib", r"Estimated CUDA graph memory: ([\d.]+) GiB total", text)
    _set_float(f, "cuda_graph_gib", r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB", text)
    _set_float(f, "pool_tokens", r"GPU KV cache size: ([\d,]+) tokens", text)
    _set_float(f, "gpu_blocks", r"#? ?GPU blocks: ([\d,]+)", text)
    _set_float(f, "gpu_blocks", r"# (?:CUDA|cuda) blocks: ([\d,]+)", text)
    m = _first(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", text)
    if m:
        s.setdefault("max_model_len", int(_num(m.group(1))))
        f["max_concurrency_x"] = float(m.group(2))
    # Pipeline stages profile separately and the pool takes the smallest (v1/engine/core.py: num_gpu_blocks =
    # min over workers); rank 0 prints its own "Available KV cache memory", the DEBUG lines give every stage's.
    non_kv = [float(x) for x in re.findall(r"Total non KV cache memory: ([\d.]+) ?GiB", text)]
    m = _first(r"Requested memory: [\d.]+ \(util\), ([\d.]+) GiB", text)
    if m and len(non_kv) > 1:
        least = round(float(m.group(1)) - max(non_kv), 2)
        if abs(least - f.get("available_kv_gib", least)) > 0.011:  # workers differ (pipeline stages)
            f["available_kv_min_gib"] = least
    # The card's name, where a kernel-config path prints it (fused_moe/configs/E=..,device_name=NVIDIA_L4.json).
    m = _first(r"device_name=([A-Za-z0-9_\-]+?)(?:,|\.json|\s)", text)
    if m:
        s["gpu_name"] = m.group(1).replace("_", " ")
    m = _first(r"vllm serve (\S+)", text)
    if m and log.model is None:
        log.model = m.group(1)
    v0 = ("V1 LLM engine" not in text and "v1/" not in text and "gpu_worker.py" not in text) and (
        "LLM engine (v" in text or "Memory profiling results" in text or "worker.py" in text or "blocks:" in text
    )
    s["engine_generation"] = "V0" if v0 else "V1"
    model_len = _count(s.get("max_model_len"))
    if v0 and "max_num_batched_tokens" not in s and model_len and model_len <= V0_LONG:
        # V0 without chunked prefill (its default up to 32K contexts): SchedulerConfig takes
        # max(max_model_len, 2048) batched tokens and 256 sequences, and the profile run uses them
        # (worker/worker.py profile_run; vllm-project/vllm#8185: "profile_run with max_num_batched_tokens
        # (max_model_len as default)").
        s["max_num_batched_tokens"] = max(model_len, 2048)
        s.setdefault("max_num_seqs", 256)


# --- SGLang ---------------------------------------------------------------------------------------------------


def _parse_sglang(text: str, log: EngineLog) -> None:
    s, f = log.settings, log.figures
    m = _first(r"ServerArgs\((.*)", text) or _first(r"ServerArgs: (.*)", text)
    if m:
        cfg = _kv_pairs(m.group(1))
        log.model = cfg.get("model_path")
        for key in (
            "tp_size",
            "pp_size",
            "page_size",
            "context_length",
            "max_running_requests",
            "chunked_prefill_size",
        ):
            value = _int_or_none(cfg.get(key))
            if value is not None:
                s[key] = value
        if cfg.get("mem_fraction_static") not in (None, "None"):
            s["mem_fraction_static"] = float(cfg["mem_fraction_static"])
        if cfg.get("kv_cache_dtype"):
            s["kv_cache_dtype"] = cfg["kv_cache_dtype"]
    # The launch command, when the log quotes it (sglang.launch_server ... --mem-fraction-static 0.5 --tp 4).
    m = _first(r"--mem-fraction-static[= ]([\d.]+)", text)
    if m:
        s.setdefault("mem_fraction_static", float(m.group(1)))
    m = _first(r"--(?:tp|tp-size|tensor-parallel-size)[= ](\d+)", text)
    if m:
        s.setdefault("tp_size", int(m.group(1)))
    m = _first(r"--model(?:-path)?[= ](\S+)", text)
    if m and log.model is None:
        log.model = m.group(1)
    m = _first(r"sglang[=\s]+v?(\d+\.\d+\.\d+[\w.]*)", text)
    if m:
        log.engine_version = m.group(1)
    _set_float(f, "free_before_load_gb", r"Load weight begin\. avail mem=([\d.]+) GB", text)
    _set_float(f, "free_after_load_gb", r"Load weight end\..*?avail mem=([\d.]+) GB", text)
    _set_float(f, "weights_gb", r"Load weight end\..*?mem usage=([\d.]+) GB", text)
    m = _first(r"KV Cache is allocated\. #tokens: ([\d,]+), K size: ([\d.]+) GB, V size: ([\d.]+) GB", text)
    if m:
        f["pool_tokens"] = _num(m.group(1))
        f["k_size_gb"], f["v_size_gb"] = float(m.group(2)), float(m.group(3))
    else:
        m = _first(r"KV Cache is allocated\. #tokens: ([\d,]+), KV size: ([\d.]+) GB", text)
        if m:  # MLA: one latent cache
            f["pool_tokens"], f["kv_size_gb"] = _num(m.group(1)), float(m.group(2))
        m = _first(r"KV Cache is allocated\. K size: ([\d.]+) GB, V size: ([\d.]+) GB", text)
        if m:  # ~0.4.1: no token count on this line (max_total_num_tokens= follows)
            f["k_size_gb"], f["v_size_gb"] = float(m.group(1)), float(m.group(2))
    _set_float(f, "pool_tokens", r"max_total_num_tokens=(\d+)", text)
    if "weights_gb" not in f and "free_before_load_gb" in f and "free_after_load_gb" in f:
        f["weights_gb"] = round(f["free_before_load_gb"] - f["free_after_load_gb"], 2)
    m = _first(r"max_running_requests=(\d+)", text)
    if m:
        f["max_running_requests"] = float(m.group(1))
    m = _first(r"context_len=(\d+)", text)
    if m:
        s.setdefault("context_length", int(m.group(1)))


# --- llama.cpp ------------------------------------------------------------------------------------------------

_HPARAMS = ("n_layer", "n_head_kv", "n_embd_head_k", "n_embd_head_v", "n_swa", "n_ctx_train", "n_embd")
_CACHE_LINE = re.compile(
    r"(?:llama_kv_cache(?:_unified)?|llama_kv_cache_init): size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +"
    r"(\d+)(?:/\d+)? seqs\), K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB"
)


def _parse_llamacpp(text: str, log: EngineLog) -> None:
    s, f = log.settings, log.figures
    m = _first(r"build: (\d+) \((\w+)\)", text)
    if m:
        log.engine_version = f"b{m.group(1)}"
    for name in _HPARAMS:
        m = _first(rf"(?:print_info|llm_load_print_meta): {name} += (\d+)", text)
        if m:
            log.hparams[name] = int(m.group(1))
    m = _first(r"print_info: general\.name += (.+)", text) or _first(r"general\.name str += (.+)", text)
    if m:
        log.model = m.group(1).strip()
    for name in ("n_ctx", "n_seq_max", "n_ubatch", "n_batch"):
        m = _first(rf"(?:llama_context|llama_new_context_with_model): {name} += (\d+)", text)
        if m:
            s[name] = int(m.group(1))
    m = _first(r"llama_context: kv_unified += (\w+)", text)
    if m:
        s["kv_unified"] = m.group(1) == "true"
    swa_flags = [m.group(1) for m in re.finditer(r"llama_kv_cache(?:_unified)?_iswa: creating +(non-SWA|SWA)", text)]
    for i, cm in enumerate(_CACHE_LINE.finditer(text)):
        swa = (swa_flags[i] == "SWA") if i < len(swa_flags) else None
        log.caches.append(
            LlamaCppCache(
                size_mib=float(cm.group(1)),
                cells=int(cm.group(2)),
                layers=int(cm.group(3)),
                seqs=int(cm.group(4)),
                k_type=cm.group(5),
                k_mib=float(cm.group(6)),
                v_type=cm.group(7),
                v_mib=float(cm.group(8)),
                swa=swa,
            )
        )
    if log.caches:
        f["kv_size_mib"] = sum(c.size_mib for c in log.caches)
        f["kv_cells"] = float(sum(c.cells for c in log.caches))
    else:
        m = _first(r"KV self size += +([\d.]+) MiB, K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB", text)
        if m:
            f["kv_size_mib"] = float(m.group(1))
            s["type_k"], s["type_v"] = m.group(2), m.group(4)


# --- TensorRT-LLM ---------------------------------------------------------------------------------------------


def _parse_trtllm(text: str, log: EngineLog) -> None:
    s, f = log.settings, log.figures
    m = _first(r"TensorRT-LLM version: ([\w.]+)", text) or _first(r"tensorrt_llm[=\s]+v?(\d+\.\d+[\w.]*)", text)
    if m:
        log.engine_version = m.group(1)
    m = _first(r"Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)", text)
    if m:
        f["kv_allocated_gib"], f["pool_tokens"] = float(m.group(1)), float(m.group(2))
    m = _first(r"Allocate (\d+) bytes for k/v cache", text)
    if m:
        f["kv_allocated_bytes"] = float(m.group(1))
    _set_float(f, "pool_tokens", r"Using (\d+) tokens in paged KV cache", text)
    _set_float(f, "gpu_blocks", r"Number of blocks in KV cache primary pool: (\d+)", text)
    _set_float(f, "runtime_buffers_gib", r"Allocated ([\d.]+) GiB for runtime buffers", text)
    _set_float(f, "decoder_gib", r"Allocated ([\d.]+) GiB for decoder", text)
    m = _first(
        r"Memory usage when calculating max tokens in paged kv cache: total: ([\d.]+) GiB, available: "
        r"([\d.]+) GiB",
        text,
    )
    if m:
        f["total_memory_gib"], f["free_for_kv_gib"] = float(m.group(1)), float(m.group(2))
    m = _first(r"tokens_per_block[\"']?[:=]\s*(\d+)", text)
    if m:
        s["tokens_per_block"] = int(m.group(1))


_PARSERS = {"vllm": _parse_vllm, "sglang": _parse_sglang, "llamacpp": _parse_llamacpp, "trtllm": _parse_trtllm}


def parse_log(text: str) -> EngineLog | None:
    """The engine, scenario and figures of a start-up log; None when no engine's lines are in it."""
    engine = detect_engine(text)
    if engine is None:
        return None
    log = EngineLog(engine=engine, lines=text.count("\n") + 1)
    _PARSERS[engine](text, log)
    return log
