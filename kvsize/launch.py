"""The engine's own launch command for a scenario kvsize sized (`--emit ENGINE`). Pure: scenario + engine + release
-> argv + notes.

Every flag is one the release's argument parser accepts, spelled as that parser spells it: the lists are data,
kvsize/data/engine_flags/<engine>.json, read from each release's source (vLLM `vllm/engine/arg_utils.py
EngineArgs.add_cli_args` and the config dataclasses it expands; SGLang `srt/server_args.py
ServerArgs.add_cli_args`; llama.cpp `common/arg.cpp`; TensorRT-LLM `tensorrt_llm/commands/serve.py`), each list
naming its file and release. A setting the release has no flag for (or no value for) is left out with a note;
nothing is guessed.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from kvsize.dtypes import KvDtype, dtype_from_torch_name
from kvsize.errors import UsageError

EMIT_ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")

# llama.cpp trees by the era that sizes them (kvsize/engines/llamacpp_releases.py): the llama-cpp-python versions
# whose vendored arg.cpp was read; an era known only from start-up logs takes the flags both neighbours accept.
LLAMACPP_TREES = {
    "2025-03": ("0.3.8",),
    "2025-05": ("0.3.9",),
    "6209": ("0.3.16",),
    "2025-08": ("0.3.16",),
    "7445": ("0.3.16", "0.3.20"),
    "2026-04": ("0.3.20",),
    "9665": ("0.3.30",),
    "2026-06": ("0.3.30",),
    "11312": ("0.3.36",),
    "2026-10": ("0.3.36",),
}
LLAMACPP_ALL_LAYERS = "999"  # -ngl: every layer on the GPU (llama.cpp clamps to the model's layers)

# Each engine's spelling of a KV dtype, by kvsize format: the first the release's --kv-cache-dtype choices hold.
KV_NAMES: dict[str, dict[KvDtype, tuple[str, ...]]] = {
    "vllm": {  # vllm/config/cache.py CacheDType (fp8 is e4m3 on CUDA)
        KvDtype.FP16: ("float16",),
        KvDtype.BF16: ("bfloat16",),
        KvDtype.FP8_E4M3: ("fp8_e4m3", "fp8"),
        KvDtype.FP8_E5M2: ("fp8_e5m2",),
        KvDtype.NVFP4: ("nvfp4",),
        KvDtype.INT8_PER_TOKEN_HEAD: ("int8_per_token_head",),
        KvDtype.FP8_PER_TOKEN_HEAD: ("fp8_per_token_head",),
        KvDtype.INT4_PER_TOKEN_HEAD: ("int4_per_token_head",),
        KvDtype.FP8_DS_MLA: ("fp8_ds_mla",),
        KvDtype.NVFP4_DS_MLA: ("nvfp4_ds_mla",),
    },
    "sglang": {  # server_args.py --kv-cache-dtype choices (nvfp4 was fp4_e2m1 until 0.5.20)
        KvDtype.BF16: ("bf16", "bfloat16"),
        KvDtype.FP8_E4M3: ("fp8_e4m3",),
        KvDtype.FP8_E5M2: ("fp8_e5m2",),
        KvDtype.NVFP4: ("nvfp4", "fp4_e2m1"),
    },
    "llamacpp": {  # common/arg.cpp kv_cache_types
        KvDtype.FP32: ("f32",),
        KvDtype.FP16: ("f16",),
        KvDtype.BF16: ("bf16",),
        KvDtype.Q8_0: ("q8_0",),
        KvDtype.Q4_0: ("q4_0",),
        KvDtype.Q4_1: ("q4_1",),
        KvDtype.IQ4_NL: ("iq4_nl",),
        KvDtype.Q5_0: ("q5_0",),
        KvDtype.Q5_1: ("q5_1",),
    },
    "trtllm": {KvDtype.FP8_E4M3: ("fp8",), KvDtype.NVFP4: ("nvfp4",)},  # llmapi KvCacheConfig.dtype
}
# --dtype (vLLM ModelDType, SGLang's --dtype choices) by the checkpoint's dtype.
MODEL_DTYPE_NAMES = {KvDtype.BF16: "bfloat16", KvDtype.FP16: "float16", KvDtype.FP32: "float32"}
ONLINE_FP8 = frozenset({"fp8", "fp8_e4m3"})  # --weights-dtype that vLLM / SGLang's --quantization fp8 serves


@dataclass(frozen=True)
class ReleaseFlags:
    """The flags one engine release accepts (`flags`), the switches among them that take no value (`bare`), the
    values of a few (`choices`), where they were read (`source`) and a note when the release itself was not."""

    release: str
    flags: frozenset[str]
    source: str
    bare: frozenset[str] = frozenset()
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str | None = None


@cache
def _table(engine: str) -> dict[str, Any]:
    text = resources.files("kvsize").joinpath("data", "engine_flags", f"{engine}.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def _releases(engine: str) -> dict[str, ReleaseFlags]:
    """Each read release's flags: the first release's list, then each one's `added` less `removed`."""
    out: dict[str, ReleaseFlags] = {}
    flags: set[str] = set()
    for release, row in _table(engine)["releases"].items():
        flags = set(row["flags"]) if "flags" in row else (flags | set(row["added"])) - set(row["removed"])
        out[release] = ReleaseFlags(
            release=release,
            flags=frozenset(flags),
            source=row["source"],
            bare=frozenset(row.get("bare", ())),
            choices={k: tuple(v) for k, v in row["choices"].items()},
        )
    return out


def _merged(engine: str, names: tuple[str, ...], note: str | None) -> ReleaseFlags:
    """What every one of the read releases `names` accepts (one name: that release's lists)."""
    rows = [_releases(engine)[n] for n in names]
    if len(rows) == 1:
        row = rows[0]
        return ReleaseFlags(row.release, row.flags, row.source, row.bare, row.choices, note)
    keys = set.intersection(*(set(r.choices) for r in rows))
    return ReleaseFlags(
        release=f"{names[0]}..{names[-1]}",
        flags=frozenset.intersection(*(r.flags for r in rows)),
        source="; ".join(r.source for r in rows),
        bare=frozenset.intersection(*(r.bare for r in rows)),
        choices={k: tuple(v for v in rows[0].choices[k] if all(v in r.choices[k] for r in rows)) for k in keys},
        note=note,
    )


def release_flags(engine: str, release: str, era: str | None = None) -> ReleaseFlags:
    """The flags of `engine` at `release` (as kvsize resolved it: `engine.version`; `era`: `engine.rules_name`).
    A release read is its own list; one between two read releases takes the flags both accept; one newer than the
    newest read takes the newest's, with a note."""
    from packaging.version import InvalidVersion, Version

    if engine == "llamacpp":
        trees = LLAMACPP_TREES.get(era or "")
        if trees is None:
            raise UsageError(
                f"no llama-server flag list is tabled for llama.cpp {release}",
                hint=f"--emit llamacpp knows the trees of llama-cpp-python {', '.join(_releases('llamacpp'))}.",
            )
        both = " and ".join(f"llama-cpp-python {t}" for t in trees)
        note = None if len(trees) == 1 else f"llama.cpp {release}'s arg.cpp was not read: only flags both {both} accept"
        return _merged(engine, trees, note)
    read = _releases(engine)
    try:
        asked = Version(release)
        order = Version(asked.base_version if asked.is_prerelease or asked.is_devrelease else asked.public)
    except InvalidVersion:
        raise UsageError(f"no {engine} flag list for release '{release[:40]}'") from None
    versions = sorted(read, key=Version)
    if str(order) in read or any(Version(v) == order for v in versions):
        exact = next(v for v in versions if Version(v) == order)
        return _merged(engine, (exact,), None)
    below = [v for v in versions if Version(v) < order]
    above = [v for v in versions if Version(v) > order]
    if not below:
        raise UsageError(
            f"no {engine} flag list for {release}: older than the oldest release read ({versions[0]})",
            hint=f"--emit {engine} knows releases {versions[0]} to {versions[-1]}.",
        )
    if not above:
        return _merged(
            engine, (below[-1],), f"{release} is newer than the newest release read: the flags of {below[-1]}"
        )
    return _merged(
        engine,
        (below[-1], above[0]),
        f"{engine} {release}'s parser was not read: only flags both {below[-1]} and {above[0]} accept",
    )


@dataclass(frozen=True)
class LaunchScenario:
    """What kvsize sized: the scenario and the settings it was sized with (None: the engine's default)."""

    model: str
    ctx: int
    batch: int
    kv_dtype: KvDtype
    model_dtype: str
    """The checkpoint's dtype (ArchSpec.model_dtype)."""
    tp: int = 1
    pp: int = 1
    utilization: float | None = None
    """The share of the card the budget used (KvBudget.utilization: gpu_memory_utilization, mem_fraction_static,
    free_gpu_memory_fraction)."""
    kv_memory_bytes: int | None = None
    """--kv-memory: the KV memory per GPU, given."""
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    prefix_caching: bool | None = None
    enforce_eager: bool = False
    """vLLM --enforce-eager, as the budget was sized (no CUDA graphs)."""
    language_model_only: bool = False
    """vLLM --language-model-only, as the budget was sized (no towers, no encoder profile)."""
    expert_parallel: bool = False
    """vLLM --enable-expert-parallel, as the budget was sized."""
    mm_limits: str | None = None
    """vLLM --limit-mm-per-prompt's JSON, as the budget was sized."""
    skip_mm_profiling: bool = False
    """vLLM --skip-mm-profiling, as the budget was sized."""
    multimodal: bool = False
    """The model takes images, video or audio (ArchSpec.is_multimodal)."""
    quant_method: str | None = None
    """The checkpoint's quantization_config.quant_method (None: an unquantized checkpoint)."""
    weights_dtype: str | None = None
    revision: str | None = None
    hf_overrides: str | None = None
    kv_cache_dtype_skip_layers: str | None = None
    # llama.cpp's context settings, as the engine sized them
    kv_unified: bool = False
    flash_attn: bool | None = None
    swa_full: bool = False
    n_ubatch: int | None = None
    n_batch: int | None = None


def checkpoint_quantization(raw: Mapping[str, Any]) -> str | None:
    """The checkpoint's quantization method (config.json quantization_config.quant_method), None for none."""
    quant = raw.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = quant.get("quant_method")
    return str(method).strip().lower() if method else None


def scenario_of(
    model: str, scenario: Any, spec: Any, raw: Mapping[str, Any], engine: Any, **given: Any
) -> LaunchScenario:
    """The LaunchScenario of one sized `scenario` (kvsize.api.Scenario) under `engine` (the Engine that sized it):
    its ctx, batch, KV dtype and parallelism; the running-request cap the engine applied; prefix caching as the
    engine had it; llama.cpp's context switches; `given`: the budget's utilisation and the settings stated."""
    caps = engine.max_running_requests(spec, scenario.ctx, scenario.tp, scenario.pp)
    prefix = given.pop("prefix_caching", None)
    if prefix is None and engine.name in ("vllm", "sglang", "trtllm"):
        prefix = engine.prefix_caching_enabled(spec)
    return LaunchScenario(
        model=model,
        ctx=scenario.ctx,
        batch=scenario.batch,
        kv_dtype=scenario.kv_dtype,
        model_dtype=spec.model_dtype,
        tp=scenario.tp,
        pp=scenario.pp,
        max_num_seqs=caps,
        prefix_caching=prefix,
        quant_method=checkpoint_quantization(raw),
        kv_unified=bool(getattr(engine, "kv_unified", False)),
        flash_attn=getattr(engine, "flash_attn", None),
        swa_full=bool(getattr(engine, "swa_full", False)),
        n_ubatch=getattr(engine, "n_ubatch_param", None) if given.get("n_ubatch") else None,
        n_batch=getattr(engine, "n_batch_param", None) if given.get("n_batch") else None,
        **{k: v for k, v in given.items() if k not in ("n_ubatch", "n_batch")},
    )


@dataclass(frozen=True)
class Launch:
    """The launch command: `argv` (the program first), the notes on what was left out, and for TensorRT-LLM the
    YAML its --extra_llm_api_options file must hold (`config_file`: name, text)."""

    engine: str
    release: str
    argv: tuple[str, ...]
    notes: tuple[str, ...]
    flags_source: str
    config_file: tuple[str, str] | None = None

    @property
    def line(self) -> str:
        """One copy-pasteable shell line."""
        return shlex.join(self.argv)

    def text(self) -> str:
        lines = [self.line, *(f"# note: {n}" for n in self.notes)]
        if self.config_file is not None:
            name, yaml = self.config_file
            lines += [f"# {name}:", *(f"#   {row}" for row in yaml.splitlines())]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "engine": self.engine,
            "release": self.release,
            "argv": list(self.argv),
            "command": self.line,
            "notes": list(self.notes),
            "flags_source": self.flags_source,
        }
        if self.config_file is not None:
            out["config_file"] = {"name": self.config_file[0], "yaml": self.config_file[1]}
        return out


class _Builder:
    """argv built flag by flag: a flag the release lacks, or a value outside its choices, becomes a note."""

    def __init__(self, engine: str, flags: ReleaseFlags, argv: list[str]) -> None:
        self.engine, self.flags, self.argv, self.notes = engine, flags, argv, list[str]()
        self.label = f"{engine} {flags.release}"

    def add(self, flag: str, value: object = None, *, what: str) -> bool:
        if flag not in self.flags.flags:
            self.notes.append(f"{what} left out: {self.label} has no {flag}")
            return False
        shown = None if value is None else _text(value)
        allowed = self.flags.choices.get(flag)
        if shown is not None and allowed is not None and shown not in allowed:
            self.notes.append(f"{what} left out: {self.label}'s {flag} does not take {shown}")
            return False
        self.argv += [flag] if shown is None else [flag, shown]
        return True

    def kv_name(self, s: LaunchScenario, flag: str) -> str | None:
        """The release's spelling of the KV dtype: auto for the checkpoint's own dtype, else the first of the
        engine's names the release's choices hold."""
        if s.kv_dtype == dtype_from_torch_name(s.model_dtype):
            return "auto"
        names = KV_NAMES[self.engine].get(s.kv_dtype, ())
        allowed = self.flags.choices.get(flag)
        found = next((n for n in names if allowed is None or n in allowed), None)
        if found is None:
            self.notes.append(f"KV dtype {s.kv_dtype.value} left out: {self.label} has no name for it")
        return found


def _text(value: object) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _model_dtype(s: LaunchScenario) -> str | None:
    dtype = dtype_from_torch_name(s.model_dtype)
    return MODEL_DTYPE_NAMES.get(dtype) if dtype is not None else None


def _quantization(b: _Builder, s: LaunchScenario, flag: str) -> None:
    """--quantization only for a quantized checkpoint (its quant_method) or --weights-dtype fp8 on an unquantized
    one (online fp8); other weight dtypes need a checkpoint quantized to them."""
    if s.quant_method is not None:
        b.add(flag, s.quant_method, what=f"the checkpoint's quantization {s.quant_method}")
    elif s.weights_dtype is not None and s.weights_dtype.strip().lower() in ONLINE_FP8:
        b.add(flag, "fp8", what="online fp8 weights (--weights-dtype fp8)")
    elif s.weights_dtype is not None:
        b.notes.append(
            f"weights were counted at {s.weights_dtype}: serve a checkpoint quantized to it (no flag quantizes "
            "online to it)"
        )


def _stated_utilization(budget: Any) -> float | None:
    """The utilisation a launch command states: the budget's, except vLLM 0.34+'s unset default under the measured
    sizing (1.0 where the warm-up bound decides: CacheConfig.resolved_gpu_memory_utilization), which the command
    leaves unset so that a driver without virtual-memory support keeps vLLM's 0.92 (a stated 1.0 would not)."""
    if budget.engine == "vllm" and budget.start_snapshot_bytes and budget.utilization == 1.0:
        return None
    return float(budget.utilization) if budget.utilization is not None else None


def _vllm(s: LaunchScenario, flags: ReleaseFlags) -> _Builder:
    b = _Builder("vllm", flags, ["vllm", "serve", s.model])
    if s.revision:
        b.add("--revision", s.revision, what="--revision")
    b.add("--tensor-parallel-size", s.tp, what="tensor parallelism")
    b.add("--pipeline-parallel-size", s.pp, what="pipeline parallelism")
    b.add("--max-model-len", s.ctx, what="the context")
    if s.kv_memory_bytes is not None:
        b.add("--kv-cache-memory-bytes", s.kv_memory_bytes, what="the KV memory (--kv-memory)")
    elif s.utilization is not None:
        b.add("--gpu-memory-utilization", s.utilization, what="the memory utilisation")
    if (kv := b.kv_name(s, "--kv-cache-dtype")) is not None:
        b.add("--kv-cache-dtype", kv, what="the KV dtype")
    if s.max_num_seqs is not None:
        b.add("--max-num-seqs", s.max_num_seqs, what="the running-request cap")
    if s.max_num_batched_tokens is not None:
        b.add("--max-num-batched-tokens", s.max_num_batched_tokens, what="the scheduler's token budget")
    if s.prefix_caching is not None:
        flag = "--enable-prefix-caching" if s.prefix_caching else "--no-enable-prefix-caching"
        b.add(flag, what="prefix caching")
    if s.enforce_eager:
        b.add("--enforce-eager", what="eager mode (no CUDA graphs)")
    if s.language_model_only:
        b.add("--language-model-only", what="text only (no encoders)")
    if s.expert_parallel:
        b.add("--enable-expert-parallel", what="expert parallelism")
    if (s.mm_limits or s.skip_mm_profiling) and not s.multimodal:
        # vLLM before the multimodal config was made optional for text models raised on the flag
        # ("limit_mm_per_prompt is only supported for multimodal models"); for a text model it changes nothing
        b.notes.append("--limit-mm-per-prompt / --skip-mm-profiling left out: a text model has no encoder")
    else:
        if s.mm_limits:
            b.add("--limit-mm-per-prompt", s.mm_limits, what="the multimodal limits")
        if s.skip_mm_profiling:
            b.add("--skip-mm-profiling", what="no encoder profile")
    if s.block_size is not None:
        b.add("--block-size", s.block_size, what="the block size")
    if (dtype := _model_dtype(s)) is not None:
        b.add("--dtype", dtype, what="the model dtype")
    _quantization(b, s, "--quantization")
    if s.hf_overrides:
        b.add("--hf-overrides", s.hf_overrides, what="--hf-overrides")
    if s.kv_cache_dtype_skip_layers:
        b.add("--kv-cache-dtype-skip-layers", s.kv_cache_dtype_skip_layers, what="--kv-cache-dtype-skip-layers")
    return b


def _sglang(s: LaunchScenario, flags: ReleaseFlags) -> _Builder:
    b = _Builder("sglang", flags, ["python", "-m", "sglang.launch_server", "--model-path", s.model])
    if s.revision:
        b.add("--revision", s.revision, what="--revision")
    b.add("--tp-size", s.tp, what="tensor parallelism")
    b.add("--pp-size", s.pp, what="pipeline parallelism")
    b.add("--context-length", s.ctx, what="the context")
    if s.kv_memory_bytes is not None:
        b.notes.append("the KV memory (--kv-memory) left out: SGLang sizes its pool in tokens (--max-total-tokens)")
    elif s.utilization is not None:
        b.add("--mem-fraction-static", s.utilization, what="mem_fraction_static")
    if (kv := b.kv_name(s, "--kv-cache-dtype")) is not None:
        b.add("--kv-cache-dtype", kv, what="the KV dtype")
    if s.max_num_seqs is not None:
        b.add("--max-running-requests", s.max_num_seqs, what="the running-request cap")
    if s.max_num_batched_tokens is not None:
        b.add("--chunked-prefill-size", s.max_num_batched_tokens, what="the chunked-prefill size")
    if s.prefix_caching is False:
        b.add("--disable-radix-cache", what="prefix caching off")
    if s.block_size is not None:
        b.add("--page-size", s.block_size, what="the page size")
    if (dtype := _model_dtype(s)) is not None:
        b.add("--dtype", dtype, what="the model dtype")
    _quantization(b, s, "--quantization")
    if s.hf_overrides:
        b.add("--json-model-override-args", s.hf_overrides, what="--json-model-override-args")
    return b


def _llamacpp(s: LaunchScenario, flags: ReleaseFlags) -> _Builder:
    hub_gguf = "/" in s.model and "gguf" in s.model.lower() and not s.model.lower().endswith(".gguf")
    b = _Builder("llamacpp", flags, ["llama-server", "-hf" if hub_gguf else "-m", s.model])
    if not hub_gguf and not s.model.lower().endswith(".gguf"):
        b.notes.append("llama-server loads a GGUF file: give -m the .gguf converted from this model")
    # n_ctx counts the cells of every sequence: -c ctx x batch over -np batch streams (kvsize/engines/llamacpp.py)
    b.add("-c", s.ctx * s.batch, what="the context (ctx x batch)")
    b.add("-np", s.batch, what="the slots")
    if s.kv_unified:
        b.add("-kvu", what="one unified KV cache")
    if (kv := b.kv_name(s, "-ctk")) is not None:
        kv = KV_NAMES["llamacpp"].get(s.kv_dtype, (kv,))[0]  # llama.cpp's default is f16: always name it
        b.add("-ctk", kv, what="the K cache type")
        b.add("-ctv", kv, what="the V cache type")
    if s.flash_attn is not None:
        if "-fa" in flags.bare:  # a switch (off by default) before flash_attn took on|off|auto
            if s.flash_attn:
                b.add("-fa", what="flash attention")
        else:
            b.add("-fa", "on" if s.flash_attn else "off", what="flash attention")
    if s.n_batch is not None:
        b.add("-b", s.n_batch, what="the logical batch")
    if s.n_ubatch is not None:
        b.add("-ub", s.n_ubatch, what="the physical batch")
    if s.swa_full:
        b.add("--swa-full", what="full-size sliding-window caches")
    b.add("-ngl", LLAMACPP_ALL_LAYERS, what="all layers on the GPU")
    if s.tp > 1:
        b.notes.append(f"--tp {s.tp} left out: llama-server has no tensor-parallel size")
    if s.pp > 1:
        b.notes.append(f"llama.cpp splits layers over every visible GPU (-sm layer, its default): show it {s.pp}")
    return b


TRTLLM_CONFIG = "extra_llm_api_options.yaml"


def _trtllm(s: LaunchScenario, flags: ReleaseFlags) -> tuple[_Builder, str | None]:
    b = _Builder("trtllm", flags, ["trtllm-serve", s.model])
    b.add("--backend", "pytorch", what="the PyTorch flow")
    if s.revision:
        b.add("--revision", s.revision, what="--revision")
    b.add("--tp_size", s.tp, what="tensor parallelism")
    b.add("--pp_size", s.pp, what="pipeline parallelism")
    b.add("--max_seq_len", s.ctx, what="the context")
    b.add("--max_batch_size", s.max_num_seqs or s.batch, what="the batch")
    if s.max_num_batched_tokens is not None:
        b.add("--max_num_tokens", s.max_num_batched_tokens, what="the token budget")
    if s.kv_memory_bytes is not None:
        b.notes.append("the KV memory (--kv-memory) left out: trtllm-serve takes a fraction of free memory")
    elif s.utilization is not None:
        b.add("--kv_cache_free_gpu_memory_fraction", s.utilization, what="free_gpu_memory_fraction")
    # KvCacheConfig fields that are no trtllm-serve flag go in the YAML file --extra_llm_api_options reads.
    kv_config: dict[str, str] = {}
    if (kv := b.kv_name(s, "")) is not None and kv != "auto":
        kv_config["dtype"] = kv
    if s.prefix_caching is False:
        kv_config["enable_block_reuse"] = "false"
    if s.block_size is not None:
        kv_config["tokens_per_block"] = str(s.block_size)
    if s.quant_method is None and s.weights_dtype is not None:
        b.notes.append(f"weights were counted at {s.weights_dtype}: serve a checkpoint quantized to it")
    if not kv_config:
        return b, None
    if not b.add("--extra_llm_api_options", TRTLLM_CONFIG, what="the KV cache config file"):
        return b, None
    b.notes.append(
        f"{TRTLLM_CONFIG} holds kv_cache_config fields that are no trtllm-serve flag (llmapi KvCacheConfig; not "
        "re-read at a release tag)"
    )
    return b, "kv_cache_config:\n" + "".join(f"  {k}: {v}\n" for k, v in kv_config.items())


def launch_command(engine: str, release: str, era: str | None, scenario: LaunchScenario) -> Launch:
    """The command that serves `scenario` on `engine` at `release` (engine.version; `era`: engine.rules_name)."""
    name = engine.strip().lower().replace(".", "").replace("-", "")
    if name not in EMIT_ENGINES:
        raise UsageError(f"--emit {engine[:20]}: no launch command for it", hint=f"One of: {', '.join(EMIT_ENGINES)}.")
    flags = release_flags(name, release, era)
    config = None
    if name == "vllm":
        b = _vllm(scenario, flags)
    elif name == "sglang":
        b = _sglang(scenario, flags)
    elif name == "llamacpp":
        b = _llamacpp(scenario, flags)
    else:
        b, yaml = _trtllm(scenario, flags)
        config = (TRTLLM_CONFIG, yaml) if yaml is not None else None
    notes = ([flags.note] if flags.note else []) + b.notes
    return Launch(name, flags.release, tuple(b.argv), tuple(notes), flags.source, config)


def sized_launch(
    model: str,
    scenario: Any,
    loaded: Any,
    options: Mapping[str, Any],
    *,
    gpu: str | None,
    engine_version: str | None,
    kv_memory_bytes: int | None = None,
    revision: str | None = None,
    weights_dtype: str | None = None,
    hf_overrides: str | None = None,
    prefix_caching: bool | None = None,
    kv_cache_dtype_skip_layers: str | None = None,
) -> Launch:
    """The command serving one `scenario` that fits (kvsize.api.Scenario, sized from `loaded` with
    `estimate_loaded(**options)` on `gpu`): the engine rebuilt as it sized it, its scheduler's token budget when
    none was given (vLLM's tier default, which the budget profiled), the budget's utilisation. `--emit` and
    `kvsize check --emit-dir` both build their commands here."""
    from kvsize.api import _gpu_card, engine_context
    from kvsize.budget import BudgetSettings
    from kvsize.config import parse_config
    from kvsize.engines import get_engine

    engine_options = options["engine_options"]
    budget = options.get("budget") or BudgetSettings()  # the vLLM switches the budget was sized with
    card = _gpu_card(gpu, options["gpu_mem"])
    device = card.device if card is not None else None
    rules = get_engine(scenario.engine, engine_version, engine_context(device, engine_options), **engine_options)
    spec = parse_config(loaded.raw, source=loaded.location)
    tokens = engine_options.get("max_num_batched_tokens")
    if tokens is None and hasattr(rules, "scheduler"):  # vLLM: the tier default the budget profiled
        tokens = rules.scheduler(scenario.ctx, scenario.tp, scenario.pp, spec).max_num_batched_tokens
    return launch_command(
        scenario.engine,
        rules.version,
        rules.rules_name,
        scenario_of(
            model,
            scenario,
            spec,
            loaded.raw,
            rules,
            utilization=_stated_utilization(scenario.gpu.budget),
            kv_memory_bytes=kv_memory_bytes,
            max_num_batched_tokens=tokens,
            revision=revision,
            weights_dtype=weights_dtype,
            hf_overrides=hf_overrides,
            prefix_caching=prefix_caching,
            kv_cache_dtype_skip_layers=kv_cache_dtype_skip_layers,
            block_size=engine_options.get("block_size"),
            enforce_eager=budget.enforce_eager,
            language_model_only=budget.language_model_only,
            expert_parallel=budget.expert_parallel,
            mm_limits=budget.mm_limits.given if budget.mm_limits else None,
            skip_mm_profiling=budget.skip_mm_profiling,
            multimodal=spec.is_multimodal,
        ),
    )
