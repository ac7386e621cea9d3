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

A log is untrusted text of any size, so matching is linear in it: no pattern spans a line, every repeat is
bounded ({0,N}, never .* after something that can recur on the line), a pattern that does not open with a
literal opens at a word boundary, and a line longer than MAX_LINE_CHARS is cut before matching. Every number is
read through `_Reader.value` / `_Reader.count`: a figure that is no finite number in range (".", "1.2.3",
"nan", a 400-digit run) is left out with a note, never handed to the arithmetic.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
import warnings
from typing import Any

import msgspec

from kvsize.errors import UsageError
from kvsize.mm_profile import parse_mm_limits
from kvsize.text import shown

GIB = 1024**3
MIB = 1024**2
V0_LONG = 32_768  # vLLM V0 turned chunked prefill on by default above this max_model_len

ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")

MAX_LINE_CHARS = 8 * 1024
"""Longest line matched whole. Engine lines are short (the longest, vLLM's config dump, is a few KiB); a longer
line is cut to this, at its last separator so that no figure is cut in two."""
MAX_FIGURE = 1e15
"""Largest figure kept (GiB, MiB, tokens, bytes alike): no engine prints one this large, and anything below it
stays exact enough in the arithmetic (1e15 GiB x 2**30 is still a finite float)."""
MAX_COUNT = 10**12
"""Largest count kept (tokens, blocks, layers, tp): beyond any real deployment, far from float overflow."""
MAX_IGNORED_NOTES = 5
"""Figures left out are listed one note each up to this many, then counted."""

# Patterns are written as the lines they match, with <F> for a figure and <N> for a count (`_expand`).
# A figure as printed, loosely ("58.11", "476,016", and the bad ones: ".", "1.2.3", "nan", "1e999", "-3.21"),
# so that a bad one is seen and noted; its unit follows in the pattern. Bounded: a 400-digit run is still read
# (and refused by `value`), a 200,000-digit one is not a match at all.
_FIG = r"([\w.,+-]{1,512})"
_INT = r"(\d[\d,]{0,63})"  # a count ("8192", "476,016"); `count` refuses one past MAX_COUNT


def _expand(pattern: str) -> str:
    """`pattern` with <F> and <N> written out."""
    return pattern.replace("<F>", _FIG).replace("<N>", _INT)


_DECIMAL = re.compile(r"-?\d{1,20}(?:\.\d{1,20})?")  # what `value` accepts, once thousands commas are gone
_LONG_DECIMAL = re.compile(r"-?\d+(?:\.\d+)?")  # a number all the same (a 400-digit run): "too many digits"


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


KV_FIGURES = frozenset(
    {
        "available_kv_gib",
        "available_kv_min_gib",
        "pool_tokens",
        "gpu_blocks",
        "max_concurrency_x",
        "k_size_gb",
        "v_size_gb",
        "kv_size_gb",
        "kv_size_mib",
        "kv_cells",
        "kv_allocated_gib",
        "kv_allocated_bytes",
    }
)
"""The figures that describe the KV cache itself (the rest are weights, overheads and the card's memory)."""


class EngineLog(msgspec.Struct):
    """What one start-up log says."""

    engine: str
    engine_version: str | None = None
    model: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    """The scenario: max_model_len, gpu_util, tp, pp, kv_cache_dtype, dtype, quantization, block_size,
    max_num_batched_tokens, max_num_seqs, mem_fraction_static, page_size, n_ctx, n_seq_max, ..."""
    figures: dict[str, float] = msgspec.field(default_factory=dict)
    """Logged numbers, in the log's units (names end in _gib, _mib, _tokens, _blocks, _x); each finite, at most
    MAX_FIGURE."""
    hparams: dict[str, int] = msgspec.field(default_factory=dict)
    """llama.cpp's printed hyper-parameters (n_layer, n_head_kv, n_embd_head_k, n_embd_head_v, n_swa)."""
    caches: list[LlamaCppCache] = msgspec.field(default_factory=list)
    failure: str | None = None
    """Why the start-up failed, when the log says it did (vLLM's negative "Available KV cache memory", "No
    available memory for the cache blocks", SGLang's "Not enough memory", ...); None otherwise."""
    notes: list[str] = msgspec.field(default_factory=list)
    """What reading the log left out: figures that are no usable number, lines cut for length."""

    def has_kv_figure(self) -> bool:
        """Whether the log printed any figure about the KV cache (a log cut before the engine sized it has none)."""
        return bool(KV_FIGURES & self.figures.keys()) or bool(self.caches)


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


# --- failed start-ups -----------------------------------------------------------------------------------------

# (what the engine raises, in its words, and what it means). A failed start-up still prints the figures before
# the failure, which may all agree with kvsize: without this the check would pass a server that never came up.
_FAILURES: tuple[tuple[str, str], ...] = (
    # vLLM v1/core/kv_cache_utils.py _check_enough_kv_cache_memory and V0 worker/worker.py
    # raise_if_cache_size_invalid (available memory <= 0).
    ("No available memory for the cache blocks", "the engine had no memory for the KV cache"),
    # vLLM V1: "To serve at least one request with the model's max seq len (N), (X GiB KV cache is needed, which
    # is larger than the available KV cache memory (Y GiB)."
    (
        "KV cache is needed, which is larger than the available KV cache memory",
        "the engine's KV cache memory cannot hold one request of max_model_len",
    ),
    # vLLM V0: "The model's max seq len (N) is larger than the maximum number of tokens that can be stored in KV
    # cache (M)."
    (
        "is larger than the maximum number of tokens that can be stored in KV cache",
        "the engine's KV cache cannot hold one request of max_model_len",
    ),
    # vLLM v1/worker/gpu_worker.py: "Free memory on device (X/Y GiB) on startup is less than desired GPU memory
    # utilization (U, Z GiB)."
    (
        "on startup is less than desired GPU memory utilization",
        "the GPU had less free memory than gpu_memory_utilization asks for",
    ),
    # SGLang model_executor/model_runner.py (max_total_num_tokens <= 0).
    ("Not enough memory. Please try to increase --mem-fraction-static", "the engine had no memory for the KV cache"),
    # llama.cpp src/llama-kv-cache.cpp.
    ("failed to allocate buffer for kv cache", "the engine could not allocate its KV cache"),
    # PyTorch's exception class, as a traceback prints it (no mere warning names it).
    ("OutOfMemoryError: CUDA out of memory", "the engine ran out of GPU memory"),
)
_NEGATIVE_KV = "Available KV cache memory: -"  # vLLM prints the budget before refusing it


def _least_of_workers(r: _Reader, text: str) -> None:
    """The smallest worker's KV memory, pool and concurrency, where the workers of the log's first start-up
    printed different ones (a log that restarts the engine keeps the first run's figures, as the other readers
    do); the first worker's unreadable figure does not hide the others'."""
    f = r.log.figures
    starts = [m.start() for m in re.finditer(r"Initializing a V1 LLM engine", text)]
    first = text[: starts[1]] if len(starts) > 1 else text

    def numbers(marker: str, pattern: str) -> list[float]:
        """Every worker's readable figure; the first-match readers already noted an unreadable one."""
        if first.count(marker) < 2:  # one worker's line: the first-match readers have it (and a 1M-line log
            return []  # costs no regex pass)
        found = (r.value(raw, marker, quiet=True) for raw in re.findall(_expand(pattern), first))
        return [n for n in found if n is not None]

    memory = numbers("Available KV cache memory", r"Available KV cache memory: <F> ?GiB")
    if memory and "available_kv_gib" not in f and r.log.failure is None:
        f["available_kv_gib"] = memory[0]
    if len(set(memory)) > 1 and "available_kv_min_gib" not in f:
        f["available_kv_min_gib"] = min(memory)
    pools = numbers("GPU KV cache size", r"GPU KV cache size: <N> tokens")
    if pools and "pool_tokens" not in f:
        f["pool_tokens"] = pools[0]
    if len(set(pools)) > 1:
        f["pool_tokens"] = min(pools)
        concurrency = numbers(
            "Maximum concurrency for", r"Maximum concurrency for [\d,]{1,32} tokens per request: <F>x"
        )
        if concurrency:
            f["max_concurrency_x"] = min(concurrency)


def _line_at(text: str, at: int) -> str:
    """The line around text[at], stripped and cut to 160 characters, for a message."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : end if end >= 0 else len(text)].strip()
    return line if len(line) <= 160 else line[:157] + "..."


def find_failure(text: str) -> str | None:
    """Why the start-up failed, with the log line that says so; None when the log shows no failure."""
    found: list[tuple[int, str]] = []
    at = text.find(_NEGATIVE_KV)
    if at >= 0:
        found.append((at, "the engine had no memory for the KV cache"))
    for marker, meaning in _FAILURES:
        at = text.find(marker)
        if at >= 0:
            found.append((at, meaning))
    if not found:
        return None
    at, meaning = min(found)  # the first failure the log shows: what followed may be its consequence
    return f"{meaning} ({_line_at(text, at)})"


# --- reading the text -----------------------------------------------------------------------------------------


def _bounded_lines(text: str) -> tuple[str, int]:
    """`text` with line breaks normalised (CR and CRLF: a progress bar's carriage returns end its updates) and
    every line longer than MAX_LINE_CHARS cut to its last separator before that length; the number of lines cut."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if len(text) <= MAX_LINE_CHARS:
        return text, 0
    lines = text.split("\n")
    cut = 0
    for i, line in enumerate(lines):
        if len(line) > MAX_LINE_CHARS:
            head = line[:MAX_LINE_CHARS]
            stop = max(head.rfind(" "), head.rfind(","), head.rfind("\t"))
            lines[i] = head[:stop] if stop > 0 else ""  # a partial number must not be read as a whole one
            cut += 1
    return ("\n".join(lines) if cut else text), cut


class _Reader:
    """The text being read, the log being filled in, and the figures left out so far."""

    def __init__(self, text: str, log: EngineLog) -> None:
        self.text = text
        self.log = log
        self.ignored = 0

    def search(self, pattern: str) -> re.Match[str] | None:
        return re.search(_expand(pattern), self.text)

    def ignore(self, what: str, raw: object, why: str) -> None:
        """Note (up to MAX_IGNORED_NOTES times) a figure left out, as the log printed it."""
        self.ignored += 1
        if self.ignored <= MAX_IGNORED_NOTES:
            self.log.notes.append(f"{what} left out: the log prints {shown(raw, 28)} ({why})")

    def value(self, raw: str, what: str, *, signed: bool = False, quiet: bool = False) -> float | None:
        """A logged figure as a float, or None (with a note, unless `quiet`) when it is no finite number in
        0..MAX_FIGURE (-MAX_FIGURE.. with `signed`)."""
        digits = raw.replace(",", "")
        if not _DECIMAL.fullmatch(digits):  # '.', '1.2.3', 'nan', 'inf', '1e999', a 400-digit run
            if not quiet:
                self.ignore(what, raw, "too many digits" if _LONG_DECIMAL.fullmatch(digits) else "not a number")
            return None
        number = float(digits)  # at most 40 digits: finite
        if abs(number) > MAX_FIGURE or (number < 0 and not signed):
            if not quiet:
                self.ignore(what, raw, "out of range")
            return None
        return number

    def count(self, raw: str, what: str, *, positive: bool = False) -> int | None:
        """A logged whole number in 0..MAX_COUNT (1.. with `positive`), or None with a note."""
        number = self.value(raw, what)
        if number is None:
            return None
        if not number.is_integer() or number > MAX_COUNT or (positive and number < 1):
            self.ignore(what, raw, "not a count kvsize can use")
            return None
        return int(number)

    def figure(self, name: str, pattern: str, *, signed: bool = False) -> None:
        """figures[name] from the first match of `pattern` (group 1), unless an earlier pattern set it."""
        if name in self.log.figures:
            return
        m = self.search(pattern)
        if m:
            number = self.value(m.group(1), name, signed=signed)
            if number is not None:
                self.log.figures[name] = number

    def fraction(self, raw: object, what: str) -> float | None:
        """A utilisation / memory fraction the log gives, as text or as a parsed literal (1e999 is inf there): a
        finite number in (0, 1], else None with a note."""
        number: float
        if isinstance(raw, str):
            parsed = self.value(raw.strip(), what)
            if parsed is None:
                return None
            number = parsed
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            number = float(raw) if -2 < raw < 2 else math.nan  # nan fails both; 10**5000 never meets float()
        else:
            number = math.nan
        if not 0 < number <= 1:  # False for nan
            self.ignore(what, raw, "not a fraction in (0, 1]")
            return None
        return number


def _dict_literal(text: str, start: int) -> dict[str, Any] | None:
    """The Python dict literal that opens at text[start] ('{') and closes on the same line, parsed safely."""
    end = text.find("\n", start)
    line = text[start : end if end >= 0 else len(text)]  # at most MAX_LINE_CHARS
    depth = 0
    for i, char in enumerate(line):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                try:
                    with warnings.catch_warnings():  # "invalid escape sequence": a warning line on stderr
                        warnings.simplefilter("ignore")
                        value = ast.literal_eval(line[: i + 1])
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, OverflowError):
                    # TypeError: an unhashable key ({[1]: 2}); ValueError: an int of over 4,300 digits
                    return None
                return value if isinstance(value, dict) else None
    return None


def _kv_pairs(segment: str) -> dict[str, str]:
    """key=value pairs of a config dump ("model='x', tensor_parallel_size=2, ..."). A key opens at a word start
    ((?<!\\w)): tried at every letter of an 8,000-letter word, `\\w+=` would scan the rest of it each time."""
    return {
        m.group(1): m.group(2).strip("'\"")
        for m in re.finditer(
            r"(?<!\w)(\w{1,64})=('[^'\n]{0,8192}'|\"[^\"\n]{0,8192}\"|[^,\s)]{1,8192})",
            segment,
        )
    }


_COUNT_KEYS = (
    "max_model_len",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
)
_TEXT_KEYS = ("kv_cache_dtype", "dtype", "quantization")


def _count(value: object) -> int | None:
    """A positive count as vLLM's arguments print it: 8192, '8192', '32k' / '1M' (binary, as vLLM parses them);
    None for anything else, a count past MAX_COUNT included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_COUNT else None
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(\d{1,13})\s*([kKmM]?)\s*", value)
    if not m:
        return None
    number = int(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[m.group(2).lower()]
    return number if 0 < number <= MAX_COUNT else None


def _int_or_none(value: str | None) -> int | None:
    """A config dump's whole number in 0..MAX_COUNT; None for 'None', 'abc', a 400-digit run."""
    if value is None or not re.fullmatch(r"\d{1,13}", value):
        return None
    number = int(value)
    return number if number <= MAX_COUNT else None


# --- vLLM -----------------------------------------------------------------------------------------------------


def _parse_vllm(r: _Reader) -> None:
    text, log = r.text, r.log
    s, f = log.settings, log.figures
    m = r.search(r"LLM engine \(v([\w.+\-]{1,64})\)") or r.search(r"vLLM API server version ([\w.+\-]{1,64})")
    if m:
        log.engine_version = m.group(1)
    args_at = text.find("non-default args: {")
    args = _dict_literal(text, args_at + len("non-default args: ")) if args_at >= 0 else None
    if args:
        for key in _COUNT_KEYS:
            if key in args and (count := _count(args[key])) is not None:
                s[key] = count
        if "gpu_memory_utilization" in args:
            fraction = r.fraction(args["gpu_memory_utilization"], "gpu_memory_utilization")
            if fraction is not None:
                s["gpu_memory_utilization"] = fraction
        for key in _TEXT_KEYS:
            if isinstance(args.get(key), str):
                s[key] = args[key]
        if "kv_cache_memory_bytes" in args and (count := _count(args["kv_cache_memory_bytes"])) is not None:
            s["kv_cache_memory_bytes"] = count
        # no CUDA graphs; no encoders (0.17+); whole experts per rank
        for switch in ("enforce_eager", "language_model_only", "enable_expert_parallel", "skip_mm_profiling"):
            if args.get(switch) is True:
                s[switch] = True
        if isinstance(limits := args.get("limit_mm_per_prompt"), dict):
            with contextlib.suppress(UsageError, TypeError, ValueError):  # one the flag would refuse: left out
                s["limit_mm_per_prompt"] = parse_mm_limits(json.dumps(limits)).given
        model = args.get("model") or args.get("model_tag")
        if isinstance(model, str):
            log.model = model
    m = r.search(r"LLM engine \(v[^)\n]{0,64}\) with config: ([^\n]*)")
    if m:
        cfg = _kv_pairs(m.group(1))
        log.model = log.model or cfg.get("model")
        for key, name in (
            ("max_seq_len", "max_model_len"),
            ("tensor_parallel_size", "tensor_parallel_size"),
            ("pipeline_parallel_size", "pipeline_parallel_size"),
        ):
            value = _int_or_none(cfg.get(key))
            if value:  # 0 is no length nor parallel size
                s.setdefault(name, value)
        for key in ("kv_cache_dtype", "quantization"):
            if cfg.get(key) not in (None, "None"):
                s.setdefault(key, cfg[key])
        if cfg.get("dtype"):
            s.setdefault("dtype", cfg["dtype"].replace("torch.", ""))
        if cfg.get("enforce_eager") == "True":
            s.setdefault("enforce_eager", True)
    m = r.search(r"max_num_batched_tokens=<N>") or r.search(r"Defaulting max_num_batched_tokens to <N>")
    if m and (count := r.count(m.group(1), "max_num_batched_tokens", positive=True)) is not None:
        s.setdefault("max_num_batched_tokens", count)
    m = r.search(r"Defaulting max_num_seqs to <N>")
    if m and (count := r.count(m.group(1), "max_num_seqs", positive=True)) is not None:
        s.setdefault("max_num_seqs", count)
    m = (
        r.search(r"Requested memory: <F> \(util\)")
        or r.search(r"gpu_memory_utilization[= ]\(?([\d.]{1,64})")
        or r.search(r"gpu_memory_utilization {1,64}([\d.]{1,64})")
    )
    if m and "gpu_memory_utilization" not in s:
        fraction = r.fraction(m.group(1), "gpu_memory_utilization")
        if fraction is not None:
            s["gpu_memory_utilization"] = fraction
    r.figure("weights_gib", r"Model loading took <F> ?Gi?B")
    r.figure("weights_gib", r"Loading model weights took <F> ?Gi?B")
    # vLLM 0.34's extensible KV cache sizes the pool after warm-up (v1/worker/extensible_kv_cache.py
    # measure_kv_cache_blocks): "Memory after warmup: F GiB free, C GiB committed to the KV cache, K GiB kept for
    # transient activations (P GiB allocated at peak, G GiB of torch reservation growth); N KV cache blocks (S GiB)
    # fit within the requested R GiB." S is the pool; "Available KV cache memory" is then only the address space
    # reserved at utilisation 1.0, kept apart as kv_reservation_gib.
    m = r.search(
        r"Memory after warmup: <F> GiB free, <F> GiB committed to the KV cache, <F> GiB kept for transient "
        r"activations \(<F> GiB allocated at peak, <F> GiB of torch reservation growth\); <N> KV cache blocks "
        r"\(<F> GiB\)"
    )
    if m:
        pool = r.value(m.group(7), "available_kv_gib")
        if pool is not None:
            f["available_kv_gib"] = pool
            s["kv_sizing"] = "measured"
        reserved = r.search(r"Available KV cache memory: <F> ?GiB")
        reservation = r.value(reserved.group(1), "kv_reservation_gib", signed=True) if reserved else None
        if reservation is not None:
            f["kv_reservation_gib"] = reservation
    m = r.search(r"Free memory on device \(<F>/<F> GiB\) on startup")
    if m:
        free, total = r.value(m.group(1), "initial_free_gib"), r.value(m.group(2), "total_memory_gib")
        if free is not None:
            f.setdefault("initial_free_gib", free)
        if total is not None:
            f.setdefault("total_memory_gib", total)
    for pattern in (
        r"Available KV cache memory: <F> ?GiB",
        r"kv_cache_size=<F>GiB",
        r"reserved for KV Cache is <F> ?GiB",
        r"available_kv_cache_memory {1,64}<F> ?GiB",
    ):
        m = r.search(pattern)
        if m and "available_kv_gib" not in f:
            number = r.value(m.group(1), "available_kv_gib", signed=True)
            if number is not None and number < 0:  # vLLM then raises "No available memory for the cache blocks"
                log.failure = log.failure or f"the engine had no memory for the KV cache ({_line_at(text, m.start())})"
            elif number is not None:
                f["available_kv_gib"] = number
    r.figure("weights_gib", r"model weights take {1,64}<F> ?GiB")
    r.figure("total_memory_gib", r"total_memory=<F>GiB")
    r.figure("total_memory_gib", r"total_gpu_memory=<F>GiB")
    r.figure("total_memory_gib", r"total_gpu_memory \(<F>GiB\)")
    r.figure("total_memory_gib", r"total_gpu_memory {1,64}<F>GiB")
    r.figure("initial_free_gib", r"free_memory=<F>GiB")
    r.figure("activation_peak_gib", r"torch peak memory increase: <F> ?GiB")
    r.figure("activation_peak_gib", r"activation peak memory takes <F> ?GiB")
    r.figure("non_torch_gib", r"non-torch forward increase memory: <F> ?GiB")
    r.figure("non_torch_gib", r"non_torch_memory=<F>GiB")
    r.figure("non_torch_gib", r"non-torch memory takes <F> ?GiB")
    r.figure("non_torch_gib", r"non_torch_memory(?: takes)? {1,64}<F> ?GiB")
    r.figure("activation_peak_gib", r"PyTorch activation peak memory(?: takes)? {1,64}<F> ?GiB")
    # v1/worker/gpu_worker.py's advice after CUDA-graph capture: "Actual usage is W GiB for weight, A GiB for peak
    # activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory" (0.10.2); later "C GiB for consumed
    # memory (weights + non-torch), A GiB for peak activation, and G GiB for CUDAGraph memory" (0.33, 0.34).
    r.figure(
        "activation_peak_gib",
        r"GiB for (?:weight|consumed memory \(weights \+ non-torch\)), <F> GiB for peak activation",
    )
    r.figure("non_torch_gib", r"GiB for peak activation, <F> GiB for non-torch memory")
    r.figure("cuda_graph_estimate_gib", r"Estimated CUDA graph memory: <F> GiB total")
    # signed: capture can end with less in use than it began with (-0.03 GiB on a DGX Spark, 0.11.0)
    r.figure("cuda_graph_gib", r"Graph capturing finished in [\d.]{1,32} secs?, took <F> GiB", signed=True)
    r.figure("pool_tokens", r"GPU KV cache size: <N> tokens")
    # the encoder's part of the profile run (v1/worker/gpu_model_runner.py profile_run, 0.8.5+)
    m = r.search(
        r"Encoder cache will be initialized with a budget of <N> tokens, and profiled with <N> (\w{1,32}) items"
    )
    if m:
        budget, items = r.count(m.group(1), "encoder_budget_tokens"), r.count(m.group(2), "mm_profile_items")
        if budget is not None and items is not None:
            f["encoder_budget_tokens"], f["mm_profile_items"] = float(budget), float(items)
            s.setdefault("mm_profile_modality", m.group(3))
    # "# GPU blocks: N" (V0) and "GPU blocks: N"; the leading '#' is matched literally, not as an option, so
    # that the pattern opens with a literal.
    r.figure("gpu_blocks", r"GPU blocks: <N>")
    r.figure("gpu_blocks", r"# (?:CUDA|cuda) blocks: <N>")
    m = r.search(r"Maximum concurrency for <N> tokens per request: <F>x")
    if m:
        model_len = r.count(m.group(1), "max_model_len", positive=True)
        concurrency = r.value(m.group(2), "max_concurrency_x")
        if model_len is not None:
            s.setdefault("max_model_len", model_len)
        if concurrency is not None:
            f["max_concurrency_x"] = concurrency
    # Pipeline stages profile separately and the pool takes the smallest (v1/engine/core.py: num_gpu_blocks =
    # min over workers); rank 0 prints its own "Available KV cache memory", the DEBUG lines give every stage's.
    non_kv = [
        number
        for raw in re.findall(_expand(r"Total non KV cache memory: <F> ?GiB"), text)
        if (number := r.value(raw, "non-KV memory")) is not None
    ]
    m = r.search(r"Requested memory: [\d.]{1,32} \(util\), <F> GiB")
    requested = r.value(m.group(1), "requested memory") if m else None
    if requested is not None and len(non_kv) > 1:
        least = round(requested - max(non_kv), 2)
        if least >= 0 and abs(least - f.get("available_kv_gib", least)) > 0.011:  # workers differ (pipeline stages)
            f["available_kv_min_gib"] = least
    # Every worker logs its own "Available KV cache memory" and, from its own config, "GPU KV cache size" and
    # "Maximum concurrency" (0.10.x, Ray and multiprocessing alike); unify_kv_cache_configs (v1/core/
    # kv_cache_utils.py, 0.10.1.1) then gives every worker the smallest num_blocks, so the pool is the least.
    _least_of_workers(r, text)
    # The card's name, where a kernel-config path prints it (fused_moe/configs/E=..,device_name=NVIDIA_L4.json).
    m = r.search(r"device_name=([A-Za-z0-9_\-]{1,128}?)(?:,|\.json|\s)")
    if m:
        s["gpu_name"] = m.group(1).replace("_", " ")
    m = r.search(r"vllm serve (\S{1,512})")
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


def _parse_sglang(r: _Reader) -> None:
    log = r.log
    s, f = log.settings, log.figures
    m = r.search(r"ServerArgs\(([^\n]*)") or r.search(r"ServerArgs: ([^\n]*)")
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
            fraction = r.fraction(cfg["mem_fraction_static"], "mem_fraction_static")
            if fraction is not None:
                s["mem_fraction_static"] = fraction
        if cfg.get("kv_cache_dtype"):
            s["kv_cache_dtype"] = cfg["kv_cache_dtype"]
    # The launch command, when the log quotes it (sglang.launch_server ... --mem-fraction-static 0.5 --tp 4).
    m = r.search(r"--mem-fraction-static[= ]<F>")
    if m and "mem_fraction_static" not in s:
        fraction = r.fraction(m.group(1), "mem_fraction_static")
        if fraction is not None:
            s["mem_fraction_static"] = fraction
    m = r.search(r"--(?:tp|tp-size|tensor-parallel-size)[= ]<N>")
    if m and (count := r.count(m.group(1), "tp_size", positive=True)) is not None:
        s.setdefault("tp_size", count)
    m = r.search(r"--model(?:-path)?[= ](\S{1,512})")
    if m and log.model is None:
        log.model = m.group(1)
    m = r.search(r"sglang[= \t]{1,8}v?(\d{1,8}\.\d{1,8}\.\d{1,8}[\w.]{0,32})")
    if m:
        log.engine_version = m.group(1)
    r.figure("free_before_load_gb", r"Load weight begin\. avail mem=<F> GB")
    # "Load weight end. [elapsed=.., ]type=.., dtype=.., avail mem=X GB[, mem usage=Y GB]." The fields before
    # "avail mem" are matched one "key=value," at a time: a lazy .*? would rescan the rest of the line from
    # every "Load weight end." a line repeats.
    m = r.search(r"Load weight end\.(?: \w{1,32}=[^,\n]{0,128},){0,8} avail mem=<F> GB(?:, mem usage=<F> GB)?")
    if m and (free := r.value(m.group(1), "free_after_load_gb")) is not None:
        f["free_after_load_gb"] = free
    if m and m.group(2) and (used := r.value(m.group(2), "weights_gb")) is not None:
        f["weights_gb"] = used
    m = r.search(r"KV Cache is allocated\. #tokens: <N>, K size: <F> GB, V size: <F> GB")
    if m:
        tokens = r.count(m.group(1), "pool_tokens")
        k, v = r.value(m.group(2), "k_size_gb"), r.value(m.group(3), "v_size_gb")
        if tokens is not None:
            f["pool_tokens"] = float(tokens)
        if k is not None and v is not None:
            f["k_size_gb"], f["v_size_gb"] = k, v
    else:
        m = r.search(r"KV Cache is allocated\. #tokens: <N>, KV size: <F> GB")
        if m:  # MLA: one latent cache
            tokens, kv = r.count(m.group(1), "pool_tokens"), r.value(m.group(2), "kv_size_gb")
            if tokens is not None:
                f["pool_tokens"] = float(tokens)
            if kv is not None:
                f["kv_size_gb"] = kv
        m = r.search(r"KV Cache is allocated\. K size: <F> GB, V size: <F> GB")
        if m:  # ~0.4.1: no token count on this line (max_total_num_tokens= follows)
            k, v = r.value(m.group(1), "k_size_gb"), r.value(m.group(2), "v_size_gb")
            if k is not None and v is not None:
                f["k_size_gb"], f["v_size_gb"] = k, v
    r.figure("pool_tokens", r"max_total_num_tokens=<N>")
    if "weights_gb" not in f and "free_before_load_gb" in f and "free_after_load_gb" in f:
        f["weights_gb"] = round(f["free_before_load_gb"] - f["free_after_load_gb"], 2)
    m = r.search(r"max_running_requests=<N>")
    if m and (count := r.count(m.group(1), "max_running_requests")) is not None:
        f["max_running_requests"] = float(count)
    m = r.search(r"context_len=<N>")
    if m and (count := r.count(m.group(1), "context_len", positive=True)) is not None:
        s.setdefault("context_length", count)


# --- llama.cpp ------------------------------------------------------------------------------------------------

_HPARAMS = ("n_layer", "n_head_kv", "n_embd_head_k", "n_embd_head_v", "n_swa", "n_ctx_train", "n_embd")
_CACHE_LINE = re.compile(
    _expand(
        r"(?:llama_kv_cache(?:_unified)?|llama_kv_cache_init): size = {1,64}<F> MiB \( {0,64}(\d{1,64}) cells, "
        r"{1,64}(\d{1,64}) layers, {1,64}(\d{1,64})(?:/\d{1,64})? seqs\), K \((\w{1,32})\): {1,64}<F> MiB, "
        r"V \((\w{1,32})\): {1,64}<F> MiB"
    )
)


def _parse_llamacpp(r: _Reader) -> None:
    text, log = r.text, r.log
    s, f = log.settings, log.figures
    m = r.search(r"build: (\d{1,12}) \((\w{1,64})\)")
    if m:
        log.engine_version = f"b{m.group(1)}"
    for name in _HPARAMS:
        m = r.search(rf"(?:print_info|llm_load_print_meta): {name} {{1,64}}= <N>")
        if m and (count := r.count(m.group(1), name)) is not None:
            log.hparams[name] = count
    m = r.search(r"print_info: general\.name {1,64}= ([^\n]{1,512})") or r.search(
        r"general\.name str {1,64}= ([^\n]{1,512})"
    )
    if m:
        log.model = m.group(1).strip() or None
    for name in ("n_ctx", "n_seq_max", "n_ubatch", "n_batch"):
        m = r.search(rf"(?:llama_context|llama_new_context_with_model): {name} {{1,64}}= <N>")
        if m and (count := r.count(m.group(1), name)) is not None:
            s[name] = count
    m = r.search(r"llama_context: kv_unified {1,64}= (\w{1,16})")
    if m:
        s["kv_unified"] = m.group(1) == "true"
    swa_flags = [
        m.group(1) for m in re.finditer(r"llama_kv_cache(?:_unified)?_iswa: creating {1,64}(non-SWA|SWA)", text)
    ]
    for i, cm in enumerate(_CACHE_LINE.finditer(text)):
        swa = (swa_flags[i] == "SWA") if i < len(swa_flags) else None
        size, k_mib, v_mib = (r.value(cm.group(n), "KV cache size (MiB)") for n in (1, 6, 8))
        cells, layers, seqs = (r.count(cm.group(n), "KV cache cells / layers / seqs") for n in (2, 3, 4))
        if size is None or k_mib is None or v_mib is None or cells is None or layers is None or seqs is None:
            continue
        log.caches.append(
            LlamaCppCache(
                size_mib=size,
                cells=cells,
                layers=layers,
                seqs=seqs,
                k_type=cm.group(5),
                k_mib=k_mib,
                v_type=cm.group(7),
                v_mib=v_mib,
                swa=swa,
            )
        )
    if log.caches:
        f["kv_size_mib"] = sum(c.size_mib for c in log.caches)
        f["kv_cells"] = float(sum(c.cells for c in log.caches))
    else:
        m = r.search(
            r"KV self size {1,64}= {1,64}<F> MiB, K \((\w{1,32})\): {1,64}<F> MiB, V \((\w{1,32})\): {1,64}<F> MiB"
        )
        if m and (size := r.value(m.group(1), "KV self size")) is not None:
            f["kv_size_mib"] = size
            s["type_k"], s["type_v"] = m.group(2), m.group(4)


# --- TensorRT-LLM ---------------------------------------------------------------------------------------------


def _parse_trtllm(r: _Reader) -> None:
    log = r.log
    s, f = log.settings, log.figures
    m = r.search(r"TensorRT-LLM version: ([\w.]{1,64})") or r.search(
        r"tensorrt_llm[= \t]{1,8}v?(\d{1,8}\.\d{1,8}[\w.]{0,32})"
    )
    if m:
        log.engine_version = m.group(1)
    m = r.search(r"Allocated <F> GiB for max tokens in paged KV cache \(<N>\)")
    if m:
        gib, tokens = r.value(m.group(1), "kv_allocated_gib"), r.count(m.group(2), "pool_tokens")
        if gib is not None and tokens is not None:
            f["kv_allocated_gib"], f["pool_tokens"] = gib, float(tokens)
    m = r.search(r"Allocate <N> bytes for k/v cache")
    if m and (count := r.count(m.group(1), "kv_allocated_bytes")) is not None:
        f["kv_allocated_bytes"] = float(count)
    r.figure("pool_tokens", r"Using <N> tokens in paged KV cache")
    r.figure("gpu_blocks", r"Number of blocks in KV cache primary pool: <N>")
    r.figure("runtime_buffers_gib", r"Allocated <F> GiB for runtime buffers")
    r.figure("decoder_gib", r"Allocated <F> GiB for decoder")
    m = r.search(r"Memory usage when calculating max tokens in paged kv cache: total: <F> GiB, available: <F> GiB")
    if m:
        total, free = r.value(m.group(1), "total_memory_gib"), r.value(m.group(2), "free_for_kv_gib")
        if total is not None and free is not None:
            f["total_memory_gib"], f["free_for_kv_gib"] = total, free
    m = r.search(r"tokens_per_block[\"']?[:=][ \t]{0,8}<N>")
    if m and (count := r.count(m.group(1), "tokens_per_block", positive=True)) is not None:
        s["tokens_per_block"] = count


_PARSERS = {"vllm": _parse_vllm, "sglang": _parse_sglang, "llamacpp": _parse_llamacpp, "trtllm": _parse_trtllm}


def parse_log(text: str) -> EngineLog | None:
    """The engine, scenario and figures of a start-up log; None when no engine's lines are in it. Linear in the
    text whatever it holds (see the module's docstring)."""
    engine = detect_engine(text)
    if engine is None:
        return None
    log = EngineLog(engine=engine)
    matched, cut = _bounded_lines(text)
    reader = _Reader(matched, log)
    _PARSERS[engine](reader)
    log.failure = find_failure(matched) or log.failure  # the engine's own words first
    if reader.ignored > MAX_IGNORED_NOTES:
        log.notes.append(f"{reader.ignored - MAX_IGNORED_NOTES} more figures left out (not usable numbers)")
    if cut:
        log.notes.append(
            f"{cut} line{'s' if cut > 1 else ''} longer than {MAX_LINE_CHARS // 1024} KiB cut to "
            f"{MAX_LINE_CHARS // 1024} KiB before reading"
        )
    return log
