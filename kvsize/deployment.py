"""What a user states about a deployment (parallelism, memory, engine knobs), validated once.

One record, `DeploymentSettings`, and one table of readers, `READERS` (the `kvsize.units` parsers): the CLI
builds the record from the option strings (`from_options`), and a capacity file's deployment validates the same
keys with the same readers (`kvsize.capacity_file` builds its schema from this table), so a value refused on the
command line (`--gpu-mem 0`, `--tp 10**30`, `--gpu-util nan`, `--revision ../x`) is refused in a file too, with
the same message. Field names are the capacity file's keys; `--gpu-mem` is `gpu_mem`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from msgspec import Meta

from kvsize.errors import KvsizeError, UsageError
from kvsize.mm_profile import parse_mm_limits
from kvsize.record import Record
from kvsize.units import (
    MAX_GPUS,
    MAX_TOKENS,
    parse_bandwidth,
    parse_count,
    parse_fraction,
    parse_revision,
    parse_size,
    parse_tokens,
)

Reader = Callable[[Any], Any]


def _size_or_zero(value: Any) -> int:
    return parse_size(value, allow_zero=True)


def _count(what: str, maximum: int | None = None) -> Reader:
    def read(value: Any) -> int:
        return parse_count(value, what) if maximum is None else parse_count(value, what, maximum=maximum)

    return read


def _tokens_or_zero(value: Any) -> int:
    return parse_count(value, "token count", maximum=MAX_TOKENS, allow_zero=True)


def _fraction(value: Any) -> float:
    return parse_fraction(value, "the value")


def _switch(value: Any) -> bool:
    """An engine switch: true or false (a YAML boolean; the CLI's flag), never a string or a number."""
    if not isinstance(value, bool):
        raise UsageError("must be true or false", hint="Write true or false, unquoted")
    return value


def _mm_limits(value: Any) -> str:
    """vLLM --limit-mm-per-prompt: its JSON, or (in a capacity file) the mapping itself; kept as the checked JSON
    (kvsize.mm_profile.MmLimits.given)."""
    import json

    if isinstance(value, Mapping):
        try:
            value = json.dumps(dict(value))
        except (TypeError, ValueError):
            raise UsageError("must map modality names to counts") from None
    if not isinstance(value, str):
        raise UsageError("must be a JSON object or a mapping", hint='e.g. {"video": 0}')
    return parse_mm_limits(value).given


# key -> (reader, what a capacity file may write there, for its JSON Schema)
READERS: dict[str, tuple[Reader, Any]] = {
    "tp": (_count("tensor-parallel size", MAX_GPUS), int | str),
    "pp": (_count("pipeline-parallel size", MAX_GPUS), int | str),
    "gpus": (_count("GPU count", MAX_GPUS), int | str | None),
    "gpu_mem": (parse_size, int | str | None),
    "gpu_util": (_fraction, float | str | None),
    "kv_memory": (parse_size, int | str | None),
    "reserve": (_size_or_zero, int | str | None),
    "weights_mem": (parse_size, int | str | None),
    "weights_mem_per_gpu": (parse_size, int | str | None),
    "max_batched_tokens": (_count("count"), int | str | None),
    "max_num_seqs": (_count("count"), int | str | None),
    "block_size": (_count("count"), int | str | None),
    "ubatch_size": (_count("count"), int | str | None),
    "batch_size": (_count("count"), int | str | None),
    "cpu_mem": (parse_size, int | str | None),
    "link_bandwidth": (parse_bandwidth, float | str | None),
    "encoder_len": (_tokens_or_zero, int | str | None),
    "revision": (parse_revision, str | None),
    "enforce_eager": (_switch, bool | None),
    "language_model_only": (_switch, bool | None),
    "enable_expert_parallel": (_switch, bool | None),
    "skip_mm_profiling": (_switch, bool | None),
    "limit_mm_per_prompt": (_mm_limits, dict[str, Any] | str | None),
}

# Shared readers for a capacity file's requirements (kvsize.capacity_file), as the CLI's options read them.
read_count = _count("count")
read_tokens = parse_tokens
read_fraction = _fraction


def read_tokens_or_zero(value: Any) -> int:
    """--prefix-len: tokens as --ctx reads them (8192, 2k), or 0 for none; never a bool or a fraction."""
    return parse_tokens(value, allow_zero=True)


MAX_REQUESTS = 10**9


def read_positive_number(value: Any) -> float:
    """A positive number of requests on average (min_steady_state_concurrency: 12, 12.5, '12.5'), never a bool,
    nan or inf, at most MAX_REQUESTS."""
    from kvsize.units import parse_number

    return parse_number(value, "the value", maximum=MAX_REQUESTS)


def _doc(text: str) -> Any:
    return Meta(description=text)


class DeploymentSettings(Record, frozen=True, kw_only=True):
    """Parallelism, memory and engine settings of one deployment, shared by the CLI and capacity files."""

    tp: Annotated[int, _doc("Tensor-parallel GPUs per replica (1 to 65,536).")] = 1
    pp: Annotated[int, _doc("Pipeline-parallel stages (1 to 65,536).")] = 1
    gpus: Annotated[int | None, _doc("GPUs in all; replicas = gpus / (tp x pp) multiply the concurrency.")] = None
    gpu_mem: Annotated[int | None, _doc("Memory of a custom card: 24GiB, 80GB, or bytes (at most 1 EiB).")] = None
    gpu_util: Annotated[
        float | None, _doc("Share of the card the engine may use (vLLM gpu_memory_utilization): 0.9 or 90%.")
    ] = None
    kv_memory: Annotated[int | None, _doc("KV memory per GPU as given (skips the budget model).")] = None
    reserve: Annotated[
        int | None, _doc("Memory kept out of the KV budget besides the weights (formula / hf engines).")
    ] = None
    weights_mem: Annotated[
        int | None,
        _doc("The whole model's weights, split over tp x pp, instead of looking them up (--weights-mem-total too)."),
    ] = None
    weights_mem_per_gpu: Annotated[
        int | None, _doc('The weights on each GPU, as vLLM logs them ("Model loading took 7.51 GiB").')
    ] = None
    max_batched_tokens: Annotated[int | None, _doc("Tokens per scheduler step (vLLM max_num_batched_tokens).")] = None
    max_num_seqs: Annotated[int | None, _doc("Most requests the engine runs at once (vLLM max_num_seqs).")] = None
    block_size: Annotated[int | None, _doc("Tokens per KV block (paged engines).")] = None
    ubatch_size: Annotated[int | None, _doc("llama.cpp physical batch (-ub, n_ubatch): sizes the SWA cells.")] = None
    batch_size: Annotated[
        int | None, _doc("llama.cpp logical batch (-b, n_batch); n_ubatch = min(n_batch, n_ubatch).")
    ] = None
    cpu_mem: Annotated[int | None, _doc("CPU DRAM (or disk) offload tier size.")] = None
    link_bandwidth: Annotated[int | None, _doc("GPU <-> offload link in GB/s (bytes per second once validated).")] = (
        None
    )
    encoder_len: Annotated[int | None, _doc("Tokens each cross-attention layer attends to.")] = None
    revision: Annotated[str | None, _doc("Hub revision: a branch, tag or full commit hash.")] = None
    enforce_eager: Annotated[bool | None, _doc("vLLM --enforce-eager: no CUDA graphs.")] = None
    language_model_only: Annotated[bool | None, _doc("vLLM 0.17+ --language-model-only: no encoders, no towers.")] = (
        None
    )
    enable_expert_parallel: Annotated[bool | None, _doc("vLLM --enable-expert-parallel: whole experts per rank.")] = (
        None
    )
    skip_mm_profiling: Annotated[bool | None, _doc("vLLM 0.10.1+ --skip-mm-profiling: no encoder profile.")] = None
    limit_mm_per_prompt: Annotated[
        str | None, _doc('vLLM --limit-mm-per-prompt, e.g. {"video": 0}: the modality profiled, towers at 0.')
    ] = None

    def __post_init__(self) -> None:
        for problem in combination_problems(self):
            raise UsageError(problem)

    @classmethod
    def read(cls, values: Mapping[str, Any]) -> DeploymentSettings:
        """Each given value (None: not given) through its reader. A bad value raises SettingError naming its key."""
        read: dict[str, Any] = {}
        for key, value in values.items():
            if key not in READERS:
                raise SettingError(key, f"unknown setting '{key}'")
            if value is not None:
                try:
                    read[key] = READERS[key][0](value)
                except KvsizeError as exc:
                    raise SettingError(key, reader_message(exc)) from None
        return cls(**read)

    def estimate_options(self, **engine_flags: bool | str | None) -> dict[str, Any]:
        """The keyword options of `kvsize.api.estimate_loaded` these settings stand for; `engine_flags` are
        engine switches (llama.cpp `kv_unified`, `flash_attn`; vLLM `enable_prefix_caching`,
        `kv_cache_dtype_skip_layers`) passed through to the engine."""
        from kvsize.budget import BudgetSettings

        return {
            "tp": self.tp,
            "pp": self.pp,
            "gpu_mem": self.gpu_mem,
            "reserve_bytes": self.reserve,
            "weights_bytes": self.weights_mem,
            "weights_bytes_per_gpu": self.weights_mem_per_gpu,  # stays per GPU when a suggestion changes tp
            "encoder_len": self.encoder_len,
            "engine_options": {
                "block_size": self.block_size,
                "max_num_batched_tokens": self.max_batched_tokens,
                "max_num_seqs": self.max_num_seqs,
                "n_ubatch": self.ubatch_size,
                "n_batch": self.batch_size,
                **engine_flags,
            },
            "budget": BudgetSettings(
                gpu_util=self.gpu_util,
                kv_memory_bytes=self.kv_memory,
                max_batched_tokens=self.max_batched_tokens,
                enforce_eager=bool(self.enforce_eager),
                language_model_only=bool(self.language_model_only),
                expert_parallel=bool(self.enable_expert_parallel),
                skip_mm_profiling=bool(self.skip_mm_profiling),
                mm_limits=None if self.limit_mm_per_prompt is None else parse_mm_limits(self.limit_mm_per_prompt),
            ),
            "offload": (self.cpu_mem, self.link_bandwidth) if self.cpu_mem is not None else None,
        }


class SettingError(UsageError):
    """A deployment setting its reader refused; `key` is the capacity file's key (`gpu_mem`)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def reader_message(exc: KvsizeError) -> str:
    """A reader's error as one sentence with its hint ("... must be above 0. Use 24GiB or bytes")."""
    return f"{exc}. {exc.hint.rstrip('.')}" if exc.hint else str(exc)


def combination_problems(settings: Any) -> list[str]:
    """Settings that are fine one by one but not together (a capacity file's deployment is checked alike)."""
    problems = []
    if settings.weights_mem is not None and settings.weights_mem_per_gpu is not None:
        problems.append("weights_mem (whole model) and weights_mem_per_gpu both given; give one of them")
    if settings.link_bandwidth is not None and settings.cpu_mem is None:
        problems.append("link_bandwidth (--link-bandwidth) needs cpu_mem (--cpu-mem), the offload tier's size")
    return problems


def from_options(**options: str | bool | None) -> DeploymentSettings:
    """The CLI's option strings (None: not given) read like a capacity file's keys; errors name the option
    (`gpu_mem` -> `--gpu-mem`)."""
    try:
        return DeploymentSettings.read(options)
    except SettingError as exc:
        raise UsageError(f"--{exc.key.replace('_', '-')}: {exc}") from None
