"""`--gpu auto`: the accelerators of this machine, read as the engines' own platform layers read them.

Readers, first that finds a device wins: NVIDIA's management library (nvidia-ml-py, module `pynvml`, which vLLM's
vllm/platforms/cuda.py NvmlCudaPlatform uses), `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,
nounits`, AMD's `amdsmi` module (vLLM's vllm/platforms/rocm.py), `rocm-smi --showproductname --showmeminfo vram
--json`, then torch when installed. Nothing here is imported by a run that does not ask for `auto`, and torch is
imported only when every other reader found nothing.

A reported name maps to a profile through `resolve_gpu` (profile ids, aliases and driver names); a card with no
profile is sized with the memory its tool reports, and a note says so.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from kvsize.errors import EnvironmentProblem, KvsizeError, UnknownGpuProfile, UsageError

if TYPE_CHECKING:
    from kvsize.engines.base import Engine
    from kvsize.profiles import GpuProfile
    from kvsize.spec import ArchSpec

__all__ = [
    "AUTO",
    "LocalGpu",
    "Machine",
    "auto_notes",
    "auto_tp",
    "detect",
    "is_auto",
    "local_profile",
    "machine_notes",
]

AUTO = "auto"
MIB = 1024 * 1024
TOOL_TIMEOUT_S = 10  # nvidia-smi answers in well under a second; a hung driver must not hang kvsize


class LocalGpu(msgspec.Struct, frozen=True):
    """One device as its tool reports it."""

    name: str
    memory_bytes: int | None
    """Total device memory in bytes; None when the tool reports none (GB10's nvidia-smi prints [N/A])."""


class Machine(msgspec.Struct, frozen=True):
    """The devices one reader found, and what was tried before it."""

    gpus: tuple[LocalGpu, ...]
    source: str
    """The reader: `NVML`, `nvidia-smi`, `amdsmi`, `rocm-smi` or `torch`."""
    tried: tuple[str, ...] = ()
    """Readers tried before it, each with why it found nothing."""


class _NotFound(Exception):
    """A reader found no device; the message says why (for the one line of a machine with none)."""


# --- readers ------------------------------------------------------------------------------------------------


def _nvml() -> list[LocalGpu]:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise _NotFound("nvidia-ml-py not installed") from None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        raise _NotFound(f"nvmlInit failed: {exc}") from None
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            # nvidia-ml-py < 11.515 returns bytes
            name = name.decode() if isinstance(name, bytes) else str(name)
            found.append(LocalGpu(name.strip(), int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)))
        return found
    except Exception as exc:
        raise _NotFound(f"NVML query failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):  # the devices are read; a failing shutdown changes nothing
            pynvml.nvmlShutdown()


def _run(tool: str, *args: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise _NotFound("not on PATH")
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise _NotFound(f"no answer in {TOOL_TIMEOUT_S} s") from None
    except OSError as exc:
        raise _NotFound(f"could not run: {exc.strerror or exc}") from None
    if done.returncode != 0:
        said = " ".join((done.stdout + done.stderr).split())[:160]
        raise _NotFound(f"exit {done.returncode}" + (f": {said}" if said else ""))
    return done.stdout


def parse_nvidia_smi(text: str) -> list[LocalGpu]:
    """`nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits`: one `name, MiB` line per GPU;
    a total the driver does not report is `[N/A]`."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, mib = line.rpartition(",")
        if not sep or not name.strip():
            raise _NotFound(f"unexpected output line {line.strip()[:80]!r}")
        mib = mib.strip()
        found.append(LocalGpu(name.strip(), int(mib) * MIB if mib.isdigit() else None))
    return found


def _nvidia_smi() -> list[LocalGpu]:
    return parse_nvidia_smi(_run("nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"))


def _amdsmi() -> list[LocalGpu]:
    try:
        import amdsmi  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise _NotFound("amdsmi not installed") from None
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:
        raise _NotFound(f"amdsmi_init failed: {exc}") from None
    try:
        found = []
        for handle in amdsmi.amdsmi_get_processor_handles():
            name = str(amdsmi.amdsmi_get_gpu_asic_info(handle)["market_name"])
            mib = amdsmi.amdsmi_get_gpu_vram_info(handle)["vram_size"]  # MiB (amdsmi_vram_info_t.vram_size)
            found.append(LocalGpu(name.strip(), int(mib) * MIB if isinstance(mib, int) and mib > 0 else None))
        return found
    except Exception as exc:
        raise _NotFound(f"amdsmi query failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            amdsmi.amdsmi_shut_down()


def parse_rocm_smi(text: str) -> list[LocalGpu]:
    """`rocm-smi --showproductname --showmeminfo vram --json`: {"card0": {"Card Series": ..., "VRAM Total Memory
    (B)": "..."}} (the key's capitals vary by release: "Card series" in older ones)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise _NotFound("output is not JSON") from None
    if not isinstance(data, dict):
        raise _NotFound("output is not a JSON object")
    cards = sorted(
        (
            (int(key[4:]), value)
            for key, value in data.items()
            if re.fullmatch(r"card\d+", key) and isinstance(value, dict)
        ),
        key=lambda kv: kv[0],
    )
    found = []
    for _, card in cards:
        fields = {str(k).strip().lower(): str(v).strip() for k, v in card.items()}
        name = fields.get("card series") or fields.get("device name") or fields.get("card model") or ""
        total = fields.get("vram total memory (b)", "")
        found.append(LocalGpu(name, int(total) if total.isdigit() and int(total) > 0 else None))
    return found


def _rocm_smi() -> list[LocalGpu]:
    return parse_rocm_smi(_run("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"))


def _torch() -> list[LocalGpu]:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise _NotFound("not installed")
    import torch

    if not torch.cuda.is_available():
        raise _NotFound("torch.cuda.is_available() is False")
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(LocalGpu(str(props.name).strip(), int(props.total_memory)))
    return found


READERS: tuple[tuple[str, Callable[[], list[LocalGpu]]], ...] = (
    ("NVML", _nvml),
    ("nvidia-smi", _nvidia_smi),
    ("amdsmi", _amdsmi),
    ("rocm-smi", _rocm_smi),
    ("torch", _torch),
)


def read_machine(readers: Sequence[tuple[str, Callable[[], list[LocalGpu]]]] | None = None) -> Machine:
    """The devices the first reader that finds any reports (default: READERS, in order). None found:
    EnvironmentProblem (exit 3), one line naming every reader tried and why it found nothing."""
    tried: list[str] = []
    for source, reader in READERS if readers is None else readers:
        try:
            gpus = reader()
        except _NotFound as exc:
            tried.append(f"{source} ({exc})")
            continue
        if gpus:
            return Machine(gpus=tuple(gpus), source=source, tried=tuple(tried))
        tried.append(f"{source} (no device)")
    raise EnvironmentProblem(
        f"--gpu auto found no GPU; tried {', '.join(tried)}",
        hint="Name the card with --gpu (kvsize gpus lists them), or give its memory with --gpu-mem.",
    )


@functools.lru_cache(maxsize=1)
def detect() -> Machine:
    """This machine's devices, read once per process."""
    return read_machine()


# --- profile ------------------------------------------------------------------------------------------------

# Words the AMD tools add to a product name that no profile names: `AMD Instinct MI300X OAM` (amdsmi
# product_name; ROCm/vllm pull 359 lists the names the tools print).
_FORM_FACTOR = re.compile(r"\s+(OAM|VF)$", re.IGNORECASE)
# Tools whose total is the quantity the profiles record (`memory_reported_by`: nvidia-smi memory.total, rocm-smi
# VRAM Total Memory): NVML is what nvidia-smi prints (in MiB), amdsmi's vram_size what rocm-smi prints. torch's
# total_memory is cudaDeviceProp.totalGlobalMem, some 500 MiB less on an H100 (gpu_profiles/h100-sxm.yaml
# memory_notes): another quantity, so it never replaces a profile's figure.
_SAME_QUANTITY = frozenset({"NVML", "nvidia-smi", "amdsmi", "rocm-smi"})


def _match(name: str, profiles: Mapping[str, GpuProfile] | None) -> GpuProfile | None:
    from kvsize.profiles import resolve_gpu

    for candidate in dict.fromkeys((name, _FORM_FACTOR.sub("", name))):
        try:
            return resolve_gpu(candidate, profiles)
        except UnknownGpuProfile:
            continue
    return None


def _kinds(machine: Machine) -> dict[str, list[int]]:
    kinds: dict[str, list[int]] = {}
    for index, gpu in enumerate(machine.gpus):
        kinds.setdefault(gpu.name, []).append(index)
    return kinds


def machine_profile(machine: Machine, profiles: Mapping[str, GpuProfile] | None = None) -> GpuProfile:
    """The profile one device of `machine` is sized with. Cards of different kinds are refused with the list
    (which one a deployment runs on is the user's to say); one kind whose totals differ is sized with the
    smallest (a tensor-parallel group is bounded by its smallest rank)."""
    from kvsize.profiles import custom_gpu

    kinds = _kinds(machine)
    if len(kinds) > 1:
        listed = "; ".join(f"{len(ix)} x {name} (GPU {', '.join(map(str, ix))})" for name, ix in kinds.items())
        raise UsageError(
            f"--gpu auto found different cards ({machine.source}): {listed}",
            hint=f"Name the one to size with --gpu (the name as printed works), e.g. --gpu '{next(iter(kinds))}'.",
        )
    name = machine.gpus[0].name
    totals = [g.memory_bytes for g in machine.gpus if g.memory_bytes is not None]
    reported = min(totals) if totals else None
    profile = _match(name, profiles)
    if profile is None:
        if reported is None:
            raise UsageError(
                f"--gpu auto: {name} has no GPU profile and {machine.source} reports no memory total",
                hint="Give its memory with --gpu-mem (or name a profile with --gpu).",
            )
        vendor = "AMD" if machine.source in ("amdsmi", "rocm-smi") or name.upper().startswith("AMD") else "NVIDIA"
        if machine.source == "torch" and not name.upper().startswith(("AMD", "NVIDIA")):
            vendor = "NVIDIA" if name else "unknown"
        custom = custom_gpu(reported, name=name)
        return msgspec.structs.replace(
            custom,
            vendor=vendor,
            driver_name=name,
            memory_reported_by=f"{machine.source} on this machine",
            sources=(f"{machine.source} on this machine (--gpu auto)",),
        )
    if reported is None or machine.source not in _SAME_QUANTITY or reported // MIB == profile.memory_bytes // MIB:
        return profile
    # The profile's CUDA total was published for its memory size; this card reports another (ECC, a driver
    # reserve), so the budget starts from the reported total less the CUDA context, as for --gpu-mem.
    return msgspec.structs.replace(
        profile,
        memory_bytes=reported,
        memory_bytes_is_advertised=False,
        memory_reported_by=f"{machine.source} on this machine (--gpu auto)",
        cuda_total_bytes=None,
        cuda_total_source=None,
    )


def machine_notes(machine: Machine, profile: GpuProfile, profiles: Mapping[str, GpuProfile] | None = None) -> list[str]:
    """What `--gpu auto` found and what it sizes with, for the run's notes."""
    from kvsize.units import format_bytes

    count, name = len(machine.gpus), machine.gpus[0].name
    found = f"{count} x {name}" if count > 1 else name
    notes = []
    matched = _match(name, profiles)
    if matched is None:
        notes.append(
            f"--gpu auto: {found} ({machine.source}) has no GPU profile; sized with the "
            f"{format_bytes(profile.memory_bytes)} {machine.source} reports (bandwidth and compute unknown)"
        )
    elif profile.memory_bytes != matched.memory_bytes:
        notes.append(
            f"--gpu auto: {found} ({machine.source}) is {matched.id}; sized with the "
            f"{format_bytes(profile.memory_bytes)} {machine.source} reports (the profile records "
            f"{format_bytes(matched.memory_bytes)})"
        )
    else:
        notes.append(f"--gpu auto: {found} ({machine.source}) is {matched.id}")
    totals = {g.memory_bytes for g in machine.gpus if g.memory_bytes is not None}
    if len(totals) > 1:
        notes.append(f"--gpu auto: the {count} GPUs report different totals; sized with the smallest")
    if count > 1:
        notes.append(f"--gpu auto: figures are per GPU; {count} GPUs allow --tp up to {count}")
    return notes


def local_profile(profiles: Mapping[str, GpuProfile] | None = None) -> GpuProfile:
    """The profile of this machine's GPU (`--gpu auto`)."""
    return machine_profile(detect(), profiles)


def auto_notes() -> list[str]:
    """The notes of a run with `--gpu auto` (the machine is read once per process)."""
    return machine_notes(detect(), local_profile())


def is_auto(gpu: str | None) -> bool:
    return gpu is not None and gpu.strip().lower() == AUTO


def auto_tp(engine: Engine, spec: ArchSpec, count: int, pp: int = 1) -> int:
    """The largest tp <= `count` GPUs the engine splits the model over (its own start-up checks:
    Engine.check_parallel, e.g. vLLM ModelConfig.verify_with_parallel_config: heads % tp == 0)."""
    for tp in range(max(1, count // max(1, pp)), 0, -1):
        try:
            engine.check_parallel(spec, tp, pp)
        except KvsizeError:
            continue
        return tp
    return 1
