"""What a user states about a deployment (parallelism, memory, engine knobs), validated once.

One pydantic model, `DeploymentSettings`, whose validators are the `kvsize.units` parsers: the CLI builds it
from the option strings (`from_options`), a capacity file's deployment extends it, so a value refused on the
command line (`--gpu-mem 0`, `--tp 10**30`, `--gpu-util nan`, `--revision ../x`) is refused in a file too, with
the same message. Field names are the capacity file's keys; `--gpu-mem` is `gpu_mem`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from kvsize.errors import KvsizeError, UsageError
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

T = TypeVar("T")


def _field(parse: Callable[[Any], T], schema: Any) -> BeforeValidator:
    """A pydantic validator running a units parser; its UsageError becomes a field error (message and hint)."""

    def validate(value: Any) -> T | None:
        if value is None:
            return None
        try:
            return parse(value)
        except KvsizeError as exc:
            raise ValueError(f"{exc}. {exc.hint.rstrip('.')}" if exc.hint else str(exc)) from None

    return BeforeValidator(validate, json_schema_input_type=schema)


Bytes = Annotated[int | None, _field(parse_size, int | str | None)]
"""A memory size above 0: 24GiB, 80GB, 512MiB, or bytes (at most 1 EiB)."""
BytesOrZero = Annotated[int | None, _field(lambda v: parse_size(v, allow_zero=True), int | str | None)]
TensorParallel = Annotated[int, _field(lambda v: parse_count(v, "tensor-parallel size", maximum=MAX_GPUS), int | str)]
"""1 to 65,536."""
PipelineParallel = Annotated[
    int, _field(lambda v: parse_count(v, "pipeline-parallel size", maximum=MAX_GPUS), int | str)
]
GpuCount = Annotated[int | None, _field(lambda v: parse_count(v, "GPU count", maximum=MAX_GPUS), int | str | None)]
Count = Annotated[int | None, _field(lambda v: parse_count(v, "count"), int | str | None)]
"""A whole number above 0 (at most 2^40)."""
RequiredCount = Annotated[int, _field(lambda v: parse_count(v, "count"), int | str)]
RequiredTokens = Annotated[int, _field(parse_tokens, int | str)]
Tokens = Annotated[int | None, _field(parse_tokens, int | str | None)]
"""Tokens: 8192, 8k, 128k, 1M (1 to 2^40)."""
TokensOrZero = Annotated[
    int | None, _field(lambda v: parse_count(v, "token count", maximum=MAX_TOKENS, allow_zero=True), int | str | None)
]
Fraction = Annotated[float | None, _field(lambda v: parse_fraction(v, "the value"), float | str | None)]
"""A share in (0, 1]: 0.9 or 90%."""
Bandwidth = Annotated[int | None, _field(parse_bandwidth, float | str | None)]
"""GB/s in the file and on the command line; bytes per second once validated."""
Revision = Annotated[str | None, _field(parse_revision, str | None)]


class DeploymentSettings(BaseModel):
    """Parallelism, memory and engine settings of one deployment, shared by the CLI and capacity files."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    tp: TensorParallel = 1
    """Tensor-parallel GPUs per replica."""
    pp: PipelineParallel = 1
    """Pipeline-parallel stages."""
    gpus: GpuCount = None
    """GPUs in all; replicas = gpus / (tp x pp) multiply the concurrency."""
    gpu_mem: Bytes = None
    """Memory of a custom card: 24GiB, or bytes."""
    gpu_util: Fraction = None
    """Share of the card the engine may use (vLLM gpu_memory_utilization)."""
    kv_memory: Bytes = None
    """KV memory per GPU as given (skips the budget model)."""
    reserve: BytesOrZero = None
    """Memory kept out of the KV budget besides the weights (formula / hf engines)."""
    weights_mem: Bytes = None
    """The whole model's weights, split over tp x pp, instead of looking them up (--weights-mem-total too)."""
    weights_mem_per_gpu: Bytes = None
    """The weights on each GPU, as vLLM logs them ("Model loading took 7.51 GiB")."""
    max_batched_tokens: Count = None
    """Tokens per scheduler step (vLLM max_num_batched_tokens)."""
    max_num_seqs: Count = None
    """Most requests the engine runs at once (vLLM max_num_seqs)."""
    block_size: Count = None
    """Tokens per KV block (paged engines)."""
    ubatch_size: Count = None
    """llama.cpp physical batch (-ub, n_ubatch): sizes the sliding-window cells."""
    batch_size: Count = None
    """llama.cpp logical batch (-b, n_batch); n_ubatch = min(n_batch, n_ubatch)."""
    cpu_mem: Bytes = None
    """CPU DRAM (or disk) offload tier size."""
    link_bandwidth: Bandwidth = None
    """GPU <-> offload link in GB/s."""
    encoder_len: TokensOrZero = None
    """Tokens each cross-attention layer attends to."""
    revision: Revision = None
    """Hub revision: a branch, tag or full commit hash."""

    @model_validator(mode="after")
    def _one_weights_size(self) -> DeploymentSettings:
        if self.weights_mem is not None and self.weights_mem_per_gpu is not None:
            raise ValueError("weights_mem (whole model) and weights_mem_per_gpu both given; give one of them")
        return self

    @model_validator(mode="after")
    def _offload_needs_a_tier(self) -> DeploymentSettings:
        if self.link_bandwidth is not None and self.cpu_mem is None:
            raise ValueError("link_bandwidth (--link-bandwidth) needs cpu_mem (--cpu-mem), the offload tier's size")
        return self

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
            "weights_bytes": (
                self.weights_mem_per_gpu * self.tp * self.pp  # the fit splits it back over tp x pp
                if self.weights_mem_per_gpu is not None
                else self.weights_mem
            ),
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
                gpu_util=self.gpu_util, kv_memory_bytes=self.kv_memory, max_batched_tokens=self.max_batched_tokens
            ),
            "offload": (self.cpu_mem, self.link_bandwidth) if self.cpu_mem is not None else None,
        }


def field_error(exc: ValidationError) -> tuple[list[int | str], str]:
    """The first error's location and its message, without pydantic's 'Value error, ' prefix."""
    err = exc.errors()[0]
    loc = [p for p in err["loc"] if isinstance(p, (int, str))]
    return loc, str(err["msg"]).removeprefix("Value error, ")


def from_options(**options: str | None) -> DeploymentSettings:
    """The CLI's option strings (None: not given) validated by the capacity file's model; errors name the option
    (`gpu_mem` -> `--gpu-mem`)."""
    try:
        return DeploymentSettings.model_validate({k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        loc, message = field_error(exc)
        raise UsageError(f"--{str(loc[0]).replace('_', '-')}: {message}" if loc else message) from None
