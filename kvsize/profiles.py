"""GPU profiles: one YAML file per accelerator in `gpu_profiles/`, validated into frozen `GpuProfile` records.

`parse_profile`, `resolve_gpu` and `custom_gpu` are pure; `load_profiles` and `profiles_dir` touch the file
system.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from kvsize.errors import ConfigError, UnknownGpuProfile, UsageError
from kvsize.record import Record
from kvsize.text import shown

__all__ = [
    "GpuProfile",
    "Interconnect",
    "Price",
    "custom_gpu",
    "load_profiles",
    "parse_profile",
    "profiles_dir",
    "reported_names",
    "resolve_gpu",
]

_NAME_PATTERN = r"^[a-z0-9][a-z0-9.-]*$"
Name = Annotated[str, Meta(pattern=_NAME_PATTERN)]
"""An id or alias: lower case, digits, dots and hyphens, as users type it on the command line."""

# Numbers keep the type the YAML gives them (989 stays an int, 362.05 a float); bools are not numbers here
# (msgspec never takes a bool for a number), and infinities are refused in `__post_init__`.
NonNegNumber = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]
PosNumber = Annotated[int, Meta(gt=0)] | Annotated[float, Meta(gt=0)]
Text = Annotated[str, Meta(min_length=1)]
ByteCount = Annotated[int, Meta(gt=0)]
Segment = Literal["datacenter", "workstation", "desktop", "laptop", "edge"]
SEGMENTS: tuple[Segment, ...] = ("datacenter", "workstation", "desktop", "laptop", "edge")

# Fields a profile may mark as not confirmed by a primary source (`uncertain_fields`).
UNCERTAIN_FIELD_NAMES = frozenset(
    {
        "memory_bytes",
        "memory_bandwidth_bytes_per_s",
        "dense_tflops.bf16",
        "dense_tflops.fp16",
        "dense_tflops.fp8",
        "dense_tflops.fp4",
        "dense_tflops.int8_tops",
        "fp8_native",
        "fp4_native",
        "tdp_w",
        "typical_per_node",
        "interconnect.scale_up",
        "interconnect.scale_up_gb_s_bidirectional",
        "interconnect.pcie",
        "interconnect.host_link_gb_s_per_direction",
    }
)

_CUSTOM_SOURCE = "user-supplied --gpu-mem"
_LIST_HINT = "'kvsize gpus' lists all; --gpu-mem 24GiB sizes a custom card"


def _check_finite(record: object, *names: str) -> None:
    for name in names:
        value = getattr(record, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")


class Interconnect(Record, frozen=True, kw_only=True):
    """How the device talks to its peers and to the host, as text plus one number."""

    scale_up: str | None
    """Scale-up fabric in words (`NVLink 4, 18 links`, `none`); null if unknown."""
    scale_up_gb_s_bidirectional: NonNegNumber | None
    """Per-device scale-up bandwidth in decimal GB/s, both directions summed (H100 NVLink 4: 900); null if
    none or unknown."""
    pcie: str | None
    """Host link in words (`PCIe Gen5 x16`); null if unknown."""
    host_link_kind: Literal["pcie", "nvlink-c2c", "unified"] | None = None
    """How the device reaches host memory (an offload tier): a PCIe slot, NVLink-C2C to a Grace CPU, or one
    memory shared by CPU and GPU (Apple, Jetson, DGX Spark)."""
    host_link_gb_s_per_direction: NonNegNumber | None = None
    """Host-link bandwidth one way in decimal GB/s (the rate a restore from CPU memory runs at): PCIe x16 Gen3/
    4/5/6 16/32/64/128, NVLink-C2C 450 (900 both ways); null for unified memory or when unknown."""
    host_link_source: str | None = None
    """Where the host-link figure comes from."""

    def __post_init__(self) -> None:
        _check_finite(self, "scale_up_gb_s_bidirectional", "host_link_gb_s_per_direction")


class Price(Record, frozen=True, kw_only=True):
    """One dated on-demand price offer for a single device-hour."""

    offer: Text
    """Who sells it and how (`Lambda 8x H100 SXM`)."""
    usd_per_hour: NonNegNumber | None
    """US dollars per device-hour; null when the entry is not an hourly price (a purchase price, say)."""
    as_of: Text
    """Date the price was read, as text (`2026-09-20`, `2025-08`, `2025`)."""
    source: Text
    """Where the price comes from; `-- secondary` marks a transcription by a third party."""

    def __post_init__(self) -> None:
        _check_finite(self, "usd_per_hour")


class GpuProfile(Record, frozen=True, kw_only=True):
    """One accelerator as kvsize sizes it: memory first, then the throughput figures for decode estimates."""

    id: Name
    """Stable identifier; equals the YAML file name without `.yaml` (`h100-sxm`)."""
    name: Text
    """Human-readable product name (`H100 SXM5 80GB`)."""
    vendor: Text | None
    """Vendor (`NVIDIA`, `AMD`, `Intel (Habana)`, `Google`, `Apple`); null for a custom card."""
    segment: Segment = "datacenter"
    """Where the device serves: `datacenter` (ranked by `kvsize plan` by default), `workstation`, `desktop`,
    `laptop` or `edge` (added by `kvsize plan --all-gpus`)."""
    aliases: tuple[Name, ...]
    """Other lower-case names users type for this device (`h100`); unique across all profiles."""
    driver_name: str | None
    """Device name as the driver or runtime prints it (`NVIDIA H100 80GB HBM3`); null if not known."""
    arch: str | None
    """Architecture and compute capability or ISA (`Hopper, sm_90`); null if not known."""
    memory_bytes: ByteCount
    """Total device memory in bytes as the tool in `memory_reported_by` reports it; the advertised figure when
    `memory_bytes_is_advertised` is true."""
    memory_bytes_is_advertised: bool
    """True when no reported total was found and `memory_bytes` is the advertised figure (usable is lower)."""
    memory_reported_by: str | None
    """The tool or runtime behind `memory_bytes` (`nvidia-smi memory.total`), or why none was found."""
    cuda_total_bytes: ByteCount | None = None
    """The total CUDA reports (torch.cuda.mem_get_info()[1] / cudaMemGetInfo), below `memory_bytes`: where the
    engines' budgets start. Published logs print it to 0.01 GiB (vLLM `total_memory=79.19GiB`), so it is
    round(GiB x 2**30), within 0.005 GiB; null where no published figure was found (the budget then takes
    `memory_bytes` less kvsize.budget.CUDA_CONTEXT_BYTES)."""
    cuda_total_source: str | None = None
    """The log line or file behind `cuda_total_bytes`, or why none was found."""
    nvml_memory_info: bool = True
    """Whether NVML answers nvmlDeviceGetMemoryInfo for this device. False on integrated parts that have no
    device memory of their own (GB10: NVML_ERROR_NOT_SUPPORTED, nvidia-smi memory.total [N/A]); vLLM's NVML
    platform then cannot read the total its batch tiers key on (kvsize/engines/vllm_scheduler.py)."""
    nvml_memory_source: str | None = None
    """Where `nvml_memory_info: false` comes from (needed then)."""
    memory_advertised: str | None
    """Marketing memory figure as text (`80 GB`)."""
    memory_advertised_bytes: ByteCount | None
    """`memory_advertised` in bytes: GiB where the vendor's "GB" means GiB (most HBM parts), 10^9 B where it
    is decimal (B300); see `memory_notes`."""
    memory_type: str | None
    """Memory technology (`HBM3`, `GDDR6 (ECC on)`, `LPDDR5X unified`)."""
    memory_notes: str | None
    """How the advertised figure maps to bytes, other totals reported by other tools, and caveats."""
    memory_bandwidth_bytes_per_s: ByteCount | None
    """Vendor peak memory bandwidth in bytes/s (decimal: 3.35 TB/s = 3_350_000_000_000); achievable is about
    80-92% of it."""
    dense_tflops: dict[str, NonNegNumber | None]
    """Peak dense (no 2:4 sparsity) matrix throughput in TFLOP/s by precision (`bf16`, `fp16`, `fp8`, `fp4`;
    `int8_tops` in TOPS); null where unknown or unsupported. GeForce cards: FP32-accumulate rates."""
    fp8_native: bool | None
    """Whether the hardware computes/converts FP8 natively (FP8 KV storage works everywhere); null if
    unknown."""
    fp8_formats: tuple[str, ...]
    """Native FP8 formats (`e4m3`, `e5m2`, `e4m3fnuz`, `mxfp8`)."""
    fp4_native: bool | None
    """Whether the hardware has native FP4 (NVFP4/MXFP4) math; null if unknown."""
    fp4_formats: tuple[str, ...]
    """Native FP4 (and on MI355X FP6) formats (`nvfp4`, `mxfp4`)."""
    interconnect: Interconnect | None
    """Scale-up fabric and host link; null if unknown."""
    tdp_w: PosNumber | str | None
    """Board/module power in watts; text where it varies by variant (`400 (SXM4) / 250 (PCIe)`); null if
    unknown."""
    typical_per_node: str | None
    """How many devices a typical node holds, as text (`8 (HGX/DGX)`)."""
    price_usd_per_hour: tuple[Price, ...]
    """Dated on-demand prices per device-hour; empty if none was found."""
    uncertain_fields: tuple[str, ...]
    """Fields (dotted for nested keys: `dense_tflops.fp8`) not confirmed by a primary or engine source."""
    notes: str | None
    """Free-text caveats from the reference table."""
    sources: Annotated[tuple[Text, ...], Meta(min_length=1)]
    """Where the numbers come from: URLs, repository paths, or `user-supplied --gpu-mem`."""

    def __hash__(self) -> int:
        # A frozen record's hash would fail on the `dense_tflops` dict; equal profiles share id and memory.
        return hash((type(self), self.id, self.memory_bytes))

    def __post_init__(self) -> None:
        _check_finite(self, "tdp_w")
        for key, value in self.dense_tflops.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"dense_tflops.{key} must be a finite number, got {value}")
        if self.id in self.aliases:
            raise ValueError(f"alias '{self.id}' repeats the id")
        dupes = sorted({a for a in self.aliases if self.aliases.count(a) > 1})
        if dupes:
            raise ValueError(f"alias '{dupes[0]}' is listed twice")
        unknown = [f for f in self.uncertain_fields if f not in UNCERTAIN_FIELD_NAMES]
        if unknown:
            raise ValueError(f"uncertain_fields entry '{unknown[0]}' is not a profile field")
        if not self.nvml_memory_info and not self.nvml_memory_source:
            raise ValueError("nvml_memory_info: false needs its nvml_memory_source")
        if self.cuda_total_bytes is not None and self.cuda_total_source is None:
            raise ValueError("cuda_total_bytes needs its cuda_total_source")
        if self.cuda_total_bytes is not None and self.cuda_total_bytes > self.memory_bytes:
            raise ValueError(f"cuda_total_bytes {self.cuda_total_bytes} exceeds memory_bytes {self.memory_bytes}")
        if self.memory_bytes_is_advertised and self.memory_advertised_bytes != self.memory_bytes:
            raise ValueError(
                f"memory_bytes_is_advertised is true but memory_bytes {self.memory_bytes} differs from"
                f" memory_advertised_bytes {self.memory_advertised_bytes}"
            )


def profiles_dir() -> Path:
    """Built-in profiles: `kvsize/gpu_profiles` in an installed wheel, else the checkout's `gpu_profiles/`."""
    here = Path(__file__).resolve().parent
    # A wheel force-includes gpu_profiles/ as kvsize/gpu_profiles, i.e. importlib.resources.files("kvsize") /
    # "gpu_profiles". Look beside this module rather than through importlib.resources: in an editable install
    # the package can resolve as a namespace spanning site-packages, where hatchling leaves a copy of the
    # profiles taken at install time that goes stale as soon as a checkout file changes.
    packaged = here / "gpu_profiles"
    if packaged.is_dir():
        return packaged
    return here.parent / "gpu_profiles"


_ERROR_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _describe_error(exc: msgspec.ValidationError, data: Any) -> str:
    """msgspec's error (`Expected `int` > 0 - at `$.memory_bytes``) as `field 'memory_bytes': expected `int` > 0
    (got 0)`, the value looked up in the data along the path."""
    found = _ERROR_AT.match(str(exc))
    message, path = (found["msg"], found["path"] or "") if found else (str(exc), "")
    value: Any = data
    for key, index in _PATH_PART.findall(path):
        if key and isinstance(value, Mapping):
            value = value.get(key)
        elif index.isdigit() and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            value = None
    where = path.lstrip(".")
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", message)
    if unknown:
        return f"unknown field '{f'{where}.' if where else ''}{unknown[1]}' (check its spelling)"
    missing = re.fullmatch(r"Object missing required field `(.*)`", message)
    if missing:
        return f"field '{f'{where}.' if where else ''}{missing[1]}': required but missing"
    text = f"field '{where}': {message[:1].lower()}{message[1:]}" if where else message
    if where and value is not None and not isinstance(value, (dict, list)):
        shown = repr(value)
        text += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return text


def parse_profile(data: object, *, source: str) -> GpuProfile:
    """Validate one profile's parsed YAML; `source` (a file name) prefixes any ConfigError message."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a GPU profile must be a mapping of fields, got {type(data).__name__}")
    try:
        return msgspec.convert(dict(data), GpuProfile, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: invalid GPU profile: {_describe_error(exc, data)}") from None


MAX_PROFILE_BYTES = 1024 * 1024  # a profile is a few KiB
MAX_INDEX_BYTES = 16 * 1024 * 1024  # the index of ~40 profiles is ~110 KiB


def _read_bytes(path: Path) -> bytes:
    """A profile file's bytes through kvsize.safe_io: a FIFO, a device or a folder named *.yaml is refused at
    once (a plain read would block on a FIFO forever, or grow without end on /dev/zero)."""
    from kvsize.safe_io import read_small_file

    return read_small_file(path, max_bytes=MAX_PROFILE_BYTES, what="GPU profile")


def _parse_yaml(data: bytes, path: Path) -> object:
    # kvsize's one YAML loader: strict safe loading, a key given twice refused, alias expansion bounded.
    from kvsize.strict_yaml import load_yaml_data

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the GPU profile is not UTF-8 text (byte {exc.start})") from None
    return load_yaml_data(text, source=str(path), what="GPU profile")


def _profile_from(data: object, path: Path) -> GpuProfile:
    profile = parse_profile(data, source=str(path))
    if profile.id != path.stem:
        raise ConfigError(f"{path}: profile id '{profile.id}' does not match the file name '{path.stem}'")
    return profile


def _check_names(profiles: Mapping[str, GpuProfile]) -> None:
    owner: dict[str, str] = {pid: pid for pid in profiles}
    for profile in profiles.values():
        for alias in profile.aliases:
            if alias in owner:
                other = owner[alias]
                what = "the id of" if alias == other else "also an alias of"
                raise ConfigError(f"GPU profile '{profile.id}': alias '{alias}' is {what} profile '{other}'")
            owner[alias] = profile.id


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise ConfigError(f"GPU profile directory '{directory}' does not exist")
    paths = sorted(directory.glob("*.yaml"))
    if not paths:
        raise ConfigError(f"GPU profile directory '{directory}' holds no *.yaml profiles")
    return paths


def _load_dir(directory: Path) -> dict[str, GpuProfile]:
    """Every profile of `directory`, validated, read through its index when the index is current. Each file is
    read once, through kvsize.safe_io."""
    paths = _yaml_files(directory)
    contents = {path.name: _read_bytes(path) for path in paths}
    parsed = _read_index(directory, _checksums(contents))
    profiles = {}
    for path in paths:
        data = parsed[path.name] if parsed is not None else _parse_yaml(contents[path.name], path)
        profile = _profile_from(data, path)
        profiles[profile.id] = profile
    _check_names(profiles)
    return profiles


# --- the index: the profiles' YAML parsed ahead of time -----------------------------------------------------
# Importing PyYAML costs a sizing run with --gpu more than everything else it does (issue 12's start-up goal),
# so `gpu_profiles/index.json` holds the parsed data of every file with the CRC-32 of its bytes. It is a cache,
# never a source: a file whose checksum differs (edited, added or removed since) makes the whole directory read
# from YAML again. `python -m kvsize.profiles` rebuilds it; tests/test_profiles.py checks it is current.

INDEX_NAME = "index.json"


def _checksums(contents: Mapping[str, bytes]) -> dict[str, int]:
    return {name: zlib.crc32(data) for name, data in contents.items()}


def _read_index(directory: Path, checksums: dict[str, int]) -> dict[str, object] | None:
    """The parsed data of each file, by file name, when the index matches the files byte for byte. An index
    that is missing, stale or not the index's JSON means the YAML is read; one that is not a regular file (a
    FIFO, a device) or is oversized is refused through kvsize.safe_io, never waited on."""
    from kvsize.safe_io import read_small_text

    path = directory / INDEX_NAME
    if not os.path.lexists(path):
        return None
    try:
        text = read_small_text(path, max_bytes=MAX_INDEX_BYTES, what="GPU profile index")
    except ConfigError as exc:
        raise ConfigError(str(exc), hint="Remove it, or rebuild it with python -m kvsize.profiles.") from None
    try:
        index = json.loads(text)
        if not isinstance(index, dict) or index.get("crc32") != checksums:
            return None
        data = index["profiles"]
    except (ValueError, KeyError, RecursionError):
        return None
    return data if isinstance(data, dict) and set(data) == set(checksums) else None


def build_index(directory: Path) -> str:
    """The index of `directory`'s profiles as JSON text (each one validated first)."""
    paths = _yaml_files(directory)
    contents = {path.name: _read_bytes(path) for path in paths}
    data = {path.name: _parse_yaml(contents[path.name], path) for path in paths}
    _check_names({(p := _profile_from(data[path.name], path)).id: p for path in paths})
    return json.dumps({"crc32": _checksums(contents), "profiles": data}, indent=1, ensure_ascii=False) + "\n"


@functools.lru_cache(maxsize=1)
def _load_default() -> dict[str, GpuProfile]:
    return _load_dir(profiles_dir())


def load_profiles(directory: Path | None = None) -> dict[str, GpuProfile]:
    """All profiles in `directory` (default: the built-in ones, read once per process), keyed by id."""
    if directory is None:
        return dict(_load_default())
    return _load_dir(directory)


def _normalize(name: str) -> str:
    """`RTX 4090`, `rtx_4090` and ` RTX-4090 ` all become `rtx-4090`."""
    return re.sub(r"[\s_-]+", "-", name.strip().lower()).strip("-")


def _suggest(key: str, names: Mapping[str, str]) -> list[str]:
    """Profile ids whose id or alias starts with `key` or is close to it, best first, at most five."""
    # `nvidia-h100` or `amd-mi300x` should still point at h100-sxm / mi300x.
    stripped = re.sub(r"^(nvidia|geforce|amd|instinct|intel|habana|google|cloud|apple)-", "", key)
    found: list[str] = []
    for probe in dict.fromkeys((key, stripped)):
        if probe in names:
            found.append(names[probe])
        if len(probe) >= 2:
            found += [pid for name, pid in names.items() if name.startswith(probe)]
        found += [names[n] for n in difflib.get_close_matches(probe, list(names), n=5, cutoff=0.6)]
    return list(dict.fromkeys(found))[:5]


def reported_names(driver_name: str | None) -> list[str]:
    """The names a profile's `driver_name` stands for, as the tools print them: ' / ' separates two boards;
    a trailing note is dropped ('AMD Instinct MI300X (gfx942)' is what rocminfo and amdsmi print as 'AMD
    Instinct MI300X'; '... -- appears as 2 devices'); '(A|B) ' inside a name is one name per choice."""
    names: list[str] = []
    for part in (driver_name or "").split(" / "):
        part = part.split(" -- ")[0].strip()
        choice = re.search(r"\(([^()]*\|[^()]*)\)", part)
        if choice:
            names += [part[: choice.start()] + alt + part[choice.end() :] for alt in choice[1].split("|")]
            continue
        if part:
            names.append(part)
            bare = re.sub(r"\s*\([^()]*\)$", "", part)
            if bare and bare != part:
                names.append(bare)
    return names


def _name_index(profiles: Mapping[str, GpuProfile]) -> tuple[dict[str, str], dict[str, str]]:
    """(ids and aliases -> id, normalised driver-reported names -> id) of a set of profiles."""
    names: dict[str, str] = {}
    reported: dict[str, str] = {}
    for profile in profiles.values():
        names[profile.id] = profile.id
        for alias in profile.aliases:
            names.setdefault(alias, profile.id)
        # The names the driver reports (nvidia-smi, torch.cuda.get_device_name, vLLM's log), ' / '-separated
        # where one profile covers two boards: 'NVIDIA H100 80GB HBM3' is h100-sxm.
        for reported_name in (*(profile.driver_name or "").split(" / "), *reported_names(profile.driver_name)):
            if reported_name.strip():
                reported.setdefault(_normalize(reported_name), profile.id)
    return names, reported


@functools.lru_cache(maxsize=1)
def _default_name_index() -> tuple[dict[str, str], dict[str, str]]:
    """The built-in profiles' index, built once per process (a capacity file resolves a card per deployment)."""
    return _name_index(_load_default())


def resolve_gpu(name: str, profiles: Mapping[str, GpuProfile] | None = None) -> GpuProfile:
    """The profile whose id, alias or driver-reported name is `name`, ignoring case and treating
    spaces/underscores as hyphens. `auto` is this machine's GPU (kvsize.local_gpu: NVML, nvidia-smi, amdsmi,
    rocm-smi or torch).

    Without `profiles`, the built-in ones."""
    if _normalize(name) == "auto":
        from kvsize.local_gpu import local_profile

        return local_profile(profiles)
    if profiles is None:
        profiles, (names, reported) = _load_default(), _default_name_index()
    else:
        names, reported = _name_index(profiles)
    key = _normalize(name)
    if key in names:
        return profiles[names[key]]
    if key in reported:
        return profiles[reported[key]]
    counted = re.fullmatch(r"\s*(\d+)\s*(?:[x×*]\s*(.+?))?\s*", name, re.IGNORECASE)
    if counted is not None and (counted.group(2) is not None or int(counted.group(1)) <= 64):
        # '2', '2xh100', '8 x H100': a count of cards, which is --tp (or --pp); '6000' or '100' stays a name
        count, card = counted.group(1), counted.group(2)
        if card is None:
            raise UnknownGpuProfile(
                f"GPU '{name.strip()}' is a count, not a card",
                hint=f"Name the card (--gpu h100) and give the count as --tp {count} (or --pp).",
            )
        one = resolve_gpu(card, profiles)
        raise UnknownGpuProfile(
            f"--gpu names one card, not {count} of them",
            hint=f"Use --gpu {one.id} --tp {count} (tensor parallel; --pp for pipeline stages).",
        )
    suggestions = _suggest(key, names) if key else []
    several = [pid for pid in suggestions if pid.startswith(key + "-")] if key else []
    if len(several) > 1:  # 'a100': two cards of one name; kvsize does not guess which memory size
        raise UnknownGpuProfile(
            f"GPU '{name}' is {len(several)} cards: {', '.join(several)}",
            hint="Name the one you have (nvidia-smi shows its memory).",
        )
    hint = f"Did you mean: {', '.join(suggestions)}? ({_LIST_HINT})" if suggestions else f"({_LIST_HINT})"
    raise UnknownGpuProfile(f"unknown GPU profile '{name}'", hint=hint)


def custom_gpu(memory_bytes: int, *, name: str = "custom") -> GpuProfile:
    """A profile for a card known only by its memory size (`--gpu-mem`); every other figure is unknown."""
    if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
        raise UsageError(f"GPU memory must be a positive number of bytes, got {shown(memory_bytes)}")
    slug = re.sub(r"[^a-z0-9.-]+", "-", name.strip().lower()).strip("-.")
    return GpuProfile(
        id=slug if re.match(_NAME_PATTERN, slug) else "custom",
        name=name.strip() or "custom",
        vendor=None,
        aliases=(),
        driver_name=None,
        arch=None,
        memory_bytes=memory_bytes,
        memory_bytes_is_advertised=False,
        memory_reported_by=_CUSTOM_SOURCE,
        memory_advertised=None,
        memory_advertised_bytes=None,
        memory_type=None,
        memory_notes=None,
        memory_bandwidth_bytes_per_s=None,
        dense_tflops={},
        fp8_native=None,
        fp8_formats=(),
        fp4_native=None,
        fp4_formats=(),
        interconnect=None,
        tdp_w=None,
        typical_per_node=None,
        price_usd_per_hour=(),
        uncertain_fields=(),
        notes=None,
        sources=(_CUSTOM_SOURCE,),
    )


if __name__ == "__main__":  # python -m kvsize.profiles [DIR]: rebuild DIR/index.json (default: the built-in profiles)
    import sys

    from kvsize.errors import KvsizeError
    from kvsize.safe_io import output_path, write_output
    from kvsize.text import clean

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else profiles_dir()
    try:
        write_output(output_path(target / INDEX_NAME, "index"), build_index(target), "index")
    except KvsizeError as exc:
        print(clean(f"Error: {exc}." + (f" {exc.hint}" if exc.hint else "")), file=sys.stderr)
        sys.exit(int(exc.exit_code))
    print(f"wrote {target / INDEX_NAME}")
