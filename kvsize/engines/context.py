"""What an engine's rules depend on besides the model and the parallel layout: the device, the release and
the scheduler settings the user gave. Engines read it through `Engine.context`; nothing here probes a GPU."""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Literal

import msgspec

if TYPE_CHECKING:
    from kvsize.profiles import GpuProfile

Platform = Literal["cuda", "rocm", "tpu", "cpu", "other"]


class UsageContext(str, Enum):
    """Who starts the engine (vllm/usage/usage_lib.py UsageContext): `vllm serve` or the offline LLM class."""

    API_SERVER = "openai_api_server"
    LLM_CLASS = "llm_class"


class Device(msgspec.Struct, frozen=True):
    """An accelerator as the engines' platform layers report it (vLLM vllm/platforms: get_device_total_memory,
    get_device_name, get_device_capability)."""

    total_memory_bytes: int
    """The card's total as NVML reports it (vLLM platforms/cuda.py get_device_total_memory: nvidia-smi's
    memory.total), which vLLM's scheduler tiers key on; kvsize uses the profile's `memory_bytes`."""
    name: str = ""
    """get_device_name(), e.g. 'NVIDIA A100-SXM4-80GB' ('' when unknown: a custom card)."""
    capability: tuple[int, int] | None = None
    """CUDA compute capability: (9, 0) Hopper, (10, 0) B200, (12, 1) GB10; None when unknown."""
    platform: Platform = "cuda"
    cuda_total_bytes: int | None = None
    """The total torch.cuda.mem_get_info() / cudaMemGetInfo reports (below NVML's), where the budget starts
    (vLLM utils/mem_utils.py MemorySnapshot.measure); None: not known for this card."""
    cuda_total_source: str | None = None
    """Where `cuda_total_bytes` comes from (a published log line)."""
    unified_memory: bool = False
    """CPU and GPU share one memory (DGX Spark, Jetson): the engine's free memory is the OS's (see budget.py)."""
    nvml_memory_info: bool = True
    """NVML answers nvmlDeviceGetMemoryInfo (False on GB10: NOT_SUPPORTED), so vLLM's NvmlCudaPlatform
    get_device_total_memory returns `total_memory_bytes` rather than raising (see vllm_scheduler)."""

    @classmethod
    def from_profile(cls, profile: GpuProfile, memory_bytes: int | None = None) -> Device:
        """The device a GPU profile describes (`memory_bytes` overrides its memory, as --gpu-mem does)."""
        vendor = (profile.vendor or "").lower()
        platform: Platform = "other"
        for key, value in (("google", "tpu"), ("amd", "rocm"), ("apple", "cpu"), ("nvidia", "cuda")):
            if key in vendor:
                platform = value  # type: ignore[assignment]
                break
        name = profile.driver_name or profile.name
        if platform == "tpu":  # the TPU platform's get_device_name(): the chip, "V6E", "V5E", "V5P"
            name = profile.id.removeprefix("tpu-").upper()
        given = memory_bytes is not None  # --gpu-mem: a card of that size, its CUDA total unknown
        inter = profile.interconnect
        return cls(
            total_memory_bytes=memory_bytes if memory_bytes is not None else profile.memory_bytes,
            name=name,
            capability=compute_capability(profile.arch),
            platform=platform,
            cuda_total_bytes=None if given else profile.cuda_total_bytes,
            cuda_total_source=None if given else profile.cuda_total_source,
            unified_memory=inter is not None and inter.host_link_kind == "unified",
            nvml_memory_info=profile.nvml_memory_info,
        )

    @property
    def generation(self) -> str | None:
        """'hopper' (sm_9x), 'blackwell' (sm_10x/11x), 'blackwell-consumer' (sm_12x), 'ada' (sm_89),
        'ampere' (sm_8x), 'pre-ampere'; None off CUDA or when the capability is unknown."""
        if self.platform != "cuda" or self.capability is None:
            return None
        major, minor = self.capability
        if major >= 12:
            return "blackwell-consumer"
        if major in (10, 11):
            return "blackwell"
        if major == 9:
            return "hopper"
        if major == 8:
            return "ada" if minor == 9 else "ampere"
        return "pre-ampere"

    def has_capability(self, major: int, minor: int = 0) -> bool:
        """Platform.has_device_capability: at least (major, minor)."""
        return self.platform == "cuda" and self.capability is not None and self.capability >= (major, minor)


def compute_capability(arch: str | None) -> tuple[int, int] | None:
    """(major, minor) from a profile's arch text: 'Hopper, sm_90' -> (9, 0); 'sm_121' -> (12, 1)."""
    found = re.search(r"sm_(\d+)(\d)\b", arch or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


class EngineContext(msgspec.Struct, frozen=True):
    """The deployment an engine's rules are evaluated for. None everywhere means the engine's defaults on
    an unknown device (vLLM then uses its small-GPU scheduler tier, as it does when no device is found)."""

    device: Device | None = None
    usage: UsageContext = UsageContext.API_SERVER
    max_num_batched_tokens: int | None = None
    """--max-num-batched-tokens (vLLM) / --chunked-prefill-size (SGLang)."""
    max_num_seqs: int | None = None
    """--max-num-seqs (vLLM) / --max-running-requests (SGLang)."""
    enable_prefix_caching: bool | None = None
    """--enable-prefix-caching / --no-enable-prefix-caching; None: the engine's default for the model."""
    num_speculative_tokens: int = 0
    """Draft tokens per step (speculative decoding); vLLM keeps one more Mamba block per draft token."""
    long_context_switches: tuple[tuple[str, str], ...] = ()
    """(engine, `VAR=value`) for each engine whose serve-past-the-maximum switch is set (kvsize/overrides.py)."""
    dtype: str | None = None
    """--dtype as vLLM and SGLang spell it (SERVED_DTYPES); None or 'auto': the engine resolves the config's."""


# --dtype values (vLLM config/model.py ModelDType and _STR_DTYPE_TO_TORCH_DTYPE, 0.8.5-0.33; SGLang
# server_args.py --dtype choices) -> the kvsize dtype served; 'auto' is the engine's own resolution.
SERVED_DTYPES: dict[str, str | None] = {
    "auto": None,
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float": "fp32",
    "float32": "fp32",
}


def served_dtype_name(dtype: str | None) -> str | None:
    """The kvsize dtype --dtype `dtype` serves ('fp16', 'bf16', 'fp32'); None for auto or not given."""
    return SERVED_DTYPES.get(dtype.strip().lower()) if dtype is not None else None


DEFAULT_CONTEXT = EngineContext()
